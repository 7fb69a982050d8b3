/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bundle_stamp(): the stamp berth dev uses to skip the bundler. Whatever the bundler could
 * read differently must change it (an edited, added, removed or renamed file, a link's new
 * target, an environment variable); what it never reads (.git) and a walk in another order
 * must not.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bundle-stamp.h"
#include "fileio.h"
#include "macros.h"
#include "tests.h"

static char base[64];

static void put(const char *rel, const char *text)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	ASSERT_OK(write_file_atomic(p, text, strlen(text), 0644));
}

static void sub(char *out, const char *rel)
{
	snprintf(out, 256, "%s/%s", base, rel);
}

static void setup(void)
{
	char p[256];

	snprintf(base, sizeof(base), "/tmp/berth-stamp.XXXXXX");
	ASSERT_NOT_NULL(mkdtemp(base));
	sub(p, "app");
	ASSERT_OK(mkdir(p, 0755));
	sub(p, "app/src");
	ASSERT_OK(mkdir(p, 0755));
	sub(p, "sdk");
	ASSERT_OK(mkdir(p, 0755));
	put("app/berth.yml", "name: a\n");
	put("app/src/index.ts", "export const x = 1;\n");
	put("sdk/runtime.mjs", "// sdk\n");
}

static void stamp(char out[65])
{
	char app[256], sdk[256];
	const char *paths[] = {app, sdk, NULL};
	static const char *const env[] = {"BERTH_STAMP_TEST_VAR", NULL};

	sub(app, "app");
	sub(sdk, "sdk");
	bool racy;

	ASSERT_OK(bundle_stamp(paths, env, out, &racy));
}

/* Another stamp than @before, and make it the new before. */
static void changed(char before[65])
{
	char now[65];

	stamp(now);
	ASSERT_TRUE(strcmp(now, before) != 0);
	memcpy(before, now, 65);
}

TEST(same_inputs_same_stamp)
{
	char a[65], b[65];

	setup();
	stamp(a);
	stamp(b);
	ASSERT_STREQ(a, b);
	ASSERT_EQ(strlen(a), 64u);
}

TEST(every_change_the_bundler_could_see_changes_it)
{
	char s[65], p[256], q[256];

	setup();
	stamp(s);
	put("app/src/index.ts", "export const x = 2;\n"); /* same size, new file */
	changed(s);
	put("app/src/more.ts", "export {};\n");
	changed(s);
	sub(p, "app/src/more.ts");
	sub(q, "app/src/renamed.ts");
	ASSERT_OK(rename(p, q));
	changed(s);
	ASSERT_OK(unlink(q));
	changed(s);
	sub(p, "app/link");
	ASSERT_OK(symlink("src/index.ts", p));
	changed(s);
	ASSERT_OK(unlink(p));
	ASSERT_OK(symlink("berth.yml", p));
	changed(s);
	put("sdk/runtime.mjs", "// sdk, edited\n");
	changed(s);
	setenv("BERTH_STAMP_TEST_VAR", "1", 1);
	changed(s);
	unsetenv("BERTH_STAMP_TEST_VAR");
	changed(s);
}

TEST(an_edit_in_place_that_keeps_the_size_changes_it)
{
	char s[65], p[256];
	struct timespec back[2];
	struct stat st;
	int fd;

	setup();
	stamp(s);
	sub(p, "app/berth.yml");
	fd = open(p, O_WRONLY);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(pwrite(fd, "b", 1, 6), 1); /* name: b, same inode, same size */
	close(fd);
	changed(s);
	/* An older mtime set back on it, as cp -p or tar would: the ctime still tells. */
	ASSERT_OK(stat(p, &st));
	back[0] = st.st_atim;
	back[1] = st.st_mtim;
	back[1].tv_sec -= 100;
	ASSERT_OK(utimensat(AT_FDCWD, p, back, 0));
	changed(s);
}

TEST(git_and_a_missing_path)
{
	char s[65], p[256], missing[256], app[256];
	const char *paths[] = {app, missing, NULL};
	char with_missing[65], with_it[65];
	bool racy;

	setup();
	stamp(s);
	sub(p, "app/.git");
	ASSERT_OK(mkdir(p, 0755));
	put("app/.git/HEAD", "ref: refs/heads/main\n");
	stamp(p);
	ASSERT_STREQ(p, s); /* the bundler never reads .git */

	sub(app, "app");
	sub(missing, "node_modules");
	ASSERT_OK(bundle_stamp(paths, NULL, with_missing, &racy));
	ASSERT_OK(mkdir(missing, 0755));
	ASSERT_OK(bundle_stamp(paths, NULL, with_it, &racy));
	ASSERT_TRUE(strcmp(with_missing, with_it) != 0);
}

TEST(files_written_before_the_stamp_do_not_make_it_racy)
{
	char app[256];
	const char *paths[] = {app, NULL};
	char s[65];
	bool racy = true;

	setup();
	sub(app, "app");
	usleep(50 * 1000); /* past the coarse clock's tick (a few ms) */
	ASSERT_OK(bundle_stamp(paths, NULL, s, &racy));
	ASSERT_FALSE(racy);
}

int main(void)
{
	return tests_run();
}
