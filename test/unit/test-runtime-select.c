/* SPDX-License-Identifier: Apache-2.0 */
/* Which sandbox runs an app: --runtime, then BERTH_SANDBOX, then ~/.berth/config.json, then
 * the VM (runtime-select.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime-select.h"
#include "tests.h"

static char home[64];

static void write_config(const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/config.json", home);
	if (!text) {
		(void)unlink(path);
		return;
	}
	f = fopen(path, "w");
	ASSERT_TRUE(f != NULL);
	fputs(text, f);
	fclose(f);
}

/* The runtime @flag selects, and that the reason names @who. */
static int pick(const char *flag, const char *who)
{
	char *reason = NULL;
	int r = runtime_select(flag, &reason);

	ASSERT_TRUE(reason != NULL);
	if (who && !strstr(reason, who)) {
		printf("# reason \"%s\" does not name %s\n", reason, who);
		r = -1000;
	}
	free(reason);
	return r;
}

static void setup(void)
{
	snprintf(home, sizeof(home), "/tmp/berth-test-runtime.XXXXXX");
	ASSERT_TRUE(mkdtemp(home) != NULL);
	setenv("BERTH_HOME", home, 1);
	unsetenv("BERTH_SANDBOX");
	write_config(NULL);
}

TEST(default_is_vm)
{
	setup();
	ASSERT_EQ(pick(NULL, "the default"), SANDBOX_VM);
}

TEST(config_then_env_then_flag)
{
	setup();
	write_config("{\"sandbox\": \"docker\"}");
	ASSERT_EQ(pick(NULL, "config.json"), SANDBOX_DOCKER);
	setenv("BERTH_SANDBOX", "vm", 1);
	ASSERT_EQ(pick(NULL, "BERTH_SANDBOX"), SANDBOX_VM);
	ASSERT_EQ(pick("docker", "--runtime"), SANDBOX_DOCKER);
	setenv("BERTH_SANDBOX", "docker", 1);
	ASSERT_EQ(pick("vm", "--runtime"), SANDBOX_VM);
	ASSERT_EQ(pick(NULL, "BERTH_SANDBOX"), SANDBOX_DOCKER);
	unsetenv("BERTH_SANDBOX");
	write_config(NULL);
}

TEST(unknown_is_an_error_naming_its_source)
{
	char *reason = NULL;

	setup();
	ASSERT_EQ(runtime_select("qemu", &reason), -EINVAL);
	ASSERT_TRUE(reason && strstr(reason, "\"qemu\"") && strstr(reason, "--runtime") &&
		    strstr(reason, "use vm or docker"));
	free(reason);
	reason = NULL;
	setenv("BERTH_SANDBOX", "podman", 1);
	ASSERT_EQ(runtime_select(NULL, &reason), -EINVAL);
	ASSERT_TRUE(reason && strstr(reason, "BERTH_SANDBOX"));
	free(reason);
	unsetenv("BERTH_SANDBOX");
}

int main(void)
{
	int r = tests_run();

	write_config(NULL);
	(void)rmdir(home);
	return r;
}
