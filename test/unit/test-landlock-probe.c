/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "landlock-probe.h"
#include "missing-landlock.h"
#include "tests.h"

/* A private TMPDIR, so the test can see what the probe leaves behind. */
static char *private_tmpdir(void)
{
	static char dir[] = "/tmp/test-landlock-probe.XXXXXX";

	if (!mkdtemp(dir))
		TEST_FAIL("mkdtemp: %s", strerror(errno));
	setenv("TMPDIR", dir, 1);
	return dir;
}

static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

/* On this host: enforcing whenever the kernel speaks Landlock, unsupported otherwise. */
TEST(probe_matches_host)
{
	LandlockProbe p;
	int abi = landlock_abi_version();

	private_tmpdir();
	ASSERT_OK(landlock_probe(&p));
	printf("# host Landlock ABI %d: %s\n", p.abi, landlock_support_to_string(p.support));
	ASSERT_EQ(p.abi, abi);
	if (abi > 0) {
		ASSERT_EQ(p.support, LANDLOCK_ENFORCING);
		ASSERT_EQ(p.error, 0);
		ASSERT_TRUE(p.failed_step == NULL);
	} else {
		ASSERT_EQ(p.support, LANDLOCK_UNSUPPORTED);
		ASSERT_TRUE(p.error == ENOSYS || p.error == EOPNOTSUPP);
		ASSERT_STREQ(p.failed_step, "create ruleset");
	}
}

/* The host the project is developed and tested on enforces Landlock (ABI 6 or later). */
TEST(host_enforces)
{
	LandlockProbe p;

	if (getenv("BERTH_TEST_NO_LANDLOCK")) {
		printf("# skipped: BERTH_TEST_NO_LANDLOCK is set\n");
		return;
	}
	private_tmpdir();
	ASSERT_OK(landlock_probe(&p));
	ASSERT_TRUE(p.abi >= 6);
	ASSERT_STREQ(landlock_support_to_string(p.support), "enforcing");
}

/* The restriction stays in the probe's child, and its directory is removed. */
TEST(caller_unrestricted_and_clean)
{
	char *dir = private_tmpdir(), path[256];
	LandlockProbe p;
	int fd;

	ASSERT_OK(landlock_probe(&p));
	ASSERT_OK(landlock_probe(&p));
	ASSERT_EQ(entries(dir), 0);
	snprintf(path, sizeof(path), "%s/after", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ASSERT_TRUE(fd >= 0);
	close(fd);
	unlink(path);
	rmdir(dir);
}

TEST(bad_tmpdir)
{
	LandlockProbe p;

	setenv("TMPDIR", "/nonexistent/berth-test", 1);
	ASSERT_ERROR(landlock_probe(&p), ENOENT);
}

TEST(support_names)
{
	ASSERT_STREQ(landlock_support_to_string(LANDLOCK_UNSUPPORTED), "unsupported");
	ASSERT_STREQ(landlock_support_to_string(LANDLOCK_PRESENT_NOT_ENFORCING),
		     "present_not_enforcing");
	ASSERT_STREQ(landlock_support_to_string(LANDLOCK_ENFORCING), "enforcing");
	ASSERT_TRUE(landlock_support_to_string(_LANDLOCK_SUPPORT_MAX) == NULL);
	ASSERT_TRUE(landlock_support_to_string(_LANDLOCK_SUPPORT_INVALID) == NULL);
}

int main(void)
{
	return tests_run();
}
