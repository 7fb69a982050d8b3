/* SPDX-License-Identifier: Apache-2.0 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macros.h"
#include "parse-util.h"
#include "pins.h"
#include "vm-support.h"

typedef struct Unsupported {
	const char *ns, *action; /* NULL action: any */
	const char *why;
} Unsupported;

/* What the VM has no broker or device for; every other capability is enforced or recorded. */
static const Unsupported unsupported[] = {
	{"network", "peer", "the VM has no mesh network (WireGuard) daemon"},
};

/* Is @name one of the comma-separated @list? */
static bool listed(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p;) {
		size_t len = strcspn(p, ",");

		if (len == n && strneq(p, name, n))
			return true;
		p += len + (p[len] == ',');
	}
	return false;
}

int vm_support_check(const Manifest *m, char **reason)
{
	return vm_support_check_image(m, pin_rootfs_daemons(), reason);
}

int vm_support_check_image(const Manifest *m, const char *daemons, char **reason)
{
	const char *const *caps;
	size_t n = manifest_capabilities(m, &caps);

	*reason = NULL;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;

		if (capability_parse(caps[i], &ns, &action, &scope) < 0)
			continue;
		if (streq(ns, "network") && !streq(action, "connect") && !streq(action, "host") &&
		    !streq(action, "peer")) {
			if (asprintf(
				    reason,
				    "\"%s\" in %s's berth.yml: the VM runtime supports network:connect:<port> and network:host:<host> only; remove it or change it to one of those (see docs/vm.md)",
				    caps[i], manifest_name(m)) < 0)
				*reason = NULL;
			return -EOPNOTSUPP;
		}
		if (streq(ns, "github") && !listed(daemons, "github-api-broker")) {
			if (asprintf(
				    reason,
				    "\"%s\" in %s's berth.yml cannot run in the VM: the pinned root image has no GitHub API broker (its manifest lists %s). Build and pin an image with it (scripts/build-artifacts.sh, then vm/repin), or remove the capability (see docs/github.md)",
				    caps[i], manifest_name(m),
				    daemons && *daemons ? daemons : "none") < 0)
				*reason = NULL;
			return -EOPNOTSUPP;
		}
		/* The browser layer is optional: installed on first need, but it must be pinned. */
		if (streq(ns, "browser") && !pin_layer_known(ARTIFACT_LAYER_BROWSER)) {
			if (asprintf(
				    reason,
				    "\"%s\" in %s's berth.yml cannot run in the VM: this berth was built without a pin for the browser layer. Build the layer and berth with it (scripts/build-artifacts.sh), or remove the capability (see docs/browser.md)",
				    caps[i], manifest_name(m)) < 0)
				*reason = NULL;
			return -EOPNOTSUPP;
		}
		if (streq(ns, "terminal") && !listed(daemons, "terminal-view")) {
			if (asprintf(
				    reason,
				    "\"%s\" in %s's berth.yml cannot run in the VM: the pinned root image has no terminal web view (its manifest lists %s). Build and pin an image with it (scripts/build-artifacts.sh, then vm/repin), or remove the capability (see docs/terminal.md)",
				    caps[i], manifest_name(m),
				    daemons && *daemons ? daemons : "none") < 0)
				*reason = NULL;
			return -EOPNOTSUPP;
		}
		if (streq(ns, "filesystem") && scope &&
		    capability_path_beneath(scope, strlen(scope), "/context") &&
		    !listed(daemons, "semantic-fs")) {
			if (asprintf(
				    reason,
				    "\"%s\" in %s's berth.yml cannot run in the VM: the pinned root image has no /context index (semantic-fs; its manifest lists %s), so tags and queries would fail. Build and pin an image with it (scripts/build-artifacts.sh, then vm/repin), or remove the capability (see docs/context.md)",
				    caps[i], manifest_name(m),
				    daemons && *daemons ? daemons : "none") < 0)
				*reason = NULL;
			return -EOPNOTSUPP;
		}
		for (size_t k = 0; k < ELEMENTSOF(unsupported); k++) {
			if (!streq(ns, unsupported[k].ns) ||
			    (unsupported[k].action && !streq(action, unsupported[k].action)))
				continue;
			if (asprintf(
				    reason,
				    "\"%s\" in %s's berth.yml cannot run in the VM: %s. Remove the capability to run the app here (see docs/vm.md)",
				    caps[i], manifest_name(m), unsupported[k].why) < 0)
				*reason = NULL;
			return -EOPNOTSUPP;
		}
	}
	return 0;
}

int docker_support_check(const Manifest *m, char **reason)
{
	const char *const *caps;
	size_t n = manifest_capabilities(m, &caps);
	int r = vm_support_check(m, reason);

	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;

		if (capability_parse(caps[i], &ns, &action, &scope) < 0 || !streq(ns, "browser") ||
		    streq(action, "navigate"))
			continue;
		if (asprintf(
			    reason,
			    "\"%s\" in %s's berth.yml cannot run under --runtime docker: the browser layer is laid over the root image with overlayfs, which berth-init may not mount in a container. Use --runtime vm (see docs/runtimes.md)",
			    caps[i], manifest_name(m)) < 0)
			*reason = NULL;
		return -EOPNOTSUPP;
	}
	return 0;
}

void vm_egress_allow_free(char **allow)
{
	for (size_t i = 0; allow && allow[i]; i++)
		free(allow[i]);
	free(allow);
}

static bool egress_scope(const char *ns, const char *action)
{
	return (streq(ns, "network") && streq(action, "host")) ||
	       (streq(ns, "browser") && streq(action, "navigate"));
}

/*
 * A scope as the dialer takes it (docs/egress.md): split at the last ':' when digits or
 * "*" follow; the host a glob of [a-z0-9.*-] (at most 253) or an IPv6 address in
 * brackets. Returns a malloc()ed pattern with the host lowercased, or NULL (errno EINVAL
 * or ENOMEM).
 */
static char *egress_pattern(const char *scope)
{
	const char *colon = strrchr(scope, ':'), *port = NULL;
	size_t host_len = strlen(scope);
	_cleanup_free_ char *host = NULL;
	char *out = NULL;

	if (colon && (streq(colon + 1, "*") ||
		      (colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)))) {
		port = colon + 1;
		host_len = (size_t)(colon - scope);
		if (!streq(port, "*") && parse_port(port, strlen(port), &(uint16_t){0}) < 0) {
			errno = EINVAL;
			return NULL;
		}
	}
	host = strndup(scope, host_len);
	if (!host)
		return NULL;
	for (char *c = host; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	if (host_len >= 2 && host[0] == '[' && host[host_len - 1] == ']') {
		struct in6_addr a;

		host[host_len - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &a) != 1) {
			errno = EINVAL;
			return NULL;
		}
		host[host_len - 1] = ']';
	} else if (host_len == 0 || host_len > 253 ||
		   strspn(host, "abcdefghijklmnopqrstuvwxyz0123456789.-*") != host_len) {
		errno = EINVAL;
		return NULL;
	}
	if (asprintf(&out, "%s%s%s", host, port ? ":" : "", port ? port : "") < 0)
		return NULL;
	return out;
}

static bool declares_port(const Manifest *m, const char *connect)
{
	const char *const *caps;
	size_t n = manifest_capabilities(m, &caps);

	for (size_t i = 0; i < n; i++)
		if (streq(caps[i], connect) || streq(caps[i], "network:connect:*"))
			return true;
	return false;
}

static bool declares_github(const Manifest *m)
{
	const char *const *caps;
	size_t n = manifest_capabilities(m, &caps);

	for (size_t i = 0; i < n; i++)
		if (strneq(caps[i], "github:", 7) &&
		    capability_parse(caps[i], NULL, NULL, NULL) == 0)
			return true;
	return false;
}

/* @next appended to the comma list *@names. */
static int append_name(char **names, const char *next)
{
	char *s = NULL;

	if (asprintf(&s, "%s%s%s", *names ? *names : "", *names ? ", " : "", next) < 0)
		return -ENOMEM;
	free(*names);
	*names = s;
	return 0;
}

/* The GitHub broker's part of the plan: one github: app at most, which dials
 * VM_GITHUB_EGRESS. Returns 0, -EOPNOTSUPP with *@reason, or -ENOMEM. */
static int github_plan(const Manifest *const *apps, size_t n, char **allow, size_t *n_allow,
		       const Manifest **ret_app, char **reason)
{
	_cleanup_free_ char *names = NULL;
	size_t found = 0;
	bool dup = false;

	*ret_app = NULL;
	for (size_t a = 0; a < n; a++) {
		if (!declares_github(apps[a]))
			continue;
		*ret_app = apps[a];
		found++;
		if (append_name(&names, manifest_name(apps[a])) < 0)
			return -ENOMEM;
	}
	if (found > 1) {
		if (asprintf(
			    reason,
			    "at most one app may declare a github:* capability when running multiple apps together — found %zu: %s",
			    found, names) < 0)
			*reason = NULL;
		return -EOPNOTSUPP;
	}
	if (found == 0)
		return 0;
	for (size_t k = 0; k < *n_allow && !dup; k++)
		dup = streq(allow[k], VM_GITHUB_EGRESS);
	if (dup)
		return 0;
	if (*n_allow >= VM_EGRESS_PATTERNS_MAX) {
		if (asprintf(
			    reason,
			    "%s's berth.yml names more than %d egress hosts, more than berth-vmm takes; use '*' globs to cover several with one scope",
			    manifest_name(*ret_app), VM_EGRESS_PATTERNS_MAX) < 0)
			*reason = NULL;
		return -EOPNOTSUPP;
	}
	allow[*n_allow] = strdup(VM_GITHUB_EGRESS);
	if (!allow[*n_allow])
		return -ENOMEM;
	(*n_allow)++;
	return 0;
}

int vm_egress_plan(const Manifest *const *apps, size_t n, char ***ret_allow, char **ret_warning,
		   char **reason)
{
	char **allow = calloc(VM_EGRESS_PATTERNS_MAX + 1, sizeof(char *));
	_cleanup_free_ char *names = NULL;
	size_t n_allow = 0, n_egress = 0;
	const Manifest *egress_app = NULL;

	*reason = NULL;
	*ret_warning = NULL;
	if (!allow)
		return -ENOMEM;
	for (size_t a = 0; a < n; a++) {
		const char *const *caps;
		size_t nc = manifest_capabilities(apps[a], &caps);
		bool declares = false;

		for (size_t i = 0; i < nc; i++) {
			_cleanup_free_ char *ns = NULL, *action = NULL, *scope = NULL;
			char *p;
			bool dup = false;

			if (capability_parse(caps[i], &ns, &action, &scope) < 0 ||
			    !egress_scope(ns, action))
				continue;
			declares = true;
			p = egress_pattern(scope);
			if (!p && errno == ENOMEM)
				goto nomem;
			if (!p) {
				if (asprintf(
					    reason,
					    "\"%s\" in %s's berth.yml cannot be reached from the VM: its egress takes a host name or IPv4 address ('*' may stand for any run of characters), or an IPv6 address in brackets, optionally followed by :PORT (1-65535) or :*. Change the scope (see docs/egress.md)",
					    caps[i], manifest_name(apps[a])) < 0)
					*reason = NULL;
				vm_egress_allow_free(allow);
				return -EOPNOTSUPP;
			}
			for (size_t k = 0; k < n_allow && !dup; k++)
				dup = streq(allow[k], p);
			if (dup) {
				free(p);
				continue;
			}
			if (n_allow >= VM_EGRESS_PATTERNS_MAX) {
				free(p);
				if (asprintf(
					    reason,
					    "%s's berth.yml names more than %d egress hosts, more than berth-vmm takes; use '*' globs to cover several with one scope",
					    manifest_name(apps[a]), VM_EGRESS_PATTERNS_MAX) < 0)
					*reason = NULL;
				vm_egress_allow_free(allow);
				return -EOPNOTSUPP;
			}
			allow[n_allow++] = p;
		}
		if (!declares)
			continue;
		egress_app = apps[a];
		n_egress++;
		{
			char *next = NULL;

			if (asprintf(&next, "%s%s%s", names ? names : "", names ? ", " : "",
				     manifest_name(apps[a])) < 0)
				goto nomem;
			free(names);
			names = next;
		}
	}
	if (n_egress > 1) {
		if (asprintf(
			    reason,
			    "at most one app may declare a browser:navigate:*/network:host:* capability when running multiple apps together — found %zu: %s",
			    n_egress, names) < 0)
			*reason = NULL;
		vm_egress_allow_free(allow);
		return -EOPNOTSUPP;
	}
	{
		const Manifest *github_app = NULL;
		int r = github_plan(apps, n, allow, &n_allow, &github_app, reason);

		if (r < 0) {
			vm_egress_allow_free(allow);
			return r;
		}
		if (egress_app && !declares_port(egress_app, "network:connect:8090") &&
		    asprintf(
			    ret_warning,
			    "%s declares network:host: but not network:connect:8090, so the kernel (Landlock) will keep it from reaching the egress broker on 127.0.0.1:8090 and its requests will fail; add network:connect:8090 to its berth.yml",
			    manifest_name(egress_app)) < 0)
			*ret_warning = NULL;
		if (!*ret_warning && github_app &&
		    !declares_port(github_app, "network:connect:8092") &&
		    asprintf(
			    ret_warning,
			    "%s declares github: but not network:connect:8092, so the kernel (Landlock) will keep it from reaching the GitHub broker on 127.0.0.1:8092 and its requests will fail; add network:connect:8092 to its berth.yml",
			    manifest_name(github_app)) < 0)
			*ret_warning = NULL;
	}
	*ret_allow = allow;
	return (int)n_allow;
nomem:
	vm_egress_allow_free(allow);
	return -ENOMEM;
}
