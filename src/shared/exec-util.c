/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec-util.h"
#include "macros.h"
#include "time-util.h"

static int is_executable_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

int find_executable_in_path(const char *name, char **ret_path)
{
	return find_executable_in_path_if(name, NULL, NULL, ret_path);
}

int find_executable_in_path_if(const char *name, executable_accept_t accept, void *userdata,
			       char **ret_path)
{
	_cleanup_free_ char *copy = NULL;
	const char *path = getenv("PATH");
	char *save = NULL;

	if (!path || !*path)
		return -ENOENT;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		char *p;

		/* A relative entry ("", ".", "node_modules/.bin") names whatever directory we were
		 * started in, an app's folder for berth dev: never a program of ours. */
		if (dir[0] != '/')
			continue;

		if (asprintf(&p, "%s/%s", dir, name) < 0)
			return -ENOMEM;
		if (is_executable_file(p) && (!accept || accept(p, userdata))) {
			*ret_path = p;
			return 0;
		}
		free(p);
	}
	return -ENOENT;
}

/* In the forked child: stdin from @in_fd (/dev/null when < 0), stdout to @out_fd, stderr
 * there too or to /dev/null; then @argv. */
static _noreturn_ void exec_child(char *const argv[], int in_fd, int out_fd, bool with_stderr)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	sigset_t none;

	/* The caller may block signals it reads through a signalfd; the child must not
	 * inherit that mask across exec. */
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);

	if (null < 0 || dup2(in_fd >= 0 ? in_fd : null, STDIN_FILENO) < 0 ||
	    dup2(out_fd, STDOUT_FILENO) < 0 || dup2(with_stderr ? out_fd : null, STDERR_FILENO) < 0)
		_exit(127);
	/* dup2() of a descriptor onto itself keeps its close-on-exec flag (a parent started
	 * with 0 or 1 closed hands those numbers out): clear it, or the program loses it. */
	for (int i = STDIN_FILENO; i <= STDERR_FILENO; i++)
		(void)fcntl(i, F_SETFD, 0);
	execv(argv[0], argv);
	_exit(127);
}

/* Read until EOF, @deadline or @cancel_fd (when > 0) turning readable; keep the first @max
 * bytes in @buf (which has room for a NUL). *@ret_len counts them on every return, so that
 * what a child said before it was stopped can be shown. */
static int read_until(int fd, int cancel_fd, int64_t deadline, char *buf, size_t max,
		      size_t *ret_len)
{
	char scratch[4096];
	size_t len = 0;

	*ret_len = 0;

	for (;;) {
		struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
				      {.fd = cancel_fd > 0 ? cancel_fd : -1, .events = POLLIN}};
		int64_t left = deadline - now_ms();
		ssize_t n;
		int r;

		if (left <= 0)
			return -ETIME;
		r = poll(p, 2, (int)MIN(left, (int64_t)INT32_MAX));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIME;
		if (p[1].revents)
			return -ECANCELED;
		if (len < max)
			n = read(fd, buf + len, max - len);
		else
			n = read(fd, scratch, sizeof(scratch));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if (len < max) {
			len += (size_t)n;
			*ret_len = len;
		}
	}
	return 0;
}

/* The wait status of the exited child @si describes, as waitpid() gives it. */
static int wait_status_of(const siginfo_t *si)
{
	return si->si_code == CLD_EXITED ? W_EXITCODE(si->si_status, 0) : si->si_status & 0x7f;
}

/* Reap the child of @pidfd by @deadline, or kill it then and reap it. */
static int reap_until(int pidfd, int64_t deadline, int *ret_status)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	siginfo_t si = {};
	int64_t left;

	while ((left = deadline - now_ms()) > 0 &&
	       poll(&p, 1, (int)MIN(left, (int64_t)INT32_MAX)) < 0 && errno == EINTR)
		;
	if (waitid(P_PIDFD, pidfd, &si, WEXITED | WNOHANG) == 0 && si.si_pid != 0) {
		*ret_status = wait_status_of(&si);
		return 0;
	}
	*ret_status = pidfd_kill_and_reap(pidfd);
	return -ETIME;
}

pid_t fork_pipe(int *ret_fd)
{
	int pipefd[2];
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int r = -errno;

		safe_close(pipefd[0]);
		safe_close(pipefd[1]);
		return r;
	}
	safe_close(pipefd[pid == 0 ? 0 : 1]);
	*ret_fd = pipefd[pid == 0 ? 1 : 0];
	return pid;
}

/* A pidfd for our just forked child @pid; when there can be none, the child is killed and
 * reaped (ours and unreaped: its pid cannot have been reused). */
static int child_pidfd(pid_t pid)
{
	int pidfd = pidfd_open(pid, 0), r = -errno;

	if (pidfd >= 0)
		return pidfd;
	(void)kill(pid, SIGKILL);
	(void)waitpid(pid, NULL, 0);
	return r;
}

int spawn_capture(char *const argv[], bool with_stderr, int *ret_pidfd, int *ret_fd)
{
	int fd = -EBADF, pidfd;
	pid_t pid = fork_pipe(&fd);

	if (pid < 0)
		return pid;
	if (pid == 0)
		exec_child(argv, -EBADF, fd, with_stderr);
	pidfd = child_pidfd(pid);
	if (pidfd < 0) {
		safe_close(fd);
		return pidfd;
	}
	*ret_pidfd = pidfd;
	*ret_fd = fd;
	return 0;
}

int spawn_socket(char *const argv[], int *ret_pidfd, int *ret_fd)
{
	int sv[2], pidfd, r;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = fork();
	if (pid == 0)
		exec_child(argv, sv[1], sv[1], false);
	r = -errno;
	safe_close(sv[1]);
	pidfd = pid < 0 ? r : child_pidfd(pid);
	if (pidfd < 0) {
		safe_close(sv[0]);
		return pidfd;
	}
	*ret_pidfd = pidfd;
	*ret_fd = sv[0];
	return 0;
}

int pidfd_kill_and_reap(int pidfd)
{
	siginfo_t si = {};

	(void)pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
	while (waitid(P_PIDFD, pidfd, &si, WEXITED) < 0 && errno == EINTR)
		;
	return wait_status_of(&si);
}

int run_capture(char *const argv[], int timeout_ms, size_t max_bytes, char **ret_out,
		int *ret_status)
{
	RunCapture o = {.timeout_ms = timeout_ms, .max_bytes = max_bytes};
	char *out = NULL;
	int r = run_capture_opts(argv, &o, &out, ret_status);

	if (r < 0) {
		free(out);
		return r;
	}
	*ret_out = out;
	return 0;
}

int run_capture_opts(char *const argv[], const RunCapture *o, char **ret_out, int *ret_status)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int rfd = -EBADF, pidfd = -EBADF;
	int64_t deadline = now_ms() + o->timeout_ms;
	size_t max_bytes = o->max_bytes;
	int status = 0, r, k;
	size_t len = 0;

	buf = malloc(max_bytes + 1);
	if (!buf)
		return -ENOMEM;
	r = spawn_capture(argv, o->with_stderr, &pidfd, &rfd);
	if (r < 0)
		return r;
	r = read_until(rfd, o->cancel_fd, deadline, buf, max_bytes, &len);
	if (r < 0)
		deadline = now_ms(); /* kill it now rather than wait for it */
	rfd = safe_close(rfd);
	k = reap_until(pidfd, deadline, &status);
	if (r < 0) {
		/* What it said before it was stopped is still worth showing. */
		if (ret_out) {
			buf[len] = '\0';
			*ret_out = TAKE_PTR(buf);
		}
		return r;
	}
	if (k < 0)
		return k;
	buf[len] = '\0';
	*ret_out = TAKE_PTR(buf);
	*ret_status = status;
	return 0;
}
