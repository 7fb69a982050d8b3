/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's side of VM egress: what the manifests let berth-vmm's dialer reach, and what
 * the VM refuses before anything boots (src/shared/vm-support.c). */
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "manifest.h"
#include "pins.h"
#include "tests.h"
#include "vm-support.h"

static Manifest *app(const char *name, const char *caps)
{
	char text[4096];
	Manifest *m = NULL;

	snprintf(text, sizeof(text),
		 "name: %s\nversion: 0.1.0\ndescription: t\ncapabilities: [%s]\n", name, caps);
	if (manifest_parse(text, strlen(text), "berth.yml", &m, NULL) < 0)
		TEST_FAIL("manifest for %s does not parse", name);
	return m;
}

static int plan(Manifest **apps, size_t n, char ***allow, char **warning, char **reason)
{
	return vm_egress_plan((const Manifest *const *)apps, n, allow, warning, reason);
}

TEST(patterns_come_from_network_host_scopes)
{
	Manifest *m = app("net", "network:host:Example.COM, \"network:host:db.example.com:5432\", "
				 "\"network:host:*.cdn.test:*\", network:host:example.com, "
				 "\"network:host:[2001:DB8::1]:443\", network:connect:8090, "
				 "filesystem:write:/workspace");
	char **allow = NULL, *warning = NULL, *reason = NULL;

	ASSERT_EQ(plan(&m, 1, &allow, &warning, &reason), 4);
	ASSERT_STREQ(allow[0], "example.com");
	ASSERT_STREQ(allow[1], "db.example.com:5432");
	ASSERT_STREQ(allow[2], "*.cdn.test:*");
	ASSERT_STREQ(allow[3], "[2001:db8::1]:443");
	ASSERT_TRUE(allow[4] == NULL);
	ASSERT_TRUE(warning == NULL && reason == NULL);
	vm_egress_allow_free(allow);
	manifest_free(m);
}

TEST(no_egress_no_patterns)
{
	Manifest *m = app("quiet", "filesystem:write:/workspace, network:connect:8080");
	char **allow = NULL, *warning = NULL, *reason = NULL;

	ASSERT_EQ(plan(&m, 1, &allow, &warning, &reason), 0);
	ASSERT_TRUE(allow && allow[0] == NULL);
	ASSERT_TRUE(warning == NULL);
	vm_egress_allow_free(allow);
	manifest_free(m);
}

TEST(egress_without_the_broker_port_is_warned_about)
{
	Manifest *m = app("net", "network:host:example.com");
	char **allow = NULL, *warning = NULL, *reason = NULL;

	ASSERT_EQ(plan(&m, 1, &allow, &warning, &reason), 1);
	ASSERT_STREQ(
		warning,
		"net declares network:host: but not network:connect:8090, so the kernel (Landlock) will keep it from reaching the egress broker on 127.0.0.1:8090 and its requests will fail; add network:connect:8090 to its berth.yml");
	free(warning);
	vm_egress_allow_free(allow);
	manifest_free(m);
	/* network:connect:* reaches it too. */
	m = app("net", "network:host:example.com, \"network:connect:*\"");
	warning = NULL;
	ASSERT_EQ(plan(&m, 1, &allow, &warning, &reason), 1);
	ASSERT_TRUE(warning == NULL);
	vm_egress_allow_free(allow);
	manifest_free(m);
}

TEST(at_most_one_egress_app)
{
	Manifest *apps[3] = {app("a", "network:host:a.test"), app("b", "filesystem:write:/tmp"),
			     app("c", "\"network:host:c.test:*\"")};
	char **allow = NULL, *warning = NULL, *reason = NULL;

	ASSERT_ERROR(plan(apps, 3, &allow, &warning, &reason), EOPNOTSUPP);
	ASSERT_STREQ(
		reason,
		"at most one app may declare a browser:navigate:*/network:host:* capability when running multiple apps together — found 2: a, c");
	free(reason);
	/* One egress app among several is fine. */
	ASSERT_EQ(plan(apps, 2, &allow, &warning, &reason), 1);
	ASSERT_STREQ(allow[0], "a.test");
	vm_egress_allow_free(allow);
	free(warning);
	for (int i = 0; i < 3; i++)
		manifest_free(apps[i]);
}

TEST(scopes_the_dialer_cannot_take_are_refused)
{
	static const char *const bad[] = {
		"network:host:exa_mple.com", "\"network:host:::1\"",
		"\"network:host:a.test:0\"", "\"network:host:a.test:65536\"",
		"\"network:host:[not-v6]\"", "network:host:a/b",
	};

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		Manifest *m = app("net", bad[i]);
		char **allow = NULL, *warning = NULL, *reason = NULL;

		if (plan(&m, 1, &allow, &warning, &reason) != -EOPNOTSUPP)
			TEST_FAIL("%s was not refused", bad[i]);
		ASSERT_TRUE(strstr(reason, "in net's berth.yml cannot be reached from the VM") !=
			    NULL);
		ASSERT_TRUE(strstr(reason, "docs/egress.md") != NULL);
		free(reason);
		manifest_free(m);
	}
}

TEST(vm_support_no_longer_refuses_network_host)
{
	Manifest *m = app("net", "network:host:example.com, network:connect:8090");
	char *reason = NULL;

	ASSERT_OK(vm_support_check(m, &reason));
	manifest_free(m);
	m = app("mesh", "\"network:peer:*\"");
	ASSERT_ERROR(vm_support_check(m, &reason), EOPNOTSUPP);
	ASSERT_TRUE(strstr(reason, "network:peer:*") != NULL);
	free(reason);
	manifest_free(m);
	m = app("odd", "\"network:listen:80\"");
	ASSERT_ERROR(vm_support_check(m, &reason), EOPNOTSUPP);
	ASSERT_TRUE(strstr(reason,
			   "supports network:connect:<port> and network:host:<host> only") != NULL);
	free(reason);
	manifest_free(m);
}

TEST(a_github_app_dials_api_github_com_443)
{
	Manifest *m =
		app("gh", "github:read:repos, network:connect:8092, network:host:example.com, "
			  "network:connect:8090");
	char **allow = NULL, *warning = NULL, *reason = NULL;

	ASSERT_EQ(plan(&m, 1, &allow, &warning, &reason), 2);
	ASSERT_STREQ(allow[0], "example.com");
	ASSERT_STREQ(allow[1], "api.github.com:443");
	ASSERT_TRUE(warning == NULL && reason == NULL);
	vm_egress_allow_free(allow);
	manifest_free(m);
	/* Without network:connect:8092 it boots, warned. */
	m = app("gh", "github:read:repos");
	ASSERT_EQ(plan(&m, 1, &allow, &warning, &reason), 1);
	ASSERT_STREQ(
		warning,
		"gh declares github: but not network:connect:8092, so the kernel (Landlock) will keep it from reaching the GitHub broker on 127.0.0.1:8092 and its requests will fail; add network:connect:8092 to its berth.yml");
	free(warning);
	vm_egress_allow_free(allow);
	manifest_free(m);
}

TEST(at_most_one_github_app)
{
	Manifest *apps[] = {app("a", "github:read:repos"), app("b", "network:connect:80"),
			    app("c", "\"github:write:issues\"")};
	char **allow = NULL, *warning = NULL, *reason = NULL;

	ASSERT_ERROR(plan(apps, 3, &allow, &warning, &reason), EOPNOTSUPP);
	ASSERT_STREQ(
		reason,
		"at most one app may declare a github:* capability when running multiple apps together — found 2: a, c");
	free(reason);
	for (size_t i = 0; i < 3; i++)
		manifest_free(apps[i]);
}

TEST(github_needs_an_image_with_the_broker)
{
	Manifest *m = app("gh", "github:read:repos, network:connect:8092");
	char *reason = NULL;

	ASSERT_OK(vm_support_check_image(m, "egress-broker,github-api-broker", &reason));
	ASSERT_ERROR(vm_support_check_image(m, "egress-broker", &reason), EOPNOTSUPP);
	ASSERT_STREQ(
		reason,
		"\"github:read:repos\" in gh's berth.yml cannot run in the VM: the pinned root image has no GitHub API broker (its manifest lists egress-broker). Build and pin an image with it (scripts/build-artifacts.sh, then vm/repin), or remove the capability (see docs/github.md)");
	free(reason);
	ASSERT_ERROR(vm_support_check_image(m, "", &reason), EOPNOTSUPP);
	free(reason);
	/* What the compiled-in pins say decides vm_support_check(). */
	if (strstr(pin_rootfs_daemons(), "github-api-broker"))
		ASSERT_OK(vm_support_check(m, &reason));
	else
		ASSERT_ERROR(vm_support_check(m, &reason), EOPNOTSUPP);
	manifest_free(m);
}

TEST(terminal_needs_an_image_with_the_view)
{
	Manifest *m = app("terminal", "filesystem:write:/workspace, \"terminal:attach:*\"");
	char *reason = NULL;

	ASSERT_OK(vm_support_check_image(m, "egress-broker,github-api-broker,terminal-view",
					 &reason));
	ASSERT_ERROR(vm_support_check_image(m, "egress-broker,github-api-broker", &reason),
		     EOPNOTSUPP);
	ASSERT_STREQ(
		reason,
		"\"terminal:attach:*\" in terminal's berth.yml cannot run in the VM: the pinned root image has no terminal web view (its manifest lists egress-broker,github-api-broker). Build and pin an image with it (scripts/build-artifacts.sh, then vm/repin), or remove the capability (see docs/terminal.md)");
	free(reason);
	manifest_free(m);
}

TEST(context_scope_needs_an_image_with_the_index)
{
	Manifest *m = app("ctx", "filesystem:write:/workspace, filesystem:read:/context/notes");
	char *reason = NULL;

	ASSERT_OK(vm_support_check_image(m, "terminal-view,semantic-fs", &reason));
	ASSERT_ERROR(vm_support_check_image(m, "terminal-view", &reason), EOPNOTSUPP);
	ASSERT_STREQ(
		reason,
		"\"filesystem:read:/context/notes\" in ctx's berth.yml cannot run in the VM: the pinned root image has no /context index (semantic-fs; its manifest lists terminal-view), so tags and queries would fail. Build and pin an image with it (scripts/build-artifacts.sh, then vm/repin), or remove the capability (see docs/context.md)");
	free(reason);
	manifest_free(m);
	/* A scope elsewhere needs no index. */
	m = app("ws", "filesystem:write:/workspace/context");
	ASSERT_OK(vm_support_check_image(m, "terminal-view", &reason));
	manifest_free(m);
}

int main(void)
{
	return tests_run();
}
