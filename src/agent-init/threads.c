/* SPDX-License-Identifier: Apache-2.0 */
/* Confining every thread of a running process (threads.h). */
#include <dirent.h>
#include <errno.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "macros.h"
#include "missing-landlock.h"
#include "threads.h"

/*
 * glibc's SIGSETXID (__SIGRTMIN + 1), on which it has every thread change its own ids. No
 * thread can block it through glibc (pthread_sigmask() leaves it out), so it reaches even
 * a thread that blocks everything else, as Node's inspector watchdog does. glibc only uses
 * it inside setuid() and its kin, which no thread calls while this runs, and its handler
 * (if any) is put back afterwards.
 */
#define SIG_CONFINE 33
#define THREADS_MAX 256
#define ACK_TIMEOUT_MSEC (10 * 1000)

/* The kernel's struct sigaction: glibc's sigaction() refuses SIG_CONFINE, so it is set with
 * the system call itself. */
struct kernel_sigaction {
	void (*handler)(int, siginfo_t *, void *);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};
#define KERNEL_SA_RESTORER 0x04000000

#if defined(__x86_64__)
/* On x86-64 a handler returns through a restorer the caller provides; glibc's is private,
 * so this is one that does what it does: rt_sigreturn. */
void confine_restore_rt(void);
__asm__(".pushsection .text\n"
	".hidden confine_restore_rt\n"
	".type confine_restore_rt,@function\n"
	"confine_restore_rt:\n"
	"\tmovq $15, %rax\n" /* __NR_rt_sigreturn */
	"\tsyscall\n"
	".size confine_restore_rt, .-confine_restore_rt\n"
	".popsection\n");
#else
#error "threads.c needs a signal restorer for this architecture"
#endif

/* What the handler runs, and what each thread it ran in reported. */
static struct {
	const ThreadSteps *steps;
	atomic_int n;
	struct {
		atomic_int tid; /* 0 until the rest is written */
		int error;
		Step step;
	} done[THREADS_MAX];
} acks;

static int fail(ThreadFailure *f, Step step)
{
	f->step = step;
	f->error = errno;
	f->tid = (pid_t)syscall(SYS_gettid);
	return -f->error;
}

int thread_confine_self(const ThreadSteps *s, ThreadFailure *f)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3] = {};
	const AppIdentity *id = s->id;

	/* The bounding set first: emptying it needs CAP_SETPCAP, which the uid change takes. */
	for (int cap = 0; cap <= s->cap_last; cap++)
		if (syscall(SYS_prctl, PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return fail(f, STEP_CAPABILITIES);
	if (syscall(SYS_prctl, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 ||
	    syscall(SYS_capget, &h, d) < 0)
		return fail(f, STEP_CAPABILITIES);
	for (size_t i = 0; i < ELEMENTSOF(d); i++)
		d[i].inheritable = 0;
	if (syscall(SYS_capset, &h, d) < 0)
		return fail(f, STEP_CAPABILITIES);
	/* Groups, gid, uid: each needs the privilege the next removes. */
	if (id->set && (syscall(SYS_setgroups, id->n_groups, id->groups) < 0 ||
			syscall(SYS_setresgid, id->gid, id->gid, id->gid) < 0 ||
			syscall(SYS_setresuid, id->uid, id->uid, id->uid) < 0))
		return fail(f, STEP_IDENTITY);
	if (syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail(f, STEP_NO_NEW_PRIVS);
	if (s->ruleset_fd >= 0 && missing_landlock_restrict_self(s->ruleset_fd, 0) < 0)
		return fail(f, STEP_LANDLOCK);
	return 0;
}

static void on_confine_signal(int sig, siginfo_t *si, void *ucontext)
{
	int saved = errno;
	ThreadFailure f = {};
	int r, i;

	/* Only what threads_confine_others() sent: a thread confines itself once. */
	if (si->si_code != SI_TKILL || si->si_pid != getpid()) {
		errno = saved;
		return;
	}
	r = thread_confine_self(acks.steps, &f);
	i = atomic_fetch_add(&acks.n, 1);
	if (i < THREADS_MAX) {
		acks.done[i].error = r < 0 ? f.error : 0;
		acks.done[i].step = f.step;
		atomic_store(&acks.done[i].tid, (int)syscall(SYS_gettid));
	}
	errno = saved;
}

static int set_handler(const struct kernel_sigaction *act, struct kernel_sigaction *old)
{
	return RET_NERRNO((int)syscall(SYS_rt_sigaction, SIG_CONFINE, act, old, sizeof(uint64_t)));
}

/* The threads of this process, the caller's included. */
static int list_threads(pid_t *tids, size_t *n)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int r = 0;

	*n = 0;
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.') {
			if (*n == THREADS_MAX) {
				r = -E2BIG;
				break;
			}
			tids[(*n)++] = (pid_t)atoi(de->d_name);
		}
	closedir(d);
	return r;
}

static bool contains(const pid_t *v, size_t n, pid_t x)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == x)
			return true;
	return false;
}

static bool acked(pid_t tid)
{
	int n = MIN(atomic_load(&acks.n), THREADS_MAX);

	for (int i = 0; i < n; i++)
		if (atomic_load(&acks.done[i].tid) == tid)
			return true;
	return false;
}

/* Until every thread signalled has confined itself, or has ended. */
static int wait_acks(const pid_t *sent, size_t n, pid_t pid)
{
	struct timespec pause = {.tv_nsec = 1000 * 1000};

	for (int waited = 0; waited < ACK_TIMEOUT_MSEC; waited++) {
		size_t pending = 0;

		for (size_t i = 0; i < n; i++)
			if (!acked(sent[i]) &&
			    !(syscall(SYS_tgkill, pid, sent[i], 0) < 0 && errno == ESRCH))
				pending++;
		if (pending == 0)
			return 0;
		nanosleep(&pause, NULL);
	}
	return -ETIMEDOUT;
}

/* One line of /proc/<tid>/status: the numbers after "Name:". */
static int status_numbers(const char *status, const char *name, int base, unsigned long long *v,
			  size_t n)
{
	const char *p = strstr(status, name);

	if (!p)
		return -ENODATA;
	p += strlen(name);
	for (size_t i = 0; i < n; i++) {
		char *end;

		errno = 0;
		v[i] = strtoull(p, &end, base);
		if (errno || end == p)
			return -EBADMSG;
		p = end;
	}
	return 0;
}

/* What a confined thread's status says: the app's ids, no capability, no_new_privs. */
static int check_thread(pid_t tid, const AppIdentity *id, char *why, size_t whylen)
{
	static const char *const caps[] = {
		"\nCapInh:", "\nCapPrm:", "\nCapEff:", "\nCapBnd:", "\nCapAmb:"};
	char path[64], status[4096];
	unsigned long long v[4], nnp;
	FILE *f;
	size_t len;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno; /* it ended */
	len = fread(status, 1, sizeof(status) - 1, f);
	fclose(f);
	status[len] = '\0';
	for (size_t i = 0; i < ELEMENTSOF(caps); i++)
		if (status_numbers(status, caps[i], 16, v, 1) < 0 || v[0] != 0) {
			snprintf(why, whylen, "thread %d still has capabilities (%s)", (int)tid,
				 caps[i] + 1);
			return -EPERM;
		}
	if (status_numbers(status, "\nNoNewPrivs:", 10, &nnp, 1) < 0 || nnp != 1) {
		snprintf(why, whylen, "thread %d has no no_new_privs", (int)tid);
		return -EPERM;
	}
	if (!id->set)
		return 0;
	if (status_numbers(status, "\nUid:", 10, v, 4) < 0 || v[0] != id->uid || v[1] != id->uid ||
	    v[2] != id->uid || v[3] != id->uid || status_numbers(status, "\nGid:", 10, v, 4) < 0 ||
	    v[0] != id->gid || v[1] != id->gid || v[2] != id->gid || v[3] != id->gid) {
		snprintf(why, whylen, "thread %d does not have the app's uid and gid", (int)tid);
		return -EPERM;
	}
	return 0;
}

int threads_confine_others(const ThreadSteps *s, ThreadFailure *f, char *why, size_t whylen)
{
	struct kernel_sigaction act = {.handler = on_confine_signal,
				       .flags = SA_SIGINFO | SA_RESTART | KERNEL_SA_RESTORER,
				       .restorer = confine_restore_rt,
				       .mask = ~(uint64_t)0},
				old;
	pid_t self = (pid_t)syscall(SYS_gettid), pid = getpid();
	pid_t sent[THREADS_MAX], tids[THREADS_MAX];
	size_t n_sent = 0, n;
	int r;

	*f = (ThreadFailure){.step = STEP_THREADS};
	why[0] = '\0';
	acks.steps = s;
	atomic_store(&acks.n, 0);
	r = set_handler(&act, &old);
	if (r < 0) {
		snprintf(why, whylen, "cannot handle signal %d: %s", SIG_CONFINE, strerror(-r));
		return r;
	}
	/* Signal every thread listed that was not yet, wait for them, and list again: a
	 * thread started by one not yet confined shows up in the next listing, and one started
	 * by a confined thread is confined from its start. Done when a listing has no new one. */
	for (;;) {
		size_t fresh = 0;

		r = list_threads(tids, &n);
		for (size_t i = 0; r >= 0 && i < n; i++) {
			if (tids[i] == self || contains(sent, n_sent, tids[i]))
				continue;
			if (n_sent == THREADS_MAX) {
				r = -E2BIG;
				break;
			}
			if (syscall(SYS_tgkill, pid, tids[i], SIG_CONFINE) < 0) {
				if (errno == ESRCH) /* it ended */
					continue;
				r = -errno;
				break;
			}
			sent[n_sent++] = tids[i];
			fresh++;
		}
		if (r < 0 || fresh == 0)
			break;
		r = wait_acks(sent, n_sent, pid);
		if (r < 0)
			break;
	}
	(void)set_handler(&old, NULL);
	if (r < 0) {
		snprintf(why, whylen, "%s: %s",
			 r == -E2BIG	   ? "more threads than agent-init confines"
			 : r == -ETIMEDOUT ? "a thread did not confine itself within 10 s"
					   : "cannot signal the runtime's threads",
			 strerror(-r));
		return r;
	}
	for (int i = 0; i < MIN(atomic_load(&acks.n), THREADS_MAX); i++)
		if (acks.done[i].error) {
			*f = (ThreadFailure){.step = acks.done[i].step,
					     .error = acks.done[i].error,
					     .tid = atomic_load(&acks.done[i].tid)};
			return -f->error;
		}
	/* What the handler said, read back from the kernel. */
	r = list_threads(tids, &n);
	for (size_t i = 0; r >= 0 && i < n; i++)
		if (tids[i] != self)
			r = check_thread(tids[i], s->id, why, whylen);
	if (r < 0 && !why[0])
		snprintf(why, whylen, "cannot read the threads' status: %s", strerror(-r));
	return r;
}
