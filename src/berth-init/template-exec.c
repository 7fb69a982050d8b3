/* SPDX-License-Identifier: Apache-2.0 */
/* The programs a template boot runs (template-exec.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

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
