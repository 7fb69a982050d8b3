/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-node-confine.node: the warm Node of a restored VM becomes an app (docs/warm-start.md).
 *
 * berth-init starts a Node in the template boot, as root, which loads Node's own modules
 * and this addon and then calls its one export, takeApp(fd), on its end of a socketpair
 * only berth-init holds. takeApp() says "ready" and blocks until berth-init hands it an
 * app, then does in C what berth-init and agent-init do for an exec'd app: the app's
 * stdout, stderr and agent-init's report pipe, its cgroup, its directory, the environment
 * agent-init would have had; a reseed of OpenSSL, whose state every VM restored from the
 * snapshot shares; and agent-init's own confinement of every thread of the process
 * (AGENT_INIT_IN_PLACE_EVENT_LOOP). Only then does it return to JavaScript, which loads the
 * app's runtime. Anything that fails before that ends the process with nothing of the app
 * run; the protocol is the zygote's start (src/berth-init/node-warm.h).
 */
#define NAPI_VERSION 8
#include <errno.h>
#include <fcntl.h>
#include <node_api.h>
#include <openssl/rand.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent-init.h"
#include "macros.h"

#define START_MAX (4u << 20) /* the directory, the cgroup and the environment */
#define REPORT_FD_MIN 10     /* above what Node's own loop opened first */

static _printf_(1, 2) _noreturn_ void fail(const char *fmt, ...)
{
	va_list ap;

	dprintf(STDERR_FILENO, "[berth-init] warm Node runtime: ");
	va_start(ap, fmt);
	vdprintf(STDERR_FILENO, fmt, ap);
	va_end(ap);
	dprintf(STDERR_FILENO, "\n");
	_exit(126);
}

/* One byte and the app's three descriptors: stdout, stderr, agent-init's report pipe.
 * False for the byte alone that asks for a rehearsal instead (node-warm.h). */
static bool receive_fds(int channel, int fds[3])
{
	char byte, control[CMSG_SPACE(3 * sizeof(int))] = {};
	struct iovec iov = {.iov_base = &byte, .iov_len = 1};
	struct msghdr msg = {.msg_iov = &iov,
			     .msg_iovlen = 1,
			     .msg_control = control,
			     .msg_controllen = sizeof(control)};
	struct cmsghdr *c;
	ssize_t n;

	do
		n = recvmsg(channel, &msg, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		_exit(0); /* berth-init closed its end: no app for this runtime */
	c = CMSG_FIRSTHDR(&msg);
	if (n == 1 && byte == 'r' && !c)
		return false;
	if (n != 1 || byte != 's' || !c || c->cmsg_level != SOL_SOCKET ||
	    c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(3 * sizeof(int)) ||
	    (msg.msg_flags & MSG_CTRUNC))
		fail("berth-init sent no app");
	memcpy(fds, CMSG_DATA(c), 3 * sizeof(int));
	return true;
}

/* The rest of the stream: NUL-terminated fields until berth-init shuts its end. */
static char *receive_start(int channel, size_t *ret_len)
{
	size_t len = 0, size = 65536;
	char *buf = malloc(size);

	if (!buf)
		fail("out of memory");
	for (;;) {
		ssize_t n;

		if (len == size) {
			char *b;

			if (size >= START_MAX)
				fail("the start is larger than %u bytes", START_MAX);
			size *= 2;
			b = realloc(buf, size);
			if (!b)
				fail("out of memory");
			buf = b;
		}
		n = read(channel, buf + len, size - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail("reading the start: %m");
		if (n == 0)
			break;
		len += (size_t)n;
	}
	*ret_len = len;
	return buf;
}

static void join_cgroup(const char *cgroup, bool strict)
{
	char path[512];
	int fd;

	if (!cgroup[0])
		return;
	snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	/* "0": the writer's whole process, every thread of it. */
	if ((fd < 0 || write(fd, "0", 1) != 1) && strict)
		fail("cannot join %s: %m", cgroup);
	safe_close(fd);
}

/* Every VM restored from one snapshot holds the same OpenSSL generator state: draw it
 * afresh from the kernel (reseeded by berth-init at the resume) before anything uses it.
 * The per-thread generators reseed from the primary when they see it was. */
static void reseed_openssl(void)
{
	EVP_RAND_CTX *ctx[] = {RAND_get0_primary(NULL), RAND_get0_public(NULL),
			       RAND_get0_private(NULL)};

	for (size_t i = 0; i < ELEMENTSOF(ctx); i++)
		if (!ctx[i] || EVP_RAND_reseed(ctx[i], 1, NULL, 0, NULL, 0) != 1)
			fail("cannot reseed OpenSSL's random generator");
}

/* A seed for V8's Math.random(), which in every clone would otherwise start from the
 * template's state: nonzero, since V8 takes 0 for none. */
static int32_t math_random_seed(void)
{
	int32_t seed = 0;

	while (seed == 0)
		if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
			fail("getrandom: %m");
	return seed;
}

/* The app, from the start's fields: set up, then confined. Returns its directory, or NULL
 * when berth-init asked for a rehearsal first. */
static const char *become_app(int channel)
{
	static bool said_ready;
	int fds[3], null, report;
	char *start, *fields[3], *p, *end, num[16];
	size_t len;

	/* What any app's confinement needs, made before the template is saved; should it
	 * fail, the confinement makes it itself. */
	if (!said_ready) {
		(void)berth_confine_preload();
		if (dprintf(channel, "ready") != 5)
			fail("cannot tell berth-init it is ready: %m");
		said_ready = true;
	}
	if (!receive_fds(channel, fds)) {
		/* A rehearsal runs only where berth-init and the kernel leave a vCPU idle. */
		(void)setpriority(PRIO_PROCESS, 0, 19);
		return NULL;
	}
	/* An app's start at an app's priority (PID 1's, root's to give back). */
	(void)setpriority(PRIO_PROCESS, 0, 0);
	start = receive_start(channel, &len);
	safe_close(channel);
	/* directory, cgroup, "1"/"0" for a strict cgroup, then NAME=VALUE entries */
	end = start + len;
	p = start;
	for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
		char *nul = memchr(p, '\0', (size_t)(end - p));

		if (!nul)
			fail("berth-init sent no start");
		fields[i] = p;
		p = nul + 1;
	}
	if (len == 0 || end[-1] != '\0')
		fail("berth-init sent a malformed start");

	null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(fds[0], STDOUT_FILENO) < 0 ||
	    dup2(fds[1], STDERR_FILENO) < 0)
		fail("cannot set up stdio: %m");
	report = fcntl(fds[2], F_DUPFD_CLOEXEC, REPORT_FD_MIN);
	if (report < 0)
		fail("cannot keep the report pipe: %m");
	safe_close(null);
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		safe_close(fds[i]);

	join_cgroup(fields[1], streq(fields[2], "1"));
	/* Its own session, as an exec'd app's (berth-init made it a leader already). */
	if (getsid(0) != getpid() && setsid() < 0)
		fail("setsid: %m");
	if (chdir(fields[0]) < 0)
		fail("cannot enter %s: %m", fields[0]);
	if (clearenv() != 0)
		fail("clearenv failed");
	for (; p < end; p += strlen(p) + 1) {
		char *eq = strchr(p, '=');

		/* putenv() keeps the pointer: the start buffer lives as long as the process. */
		if (!eq || eq == p || putenv(p) != 0)
			fail("a malformed variable in the start");
	}
	/* agent-init's report pipe is where this process holds it, not fd 3. */
	snprintf(num, sizeof(num), "%d", report);
	if (setenv("BERTH_REPORT_FD", num, 1) < 0)
		fail("setenv: %m");
	reseed_openssl();
	/* agent-init's code: it exits the process rather than return unconfined. */
	if (berth_confine_in_place_event_loop() != 0)
		_exit(EXIT_FAILURE);
	return fields[0];
}

static napi_value throw_error(napi_env env, const char *message)
{
	napi_throw_error(env, NULL, message);
	return NULL;
}

/* takeApp(fd) -> {dir, randomSeed}: returns confined, as the app berth-init handed it. */
static napi_value take_app(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], result, dir, seed;
	int32_t fd;
	const char *d;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 1 ||
	    napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0)
		return throw_error(env, "takeApp(fd) needs berth-init's descriptor");
	d = become_app(fd);
	if (!d) {
		napi_value yes;

		if (napi_create_object(env, &result) != napi_ok ||
		    napi_get_boolean(env, true, &yes) != napi_ok ||
		    napi_set_named_property(env, result, "rehearse", yes) != napi_ok)
			fail("cannot answer JavaScript");
		return result;
	}
	if (napi_create_object(env, &result) != napi_ok ||
	    napi_create_string_utf8(env, d, NAPI_AUTO_LENGTH, &dir) != napi_ok ||
	    napi_create_int32(env, math_random_seed(), &seed) != napi_ok ||
	    napi_set_named_property(env, result, "dir", dir) != napi_ok ||
	    napi_set_named_property(env, result, "randomSeed", seed) != napi_ok)
		fail("cannot answer JavaScript"); /* confined, but nothing of the app ran */
	return result;
}

/* appWaiting(fd) -> whether berth-init has sent an app: a rehearsal stops for it. */
static napi_value app_waiting(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], result;
	int32_t fd;
	struct pollfd p;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc != 1 ||
	    napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0)
		return throw_error(env, "appWaiting(fd) needs berth-init's descriptor");
	p = (struct pollfd){.fd = fd, .events = POLLIN};
	if (napi_get_boolean(env, poll(&p, 1, 0) != 0, &result) != napi_ok)
		return NULL;
	return result;
}

/* Node's entry points for an addon, declared here: the header's macro leaves them without
 * prototypes. */
NAPI_MODULE_EXPORT int32_t node_api_module_get_api_version_v1(void);
NAPI_MODULE_EXPORT napi_value napi_register_module_v1(napi_env env, napi_value exports);

NAPI_MODULE_EXPORT int32_t node_api_module_get_api_version_v1(void)
{
	return NAPI_VERSION;
}

NAPI_MODULE_EXPORT napi_value napi_register_module_v1(napi_env env, napi_value exports)
{
	napi_value fn;

	if (napi_create_function(env, "takeApp", NAPI_AUTO_LENGTH, take_app, NULL, &fn) !=
		    napi_ok ||
	    napi_set_named_property(env, exports, "takeApp", fn) != napi_ok ||
	    napi_create_function(env, "appWaiting", NAPI_AUTO_LENGTH, app_waiting, NULL, &fn) !=
		    napi_ok ||
	    napi_set_named_property(env, exports, "appWaiting", fn) != napi_ok)
		return NULL;
	return exports;
}
