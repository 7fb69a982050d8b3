/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth mcp's standard output carries nothing but JSON-RPC: from the start, fds 1 and 2
 * are a pipe that a thread copies to the real standard error with "[berth:mcp] " before
 * each line, so no log line, child process or library can write anything else to the
 * client. A thread, not the event loop, because the loop may wait on a child (the bundler)
 * that writes more than a pipe holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fileio.h"
#include "mcp.h"
#include "relay.h"
#include "term-text.h"

static struct {
	int read_fd, quit_fd, err_fd;
	pthread_t thread;
	bool running;
} relay = {.read_fd = -EBADF, .quit_fd = -EBADF, .err_fd = -EBADF};

/* One line to the real standard error, for a person: what goes through the relay includes
 * the guest's and the app's text (berth vm logs after a failed boot, berth-vmm's output). */
static void relay_write(const char *buf, size_t len)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);

	if (!f)
		return;
	fputs(MCP_PREFIX, f);
	term_text_write(f, buf, len, TERM_TEXT_LOG_LINE);
	fputc('\n', f);
	if (fclose(f) == 0)
		(void)loop_write(relay.err_fd, text, size);
	free(text);
}

static void *relay_main(void *arg)
{
	char line[4096];
	size_t len = 0;
	bool quitting = false;

	for (;;) {
		struct pollfd p[2] = {{relay.read_fd, POLLIN, 0}, {relay.quit_fd, POLLIN, 0}};
		ssize_t n;
		int k = poll(p, quitting ? 1 : 2, quitting ? 0 : -1);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 || (quitting && k == 0))
			break;
		if (!quitting && (p[1].revents & POLLIN)) {
			quitting = true; /* drain what is there, then stop */
			continue;
		}
		if (!(p[0].revents & (POLLIN | POLLHUP)))
			continue;
		n = read(relay.read_fd, line + len, sizeof(line) - len);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			break;
		}
		len += (size_t)n;
		for (char *nl; (nl = memchr(line, '\n', len));) {
			relay_write(line, (size_t)(nl - line));
			len -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, len);
		}
		if (len == sizeof(line)) { /* a very long line: pass it on in pieces */
			relay_write(line, len);
			len = 0;
		}
	}
	if (len > 0)
		relay_write(line, len);
	return NULL;
}

/* Keep the real standard output for MCP; send everything else through the relay. */
int relay_start(int *ret_mcp_fd)
{
	int p[2], mcp_fd;

	mcp_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
	relay.err_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	relay.quit_fd = eventfd(0, EFD_CLOEXEC);
	if (mcp_fd < 0 || relay.err_fd < 0 || relay.quit_fd < 0 || pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	relay.read_fd = p[0];
	if (dup2(p[1], STDOUT_FILENO) < 0 || dup2(p[1], STDERR_FILENO) < 0)
		return -errno;
	close(p[1]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* The relay never takes a signal: a client's SIGTERM must reach the thread that acts
	 * on it (the handler before serving, the loop's signalfd after), not sit in a flag
	 * nobody reads. The thread inherits this mask. */
	sigset_t all, saved;
	int r;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	r = pthread_create(&relay.thread, NULL, relay_main, NULL);
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (r != 0)
		return -EAGAIN;
	relay.running = true;
	*ret_mcp_fd = mcp_fd;
	return 0;
}

/* Flush what is left and stop the relay. A detached child (berth-vmm) may still hold the
 * pipe, so the thread is told to stop rather than waiting for end of file. */
void relay_stop(void)
{
	int null_fd;

	if (!relay.running)
		return;
	fflush(stdout);
	fflush(stderr);
	null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if (null_fd >= 0) {
		dup2(null_fd, STDOUT_FILENO);
		dup2(null_fd, STDERR_FILENO);
		close(null_fd);
	}
	(void)eventfd_write(relay.quit_fd, 1);
	pthread_join(relay.thread, NULL);
	relay.running = false;
	dup2(relay.err_fd, STDERR_FILENO);
}
