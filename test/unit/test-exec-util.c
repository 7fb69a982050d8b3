/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>
#include <sys/wait.h>

#include "exec-util.h"
#include "macros.h"
#include "tests.h"
#include "time-util.h"

static char *sh(const char *script)
{
	return (char *)script;
}

TEST(capture_stdout)
{
	char *argv[] = {"/bin/sh", "-c", sh("echo out; echo err >&2; exit 3"), NULL};
	char *out = NULL;
	int status;

	ASSERT_OK(run_capture(argv, 10000, 4096, &out, &status));
	ASSERT_STREQ(out, "out\n");
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3);
	free(out);
}

TEST(capture_with_stderr_and_cap)
{
	char *argv[] = {"/bin/sh", "-c", sh("echo one; echo two >&2; yes | head -c 100000"), NULL};
	RunCapture o = {.timeout_ms = 10000, .max_bytes = 8, .with_stderr = true};
	char *out = NULL;
	int status;

	ASSERT_OK(run_capture_opts(argv, &o, &out, &status));
	ASSERT_STREQ(out, "one\ntwo\n"); /* the rest was read and dropped */
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	free(out);
}

TEST(capture_timeout)
{
	char *argv[] = {"/bin/sh", "-c", sh("echo started; exec sleep 30"), NULL};
	RunCapture o = {.timeout_ms = 300, .max_bytes = 64};
	char *out = NULL;
	int64_t t0 = now_ms();
	int status;

	ASSERT_ERROR(run_capture_opts(argv, &o, &out, &status), ETIME);
	ASSERT_TRUE(now_ms() - t0 < 5000);
	ASSERT_STREQ(out, "started\n"); /* what it said before it was stopped */
	free(out);
}

TEST(capture_missing_program)
{
	char *argv[] = {"/nonexistent/berth-test", NULL};
	char *out = NULL;
	int status;

	ASSERT_OK(run_capture(argv, 10000, 64, &out, &status));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 127);
	free(out);
}

TEST(fork_pipe_carries_bytes)
{
	char buf[8] = "";
	int fd = -EBADF, status;
	pid_t pid = fork_pipe(&fd);

	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		(void)!write(fd, "hello", 5);
		_exit(0);
	}
	ASSERT_EQ(read(fd, buf, sizeof(buf) - 1), 5);
	ASSERT_STREQ(buf, "hello");
	/* The write end is closed in the parent: EOF once the child is gone. */
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT_EQ(read(fd, buf, sizeof(buf)), 0);
	safe_close(fd);
}

int main(void)
{
	return tests_run();
}
