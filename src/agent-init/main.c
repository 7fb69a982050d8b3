/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent-init <command> [args...]: confine this process the way the app's capability policy
 * says, then exec the command (SPEC 4). Two phases:
 *
 *   prepare: everything that can fail or allocate. Read the policy, create the write paths,
 *            build the Landlock ruleset and compile the seccomp filters, resolve the command,
 *            format every line the second phase will print. Nothing is restricted yet, so a
 *            refusal here simply exits 1 and the app never runs.
 *   confine_and_exec(): the irreversible part, straight-line, any failure is _exit(1).
 *
 * The same code, built as libberth-confine.so (in-place.c), confines a pre-started runtime
 * in place instead of exec'ing one: the Python runtime forked from the warm-start zygote,
 * and the warm Node of a restored VM (docs/warm-start.md). Then every thread of the
 * process is confined (threads.h), the last step closes what the exec would have closed,
 * and the function returns.
 *
 * See docs/confinement.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "agent-init.h"
#include "audit.h"
#include "inputs.h"
#include "listen-fd.h"
#include "fileio.h"
#include "filters.h"
#include "macros.h"
#include "missing-landlock.h"
#include "policy.h"
#include "ruleset.h"
#include "threads.h"

#define DEFAULT_POLICY_PATH ".berth/capability-policy.json"
#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

extern char **environ;

static const char *const step_names[_STEP_MAX] = {
	[STEP_CAPABILITIES] = "dropping capabilities",
	[STEP_IDENTITY] = "switching to the app uid",
	[STEP_NO_NEW_PRIVS] = "setting no_new_privs",
	[STEP_LANDLOCK] = "landlock_restrict_self()",
	[STEP_FDS] = "closing inherited file descriptors",
	[STEP_SECCOMP_BASE] = "loading the namespace seccomp filter",
	[STEP_SECCOMP_DATAGRAM] = "loading the network seccomp filter",
	[STEP_THREADS] = "confining the runtime's other threads",
};

/* What confine_and_exec() needs, all of it ready before the first restriction. */
typedef struct Confinement {
	char **argv;
	char *exec_path;
	const char *app;
	const char *boot_id;
	int64_t now;
	AppIdentity id;
	int cap_last;
	int ruleset_fd; /* -EBADF: nothing to restrict with (no policy, or ABI 0) */
	Filters filters;
	/* The lines each step prints once it has succeeded. */
	char *caps_lines, *uid_lines, *landlock_lines, *seccomp_base_lines, *seccomp_datagram_lines;
} Confinement;

/* berth-init's report pipe (BERTH_REPORT_FD): the audit lines go there too, on a channel
 * the app cannot write to, since it is closed at the exec. -1 when there is none. */
static int report_fd = -1;

/* Confining the calling process in place (libberth-confine.so) rather than exec'ing. */
static AgentInitMode mode;
static bool in_place;

/* BERTH_LISTEN_FD: a listening unix socket berth-init bound for a daemon it starts before
 * the daemon listens itself (socket activation, docs/context.md). It is always fd 3 and
 * the one descriptor beyond stdio that survives the exec; -1 when there is none. */
static int listen_fd = -1;

static void write_all(int fd, const char *s, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, s, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		s += n;
		len -= (size_t)n;
	}
}

static void emit(const char *s)
{
	if (!s)
		return;
	write_all(STDERR_FILENO, s, strlen(s));
	/* The JSON lines (the audit records) are the reports; the human lines are not. */
	for (const char *l = s; report_fd >= 0 && *l;) {
		const char *nl = strchrnul(l, '\n');

		if (*l == '{')
			write_all(report_fd, l, (size_t)(nl - l) + (*nl == '\n'));
		l = *nl ? nl + 1 : nl;
	}
}

/* BERTH_REPORT_FD names an open descriptor of ours, or is ignored; the app never sees it. */
static void take_report_fd(void)
{
	const char *v = getenv("BERTH_REPORT_FD");
	char *end = NULL;
	long fd = v ? strtol(v, &end, 10) : -1;

	if (v && end && !*end && fd >= 3 && fd < 1024 && fcntl((int)fd, F_GETFD) >= 0) {
		report_fd = (int)fd;
		(void)fcntl(report_fd, F_SETFD, FD_CLOEXEC);
	}
	(void)unsetenv("BERTH_REPORT_FD");
}

/* Kept only when BERTH_LISTEN_FD is "3" and fd 3 is a listening unix stream socket; the
 * daemon reads the variable itself. Anything else is closed at the exec like the rest. */
static void take_listen_fd(void)
{
	const char *v = getenv(LISTEN_FD_ENV);

	if (!v)
		return;
	if (streq(v, "3") && !in_place && listen_fd_is_listening_unix(LISTEN_FD))
		listen_fd = LISTEN_FD;
	else
		(void)unsetenv(LISTEN_FD_ENV);
}

static _printf_(1, 2) void say(const char *fmt, ...)
{
	va_list ap;

	fputs("[agent-init] ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
}

static _printf_(1, 2) char *format(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* Log lines are records: no control characters, and valid UTF-8 for the JSON ones. */
static char *printable(const char *s)
{
	char *copy = strdup(s ?: "");

	for (char *p = copy; p && *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
			*p = '?';
	return copy;
}

/* The refusal of SPEC 4.5.1: an audit line, a FATAL line, exit 1. Nothing is restricted. */
static _noreturn_ void refuse(const char *app, int64_t now, bool required, const char *reason)
{
	_cleanup_free_ char *r = printable(reason);

	emit(audit_enforcement_refused(app, r ?: "out of memory", now));
	if (required)
		say("FATAL: BERTH_REQUIRE_ENFORCEMENT is set but %s for \"%s\" — refusing to exec unrestricted.",
		    r ?: "out of memory", app);
	else
		say("FATAL: %s for \"%s\" — refusing to exec.", r ?: "out of memory", app);
	_exit(EXIT_FAILURE);
}

/*
 * A step of the irreversible sequence failed: its audit line (when it has one) with the
 * error, the refusal, _exit. Some restrictions may already be in place, which is why this
 * never returns and never execs.
 */
static _noreturn_ void die(const Confinement *c, Step step, int error, const char *detail)
{
	_cleanup_free_ char *reason =
		format("%s failed: %s", step_names[step], detail ?: strerror(error));
	const char *why = reason ?: "out of memory";

	/* The lines of the steps that succeeded before it, as they would have come. */
	if (step > STEP_CAPABILITIES && step < STEP_THREADS)
		emit(c->caps_lines);
	if (step > STEP_IDENTITY && step < STEP_THREADS)
		emit(c->uid_lines);
	if (step == STEP_CAPABILITIES)
		emit(audit_capabilities_dropped(c->boot_id, c->app, false, c->now));
	else if (step == STEP_IDENTITY)
		emit(audit_app_uid(c->boot_id, c->app, c->id.uid, c->id.gid, false, why, c->now));
	else if (step == STEP_SECCOMP_BASE)
		emit(audit_seccomp("namespace_seccomp_filter", c->boot_id, c->app, false, why,
				   c->now));
	else if (step == STEP_SECCOMP_DATAGRAM)
		emit(audit_seccomp("network_seccomp_filter", c->boot_id, c->app, false, why,
				   c->now));
	emit(audit_enforcement_refused(c->app, why, c->now));
	say("FATAL: %s for \"%s\" — refusing to exec.", why, c->app);
	_exit(EXIT_FAILURE);
}

/* getresuid()/getresgid() say the app identity in all three slots, and root is gone for
 * good: setuid(0) and setgid(0) fail. */
static bool identity_is_final(const AppIdentity *id)
{
	uid_t ru, eu, su;
	gid_t rg, eg, sg;

	if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
		return false;
	if (ru != id->uid || eu != id->uid || su != id->uid || rg != id->gid || eg != id->gid ||
	    sg != id->gid)
		return false;
	/* The system calls, not glibc's wrappers, which would ask every thread to try. */
	return syscall(SYS_setuid, 0) < 0 && syscall(SYS_setgid, 0) < 0;
}

/* In place, what the exec would have closed; a runtime with an event loop keeps its own. */
static int close_inherited_fds(const Confinement *c)
{
	if (mode != AGENT_INIT_IN_PLACE_EVENT_LOOP)
		return RET_NERRNO(close_range(3, ~0U, 0));
	/* Its loop's descriptors were checked at the prepare; only agent-init's own remain. */
	if (report_fd >= 0)
		(void)close(report_fd);
	if (c->ruleset_fd >= 0)
		(void)close(c->ruleset_fd);
	return 0;
}

/*
 * The irreversible sequence (STYLE 3.8). Everything it uses was prepared; every failure is
 * _exit(1) through die(). Order: the steps each thread takes for itself (threads.h:
 * capabilities, whose bounding set needs CAP_SETPCAP, which the uid change takes away;
 * identity; no_new_privs; Landlock), in place first in every other thread of the runtime;
 * then the fds, seccomp last, exec. In place, it returns instead of the exec, with the
 * process as the exec would leave it.
 */
static void confine_and_exec(const Confinement *c)
{
	ThreadSteps steps = {.cap_last = c->cap_last, .id = &c->id, .ruleset_fd = c->ruleset_fd};
	/* In place, the filters reach every thread; one that cannot take them is an error. */
	unsigned seccomp_flags = in_place ? SECCOMP_FILTER_FLAG_TSYNC : 0;
	ThreadFailure f = {};
	char why[160];

	/* Nothing of the calling thread is restricted yet, whichever other thread failed. */
	if (in_place && threads_confine_others(&steps, &f, why, sizeof(why)) < 0) {
		if (f.step != STEP_THREADS)
			snprintf(why, sizeof(why), "thread %d, %s: %s", (int)f.tid,
				 step_names[f.step], strerror(f.error));
		die(c, STEP_THREADS, f.error, why);
	}

	/* 1-4. The bounding set emptied, ambient and inheritable cleared (no capability survives
	 *      the exec, whether or not the app stays root); groups, gid, uid; no_new_privs, so
	 *      that no setuid binary or file capability can undo them, and which lets an
	 *      unprivileged process use Landlock and seccomp; Landlock (the ruleset's fd is
	 *      close-on-exec). */
	if (thread_confine_self(&steps, &f) < 0)
		die(c, f.step, f.error, NULL);
	emit(c->caps_lines);
	if (c->id.set && !identity_is_final(&c->id))
		die(c, STEP_IDENTITY, EPERM,
		    "the uid change did not take or is reversible (setuid(0) succeeded)");
	/* The uid change made the process undumpable, which an exec would undo: the app could
	 * not read its own /proc/self otherwise. Its memory is the image's runtime and its own. */
	if (c->id.set && in_place && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		die(c, STEP_IDENTITY, errno, NULL);
	emit(c->uid_lines);
	emit(c->landlock_lines);

	/* 5. Only stdin, stdout and stderr reach the app (and a daemon's listening socket). */
	if (close_range(listen_fd >= 0 ? LISTEN_FD + 1 : 3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		die(c, STEP_FDS, errno, NULL);
	if (listen_fd >= 0 && fcntl(listen_fd, F_SETFD, 0) < 0)
		die(c, STEP_FDS, errno, NULL);

	/* 6. seccomp last: it only refuses calls this sequence no longer makes, and lets
	 *    execve through. */
	if (seccomp_program_load(&c->filters.base, seccomp_flags) < 0)
		die(c, STEP_SECCOMP_BASE, errno, NULL);
	emit(c->seccomp_base_lines);
	if (c->filters.datagram.insns &&
	    seccomp_program_load(&c->filters.datagram, seccomp_flags) < 0)
		die(c, STEP_SECCOMP_DATAGRAM, errno, NULL);
	emit(c->seccomp_datagram_lines);

	/* 7. In place: what the exec would close, and the runtime goes on as the app. */
	if (in_place) {
		if (close_inherited_fds(c) < 0)
			die(c, STEP_FDS, errno, NULL);
		return;
	}
	execve(c->exec_path, c->argv, environ);
	say("failed to exec \"%s\": %s", c->argv[0], strerror(errno));
	_exit(EXIT_FAILURE);
}

/* --- prepare ---------------------------------------------------------------------- */

/* The command as execvp() would find it, found now rather than after the restrictions. */
static int resolve_command(const char *cmd, char **ret)
{
	const char *path = getenv("PATH");
	int r = -ENOENT;

	if (strchr(cmd, '/')) {
		*ret = strdup(cmd);
		return !*ret ? -ENOMEM : access(cmd, F_OK) < 0 ? -errno : 0;
	}
	if (!path || !*path)
		path = DEFAULT_PATH;
	for (const char *p = path;; p++) {
		const char *end = strchrnul(p, ':');
		/* An empty PATH entry means the current directory, as for execvp(). */
		_cleanup_free_ char *candidate =
			end > p ? format("%.*s/%s", (int)(end - p), p, cmd) : format("./%s", cmd);
		struct stat st;

		if (!candidate)
			return -ENOMEM;
		if (stat(candidate, &st) == 0 && S_ISREG(st.st_mode)) {
			if (access(candidate, X_OK) == 0) {
				*ret = TAKE_PTR(candidate);
				return 0;
			}
			r = -EACCES;
		}
		if (!*end)
			return r;
		p = end;
	}
}

/*
 * A runtime with an event loop keeps its loop's descriptors when it is confined in place.
 * Each must be its own: an epoll, eventfd, signalfd or timerfd instance (anon inodes, which
 * reach nothing outside it), a pipe of which it holds both ends, or /dev/null. Anything
 * else open (a socket, a file, a directory, one end of a pipe) could reach beyond the app's
 * policy, and refuses the confinement: the runtime closes what it was given first.
 */
static int check_event_loop_fds(char **reterr)
{
	struct {
		ino_t ino;
		int modes; /* 1: a read end, 2: a write end */
	} pipes[64];
	size_t n_pipes = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int r = 0;

	if (!d)
		return -errno;
	while (r >= 0 && (de = readdir(d))) {
		int fd = atoi(de->d_name);
		char path[64], target[128] = "";
		struct stat st;
		ssize_t n;
		int fl;

		if (de->d_name[0] == '.' || fd < 3 || fd == dirfd(d) || fd == report_fd)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, target, sizeof(target) - 1);
		if (n > 0)
			target[n] = '\0';
		if (fstat(fd, &st) < 0 || (fl = fcntl(fd, F_GETFL)) < 0) {
			r = -errno;
			break;
		}
		if (strneq(target, "anon_inode:", strlen("anon_inode:")))
			continue;
		if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3))
			continue;
		if (S_ISFIFO(st.st_mode) && strneq(target, "pipe:", strlen("pipe:"))) {
			size_t i = 0;

			while (i < n_pipes && pipes[i].ino != st.st_ino)
				i++;
			if (i == ELEMENTSOF(pipes)) {
				r = -E2BIG;
				break;
			}
			if (i == n_pipes)
				pipes[n_pipes++] = (typeof(pipes[0])){.ino = st.st_ino};
			pipes[i].modes |= (fl & O_ACCMODE) == O_RDONLY	 ? 1
					  : (fl & O_ACCMODE) == O_WRONLY ? 2
									 : 3;
			continue;
		}
		*reterr = format("descriptor %d (%s) is open in the runtime", fd,
				 target[0] ? target : "?");
		r = -EBADF;
	}
	closedir(d);
	for (size_t i = 0; r >= 0 && i < n_pipes; i++)
		if (pipes[i].modes != 3) {
			*reterr = format("the runtime holds one end only of pipe:[%lu]",
					 (unsigned long)pipes[i].ino);
			r = -EBADF;
		}
	return r;
}

static bool have_setpcap(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};

	return syscall(SYS_capget, &h, d) == 0 && (d[0].effective & (1U << CAP_SETPCAP));
}

static int capability_last(void)
{
	int cap = 0;

	while (cap < 64 && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0)
		cap++;
	return cap - 1;
}

/* The policy file through the one reader (policy.h): every field checked. */
static int load_policy(const char *path, CapabilityPolicy **ret, char **reterr_message)
{
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r;

	*reterr_message = NULL;
	r = read_full_file(path, POLICY_FILE_SIZE_MAX, &text, &len);
	if (r < 0)
		return r;
	return capability_policy_decode(text, len, ret, reterr_message);
}

static char *join(const PolicyStrings *a, const char *empty)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		return NULL;
	for (size_t i = 0; i < a->n; i++) {
		_cleanup_free_ char *s = printable(a->v[i]);

		fprintf(f, "%s%s", i > 0 ? ", " : "", s ?: "?");
	}
	if (a->n == 0)
		fputs(empty, f);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static char *capabilities_lines(const Confinement *c)
{
	_cleanup_free_ char *audit = audit_capabilities_dropped(c->boot_id, c->app, true, c->now);

	if (!audit)
		return NULL;
	return format(
		"[agent-init] capabilities: bounding set emptied, inheritable and ambient cleared — none survives the exec\n%s",
		audit);
}

static char *identity_lines(const Confinement *c)
{
	_cleanup_free_ char *groups = NULL, *audit = NULL;
	size_t size = 0;
	FILE *f;

	if (!c->id.set)
		return audit_app_uid(c->boot_id, c->app, 0, 0, false,
				     "no BERTH_APP_UID — running as root", c->now);
	f = open_memstream(&groups, &size);
	if (!f)
		return NULL;
	for (size_t i = 0; i < c->id.n_supplementary; i++)
		fprintf(f, "%s%u", i > 0 ? ", " : "", c->id.supplementary[i]);
	if (fclose(f) != 0)
		return NULL;
	audit = audit_app_uid(c->boot_id, c->app, c->id.uid, c->id.gid, true, "irreversible",
			      c->now);
	if (!audit)
		return NULL;
	return format(
		"[agent-init] running \"%s\" as uid %u (gid %u, supplementary [%s]) — no longer root\n%s",
		c->app, c->id.uid, c->id.gid, groups, audit);
}

static char *landlock_lines(const Confinement *c, const CapabilityPolicy *p, const Ruleset *rs)
{
	const char *status = ruleset_status_to_string(rs->status);
	_cleanup_free_ char *granted = join(&rs->granted_write, "(nothing)"),
			    *declared = p ? join(&p->declared, "none") : NULL, *human = NULL,
			    *audit = p ? audit_policy_applied(c->boot_id, p, rs->status, c->now)
				       : strdup("");

	if (!granted || !audit || (p && !declared))
		return NULL;
	if (rs->status == RULESET_NOT_ENFORCED)
		human = format(
			"[agent-init] NOT RESTRICTED \"%s\" — %s; the declared capabilities are recorded but not enforced (declared capabilities: %s)\n",
			c->app,
			p ? "this kernel cannot apply a Landlock ruleset (Landlock ABI 0)"
			  : "no capability policy was applied",
			declared ?: "unknown");
	else
		human = format(
			"[agent-init] restricted \"%s\" (%s) — write access allowed only under: %s (declared capabilities: %s)\n",
			c->app, status, granted, declared);
	if (!human)
		return NULL;
	return format(
		"[agent-init] landlock restrict_self() status: ruleset=%s no_new_privs=true\n%s%s",
		status, human, audit);
}

static char *seccomp_base_lines(const Confinement *c)
{
	/* The event keeps its SPEC name; the detail says the filter is the allow list. */
	_cleanup_free_ char *audit =
		audit_seccomp("namespace_seccomp_filter", c->boot_id, c->app, true,
			      "syscall_allow_list,new_namespaces_denied", c->now);

	if (!audit)
		return NULL;
	return format(
		"[agent-init] seccomp: system call allow list on for \"%s\" — anything else ENOSYS; new namespaces, ptrace, bpf, keyrings, modules, mounts, kexec, perf_event_open, userfaultfd and sockets but unix, IPv4/IPv6 and netlink route refused\n%s",
		c->app, audit);
}

static char *seccomp_datagram_lines(const Confinement *c, bool have_policy)
{
	_cleanup_free_ char *audit = NULL;

	if (!c->filters.datagram.insns)
		return audit_seccomp(
			"network_seccomp_filter", c->boot_id, c->app, false,
			have_policy
				? "network capability declared — datagram sockets left open for DNS"
				: "no capability policy — datagram sockets left open",
			c->now);
	audit = audit_seccomp("network_seccomp_filter", c->boot_id, c->app, true,
			      "udp_and_raw_sockets_denied", c->now);
	if (!audit)
		return NULL;
	return format(
		"[agent-init] no network capability declared — UDP and raw sockets refused by seccomp for \"%s\"\n%s",
		c->app, audit);
}

/* Policy and Landlock. Returns the status; refuses (exits) where SPEC 4.5.1 says so. */
static void prepare_landlock(Confinement *c, bool required, CapabilityPolicy **pp, Ruleset *rs)
{
	const char *path = getenv("BERTH_CAPABILITY_POLICY") ?: DEFAULT_POLICY_PATH;
	_cleanup_free_ char *err = NULL, *reason = NULL, *ppath = printable(path);
	int r;

	r = load_policy(path, pp, &err);
	if (r >= 0) {
		c->app = (*pp)->app_name;
		r = ruleset_build(*pp, &c->id, ruleset_abi(), rs, &err);
	}
	if (r < 0) {
		reason = format("could not apply capability policy from %s (%s)", ppath ?: "?",
				err ?: strerror(-r));
		if (required)
			refuse(c->app, c->now, true, reason);
		say("WARNING: %s — continuing unrestricted.", reason ?: "out of memory");
		*pp = capability_policy_free(*pp);
		c->app = "unknown";
		*rs = (Ruleset){.fd = -EBADF, .status = RULESET_NOT_ENFORCED};
		return;
	}
	if (rs->missing)
		say("Landlock ABI %d cannot handle %s, which \"%s\" needs: the ruleset is PartiallyEnforced",
		    rs->abi, rs->missing, c->app);
	if (rs->abi > 0 && !rs->scoped)
		say("Landlock ABI %d has no IPC scoping: abstract unix sockets and signals of other domains stay reachable",
		    rs->abi);
	if (required && rs->status != RULESET_FULLY_ENFORCED) {
		free(reason);
		reason = format("landlock ruleset status was %s, not FullyEnforced%s%s%s",
				ruleset_status_to_string(rs->status),
				rs->missing ? " (this kernel cannot handle " : "",
				rs->missing ?: "", rs->missing ? ")" : "");
		refuse(c->app, c->now, true, reason);
	}
	c->ruleset_fd = rs->fd;
}

int agent_init_run(int argc, char *argv[], AgentInitMode confine_mode)
{
	bool required = enforcement_required(getenv("BERTH_REQUIRE_ENFORCEMENT"));
	_cleanup_free_ char *boot_id = printable(getenv("BERTH_BOOT_ID") ?: "unknown");
	Confinement c = {.app = "unknown", .now = (int64_t)time(NULL), .ruleset_fd = -EBADF};
	_cleanup_(capability_policy_freep) CapabilityPolicy *policy = NULL;
	_cleanup_(ruleset_done) Ruleset rs = {.fd = -EBADF};
	bool have_policy, no_network;
	int r;

	mode = confine_mode;
	in_place = mode != AGENT_INIT_EXEC;
	if (argc < 2 && !in_place) {
		fputs("[agent-init] usage: agent-init <command> [args...]\n", stderr);
		return EXIT_FAILURE;
	}
	c.argv = argv + 1;
	c.boot_id = boot_id ?: "unknown";
	take_report_fd();
	take_listen_fd();
	app_identity_parse(getenv("BERTH_APP_UID"), getenv("BERTH_APP_GID"),
			   getenv("BERTH_APP_SUPPLEMENTARY_GIDS"), &c.id);
	/* Fail closed: an identity that is missing or does not parse means "stay root" only
	 * where nothing asked for enforcement. */
	if (required && !c.id.set)
		refuse(c.app, c.now, true,
		       "BERTH_APP_UID or BERTH_APP_GID is missing or not a valid id (not 0), so the "
		       "app would run as root");
	if (!have_setpcap())
		refuse(c.app, c.now, false,
		       "agent-init must run as root (it needs CAP_SETPCAP to empty the capability bounding set)");

	prepare_landlock(&c, required, &policy, &rs);
	have_policy = policy != NULL;
	no_network = have_policy && !policy->network_unrestricted && policy->network_ports.n == 0;
	r = filters_build(have_policy && !policy->network_unrestricted, no_network, &c.filters);
	if (r < 0) {
		_cleanup_free_ char *reason =
			format("could not build the seccomp filters (%s)", strerror(-r));
		refuse(c.app, c.now, required, reason);
	}
	c.cap_last = capability_last();
	/* In place, only the uid change clears the effective and permitted capabilities the
	 * runtime holds (an exec would have dropped them): no identity, no confinement. */
	if (in_place && !c.id.set)
		refuse(c.app, c.now, true,
		       "BERTH_APP_UID or BERTH_APP_GID is missing or not a valid id (not 0), and a "
		       "runtime confined in place would keep root's capabilities");
	if (mode == AGENT_INIT_IN_PLACE_EVENT_LOOP) {
		_cleanup_free_ char *err = NULL;

		r = check_event_loop_fds(&err);
		if (r < 0) {
			_cleanup_free_ char *reason = format(
				"cannot confine the runtime in place: %s", err ?: strerror(-r));
			refuse(c.app, c.now, true, reason);
		}
	}
	r = in_place ? 0 : resolve_command(argv[1], &c.exec_path);
	if (r < 0) {
		say("failed to exec \"%s\": %s", argv[1], strerror(-r));
		return EXIT_FAILURE;
	}

	c.caps_lines = capabilities_lines(&c);
	c.uid_lines = identity_lines(&c);
	c.landlock_lines = landlock_lines(&c, policy, &rs);
	c.seccomp_base_lines = seccomp_base_lines(&c);
	c.seccomp_datagram_lines = seccomp_datagram_lines(&c, have_policy);
	if (!c.caps_lines || !c.uid_lines || !c.landlock_lines || !c.seccomp_base_lines ||
	    !c.seccomp_datagram_lines)
		refuse(c.app, c.now, required, "out of memory");
	fflush(stderr);
	confine_and_exec(&c);
	return EXIT_SUCCESS;
}

#ifndef AGENT_INIT_LIBRARY
int main(int argc, char *argv[])
{
	return agent_init_run(argc, argv, AGENT_INIT_EXEC);
}
#endif
