/* SPDX-License-Identifier: Apache-2.0 */
/* The programs a template boot runs (template-exec.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "term-text.h"
#include "template-exec.h"

_noreturn_ void exec_template_program(const char *path, char *const argv[], int keep_fd,
				      int keep_as, bool quiet)
{
	char *const envp[] = {(char *)"PATH=/usr/local/bin:/usr/bin:/bin", (char *)"LANG=C.UTF-8",
			      (char *)"HOME=/", NULL};
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	sigset_t none;

	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
	    (quiet && dup2(null, STDERR_FILENO) < 0) ||
	    (keep_fd >= 0 && dup2(keep_fd, keep_as) < 0) || chdir("/") < 0)
		_exit(126);
	(void)setsid();
	execve(path, argv, envp);
	_exit(127);
}

int wait_fd_readable(int fd, int msec)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int r;

	do
		r = poll(&p, 1, msec);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return r == 0 ? -ETIMEDOUT : 0;
}

pid_t template_spawn(const char *path, char *const argv[], int type, int keep_as, bool quiet,
		     int *ret_fd, char *why, size_t whylen)
{
	int sv[2], r;
	pid_t pid;

	if (socketpair(AF_UNIX, type | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(why, whylen, "socketpair: %m");
		return -errno;
	}
	pid = fork();
	if (pid < 0) {
		r = -errno;
		snprintf(why, whylen, "fork: %m");
		safe_close(sv[0]);
		safe_close(sv[1]);
		return r;
	}
	if (pid == 0)
		exec_template_program(path, argv, sv[1], keep_as, quiet);
	safe_close(sv[1]);
	*ret_fd = sv[0];
	return pid;
}

int template_read_ready(int fd, char *why, size_t whylen)
{
	_cleanup_free_ char *said = NULL;
	char buf[256];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);

	if (n < 0)
		n = -errno;
	if (n == 5 && memcmp(buf, "ready", 5) == 0)
		return 0;
	if (n > 0) {
		buf[n] = '\0';
		said = term_text_dup(buf, TERM_TEXT_QUESTION);
	}
	snprintf(why, whylen, "it did not say it was ready (%s)",
		 n < 0	  ? strerror((int)-n)
		 : n == 0 ? "it ended"
			  : said ?: "out of memory");
	return n < 0 ? (int)n : -EPROTO;
}

int template_wait_ready(int fd, int msec, char *why, size_t whylen)
{
	int r = wait_fd_readable(fd, msec);

	if (r < 0) {
		snprintf(why, whylen, "it did not say it was ready (%s)", strerror(-r));
		return r;
	}
	return template_read_ready(fd, why, whylen);
}

int send_with_fds(int fd, char byte, const int *fds, size_t n)
{
	char control[CMSG_SPACE(8 * sizeof(int))] = {};
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control,
			     .msg_controllen = CMSG_SPACE(n * sizeof(int))};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

	if (n == 0 || n > 8)
		return -EINVAL;
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(n * sizeof(int));
	memcpy(CMSG_DATA(c), fds, n * sizeof(int));
	return sendmsg(fd, &msg, MSG_NOSIGNAL) == 1 ? 0 : -errno;
}

int template_write_start(int fd, const char *dir, const char *cgroup, bool strict_cgroup,
			 char *const *env, size_t n)
{
	int r = loop_write(fd, dir, strlen(dir) + 1);

	if (r >= 0)
		r = loop_write(fd, cgroup, strlen(cgroup) + 1);
	if (r >= 0)
		r = loop_write(fd, strict_cgroup ? "1" : "0", 2);
	for (size_t i = 0; r >= 0 && i < n; i++)
		r = loop_write(fd, env[i], strlen(env[i]) + 1);
	return r < 0 ? r : 0;
}
