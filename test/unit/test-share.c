/* SPDX-License-Identifier: Apache-2.0 */
/*
 * share_digest() and share_pack(): an app share may hold directories and regular files of
 * its own only. Each hostile entry sits next to a canary file outside the share, and
 * neither function may follow it, block on it or pack it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "share.h"
#include "tests.h"

#define CANARY "berth-share-canary-5f1c0e7a9b"

typedef struct Fixture {
	char base[64];	  /* holds share/ and outside/ */
	char share[96];	  /* the share */
	char outside[96]; /* a directory next to it, with canary.txt */
	char canary[128]; /* outside/canary.txt */
	char image[128];  /* where share_pack writes */
} Fixture;

static void put(const char *path, const char *text)
{
	ASSERT_OK(write_file_atomic(path, text, strlen(text), 0644));
}

static void fixture_init(Fixture *f)
{
	char p[160];

	/* A FIFO opened by mistake would block forever: fail the test instead. */
	alarm(20);
	snprintf(f->base, sizeof(f->base), "/tmp/berth-test-share-XXXXXX");
	ASSERT_TRUE(mkdtemp(f->base));
	snprintf(f->share, sizeof(f->share), "%s/share", f->base);
	snprintf(f->outside, sizeof(f->outside), "%s/outside", f->base);
	snprintf(f->canary, sizeof(f->canary), "%s/canary.txt", f->outside);
	snprintf(f->image, sizeof(f->image), "%s/share.erofs", f->base);
	ASSERT_OK(mkdir_p(f->outside, 0755));
	put(f->canary, CANARY "\n");
	snprintf(p, sizeof(p), "%s/dist", f->share);
	ASSERT_OK(mkdir_p(p, 0755));
	snprintf(p, sizeof(p), "%s/berth.yml", f->share);
	put(p, "name: t\nversion: 0.1.0\n");
	snprintf(p, sizeof(p), "%s/dist/index.mjs", f->share);
	put(p, "export default 1;\n");
}

static void fixture_done(Fixture *f)
{
	(void)rm_rf(f->base);
}

static void share_path(const Fixture *f, const char *rel, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", f->share, rel);
}

static bool have_mkfs_erofs(void)
{
	return system("command -v mkfs.erofs >/dev/null 2>&1") == 0;
}

static bool file_holds(const char *path, const char *needle)
{
	_cleanup_free_ char *data = NULL;
	size_t size = 0;

	if (read_full_file(path, 64 * 1024 * 1024, &data, &size) < 0)
		return false;
	return memmem(data, size, needle, strlen(needle)) != NULL;
}

/* share_digest() refuses with @err, share_pack() the same, and no image is written. */
static void assert_refused(Fixture *f, int err, const char *what)
{
	char msg[512] = "";
	ShareDigest d;

	ASSERT_ERROR(share_digest(f->share, &d, msg, sizeof(msg)), err);
	if (!strstr(msg, what))
		TEST_FAIL("share_digest message \"%s\" does not say \"%s\"", msg, what);
	msg[0] = '\0';
	ASSERT_ERROR(share_pack(f->share, f->image, msg, sizeof(msg)), err);
	if (!strstr(msg, what))
		TEST_FAIL("share_pack message \"%s\" does not say \"%s\"", msg, what);
	ASSERT_FALSE(file_exists(f->image));
}

TEST(plain_share_is_measured_and_packed)
{
	char p[160], msg[512] = "", first[65];
	ShareDigest d;
	Fixture f;

	fixture_init(&f);
	ASSERT_OK(share_digest(f.share, &d, msg, sizeof(msg)));
	ASSERT_EQ(d.files, 2);
	ASSERT_EQ(d.bytes, strlen("name: t\nversion: 0.1.0\n") + strlen("export default 1;\n"));
	memcpy(first, d.tree_sha256, sizeof(first));
	ASSERT_OK(share_digest(f.share, &d, msg, sizeof(msg)));
	ASSERT_STREQ(d.tree_sha256, first);
	share_path(&f, "dist/index.mjs", p, sizeof(p));
	put(p, "export default 2;\n");
	ASSERT_OK(share_digest(f.share, &d, msg, sizeof(msg)));
	ASSERT_TRUE(strcmp(d.tree_sha256, first) != 0);
	if (have_mkfs_erofs()) {
		ASSERT_OK(share_pack(f.share, f.image, msg, sizeof(msg)));
		ASSERT_TRUE(file_holds(f.image, "export default 2;"));
	}
	fixture_done(&f);
}

TEST(symlink_to_a_file_outside_is_refused)
{
	char p[160];
	Fixture f;

	fixture_init(&f);
	share_path(&f, "dist/secret.txt", p, sizeof(p));
	ASSERT_EQ(symlink(f.canary, p), 0);
	assert_refused(&f, ELOOP, "dist/secret.txt is a symlink");
	fixture_done(&f);
}

TEST(symlink_to_a_directory_outside_is_refused)
{
	char p[160];
	Fixture f;

	fixture_init(&f);
	share_path(&f, "data", p, sizeof(p));
	ASSERT_EQ(symlink(f.outside, p), 0);
	assert_refused(&f, ELOOP, "data is a symlink");
	fixture_done(&f);
}

TEST(symlink_inside_the_share_is_refused_too)
{
	char p[160];
	Fixture f;

	/* Its target is resolved in the guest, where the share's paths mean something else. */
	fixture_init(&f);
	share_path(&f, "alias.mjs", p, sizeof(p));
	ASSERT_EQ(symlink("dist/index.mjs", p), 0);
	assert_refused(&f, ELOOP, "alias.mjs is a symlink");
	fixture_done(&f);
}

TEST(hard_link_to_a_file_outside_is_refused)
{
	char p[160];
	Fixture f;

	fixture_init(&f);
	share_path(&f, "dist/creds", p, sizeof(p));
	ASSERT_EQ(link(f.canary, p), 0);
	assert_refused(&f, EMLINK, "dist/creds is a hard link (2 names)");
	fixture_done(&f);
}

TEST(fifo_is_refused_without_blocking)
{
	char p[160];
	Fixture f;

	fixture_init(&f);
	share_path(&f, "dist/pipe", p, sizeof(p));
	ASSERT_EQ(mkfifo(p, 0644), 0);
	assert_refused(&f, EBADFD, "dist/pipe is a FIFO");
	fixture_done(&f);
}

TEST(socket_is_refused)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	Fixture f;

	fixture_init(&f);
	ASSERT_TRUE(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s.sock", f.share);
	ASSERT_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	assert_refused(&f, EBADFD, "s.sock is a socket");
	fixture_done(&f);
}

TEST(device_is_refused)
{
	char p[160];
	Fixture f;

	fixture_init(&f);
	share_path(&f, "null", p, sizeof(p));
	if (mknod(p, S_IFCHR | 0644, makedev(1, 3)) < 0) {
		printf("# skipped: cannot make a device node here (%s)\n", strerror(errno));
		fixture_done(&f);
		return;
	}
	assert_refused(&f, EBADFD, "null is a character device");
	fixture_done(&f);
}

TEST(depth_is_capped)
{
	char p[4096];
	int n;
	Fixture f;

	fixture_init(&f);
	n = snprintf(p, sizeof(p), "%s", f.share);
	for (int i = 0; i <= SHARE_DEPTH_MAX + 1; i++)
		n += snprintf(p + n, sizeof(p) - (size_t)n, "/d");
	ASSERT_OK(mkdir_p(p, 0755));
	assert_refused(&f, E2BIG, "directories deep");
	fixture_done(&f);
}

TEST(pack_drops_extended_attributes)
{
	char p[160], msg[512] = "";
	Fixture f;

	fixture_init(&f);
	share_path(&f, "berth.yml", p, sizeof(p));
	if (!have_mkfs_erofs() || setxattr(p, "user.berth-test", CANARY, strlen(CANARY), 0) < 0) {
		printf("# skipped: no mkfs.erofs or no user xattrs here\n");
		fixture_done(&f);
		return;
	}
	ASSERT_OK(share_pack(f.share, f.image, msg, sizeof(msg)));
	ASSERT_FALSE(file_holds(f.image, CANARY));
	fixture_done(&f);
}

TEST(pack_never_runs_a_mkfs_erofs_from_a_relative_path_entry)
{
	char fake[192], marker[192], msg[512] = "";
	FILE *s;
	Fixture f;

	/* berth-vmm may be started from an app's folder, with "." or node_modules/.bin on
	 * PATH. */
	fixture_init(&f);
	snprintf(fake, sizeof(fake), "%s/mkfs.erofs", f.outside);
	snprintf(marker, sizeof(marker), "%s/ran", f.outside);
	s = fopen(fake, "we");
	ASSERT_NOT_NULL(s);
	fprintf(s, "#!/bin/sh\necho ran >'%s'\n", marker);
	fclose(s);
	ASSERT_EQ(chmod(fake, 0755), 0);
	ASSERT_EQ(chdir(f.outside), 0);
	ASSERT_EQ(setenv("PATH", ".", 1), 0);
	ASSERT_TRUE(share_pack(f.share, f.image, msg, sizeof(msg)) < 0);
	ASSERT_TRUE(strstr(msg, "mkfs.erofs is missing") != NULL);
	ASSERT_FALSE(file_exists(marker));
	fixture_done(&f);
}

int main(void)
{
	return tests_run();
}
