/* SPDX-License-Identifier: Apache-2.0 */
/* The CLI's secrets disk, read back by the guest's own parser (src/berth-init/secrets.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boot-disk.h"
#include "env-args.h"
#include "fileio.h"
#include "macros.h"
#include "manifest.h"
#include "secrets-disk.h"
#include "secrets.h" /* berth-init's */
#include "tests.h"

#define SECRET "s3cr3t-Value"

static Manifest *manifest(const char *name, const char *secrets)
{
	_cleanup_free_ char *yaml = NULL;
	Manifest *m = NULL;

	ASSERT_TRUE(asprintf(&yaml, "name: %s\nversion: 1.0.0\n%s%s\n", name,
			     secrets ? "secrets: " : "", secrets ?: "") > 0);
	ASSERT_OK(manifest_parse(yaml, strlen(yaml), NULL, &m, NULL));
	return m;
}

static EnvSet *env(const char *dotenv)
{
	EnvSet *s = NULL;
	char err[256];

	if (env_set_parse_dotenv(&s, dotenv, strlen(dotenv), "test", err, sizeof(err)) < 0)
		TEST_FAIL("%s", err);
	return s;
}

typedef struct Warnings {
	char text[4096];
} Warnings;

static void collect(const char *line, void *userdata)
{
	Warnings *w = userdata;

	ASSERT_TRUE(strchr(line, '\n') == NULL);
	strncat(w->text, line, sizeof(w->text) - strlen(w->text) - 2);
	strcat(w->text, "\n");
}

/* Build, check the framing, and parse with berth-init's parser. */
static json_t *build_and_read(const EnvSet *e, const SecretsDiskApp *apps, size_t n)
{
	char *image = NULL, err[512] = "";
	size_t size = 0, json_end;
	json_t *doc = NULL;

	ASSERT_OK(secrets_disk_build(e, apps, n, &image, &size, err, sizeof(err)));
	ASSERT_TRUE(size > 0 && size % 512 == 0 && size <= SECRETS_DISK_SIZE_MAX);
	ASSERT_TRUE(memcmp(image, "BERTHSEC2\n", 10) == 0);
	json_end = strnlen(image, size);
	for (size_t i = json_end; i < size; i++)
		ASSERT_EQ(image[i], 0);
	ASSERT_TRUE(size - json_end < 512);
	if (secrets_parse(image, size, &doc, err, sizeof(err)) < 0)
		TEST_FAIL("berth-init refuses the disk: %s", err);
	secrets_disk_image_free(image, size);
	return doc;
}

static Manifest *manifest_caps(const char *name, const char *caps, const char *secrets)
{
	_cleanup_free_ char *yaml = NULL;
	Manifest *m = NULL;

	ASSERT_TRUE(asprintf(&yaml, "name: %s\nversion: 1.0.0\ncapabilities: %s\n%s%s\n", name,
			     caps, secrets ? "secrets: " : "", secrets ?: "") > 0);
	ASSERT_OK(manifest_parse(yaml, strlen(yaml), NULL, &m, NULL));
	return m;
}

static const char *value_at(json_t *doc, const char *app, const char *name)
{
	json_t *o = app ? json_object_get(json_object_get(doc, "apps"), app)
			: json_object_get(doc, "shared");

	return json_string_value(json_object_get(o, name));
}

TEST(scoping)
{
	_cleanup_(manifest_freep) Manifest *gh = manifest("gh", "[GH_TOKEN, BOTH, GH_MISSING]");
	_cleanup_(manifest_freep) Manifest *other = manifest("other", "[BOTH]");
	_cleanup_(manifest_freep) Manifest *plain = manifest("plain", NULL);
	_cleanup_(env_set_freep) EnvSet *e = env("GH_TOKEN=gh-" SECRET "\nSHARED=for all\n"
						 "BOTH=two apps\nALSO_SHARED=x\n");
	SecretsDiskApp apps[] = {{"gh", gh, NULL}, {"other", other, NULL}, {"plain", plain, NULL}};
	_cleanup_(json_decrefp) json_t *doc = build_and_read(e, apps, 3);
	_cleanup_free_ char *text = json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT);

	ASSERT_STREQ(
		text,
		"{\"apps\":{\"gh\":{\"BOTH\":\"two apps\",\"GH_TOKEN\":\"gh-s3cr3t-Value\"},\"other\":{\"BOTH\":\"two apps\"}},\"daemons\":{},\"shared\":{\"ALSO_SHARED\":\"x\",\"SHARED\":\"for all\"}}");
	/* An app that declares nothing gets no object of its own: shared values only. */
	ASSERT_TRUE(json_object_get(json_object_get(doc, "apps"), "plain") == NULL);
}

/* The CLI's own values for one app (the terminal's login): to that app alone, whatever its
 * berth.yml declares, over a --env value of the same name there, and with nothing else on
 * the disk. */
TEST(own_values)
{
	_cleanup_(manifest_freep) Manifest *term =
		manifest("terminal", "[BERTH_TERMINAL_CREDENTIAL]");
	_cleanup_(manifest_freep) Manifest *other = manifest("other", NULL);
	_cleanup_(env_set_freep) EnvSet *login =
		env("BERTH_TERMINAL_CREDENTIAL=berth:" SECRET "\n");
	_cleanup_(env_set_freep) EnvSet *e = env("BERTH_TERMINAL_CREDENTIAL=from-the-user\nA=1\n");
	SecretsDiskApp apps[] = {{"other", other, NULL}, {"terminal", term, login}};
	_cleanup_(json_decrefp) json_t *doc = build_and_read(e, apps, 2), *alone = NULL;
	_cleanup_free_ char *text = json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT), *text2 = NULL;

	ASSERT_STREQ(text, "{\"apps\":{\"terminal\":{\"BERTH_TERMINAL_CREDENTIAL\":"
			   "\"berth:s3cr3t-Value\"}},\"daemons\":{},\"shared\":{\"A\":\"1\"}}");
	/* Without any --env, and for an app that declares nothing. */
	apps[1].manifest = other;
	alone = build_and_read(NULL, apps, 2);
	text2 = json_dumps(alone, JSON_SORT_KEYS | JSON_COMPACT);
	ASSERT_STREQ(text2, "{\"apps\":{\"terminal\":{\"BERTH_TERMINAL_CREDENTIAL\":"
			    "\"berth:s3cr3t-Value\"}},\"daemons\":{},\"shared\":{}}");
}

TEST(warnings_name_names_only)
{
	_cleanup_(manifest_freep) Manifest *gh = manifest("gh", "[GH_TOKEN, GH_MISSING]");
	_cleanup_(manifest_freep) Manifest *other = manifest("other", "[OTHER_MISSING]");
	_cleanup_(env_set_freep) EnvSet *e = env("GH_TOKEN=" SECRET "\nUNSCOPED=" SECRET "\n");
	SecretsDiskApp apps[] = {{"gh", gh, NULL}, {"other", other, NULL}};
	Warnings w = {};

	secrets_disk_warn(e, apps, 2, collect, &w);
	ASSERT_STREQ(
		w.text,
		"[berth] UNSCOPED is not declared under secrets: in any app's berth.yml, so every app in this VM receives it; to give it to one app only, list it under secrets: in that app's berth.yml\n"
		"[berth] app \"gh\" declares secret GH_MISSING in berth.yml, but no value was provided for this boot\n"
		"[berth] app \"other\" declares secret OTHER_MISSING in berth.yml, but no value was provided for this boot\n");
	ASSERT_TRUE(strstr(w.text, "s3cr3t") == NULL);

	/* No --env at all: the declared names are still reported. */
	w = (Warnings){};
	secrets_disk_warn(NULL, apps, 2, collect, &w);
	ASSERT_STREQ(
		w.text,
		"[berth] app \"gh\" declares secret GH_TOKEN in berth.yml, but no value was provided for this boot\n"
		"[berth] app \"gh\" declares secret GH_MISSING in berth.yml, but no value was provided for this boot\n"
		"[berth] app \"other\" declares secret OTHER_MISSING in berth.yml, but no value was provided for this boot\n");
	/* Everything given and declared: silence. */
	w = (Warnings){};
	{
		_cleanup_(env_set_freep) EnvSet *all =
			env("GH_TOKEN=1\nGH_MISSING=2\nOTHER_MISSING=3\n");

		secrets_disk_warn(all, apps, 2, collect, &w);
	}
	ASSERT_STREQ(w.text, "");
}

TEST(values_survive_byte_for_byte)
{
	_cleanup_(manifest_freep) Manifest *m = manifest("app", "[KEY]");
	_cleanup_(env_set_freep) EnvSet *e = NULL;
	static const char *const values[] = {
		"",
		"quote \" backslash \\ slash / done",
		"-----BEGIN KEY-----\nabc\r\n\t-----END KEY-----\n",
		"controls \x01\x02\x1b\x1f and del \x7f",
		"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\x91",
		"looks like json {\"a\":[1]} and \\u0000",
	};
	char err[256], arg[256];
	SecretsDiskApp app = {"app", m, NULL};

	for (size_t i = 0; i < ELEMENTSOF(values); i++) {
		snprintf(arg, sizeof(arg), "V%zu=%s", i, values[i]);
		ASSERT_OK(env_set_add_env(&e, arg, err, sizeof(err)));
	}
	ASSERT_OK(env_set_add_env(&e, "KEY=scoped \"one\"\n", err, sizeof(err)));
	{
		_cleanup_(json_decrefp) json_t *doc = build_and_read(e, &app, 1);

		for (size_t i = 0; i < ELEMENTSOF(values); i++) {
			char name[8];

			snprintf(name, sizeof(name), "V%zu", i);
			ASSERT_STREQ(value_at(doc, NULL, name), values[i]);
		}
		ASSERT_STREQ(value_at(doc, "app", "KEY"), "scoped \"one\"\n");
		ASSERT_TRUE(value_at(doc, NULL, "KEY") == NULL);
	}
}

TEST(empty_set)
{
	_cleanup_(manifest_freep) Manifest *m = manifest("app", "[KEY]");
	SecretsDiskApp app = {"app", m, NULL};
	char *image = NULL, err[256];
	size_t size;

	ASSERT_OK(secrets_disk_build(NULL, &app, 1, &image, &size, err, sizeof(err)));
	ASSERT_EQ(size, 512);
	ASSERT_STREQ(image, "BERTHSEC2\n{\"shared\":{},\"apps\":{},\"daemons\":{}}");
	secrets_disk_image_free(image, size);
}

TEST(github_token_goes_to_the_broker_alone)
{
	_cleanup_(env_set_freep) EnvSet *e = env("GITHUB_TOKEN=ghp_s3cr3t\nGITHUB_REPO=o/r\n");
	Manifest *gh = manifest_caps("gh", "[github:read:repos, network:connect:8092]",
				     "[GITHUB_TOKEN, GITHUB_REPO]");
	Manifest *other = manifest_caps("other", "[]", "[GITHUB_TOKEN]");
	SecretsDiskApp apps[] = {{"gh", gh, NULL}, {"other", other, NULL}};
	json_t *doc = build_and_read(e, apps, 2);
	_cleanup_free_ char *text = json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT);
	Warnings w = {};

	ASSERT_STREQ(
		text,
		"{\"apps\":{\"gh\":{\"GITHUB_REPO\":\"o/r\",\"GITHUB_TOKEN\":\"" SECRETS_GITHUB_TOKEN_PLACEHOLDER
		"\"}},\"daemons\":{\"github-api-broker\":"
		"{\"GITHUB_TOKEN\":\"ghp_s3cr3t\"}},\"shared\":{}}");
	secrets_disk_warn(e, apps, 2, collect, &w);
	ASSERT_TRUE(strstr(w.text, "[berth] GITHUB_TOKEN goes to the GitHub API broker alone") !=
		    NULL);
	ASSERT_TRUE(strstr(w.text, "s3cr3t") == NULL);
	json_decref(doc);
	/* Undeclared too: the token is never shared with every app once github: is declared. */
	{
		Manifest *gh2 = manifest_caps("gh", "[github:read:repos]", NULL);
		SecretsDiskApp one[] = {{"gh", gh2, NULL}};

		doc = build_and_read(e, one, 1);
		ASSERT_TRUE(json_object_get(json_object_get(doc, "shared"), "GITHUB_TOKEN") ==
			    NULL);
		ASSERT_STREQ(json_string_value(json_object_get(
				     json_object_get(json_object_get(doc, "apps"), "gh"),
				     "GITHUB_TOKEN")),
			     SECRETS_GITHUB_TOKEN_PLACEHOLDER);
		json_decref(doc);
		manifest_free(gh2);
	}
	/* Without a github: app, GITHUB_TOKEN is a secret like any other. */
	{
		SecretsDiskApp plain[] = {{"other", other, NULL}};

		doc = build_and_read(e, plain, 1);
		ASSERT_STREQ(value_at(doc, "other", "GITHUB_TOKEN"), "ghp_s3cr3t");
		ASSERT_TRUE(json_object_size(json_object_get(doc, "daemons")) == 0);
		json_decref(doc);
	}
	manifest_free(gh);
	manifest_free(other);
}

TEST(padding_at_the_boundary)
{
	/* "BERTHSEC2\n" + {"shared":{"A":"<v>"},"apps":{},"daemons":{}} is 52 bytes + the
	 * value. */
	_cleanup_(env_set_freep) EnvSet *e = NULL;
	char *image = NULL, err[256], arg[1100];
	size_t size;

	for (size_t vlen = 457; vlen < 467; vlen++) {
		e = env_set_free(e);
		snprintf(arg, sizeof(arg), "A=%0*d", (int)vlen, 0);
		ASSERT_OK(env_set_add_env(&e, arg, err, sizeof(err)));
		ASSERT_OK(secrets_disk_build(e, NULL, 0, &image, &size, err, sizeof(err)));
		ASSERT_EQ(size, 52 + vlen <= 512 ? 512 : 1024);
		ASSERT_EQ(strnlen(image, size), 52 + vlen);
		{
			_cleanup_(json_decrefp) json_t *doc = NULL;

			ASSERT_OK(secrets_parse(image, size, &doc, err, sizeof(err)));
		}
		secrets_disk_image_free(image, size);
	}
}

TEST(size_cap)
{
	_cleanup_(env_set_freep) EnvSet *e = NULL;
	_cleanup_free_ char *arg = malloc(ENV_VALUE_SIZE_MAX + 16);
	char *image = NULL, err[512];
	size_t size;

	/* Eight 128 KiB values fill 1 MiB; the names and quotes push it past. */
	for (int i = 0; i < 8; i++) {
		snprintf(arg, 16, "V%d=", i);
		memset(arg + 3, 'x', ENV_VALUE_SIZE_MAX);
		memcpy(arg + 3, SECRET, strlen(SECRET));
		arg[3 + ENV_VALUE_SIZE_MAX] = '\0';
		ASSERT_OK(env_set_add_env(&e, arg, err, sizeof(err)));
	}
	ASSERT_ERROR(secrets_disk_build(e, NULL, 0, &image, &size, err, sizeof(err)), E2BIG);
	ASSERT_STREQ(
		err,
		"the values given with --env and --env-file take 1048685 bytes on the secrets disk, more than the 1024 KiB it holds; pass only what the apps need");
	ASSERT_TRUE(image == NULL);

	/* Control characters take six bytes each once escaped: the cap counts those. Two
	 * values of 100 KiB take 1.2 MiB. */
	e = env_set_free(e);
	memset(arg, '\x01', 100 * 1024);
	arg[100 * 1024] = '\0';
	for (int i = 0; i < 2; i++) {
		_cleanup_free_ char *a = NULL;

		ASSERT_TRUE(asprintf(&a, "C%d=%s", i, arg) > 0);
		ASSERT_OK(env_set_add_env(&e, a, err, sizeof(err)));
	}
	ASSERT_ERROR(secrets_disk_build(e, NULL, 0, &image, &size, err, sizeof(err)), E2BIG);
	ASSERT_TRUE(strstr(err, "\x01") == NULL);

	/* Just under the cap is written whole. */
	e = env_set_free(e);
	for (int i = 0; i < 7; i++) {
		snprintf(arg, 16, "V%d=", i);
		memset(arg + 3, 'y', ENV_VALUE_SIZE_MAX);
		arg[3 + ENV_VALUE_SIZE_MAX] = '\0';
		ASSERT_OK(env_set_add_env(&e, arg, err, sizeof(err)));
	}
	{
		_cleanup_(json_decrefp) json_t *doc = build_and_read(e, NULL, 0);

		ASSERT_EQ(strlen(value_at(doc, NULL, "V6")), ENV_VALUE_SIZE_MAX);
	}
}

TEST(app_names_the_guest_refuses)
{
	_cleanup_(manifest_freep) Manifest *m = manifest("app", NULL);
	SecretsDiskApp bad[] = {{"Bad", m, NULL}}, twice[] = {{"a", m, NULL}, {"a", m, NULL}};
	char *image = NULL, err[256];
	size_t size;

	ASSERT_ERROR(secrets_disk_build(NULL, bad, 1, &image, &size, err, sizeof(err)), EINVAL);
	ASSERT_ERROR(secrets_disk_build(NULL, twice, 2, &image, &size, err, sizeof(err)), EINVAL);
}

static char *temp_dir(void)
{
	char *d = strdup("/tmp/test-secrets-disk.XXXXXX");

	ASSERT_NOT_NULL(mkdtemp(d));
	return d;
}

TEST(write_is_0600_exclusive_and_never_follows)
{
	_cleanup_free_ char *dir = temp_dir(), *path = NULL, *other = NULL, *back = NULL;
	char image[512] = "BERTHSEC1\n{}", err[512], link_target[64];
	struct stat st;
	size_t n;

	ASSERT_TRUE(asprintf(&path, "%s/vm.img", dir) > 0);
	ASSERT_TRUE(asprintf(&other, "%s/elsewhere", dir) > 0);

	/* 0600 whatever the umask. */
	umask(0);
	ASSERT_OK(secrets_disk_write(path, image, sizeof(image), err, sizeof(err)));
	ASSERT_EQ(stat(path, &st), 0);
	ASSERT_EQ(st.st_mode & 07777, 0600);
	ASSERT_EQ(st.st_size, 512);
	ASSERT_OK(read_full_file(path, 4096, &back, &n));
	ASSERT_EQ(n, 512);
	ASSERT_TRUE(memcmp(back, image, 512) == 0);

	/* A file of ours left by a crashed run is replaced (a new inode, not rewritten). */
	{
		ino_t old = st.st_ino;
		int hold = open(path, O_RDONLY | O_CLOEXEC);

		ASSERT_TRUE(hold >= 0);
		ASSERT_OK(secrets_disk_write(path, image, sizeof(image), err, sizeof(err)));
		ASSERT_EQ(stat(path, &st), 0);
		ASSERT_TRUE(st.st_ino != old);
		close(hold);
	}

	/* A symlink at the path is refused and its target untouched. */
	ASSERT_EQ(unlink(path), 0);
	ASSERT_EQ(symlink(other, path), 0);
	ASSERT_ERROR(secrets_disk_write(path, image, sizeof(image), err, sizeof(err)), EEXIST);
	ASSERT_TRUE(strstr(err, "exists and is not a file of this user's; remove it") != NULL);
	ASSERT_EQ(access(other, F_OK), -1);
	ASSERT_EQ(readlink(path, link_target, sizeof(link_target)), (ssize_t)strlen(other));
	ASSERT_EQ(unlink(path), 0);

	/* So are a directory and a FIFO. */
	ASSERT_EQ(mkdir(path, 0700), 0);
	ASSERT_ERROR(secrets_disk_write(path, image, sizeof(image), err, sizeof(err)), EEXIST);
	ASSERT_EQ(rmdir(path), 0);
	ASSERT_EQ(mkfifo(path, 0600), 0);
	ASSERT_ERROR(secrets_disk_write(path, image, sizeof(image), err, sizeof(err)), EEXIST);
	ASSERT_EQ(unlink(path), 0);

	/* A missing directory is an error, and leaves nothing. */
	{
		_cleanup_free_ char *deep = NULL;

		ASSERT_TRUE(asprintf(&deep, "%s/no/such/dir.img", dir) > 0);
		ASSERT_ERROR(secrets_disk_write(deep, image, sizeof(image), err, sizeof(err)),
			     ENOENT);
	}
	ASSERT_OK(secrets_disk_remove(path));
	ASSERT_OK(rm_rf(dir));
}

TEST(path_is_private)
{
	_cleanup_free_ char *home = temp_dir(), *path = NULL, *want = NULL, *dir = NULL;
	char err[512];
	struct stat st;

	ASSERT_EQ(setenv("BERTH_HOME", home, 1), 0);
	ASSERT_OK(secrets_disk_path("berth-dev-notes", &path, err, sizeof(err)));
	ASSERT_TRUE(asprintf(&want, "%s/run/secrets/berth-dev-notes.img", home) > 0);
	ASSERT_TRUE(asprintf(&dir, "%s/run/secrets", home) > 0);
	ASSERT_STREQ(path, want);
	ASSERT_EQ(lstat(dir, &st), 0);
	ASSERT_TRUE(S_ISDIR(st.st_mode));
	ASSERT_EQ(st.st_mode & 0777, 0700);

	/* Opened up by someone: made private again. */
	ASSERT_EQ(chmod(dir, 0755), 0);
	free(path);
	ASSERT_OK(secrets_disk_path("berth-dev-notes", &path, err, sizeof(err)));
	ASSERT_EQ(lstat(dir, &st), 0);
	ASSERT_EQ(st.st_mode & 0777, 0700);

	/* A symlink in its place is refused. */
	ASSERT_EQ(rmdir(dir), 0);
	ASSERT_EQ(symlink("/tmp", dir), 0);
	free(path);
	path = NULL;
	ASSERT_ERROR(secrets_disk_path("berth-dev-notes", &path, err, sizeof(err)), EPERM);
	ASSERT_TRUE(strstr(err, "is not a directory of this user's") != NULL);

	ASSERT_ERROR(secrets_disk_path("../escape", &path, err, sizeof(err)), EINVAL);
	ASSERT_OK(rm_rf(home));
}

/*
 * The boot disk as berth-init reads it (boot_read_device()): plan and secrets back, and no
 * byte read past them. A restored VM's boot disk has the template's size, megabytes past
 * its content; here the disk is a FIFO whose writer stays open after the content, so a
 * read past it would wait for the writer, which leaves only 10 s later.
 */
TEST(boot_disk_read_stops_at_its_content)
{
	_cleanup_(manifest_freep) Manifest *m = manifest("notes", "[TOKEN]");
	_cleanup_(env_set_freep) EnvSet *e = env("TOKEN=" SECRET "\n");
	SecretsDiskApp apps[] = {{"notes", m, NULL}};
	char dir[] = "/tmp/test-boot-read.XXXXXX", fifo[64], sec_path[64], err[512] = "";
	_cleanup_(json_decrefp) json_t *plan =
		json_pack("{s:[{s:s, s:s}]}", "apps", "name", "notes", "share", "app0");
	json_t *got_plan = NULL, *got_secrets = NULL;
	char *image = NULL, *disk;
	size_t size = 0;
	ssize_t len;
	int disk_fd, sec_fd, status;
	pid_t writer;

	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(sec_path, sizeof(sec_path), "%s/secrets.img", dir);
	snprintf(fifo, sizeof(fifo), "%s/boot", dir);
	ASSERT_OK(secrets_disk_build(e, apps, 1, &image, &size, err, sizeof(err)));
	sec_fd = open(sec_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ASSERT_EQ(write(sec_fd, image, size), (ssize_t)size);
	secrets_disk_image_free(image, size);
	/* The disk's content, as berth-vmm writes it. */
	disk_fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	ASSERT_TRUE(disk_fd >= 0);
	if (boot_disk_write(disk_fd, plan, sec_fd, err, sizeof(err)) < 0)
		TEST_FAIL("boot_disk_write: %s", err);
	len = lseek(disk_fd, 0, SEEK_END);
	disk = malloc((size_t)len);
	ASSERT_EQ(pread(disk_fd, disk, (size_t)len, 0), len);
	ASSERT_EQ(mkfifo(fifo, 0600), 0);
	writer = fork();
	ASSERT_TRUE(writer >= 0);
	if (writer == 0) {
		int w = open(fifo, O_WRONLY | O_CLOEXEC);

		if (w < 0 || write(w, disk, (size_t)len) != len)
			_exit(1);
		sleep(10);
		_exit(0);
	}
	if (boot_read_device(fifo, &got_plan, &got_secrets, err, sizeof(err)) < 0)
		TEST_FAIL("boot_read_device: %s", err);
	/* It returned while the writer still held the FIFO open: it read nothing past the
	 * content. */
	if (waitpid(writer, &status, WNOHANG) != 0)
		TEST_FAIL("the writer ended first (status %d): the reader read past the content",
			  status);
	(void)kill(writer, SIGKILL);
	(void)waitpid(writer, &status, 0);
	ASSERT_TRUE(json_equal(got_plan, plan));
	ASSERT_STREQ(
		json_string_value(json_object_get(
			json_object_get(json_object_get(got_secrets, "apps"), "notes"), "TOKEN")),
		SECRET);
	/* Nobody may open it again. */
	ASSERT_EQ(access(fifo, F_OK), -1);
	json_decref(got_plan);
	json_decref(got_secrets);
	free(disk);
	close(disk_fd);
	close(sec_fd);
	ASSERT_OK(rm_rf(dir));
}

TEST(remove_is_idempotent)
{
	ASSERT_OK(secrets_disk_remove("/tmp/test-secrets-disk.does-not-exist"));
}

int main(void)
{
	return tests_run();
}
