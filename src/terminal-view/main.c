/* SPDX-License-Identifier: Apache-2.0 */
/*
 * terminal-view: the terminal app's web view (docs/terminal.md).
 *
 *   terminal-view [--port N] [--assets DIR] -- COMMAND [ARG]...
 *
 * Reads the login ("berth:<secret>") as one line on standard input, never from its
 * arguments or environment, listens on 127.0.0.1:N (7681), and runs COMMAND (tmux attach)
 * on a pseudo-terminal of its own for each websocket. apps/terminal starts it on the
 * terminal's first call, under the app's own confinement.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "auth.h"
#include "macros.h"
#include "parse-util.h"
#include "server.h"

#define ASSETS_DEFAULT "/usr/share/berth/terminal-view"

static volatile sig_atomic_t stop;
static ViewServer *server;

static void on_stop(int sig)
{
	stop = 1;
	if (server)
		view_server_wake(server);
}

/* One line on standard input, which is then closed. Returns its length, or -1. */
static ssize_t read_credential(char *buf, size_t size)
{
	size_t n = 0;

	while (n < size) {
		ssize_t r = read(STDIN_FILENO, buf + n, size - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (memchr(buf, '\n', n))
			break;
	}
	/* Nothing more is read there; /dev/null keeps the descriptor from being reused. */
	{
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (null >= 0 && dup2(null, STDIN_FILENO) < 0)
			(void)close(STDIN_FILENO);
		if (null > STDIN_FILENO)
			(void)close(null);
	}
	if (n == 0 || n == size)
		return -1;
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return (ssize_t)strlen(buf);
}

/* The attach command's environment: ours, with TERM for what the page emulates. */
static char **attach_environment(void)
{
	extern char **environ;
	size_t n = 0, k = 0;
	char **envp;

	while (environ[n])
		n++;
	envp = calloc(n + 2, sizeof(char *));
	if (!envp)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!strneq(environ[i], "TERM=", 5))
			envp[k++] = environ[i];
	envp[k++] = (char *)"TERM=xterm-256color";
	envp[k] = NULL;
	return envp;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {{"port", required_argument, NULL, 'p'},
						{"assets", required_argument, NULL, 'a'},
						{"help", no_argument, NULL, 'h'},
						{}};
	ViewConfig cfg = {.port = VIEW_PORT_DEFAULT, .assets_dir = ASSETS_DEFAULT};
	char credential[VIEW_CREDENTIAL_MAX + 2], err[512];
	_cleanup_free_ char **envp = NULL;
	struct sigaction sa = {.sa_handler = on_stop};
	unsigned port;
	int c, r;

	while ((c = getopt_long(argc, argv, "+", options, NULL)) >= 0) {
		switch (c) {
		case 'p':
			if (parse_uint_range(optarg, 1, 65535, &port) < 0) {
				fprintf(stderr, "terminal-view: --port takes 1-65535, not '%s'\n",
					optarg);
				return 2;
			}
			cfg.port = (int)port;
			break;
		case 'a':
			cfg.assets_dir = optarg;
			break;
		case 'h':
			printf("usage: terminal-view [--port N] [--assets DIR] -- COMMAND [ARG]...\n"
			       "  reads the login (berth:<secret>) as one line on standard input\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "terminal-view: give the command to attach, after --\n");
		return 2;
	}
	/* The login is in this process's memory: no other process of the app's uid may read
	 * it through /proc (mem, environ) or attach to it. */
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	/* Gone with the app that started it. */
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);
	if (read_credential(credential, sizeof(credential)) < 0 ||
	    !view_credential_valid(credential, strlen(credential))) {
		fprintf(stderr, "terminal-view: no valid login on standard input (one line, "
				"berth:<secret>); not serving the terminal without one\n");
		return 1;
	}
	envp = attach_environment();
	if (!envp)
		return 1;
	cfg.credential = credential;
	cfg.attach_argv = argv + optind;
	cfg.attach_envp = envp;
	sigemptyset(&sa.sa_mask);
	(void)sigaction(SIGTERM, &sa, NULL);
	(void)sigaction(SIGINT, &sa, NULL);
	(void)signal(SIGPIPE, SIG_IGN);
	/* The attach commands are reaped by the kernel; each resets this before its exec. */
	(void)signal(SIGCHLD, SIG_IGN);
	r = view_server_new(&cfg, &server, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "terminal-view: %s\n", err);
		return 1;
	}
	fprintf(stderr, "[terminal-view] serving the terminal on 127.0.0.1:%d\n", cfg.port);
	r = view_server_run(server, &stop);
	server = view_server_free(server);
	explicit_bzero(credential, sizeof(credential));
	return r < 0 ? 1 : 0;
}
