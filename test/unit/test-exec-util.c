/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

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

static bool not_in_first(const char *path, void *userdata)
{
	return strncmp(path, userdata, strlen(userdata)) != 0;
}

TEST(spawn_socket_talks_both_ways)
{
	char *argv[] = {"/bin/sh", "-c", sh("read line; echo \"got $line\"; echo err >&2; exit 4"),
			NULL};
	char buf[64] = "";
	int pidfd = -EBADF, fd = -EBADF, status;
	size_t len = 0;
	ssize_t n;

	ASSERT_OK(spawn_socket(argv, &pidfd, &fd));
	ASSERT_EQ(send(fd, "hello\n", 6, MSG_NOSIGNAL), 6);
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - len)) > 0)
		len += (size_t)n;
	ASSERT_STREQ(buf, "got hello\n"); /* stderr went to /dev/null */
	/* Its exit status comes back from the reap, even when it ended on its own. */
	status = pidfd_kill_and_reap(pidfd);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 4);
	/* A peer that is gone is an error to handle, not a SIGPIPE. */
	ASSERT_EQ(send(fd, "x", 1, MSG_NOSIGNAL), -1);
	ASSERT_TRUE(errno == EPIPE || errno == ECONNRESET);
	safe_close(fd);
	safe_close(pidfd);
}

TEST(path_lookup)
{
	char dir[] = "/tmp/berth-test-exec.XXXXXX", a[64], b[64], prog[96], path[256];
	char *found = NULL;
	const char *old = getenv("PATH");
	char *saved = old ? strdup(old) : NULL;

	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(a, sizeof(a), "%s/a", dir);
	snprintf(b, sizeof(b), "%s/b", dir);
	ASSERT_OK(mkdir(a, 0755));
	ASSERT_OK(mkdir(b, 0755));
	for (int i = 0; i < 2; i++) {
		int fd;

		snprintf(prog, sizeof(prog), "%s/berth-test-prog", i ? b : a);
		fd = open(prog, O_WRONLY | O_CREAT | O_CLOEXEC, 0755);
		ASSERT_TRUE(fd >= 0);
		close(fd);
	}
	/* A relative entry is never searched, even first. */
	snprintf(path, sizeof(path), "berth-rel:%s:%s", a, b);
	setenv("PATH", path, 1);
	ASSERT_OK(find_executable_in_path("berth-test-prog", &found));
	ASSERT_TRUE(strncmp(found, a, strlen(a)) == 0);
	free(found);
	ASSERT_OK(find_executable_in_path_if("berth-test-prog", not_in_first, a, &found));
	ASSERT_TRUE(strncmp(found, b, strlen(b)) == 0);
	free(found);
	ASSERT_ERROR(find_executable_in_path("berth-no-such-prog", &found), ENOENT);
	unsetenv("PATH");
	ASSERT_ERROR(find_executable_in_path("berth-test-prog", &found), ENOENT);
	if (saved)
		setenv("PATH", saved, 1);
	free(saved);
	for (int i = 0; i < 2; i++) {
		snprintf(prog, sizeof(prog), "%s/berth-test-prog", i ? b : a);
		unlink(prog);
	}
	rmdir(a);
	rmdir(b);
	rmdir(dir);
}

int main(void)
{
	return tests_run();
}
