/* SPDX-License-Identifier: Apache-2.0 */
/* A program on a pseudo-terminal of its own (pty.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "macros.h"
#include "pty.h"

int view_pty_resize(int master, unsigned cols, unsigned rows)
{
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};

	return ioctl(master, TIOCSWINSZ, &ws) < 0 ? -errno : 0;
}

static _noreturn_ void exec_on_terminal(const char *slave, char *const argv[], char *const envp[])
{
	sigset_t none;
	int fd;

	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	for (int sig = 1; sig < NSIG; sig++)
		(void)signal(sig, SIG_DFL);
	if (setsid() < 0)
		_exit(126);
	/* The first terminal a session leader opens becomes its controlling terminal. */
	fd = open(slave, O_RDWR);
	if (fd < 0 || ioctl(fd, TIOCSCTTY, 0) < 0)
		_exit(126);
	if (dup2(fd, STDIN_FILENO) < 0 || dup2(fd, STDOUT_FILENO) < 0 ||
	    dup2(fd, STDERR_FILENO) < 0)
		_exit(126);
	if (fd > STDERR_FILENO)
		close(fd);
	execvpe(argv[0], argv, envp);
	dprintf(STDERR_FILENO, "[terminal-view] cannot run %s: %m\n", argv[0]);
	_exit(127);
}

int view_pty_spawn(char *const argv[], char *const envp[], unsigned cols, unsigned rows,
		   int *ret_master, pid_t *ret_pid)
{
	char slave[64];
	pid_t pid;
	int master, r;

	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (master < 0)
		return -errno;
	if (grantpt(master) < 0 || unlockpt(master) < 0 ||
	    ptsname_r(master, slave, sizeof(slave)) != 0) {
		r = -errno;
		close(master);
		return r;
	}
	r = view_pty_resize(master, cols, rows);
	if (r < 0) {
		close(master);
		return r;
	}
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(master);
		return r;
	}
	if (pid == 0)
		exec_on_terminal(slave, argv, envp);
	if (fcntl(master, F_SETFL, O_NONBLOCK) < 0) {
		r = -errno;
		(void)kill(pid, SIGKILL);
		close(master);
		return r;
	}
	*ret_master = master;
	*ret_pid = pid;
	return 0;
}
