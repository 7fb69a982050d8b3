/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fileio.h"
#include "macros.h"
#include "tests.h"

static char tmpdir[PATH_MAX];

static void setup(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/berth-test-config-XXXXXX");
	ASSERT_NOT_NULL(mkdtemp(tmpdir));
	setenv("BERTH_HOME", tmpdir, 1);
	unsetenv("BERTH_VM_ARTIFACTS_URL");
	unsetenv("BERTH_VMM_ARTIFACTS");
	unsetenv("BERTH_VMM");
	unsetenv("BERTH_SANDBOX");
	unsetenv("BERTH_ACCEL");
	unsetenv("BERTH_QEMU");
}

static void teardown(void)
{
	rm_rf(tmpdir);
}

static void write_config(const char *text)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/config.json", tmpdir);
	ASSERT_OK(write_file_atomic(path, text, strlen(text), 0644));
}

static void load_ok(BerthConfig *c)
{
	ConfigError e = {};
	char msg[PATH_MAX + 512];
	int r = config_load(NULL, c, &e);

	if (r < 0) {
		config_error_format(&e, msg, sizeof(msg));
		TEST_FAIL("config_load: %s", msg);
	}
}

TEST(missing_file_is_empty)
{
	BerthConfig c;
	ConfigSource s;

	setup();
	load_ok(&c);
	ASSERT_TRUE(strstr(c.path, "/config.json") != NULL);
	ASSERT_TRUE(config_get(&c, CONFIG_ARTIFACTS_URL, NULL, &s) == NULL);
	ASSERT_EQ(s, CONFIG_SOURCE_NONE);
	ASSERT_TRUE(config_get(&c, CONFIG_ARTIFACTS_DIR, NULL, &s) == NULL);
	config_done(&c);
	teardown();
}

TEST(url_precedence_flag_env_file_default)
{
	BerthConfig c;
	ConfigSource s;
	char *d;

	setup();
	write_config("{\"vm\": {\"artifactsUrl\": \"https://file/{asset}\"}}");
	load_ok(&c);
	setenv("BERTH_VM_ARTIFACTS_URL", "https://env/{asset}", 1);
	ASSERT_STREQ(config_get(&c, CONFIG_ARTIFACTS_URL, "https://flag/{asset}", &s),
		     "https://flag/{asset}");
	ASSERT_EQ(s, CONFIG_SOURCE_FLAG);
	d = config_source_describe(&c, CONFIG_ARTIFACTS_URL, s);
	ASSERT_STREQ(d, "--url");
	free(d);

	ASSERT_STREQ(config_get(&c, CONFIG_ARTIFACTS_URL, NULL, &s), "https://env/{asset}");
	ASSERT_EQ(s, CONFIG_SOURCE_ENV);
	d = config_source_describe(&c, CONFIG_ARTIFACTS_URL, s);
	ASSERT_STREQ(d, "BERTH_VM_ARTIFACTS_URL");
	free(d);

	/* Empty counts as unset, at every level. */
	setenv("BERTH_VM_ARTIFACTS_URL", "", 1);
	ASSERT_STREQ(config_get(&c, CONFIG_ARTIFACTS_URL, "", &s), "https://file/{asset}");
	ASSERT_EQ(s, CONFIG_SOURCE_FILE);
	d = config_source_describe(&c, CONFIG_ARTIFACTS_URL, s);
	ASSERT_TRUE(strncmp(d, "vm.artifactsUrl in ", 19) == 0);
	ASSERT_TRUE(strstr(d, "/config.json") != NULL);
	free(d);
	config_done(&c);

	/* No file: the built-in default, which is empty because there is no release host. */
	unsetenv("BERTH_VM_ARTIFACTS_URL");
	ASSERT_TRUE(config_get(NULL, CONFIG_ARTIFACTS_URL, NULL, &s) == NULL);
	ASSERT_EQ(s, CONFIG_SOURCE_NONE);
	ASSERT_STREQ(CONFIG_ARTIFACTS_URL_DEFAULT, "");
	teardown();
}

TEST(dir_precedence_and_home_expansion)
{
	BerthConfig c;
	ConfigSource s;

	setup();
	setenv("HOME", "/home/someone", 1);
	write_config(
		"{\"vm\": {\"artifactsDir\": \"~/out/artifacts\", \"vmm\": \"/opt/berth-vmm\"},\n"
		" \"sandbox\": \"vm\", \"telemetry\": false}");
	load_ok(&c);
	ASSERT_STREQ(c.vm_artifacts_dir, "/home/someone/out/artifacts");
	ASSERT_STREQ(c.vm_vmm, "/opt/berth-vmm");
	ASSERT_STREQ(c.sandbox, "vm");
	ASSERT_STREQ(config_get(&c, CONFIG_ARTIFACTS_DIR, NULL, &s), "/home/someone/out/artifacts");
	ASSERT_EQ(s, CONFIG_SOURCE_FILE);
	setenv("BERTH_VMM_ARTIFACTS", "/env/dir", 1);
	ASSERT_STREQ(config_get(&c, CONFIG_ARTIFACTS_DIR, NULL, &s), "/env/dir");
	ASSERT_EQ(s, CONFIG_SOURCE_ENV);
	ASSERT_STREQ(config_get(&c, CONFIG_ARTIFACTS_DIR, "/flag/dir", &s), "/flag/dir");
	ASSERT_EQ(s, CONFIG_SOURCE_FLAG);
	setenv("BERTH_SANDBOX", "docker", 1);
	ASSERT_STREQ(config_get(&c, CONFIG_SANDBOX, NULL, &s), "docker");
	ASSERT_STREQ(config_key_env(CONFIG_ARTIFACTS_DIR), "BERTH_VMM_ARTIFACTS");
	config_done(&c);
	teardown();
}

TEST(nulls_and_empty_strings_are_unset)
{
	BerthConfig c;

	setup();
	write_config(
		"{\"vm\": {\"artifactsUrl\": null, \"artifactsDir\": \"\"}, \"sandbox\": null}");
	load_ok(&c);
	ASSERT_TRUE(c.vm_artifacts_url == NULL);
	ASSERT_TRUE(c.vm_artifacts_dir == NULL);
	ASSERT_TRUE(c.sandbox == NULL);
	config_done(&c);
	teardown();
}

static void expect_bad(const char *text, int line, const char *in_message)
{
	char msg[PATH_MAX + 512];
	ConfigError e = {};
	BerthConfig c;

	write_config(text);
	ASSERT_ERROR(config_load(NULL, &c, &e), EBADMSG);
	ASSERT_TRUE(c.path == NULL);
	ASSERT_EQ(e.line, line);
	config_error_format(&e, msg, sizeof(msg));
	if (!strstr(msg, in_message))
		TEST_FAIL("\"%s\" lacks \"%s\"", msg, in_message);
	/* The message names the file and says what to do. */
	ASSERT_TRUE(strstr(msg, tmpdir) != NULL);
	ASSERT_TRUE(strstr(msg, "config.json") != NULL);
	ASSERT_TRUE(strstr(msg, "fix the file") != NULL);
}

TEST(malformed)
{
	char msg[PATH_MAX + 512];
	ConfigError e = {};

	setup();
	expect_bad("{\n  \"vm\": {\n    \"artifactsUrl\": \"x\",\n  }\n}\n", 4, ":4:");
	expect_bad("{\"vm\": {}, \"vm\": {}}", 1, "duplicate");
	expect_bad("[1, 2]", 0, "must hold a JSON object");
	expect_bad("{\"vm\": []}", 0, "vm must be an object");
	expect_bad("{\"vm\": {\"artifactsUrl\": 3}}", 0, "vm.artifactsUrl must be a string");
	expect_bad("{\"vm\": {\"artifactUrl\": \"x\"}}", 0, "unknown key \"vm.artifactUrl\"");
	expect_bad("{\"sandbox\": \"qemu\"}", 0, "sandbox must be \"vm\" or \"docker\"");
	expect_bad("{\"vm\": {\"accel\": \"hvf\"}}", 0,
		   "vm.accel must be \"auto\", \"kvm\" or \"tcg\", not \"hvf\"");
	expect_bad("", 1, "config.json:1:");

	/* Line and column come from jansson. */
	write_config("{\n\n   x}");
	{
		BerthConfig c;

		ASSERT_ERROR(config_load(NULL, &c, &e), EBADMSG);
		ASSERT_EQ(e.line, 3);
		ASSERT_EQ(e.column, 4);
		config_error_format(&e, msg, sizeof(msg));
		ASSERT_TRUE(strstr(msg, "config.json:3:4: ") != NULL);
	}
	teardown();
}

TEST(accel_and_qemu_precedence)
{
	BerthConfig c;
	ConfigSource src;

	setup();
	load_ok(&c);
	ASSERT_STREQ(config_get(&c, CONFIG_ACCEL, NULL, &src), "auto");
	ASSERT_EQ(src, CONFIG_SOURCE_DEFAULT);
	ASSERT_STREQ(config_get(&c, CONFIG_QEMU, NULL, &src), "qemu-system-x86_64");
	config_done(&c);
	write_config("{\"vm\": {\"accel\": \"tcg\", \"qemu\": \"~/bin/qemu\"}}");
	load_ok(&c);
	ASSERT_STREQ(config_get(&c, CONFIG_ACCEL, NULL, &src), "tcg");
	ASSERT_EQ(src, CONFIG_SOURCE_FILE);
	ASSERT_TRUE(strstr(config_get(&c, CONFIG_QEMU, NULL, NULL), "/bin/qemu") != NULL);
	ASSERT_TRUE(config_get(&c, CONFIG_QEMU, NULL, NULL)[0] == '/');
	setenv("BERTH_ACCEL", "kvm", 1);
	ASSERT_STREQ(config_get(&c, CONFIG_ACCEL, NULL, &src), "kvm");
	ASSERT_EQ(src, CONFIG_SOURCE_ENV);
	ASSERT_STREQ(config_get(&c, CONFIG_ACCEL, "auto", &src), "auto");
	ASSERT_EQ(src, CONFIG_SOURCE_FLAG);
	unsetenv("BERTH_ACCEL");
	config_done(&c);
	teardown();
}

TEST(size_cap)
{
	char path[PATH_MAX + 16], *big;
	ConfigError e = {};
	BerthConfig c;

	setup();
	big = malloc(CONFIG_SIZE_MAX + 2);
	ASSERT_NOT_NULL(big);
	memset(big, ' ', CONFIG_SIZE_MAX + 1);
	big[0] = '{';
	big[CONFIG_SIZE_MAX] = '}';
	snprintf(path, sizeof(path), "%s/config.json", tmpdir);
	ASSERT_OK(write_file_atomic(path, big, CONFIG_SIZE_MAX + 1, 0644));
	ASSERT_ERROR(config_load(NULL, &c, &e), EFBIG);
	ASSERT_TRUE(strstr(e.message, "larger than") != NULL);
	free(big);
	teardown();
}

TEST(symlinked_config_is_followed)
{
	char target[PATH_MAX + 16], link[PATH_MAX + 16];
	const char *text = "{\"vm\": {\"artifactsUrl\": \"https://linked/{asset}\"}}";
	BerthConfig c;

	setup();
	snprintf(target, sizeof(target), "%s/dotfiles.json", tmpdir);
	snprintf(link, sizeof(link), "%s/config.json", tmpdir);
	ASSERT_OK(write_file_atomic(target, text, strlen(text), 0644));
	ASSERT_OK(symlink(target, link));
	load_ok(&c);
	ASSERT_STREQ(c.vm_artifacts_url, "https://linked/{asset}");
	config_done(&c);
	teardown();
}

int main(void)
{
	return tests_run();
}
