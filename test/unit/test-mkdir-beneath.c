/* SPDX-License-Identifier: Apache-2.0 */
/* mkdir_beneath() (src/basic/mkdir-beneath.c): mkdir -p as root that never follows a
 * symbolic link. Ownership is checked when the test runs as root. */
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "macros.h"
#include "mkdir-beneath.h"
#include "tests.h"

#define APP_UID 12345
#define APP_GID 23456

static char base[256];

/* A fresh directory under /tmp, by its real absolute path. */
static void base_make(void)
{
	char tmpl[] = "/tmp/test-mkdir-beneath.XXXXXX", real[PATH_MAX];

	ASSERT_NOT_NULL(mkdtemp(tmpl));
	ASSERT_NOT_NULL(realpath(tmpl, real));
	ASSERT_TRUE(strlen(real) < sizeof(base));
	strcpy(base, real);
	umask(0);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path) < 0 ? -errno : 0;
}

/* The directory and everything in it, links not followed. */
static void base_remove(void)
{
	ASSERT_OK(nftw(base, remove_one, 16, FTW_DEPTH | FTW_PHYS));
}

static const char *at(const char *rel)
{
	static char paths[8][PATH_MAX];
	static int next;
	char *p = paths[next++ % 8];

	snprintf(p, PATH_MAX, "%s/%s", base, rel);
	return p;
}

static bool is_root(void)
{
	return geteuid() == 0;
}

static void assert_dir(const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		TEST_FAIL("%s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		TEST_FAIL("%s is not a directory", path);
	if ((st.st_mode & 07777) != mode)
		TEST_FAIL("%s: mode %04o, expected %04o", path, st.st_mode & 07777, mode);
	if (st.st_uid != uid || st.st_gid != gid)
		TEST_FAIL("%s: owner %u:%u, expected %u:%u", path, st.st_uid, st.st_gid, uid, gid);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

static size_t entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	size_t n = 0;

	ASSERT_NOT_NULL(d);
	while ((de = readdir(d)))
		if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* The descriptor refers to @path, is O_PATH and close-on-exec. */
static void assert_fd_is(int fd, const char *path)
{
	struct stat a, b;

	ASSERT_OK(fd);
	ASSERT_OK(fstat(fd, &a));
	ASSERT_OK(stat(path, &b));
	ASSERT_EQ(a.st_dev, b.st_dev);
	ASSERT_EQ(a.st_ino, b.st_ino);
	ASSERT_TRUE(fcntl(fd, F_GETFL) & O_PATH);
	ASSERT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

static int try_mkdir(const char *path, char *bad, size_t badlen)
{
	bool created = true;

	return mkdir_beneath(path, 0755, is_root() ? APP_UID : (uid_t)-1,
			     is_root() ? APP_GID : (gid_t)-1, &created, bad, badlen);
}

/* mkdir_beneath(@path) must fail, naming the component @bad. */
static void refused(const char *path, int err, const char *bad)
{
	char got[NAME_MAX + 1] = "";
	int r = try_mkdir(path, got, sizeof(got));

	(void)err; /* checked by test a_link_is_refused_with_eloop */
	if (r >= 0)
		TEST_FAIL("%s: created or opened, expected -%d (%s)", path, err, strerror(err));
	if (bad && !streq(got, bad))
		TEST_FAIL("%s: named \"%s\", expected \"%s\"", path, got, bad);
}

/* Each refusal that did not come back as -@err, reported all at once by errors_checked(). */
static char mismatches[4096];

static void refused_with(const char *path, int err)
{
	size_t n = strlen(mismatches);
	int r = try_mkdir(path, NULL, 0);

	if (r >= 0)
		TEST_FAIL("%s: created or opened, expected -%d (%s)", path, err, strerror(err));
	if (r != -err)
		snprintf(mismatches + n, sizeof(mismatches) - n,
			 "\n#   %s: expected -%d (%s), got %d (%s)", path, err, strerror(err), r,
			 strerror(-r));
}

static void errors_checked(void)
{
	if (mismatches[0])
		TEST_FAIL("refused, but not with the documented error:%s", mismatches);
}

TEST(creates_nested_directories_with_mode_and_owner)
{
	uid_t uid = is_root() ? APP_UID : (uid_t)-1;
	gid_t gid = is_root() ? APP_GID : (gid_t)-1;
	uid_t want_uid = is_root() ? APP_UID : geteuid();
	gid_t want_gid = is_root() ? APP_GID : getegid();
	struct stat st;
	bool created = false;
	int fd;

	base_make();
	ASSERT_OK(stat(base, &st));
	fd = mkdir_beneath(at("a/b/c"), 0750, uid, gid, &created, NULL, 0);
	assert_fd_is(fd, at("a/b/c"));
	ASSERT_TRUE(created);
	close(fd);
	assert_dir(at("a"), 0750, want_uid, want_gid);
	assert_dir(at("a/b"), 0750, want_uid, want_gid);
	assert_dir(at("a/b/c"), 0750, want_uid, want_gid);
	/* What existed is left as it was. */
	assert_dir(base, st.st_mode & 07777, st.st_uid, st.st_gid);

	/* Again: nothing created, nothing changed. */
	created = true;
	fd = mkdir_beneath(at("a/b/c"), 0700, (uid_t)-1, (gid_t)-1, &created, NULL, 0);
	assert_fd_is(fd, at("a/b/c"));
	ASSERT_FALSE(created);
	close(fd);
	assert_dir(at("a/b/c"), 0750, want_uid, want_gid);

	/* One more level below what exists: only the new one is made and given away. */
	fd = mkdir_beneath(at("a/b/c/d"), 0711, uid, gid, &created, NULL, 0);
	assert_fd_is(fd, at("a/b/c/d"));
	ASSERT_TRUE(created);
	close(fd);
	assert_dir(at("a/b/c/d"), 0711, want_uid, want_gid);

	/* An existing directory of root's, below which one is made. */
	ASSERT_OK(mkdir(at("rootdir"), 0700));
	fd = mkdir_beneath(at("rootdir/x"), 0755, uid, gid, &created, NULL, 0);
	ASSERT_TRUE(created);
	close(fd);
	assert_dir(at("rootdir"), 0700, geteuid(), getegid());
	assert_dir(at("rootdir/x"), 0755, want_uid, want_gid);

	/* Without an owner, root keeps them. */
	fd = mkdir_beneath(at("mine/y"), 0755, (uid_t)-1, (gid_t)-1, &created, NULL, 0);
	ASSERT_TRUE(created);
	close(fd);
	assert_dir(at("mine"), 0755, geteuid(), getegid());
	assert_dir(at("mine/y"), 0755, geteuid(), getegid());

	/* The out-parameters may be NULL; the last component existing means "not created". */
	fd = mkdir_beneath(at("mine"), 0755, (uid_t)-1, (gid_t)-1, NULL, NULL, 0);
	assert_fd_is(fd, at("mine"));
	close(fd);
	fd = mkdir_beneath(at("mine/y"), 0755, (uid_t)-1, (gid_t)-1, &created, NULL, 0);
	ASSERT_FALSE(created);
	close(fd);
	base_remove();
}

TEST(extra_slashes_and_dots)
{
	char path[PATH_MAX];
	bool created = false;
	int fd;

	base_make();
	snprintf(path, sizeof(path), "%s//m///n/", base);
	fd = mkdir_beneath(path, 0755, (uid_t)-1, (gid_t)-1, &created, NULL, 0);
	assert_fd_is(fd, at("m/n"));
	ASSERT_TRUE(created);
	close(fd);
	snprintf(path, sizeof(path), "%s/./m/./o", base);
	fd = mkdir_beneath(path, 0755, (uid_t)-1, (gid_t)-1, &created, NULL, 0);
	assert_fd_is(fd, at("m/o"));
	ASSERT_TRUE(created);
	close(fd);
	/* "/" itself exists. */
	fd = mkdir_beneath("/", 0755, (uid_t)-1, (gid_t)-1, &created, NULL, 0);
	assert_fd_is(fd, "/");
	ASSERT_FALSE(created);
	close(fd);
	/* "..": refused (openat2 resolves beneath), or walked as the kernel would (the fallback
	 * without openat2); never anything else. */
	snprintf(path, sizeof(path), "%s/m/../p", base);
	fd = mkdir_beneath(path, 0755, (uid_t)-1, (gid_t)-1, &created, NULL, 0);
	if (fd >= 0) {
		assert_fd_is(fd, at("p"));
		close(fd);
	} else
		ASSERT_FALSE(exists(at("p")));
	base_remove();
}

TEST(refuses_relative_paths)
{
	ASSERT_ERROR(mkdir_beneath("tmp/x", 0755, (uid_t)-1, (gid_t)-1, NULL, NULL, 0), EINVAL);
	ASSERT_ERROR(mkdir_beneath("", 0755, (uid_t)-1, (gid_t)-1, NULL, NULL, 0), EINVAL);
	ASSERT_ERROR(mkdir_beneath("./x", 0755, (uid_t)-1, (gid_t)-1, NULL, NULL, 0), EINVAL);
}

TEST(refuses_a_link_to_a_directory_in_the_middle)
{
	char target[] = "/tmp/test-mkdir-beneath-target.XXXXXX";

	base_make();
	ASSERT_NOT_NULL(mkdtemp(target));
	ASSERT_OK(mkdir(at("real"), 0755));
	ASSERT_OK(symlink(at("real"), at("link")));
	ASSERT_OK(symlink(target, at("out")));
	refused(at("link/sub"), ELOOP, "link");
	refused(at("link/sub/deeper"), ELOOP, "link");
	refused(at("out/x/y"), ELOOP, "out");
	/* Nothing was made through them. */
	ASSERT_EQ(entries(at("real")), 0);
	ASSERT_EQ(entries(target), 0);
	/* A relative link, deeper down. */
	ASSERT_OK(mkdir(at("a"), 0755));
	ASSERT_OK(mkdir(at("a/b"), 0755));
	ASSERT_OK(symlink("../../real", at("a/b/rel")));
	refused(at("a/b/rel/c/d"), ELOOP, "rel");
	ASSERT_EQ(entries(at("real")), 0);
	ASSERT_EQ(entries(at("a/b")), 1);
	rmdir(target);
	base_remove();
}

TEST(refuses_a_link_as_the_last_component)
{
	char target[] = "/tmp/test-mkdir-beneath-target.XXXXXX";
	struct stat before, after;

	base_make();
	ASSERT_NOT_NULL(mkdtemp(target));
	ASSERT_OK(stat(target, &before));
	ASSERT_OK(symlink(target, at("last")));
	refused(at("last"), ELOOP, "last");
	/* The directory it points to is untouched: not chowned, not chmodded. */
	ASSERT_OK(stat(target, &after));
	ASSERT_EQ(after.st_mode, before.st_mode);
	ASSERT_EQ(after.st_uid, before.st_uid);
	ASSERT_EQ(after.st_gid, before.st_gid);
	ASSERT_EQ(entries(target), 0);
	rmdir(target);
	base_remove();
}

TEST(refuses_dangling_links)
{
	base_make();
	ASSERT_OK(symlink(at("nowhere"), at("dangling")));
	refused(at("dangling"), ELOOP, "dangling");
	ASSERT_FALSE(exists(at("nowhere")));
	refused(at("dangling/x"), ELOOP, "dangling");
	ASSERT_FALSE(exists(at("nowhere")));
	/* One that would lead out of the tree. */
	ASSERT_OK(symlink("/tmp/test-mkdir-beneath-never-made", at("away")));
	refused(at("away/x"), ELOOP, "away");
	ASSERT_FALSE(exists("/tmp/test-mkdir-beneath-never-made"));
	base_remove();
}

TEST(refuses_links_to_files_and_files)
{
	int fd;

	base_make();
	fd = open(at("file"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ASSERT_OK(fd);
	close(fd);
	ASSERT_OK(symlink(at("file"), at("filelink")));
	refused(at("file"), ENOTDIR, "file");
	refused(at("file/x"), ENOTDIR, "file");
	refused(at("filelink"), ELOOP, "filelink");
	refused(at("filelink/x"), ELOOP, "filelink");
	ASSERT_OK(mkfifo(at("fifo"), 0600));
	refused(at("fifo/x"), ENOTDIR, "fifo");
	/* Nothing but what the test made. */
	ASSERT_EQ(entries(base), 3);
	base_remove();
}

TEST(names_the_bad_component_within_its_buffer)
{
	char bad[4] = "zzz";

	base_make();
	ASSERT_OK(symlink(at("x"), at("longname")));
	ASSERT_TRUE(mkdir_beneath(at("longname/y"), 0755, (uid_t)-1, (gid_t)-1, NULL, bad,
				  sizeof(bad)) < 0);
	ASSERT_STREQ(bad, "lon");
	ASSERT_TRUE(mkdir_beneath(at("longname/y"), 0755, (uid_t)-1, (gid_t)-1, NULL, NULL, 0) < 0);
	ASSERT_FALSE(exists(at("x")));
	base_remove();
}

/* Make openat2() fail with ENOSYS in this (forked, throwaway) test process, as on a
 * kernel older than 5.6, so that mkdir_beneath() takes its fallback. */
static void without_openat2(void)
{
	struct sock_filter insns[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = ELEMENTSOF(insns), .filter = insns};

	ASSERT_OK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	ASSERT_OK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0));
	ASSERT_TRUE(syscall(SYS_openat2, AT_FDCWD, "/", NULL, 0) < 0 && errno == ENOSYS);
}

TEST(without_openat2_the_same_refusals)
{
	char target[] = "/tmp/test-mkdir-beneath-target.XXXXXX";
	bool created = false;
	int fd;

	base_make();
	ASSERT_NOT_NULL(mkdtemp(target));
	ASSERT_OK(mkdir(at("real"), 0755));
	ASSERT_OK(symlink(at("real"), at("link")));
	ASSERT_OK(symlink(target, at("out")));
	ASSERT_OK(symlink(at("nowhere"), at("dangling")));
	fd = open(at("file"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ASSERT_OK(fd);
	close(fd);
	without_openat2();

	fd = mkdir_beneath(at("a/b"), 0750, (uid_t)-1, (gid_t)-1, &created, NULL, 0);
	assert_fd_is(fd, at("a/b"));
	ASSERT_TRUE(created);
	close(fd);
	assert_dir(at("a/b"), 0750, geteuid(), getegid());
	refused(at("link/sub"), ELOOP, "link");
	refused(at("out/x"), ELOOP, "out");
	refused(at("out"), ELOOP, "out");
	refused(at("dangling"), ELOOP, "dangling");
	refused(at("file/x"), ENOTDIR, "file");
	ASSERT_EQ(entries(at("real")), 0);
	ASSERT_EQ(entries(target), 0);
	ASSERT_FALSE(exists(at("nowhere")));
	rmdir(target);
	base_remove();
}

/* The header's promise: -ELOOP for a link, wherever it is and wherever it points;
 * -ENOTDIR for something else that is not a directory. With openat2() and without. */
static void link_refusals(const char *target, const char *how)
{
	size_t n = strlen(mismatches);

	snprintf(mismatches + n, sizeof(mismatches) - n, "\n#  %s:", how);
	refused_with(at("link/sub"), ELOOP);
	refused_with(at("link"), ELOOP);
	refused_with(at("out/x"), ELOOP);
	refused_with(at("dangling"), ELOOP);
	refused_with(at("dangling/x"), ELOOP);
	refused_with(at("filelink"), ELOOP);
	refused_with(at("file"), ENOTDIR);
	refused_with(at("file/x"), ENOTDIR);
	ASSERT_EQ(entries(at("real")), 0);
	ASSERT_EQ(entries(target), 0);
	if (strlen(mismatches) == n + strlen("\n#  :") + strlen(how))
		mismatches[n] = '\0'; /* all as documented */
}

TEST(a_link_is_refused_with_eloop)
{
	char target[] = "/tmp/test-mkdir-beneath-target.XXXXXX";
	int fd;

	base_make();
	ASSERT_NOT_NULL(mkdtemp(target));
	ASSERT_OK(mkdir(at("real"), 0755));
	ASSERT_OK(symlink(at("real"), at("link")));
	ASSERT_OK(symlink(target, at("out")));
	ASSERT_OK(symlink(at("nowhere"), at("dangling")));
	fd = open(at("file"), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	ASSERT_OK(fd);
	close(fd);
	ASSERT_OK(symlink(at("file"), at("filelink")));
	link_refusals(target, "with openat2()");
	without_openat2();
	link_refusals(target, "without openat2() (the fallback)");
	rmdir(target);
	base_remove();
	errors_checked();
}

int main(void)
{
	return tests_run();
}
