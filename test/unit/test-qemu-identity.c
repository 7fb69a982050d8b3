/* SPDX-License-Identifier: Apache-2.0 */
/* A QEMU program's identity and its remembered version (src/berth-vmm/qemu-identity.c). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "qemu-identity.h"
#include "tests.h"

static char home[] = "/tmp/test-qemu-identity.XXXXXX";
static char qemu[128], runs[128];

/* A stand-in QEMU that says @version and counts how often it was asked. */
static void write_qemu(const char *version)
{
	char text[512];

	snprintf(text, sizeof(text), "#!/bin/sh\necho run >>%s\necho '%s'\necho 'Copyright'\n",
		 runs, version);
	ASSERT_OK(write_file_atomic(qemu, text, strlen(text), 0755));
}

static int times_run(void)
{
	_cleanup_free_ char *text = NULL;
	int n = 0;

	if (read_full_file(runs, 4096, &text, NULL) < 0)
		return 0;
	for (char *p = text; (p = strstr(p, "run")); p++)
		n++;
	return n;
}

/* Each process asks once at most: the version a fresh berth-vmm would get. */
static void identify_in_child(char *version, size_t size)
{
	int p[2], status;
	pid_t pid;
	ssize_t n;

	ASSERT_EQ(pipe(p), 0);
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		QemuIdentity q;

		qemu_identify(qemu, &q);
		dprintf(p[1], "%s|%d|%s", q.found ? "found" : "missing", q.found, q.version);
		_exit(0);
	}
	close(p[1]);
	n = read(p[0], version, size - 1);
	version[n > 0 ? n : 0] = '\0';
	close(p[0]);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
}

TEST(version_asked_once_per_file)
{
	char got[512], cache[160];

	ASSERT_NOT_NULL(mkdtemp(home));
	ASSERT_EQ(setenv("BERTH_HOME", home, 1), 0);
	snprintf(cache, sizeof(cache), "%s/vm", home);
	ASSERT_EQ(mkdir(cache, 0700), 0);
	snprintf(cache, sizeof(cache), "%s/vm/qemu-version.json", home);
	snprintf(qemu, sizeof(qemu), "%s/qemu-system-test", home);
	snprintf(runs, sizeof(runs), "%s/runs", home);
	write_qemu("QEMU emulator version 7.2.99");

	identify_in_child(got, sizeof(got));
	ASSERT_STREQ(got, "found|1|QEMU emulator version 7.2.99");
	ASSERT_EQ(times_run(), 1);
	ASSERT_EQ(access(cache, F_OK), 0);

	/* Another process: remembered, not asked. */
	identify_in_child(got, sizeof(got));
	ASSERT_STREQ(got, "found|1|QEMU emulator version 7.2.99");
	ASSERT_EQ(times_run(), 1);

	/* The program replaced (a new file, as an upgrade writes it): asked again. */
	write_qemu("QEMU emulator version 8.0.0");
	identify_in_child(got, sizeof(got));
	ASSERT_STREQ(got, "found|1|QEMU emulator version 8.0.0");
	ASSERT_EQ(times_run(), 2);

	/* Rewritten in place, the same inode: its ctime moved, asked again. */
	{
		int fd = open(qemu, O_WRONLY | O_APPEND | O_CLOEXEC);

		ASSERT_TRUE(fd >= 0);
		ASSERT_EQ(write(fd, "\n", 1), 1);
		close(fd);
	}
	identify_in_child(got, sizeof(got));
	ASSERT_EQ(times_run(), 3);

	/* A record that is not what we wrote is not believed. */
	ASSERT_OK(write_file_atomic(cache, "{\"version\":\"made up\"}", 21, 0600));
	identify_in_child(got, sizeof(got));
	ASSERT_STREQ(got, "found|1|QEMU emulator version 8.0.0");
	ASSERT_EQ(times_run(), 4);

	/* No such program: nothing asked, nothing remembered. */
	snprintf(qemu, sizeof(qemu), "%s/no-such-qemu", home);
	identify_in_child(got, sizeof(got));
	ASSERT_STREQ(got, "missing|0|unknown");
	ASSERT_OK(rm_rf(home));
}

int main(void)
{
	return tests_run();
}
