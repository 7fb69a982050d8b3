/* SPDX-License-Identifier: Apache-2.0 */
/*
 * containerd-shim-berth-v2: containerd's runtime v2 shim (io.containerd.berth.v2) that runs
 * each task as a Berth sandbox (docs/kubernetes.md).
 *
 *   containerd-shim-berth-v2 -namespace NS -address ADDR -publish-binary BIN -id ID start
 *     starts the shim's daemon for task ID, listening on a unix socket, writes its address
 *     to ./address (the bundle is the working directory) and prints it;
 *   containerd-shim-berth-v2 -namespace NS -id ID ... delete
 *     cleans up after a shim that is gone (berth-vmm, its run dir, the mount, the state
 *     disk) and prints a DeleteResponse.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "shim.h"
#include "shim.pb-c.h"
#include "task.h"

#define SOCKET_DIR "/run/berth-shim"

typedef struct Args {
	const char *ns, *address, *id, *bundle, *verb;
} Args;

/* Go's flag syntax, as containerd passes it: -name value, -name=value, --name value. */
static int parse_args(int argc, char **argv, Args *a)
{
	for (int i = 1; i < argc; i++) {
		const char *arg = argv[i], *eq;
		const char **into = NULL;
		size_t n;

		if (arg[0] != '-') {
			a->verb = arg;
			continue;
		}
		arg += arg[1] == '-' ? 2 : 1;
		eq = strchr(arg, '=');
		n = eq ? (size_t)(eq - arg) : strlen(arg);
		if (n == 9 && strneq(arg, "namespace", 9))
			into = &a->ns;
		else if (n == 7 && strneq(arg, "address", 7))
			into = &a->address;
		else if (n == 2 && strneq(arg, "id", 2))
			into = &a->id;
		else if (n == 6 && strneq(arg, "bundle", 6))
			into = &a->bundle;
		else if ((n == 14 && strneq(arg, "publish-binary", 14)) ||
			 (n == 6 && strneq(arg, "socket", 6))) {
			if (!eq)
				i++; /* known, not needed */
			continue;
		} else if (n == 5 && strneq(arg, "debug", 5))
			continue;
		else if (n == 1 && arg[0] == 'v') {
			printf("containerd-shim-berth-v2 (%s)\n", SHIM_VERSION);
			exit(0);
		} else {
			fprintf(stderr, "containerd-shim-berth-v2: unknown flag -%.*s\n", (int)n,
				arg);
			return -EINVAL;
		}
		if (eq)
			*into = eq + 1;
		else if (i + 1 < argc)
			*into = argv[++i];
		else
			return -EINVAL;
	}
	if (!a->verb || !a->id) {
		fprintf(stderr, "usage: containerd-shim-berth-v2 -namespace NS -id ID [-address "
				"ADDR] start|delete\n");
		return -EINVAL;
	}
	if (!a->ns)
		a->ns = getenv("NAMESPACE") ?: "default";
	return 0;
}

/* One socket per namespace and task, in a short path (sun_path is 108 bytes). */
static int socket_path(const Args *a, char *ret, size_t size)
{
	_cleanup_free_ char *key = NULL;
	char hex[SHA256_HEX_LEN + 1];

	if (asprintf(&key, "%s/%s", a->ns, a->id) < 0 ||
	    sha256_buffer_hex(key, strlen(key), hex) < 0)
		return -ENOMEM;
	snprintf(ret, size, SOCKET_DIR "/%.32s.sock", hex);
	return 0;
}

static int listen_on(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (mkdir(SOCKET_DIR, 0711) < 0 && errno != EEXIST)
		return -errno;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	(void)unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* containerd (root) alone connects. */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, 16) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

/* The daemon's standard error: containerd's shim log fifo in the bundle, when it reads it. */
static void daemon_stdio(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int logfd = open("log", O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (null >= 0) {
		(void)dup2(null, STDIN_FILENO);
		(void)dup2(null, STDOUT_FILENO);
	}
	if (logfd >= 0) {
		int flags = fcntl(logfd, F_GETFL);

		(void)fcntl(logfd, F_SETFL, flags & ~O_NONBLOCK);
		(void)dup2(logfd, STDERR_FILENO);
	} else if (null >= 0)
		(void)dup2(null, STDERR_FILENO);
}

static int verb_start(const Args *a)
{
	char path[128], address[160];
	const char *events = getenv("TTRPC_ADDRESS");
	int fd, r;
	pid_t pid;

	r = socket_path(a, path, sizeof(path));
	if (r < 0)
		return r;
	fd = listen_on(path);
	if (fd < 0) {
		fprintf(stderr, "containerd-shim-berth-v2: cannot listen on %s: %s\n", path,
			strerror(-fd));
		return fd;
	}
	snprintf(address, sizeof(address), "unix://%s", path);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		(void)setsid();
		daemon_stdio();
		(void)signal(SIGPIPE, SIG_IGN);
		(void)signal(SIGINT, SIG_IGN);
		log_setup("containerd-shim-berth-v2", LOG_LEVEL_INFO);
		r = shim_serve(fd, a->ns, a->id, events);
		(void)unlink(path);
		_exit(r < 0 ? 1 : 0);
	}
	close(fd);
	r = write_file_atomic("address", address, strlen(address), 0600);
	if (r < 0)
		fprintf(stderr, "containerd-shim-berth-v2: cannot write ./address: %s\n",
			strerror(-r));
	printf("%s", address);
	fflush(stdout);
	return 0;
}

static int verb_delete(const Args *a)
{
	Berthshim__DeleteResponse resp = BERTHSHIM__DELETE_RESPONSE__INIT;
	Berthshim__Timestamp ts = BERTHSHIM__TIMESTAMP__INIT;
	_cleanup_free_ uint8_t *buf = NULL;
	char cwd[512], path[128];
	struct timespec now;
	size_t n;

	if (!getcwd(cwd, sizeof(cwd)))
		return -errno;
	task_cleanup_bundle(a->bundle ? a->bundle : cwd, a->ns, a->id);
	if (socket_path(a, path, sizeof(path)) >= 0)
		(void)unlink(path);
	clock_gettime(CLOCK_REALTIME, &now);
	ts.seconds = now.tv_sec;
	ts.nanos = (int32_t)now.tv_nsec;
	resp.exit_status = 128 + SIGKILL;
	resp.exited_at = &ts;
	n = berthshim__delete_response__get_packed_size(&resp);
	buf = malloc(n ? n : 1);
	if (!buf)
		return -ENOMEM;
	berthshim__delete_response__pack(&resp, buf);
	return loop_write(STDOUT_FILENO, buf, n);
}

int main(int argc, char **argv)
{
	Args a = {};
	int r;

	log_setup("containerd-shim-berth-v2", LOG_LEVEL_INFO);
	if (parse_args(argc, argv, &a) < 0)
		return 2;
	if (streq(a.verb, "start"))
		r = verb_start(&a);
	else if (streq(a.verb, "delete"))
		r = verb_delete(&a);
	else {
		fprintf(stderr, "containerd-shim-berth-v2: unknown command '%s': start or delete\n",
			a.verb);
		return 2;
	}
	return r < 0 ? 1 : 0;
}
