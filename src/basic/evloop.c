/* SPDX-License-Identifier: Apache-2.0 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/pidfd.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evloop.h"
#include "log.h"

#define EV_EVENTS_MAX 64

typedef enum EvSourceType {
	EV_SOURCE_IO,
	EV_SOURCE_TIME,
	EV_SOURCE_SIGNAL,
	EV_SOURCE_CHILD,
	EV_SOURCE_DEFER,
	EV_SOURCE_POST,
	EV_SOURCE_SIGNALFD, /* the loop's own signalfd watch */
} EvSourceType;

struct EvSource {
	EvLoop *loop;
	EvSourceType type;
	int enabled;
	bool dead;
	bool in_epoll;
	void *userdata;
	EvSource *prev, *next; /* e->sources, in creation order */
	union {
		struct {
			int fd;
			uint32_t events;
			bool own;
			ev_io_handler_t cb;
		} io;
		struct {
			uint64_t usec;
			size_t heap_idx; /* SIZE_MAX when not in the heap */
			bool pending;
			ev_time_handler_t cb;
		} time;
		struct {
			int sig;
			ev_signal_handler_t cb;
		} signal;
		struct {
			int pidfd;
			pid_t pid;
			bool reaped;
			ev_child_handler_t cb;
		} child;
		struct {
			ev_handler_t cb;
		} plain;
	};
};

struct EvLoop {
	int epoll_fd;
	int signal_fd;
	sigset_t sigmask;
	EvSource *signal_watch;
	EvSource *signal_sources[_NSIG];
	EvSource *sources, *sources_tail;
	EvSource **heap;
	size_t n_heap, heap_alloc;
	EvSource **due; /* scratch for dispatch_timers() */
	size_t due_alloc;
	unsigned n_defer_enabled;
	bool dispatching;
	bool need_gc;
	bool exiting;
	int exit_code;
	uint64_t now;
};

uint64_t ev_time_now(void)
{
	return now_usec();
}

/* ---- timer heap ---- */

static bool heap_less(EvSource *a, EvSource *b)
{
	return a->time.usec < b->time.usec;
}

static void heap_swap(EvLoop *e, size_t a, size_t b)
{
	EvSource *t = e->heap[a];

	e->heap[a] = e->heap[b];
	e->heap[b] = t;
	e->heap[a]->time.heap_idx = a;
	e->heap[b]->time.heap_idx = b;
}

static void heap_fix(EvLoop *e, size_t i)
{
	while (i > 0 && heap_less(e->heap[i], e->heap[(i - 1) / 2])) {
		heap_swap(e, i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < e->n_heap && heap_less(e->heap[l], e->heap[m]))
			m = l;
		if (r < e->n_heap && heap_less(e->heap[r], e->heap[m]))
			m = r;
		if (m == i)
			return;
		heap_swap(e, i, m);
		i = m;
	}
}

static int heap_push(EvLoop *e, EvSource *s)
{
	if (e->n_heap == e->heap_alloc) {
		size_t n = e->heap_alloc ? e->heap_alloc * 2 : 16;
		EvSource **h = reallocarray(e->heap, n, sizeof(*h));

		if (!h)
			return -ENOMEM;
		e->heap = h;
		e->heap_alloc = n;
	}
	e->heap[e->n_heap] = s;
	s->time.heap_idx = e->n_heap++;
	heap_fix(e, s->time.heap_idx);
	return 0;
}

static void heap_remove(EvLoop *e, EvSource *s)
{
	size_t i = s->time.heap_idx;

	if (i == SIZE_MAX)
		return;
	s->time.heap_idx = SIZE_MAX;
	if (i != --e->n_heap) {
		e->heap[i] = e->heap[e->n_heap];
		e->heap[i]->time.heap_idx = i;
		heap_fix(e, i);
	}
}

/* ---- arming and disarming ---- */

static int source_epoll_fd(EvSource *s)
{
	switch (s->type) {
	case EV_SOURCE_IO:
		return s->io.fd;
	case EV_SOURCE_CHILD:
		return s->child.pidfd;
	case EV_SOURCE_SIGNALFD:
		return s->loop->signal_fd;
	case EV_SOURCE_TIME:
	case EV_SOURCE_SIGNAL:
	case EV_SOURCE_DEFER:
	case EV_SOURCE_POST:
		break;
	}
	return -EBADF;
}

static uint32_t source_epoll_events(EvSource *s)
{
	return s->type == EV_SOURCE_IO ? s->io.events : EPOLLIN;
}

/* Bring the kernel- and heap-side state in line with s->enabled. */
static int source_arm(EvSource *s, bool on)
{
	EvLoop *e = s->loop;

	switch (s->type) {
	case EV_SOURCE_IO:
	case EV_SOURCE_CHILD:
	case EV_SOURCE_SIGNALFD: {
		struct epoll_event ev = {.events = source_epoll_events(s), .data.ptr = s};
		int fd = source_epoll_fd(s);

		/* A disabled fd must leave the epoll set: EPOLLHUP/EPOLLERR are reported even
		 * with an empty event mask and would spin the loop. */
		if (on && !s->in_epoll) {
			if (epoll_ctl(e->epoll_fd, EPOLL_CTL_ADD, fd, &ev) < 0)
				return -errno;
			s->in_epoll = true;
		} else if (!on && s->in_epoll) {
			/* The fd may already be closed by its owner; nothing to undo then. */
			(void)epoll_ctl(e->epoll_fd, EPOLL_CTL_DEL, fd, NULL);
			s->in_epoll = false;
		}
		return 0;
	}
	case EV_SOURCE_TIME:
		if (on && s->time.heap_idx == SIZE_MAX)
			return heap_push(e, s);
		if (!on)
			heap_remove(e, s);
		return 0;
	case EV_SOURCE_DEFER:
	case EV_SOURCE_SIGNAL:
	case EV_SOURCE_POST:
		return 0;
	}
	return 0;
}

int ev_source_set_enabled(EvSource *s, int enabled)
{
	bool was, on;
	int r;

	if (!s || s->dead || enabled < EV_ONESHOT || enabled > EV_ON)
		return -EINVAL;
	if (s->type == EV_SOURCE_CHILD && s->child.reaped && enabled != EV_OFF)
		return -ESRCH;
	was = s->enabled != EV_OFF;
	on = enabled != EV_OFF;
	r = source_arm(s, on);
	if (r < 0)
		return r;
	if (s->type == EV_SOURCE_DEFER && was != on) {
		if (on)
			s->loop->n_defer_enabled++;
		else
			s->loop->n_defer_enabled--;
	}
	s->enabled = enabled;
	return 0;
}

int ev_source_get_enabled(EvSource *s)
{
	return s ? s->enabled : -EINVAL;
}

/* ---- creation and destruction ---- */

static EvSource *source_new(EvLoop *e, EvSourceType type, void *userdata)
{
	EvSource *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->loop = e;
	s->type = type;
	s->userdata = userdata;
	s->prev = e->sources_tail;
	if (e->sources_tail)
		e->sources_tail->next = s;
	else
		e->sources = s;
	e->sources_tail = s;
	return s;
}

static void source_unlink_and_free(EvSource *s)
{
	EvLoop *e = s->loop;

	if (s->prev)
		s->prev->next = s->next;
	else
		e->sources = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		e->sources_tail = s->prev;
	free(s);
}

static void signal_mask_update(EvLoop *e)
{
	/* Updating an existing signalfd's mask cannot fail with a valid fd and mask. */
	if (e->signal_fd >= 0)
		(void)signalfd(e->signal_fd, &e->sigmask, SFD_NONBLOCK | SFD_CLOEXEC);
}

/* Disarm @s and drop every resource it holds, but keep the struct (a dispatch in progress
 * may still look at it). */
static void source_disconnect(EvSource *s)
{
	EvLoop *e = s->loop;

	if (s->enabled != EV_OFF)
		(void)ev_source_set_enabled(s, EV_OFF);
	s->dead = true;
	switch (s->type) {
	case EV_SOURCE_IO:
		if (s->io.own)
			s->io.fd = safe_close(s->io.fd);
		break;
	case EV_SOURCE_CHILD:
		s->child.pidfd = safe_close(s->child.pidfd);
		break;
	case EV_SOURCE_SIGNAL:
		e->signal_sources[s->signal.sig] = NULL;
		sigdelset(&e->sigmask, s->signal.sig);
		signal_mask_update(e);
		break;
	case EV_SOURCE_TIME:
		s->time.pending = false;
		break;
	case EV_SOURCE_SIGNALFD:
	case EV_SOURCE_DEFER:
	case EV_SOURCE_POST:
		break;
	}
}

EvSource *ev_source_free(EvSource *s)
{
	if (!s || s->dead)
		return NULL;
	source_disconnect(s);
	if (s->loop->dispatching)
		s->loop->need_gc = true;
	else
		source_unlink_and_free(s);
	return NULL;
}

static void loop_gc(EvLoop *e)
{
	EvSource *s, *next;

	if (!e->need_gc)
		return;
	e->need_gc = false;
	for (s = e->sources; s; s = next) {
		next = s->next;
		if (s->dead)
			source_unlink_and_free(s);
	}
}

int ev_loop_new(EvLoop **ret)
{
	EvLoop *e;

	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->signal_fd = -EBADF;
	sigemptyset(&e->sigmask);
	e->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (e->epoll_fd < 0) {
		int r = -errno;

		free(e);
		return r;
	}
	e->now = ev_time_now();
	*ret = e;
	return 0;
}

EvLoop *ev_loop_free(EvLoop *e)
{
	if (!e)
		return NULL;
	assert(!e->dispatching);
	while (e->sources) {
		EvSource *s = e->sources;

		if (!s->dead)
			source_disconnect(s);
		source_unlink_and_free(s);
	}
	safe_close(e->signal_fd);
	safe_close(e->epoll_fd);
	free(e->heap);
	free(e->due);
	free(e);
	return NULL;
}

static int source_finish_add(EvSource *s, int enabled, EvSource **ret)
{
	int r = ev_source_set_enabled(s, enabled);

	if (r < 0) {
		/* Never close a caller's fd on failure. */
		if (s->type == EV_SOURCE_IO)
			s->io.own = false;
		else if (s->type == EV_SOURCE_CHILD)
			s->child.pidfd = -EBADF;
		source_disconnect(s);
		source_unlink_and_free(s);
		return r;
	}
	if (ret)
		*ret = s;
	return 0;
}

int ev_add_io(EvLoop *e, EvSource **ret, int fd, uint32_t events, ev_io_handler_t cb,
	      void *userdata)
{
	EvSource *s;

	if (!e || fd < 0 || !cb)
		return -EINVAL;
	s = source_new(e, EV_SOURCE_IO, userdata);
	if (!s)
		return -ENOMEM;
	s->io.fd = fd;
	s->io.events = events;
	s->io.cb = cb;
	return source_finish_add(s, EV_ON, ret);
}

int ev_add_time(EvLoop *e, EvSource **ret, uint64_t usec, ev_time_handler_t cb, void *userdata)
{
	EvSource *s;

	if (!e || !cb)
		return -EINVAL;
	s = source_new(e, EV_SOURCE_TIME, userdata);
	if (!s)
		return -ENOMEM;
	s->time.usec = usec;
	s->time.heap_idx = SIZE_MAX;
	s->time.cb = cb;
	return source_finish_add(s, EV_ONESHOT, ret);
}

int ev_add_time_relative(EvLoop *e, EvSource **ret, uint64_t usec, ev_time_handler_t cb,
			 void *userdata)
{
	uint64_t now = ev_time_now();

	return ev_add_time(e, ret, usec > UINT64_MAX - now ? UINT64_MAX : now + usec, cb, userdata);
}

static int loop_ensure_signalfd(EvLoop *e)
{
	EvSource *w;

	if (e->signal_fd >= 0)
		return 0;
	e->signal_fd = signalfd(-1, &e->sigmask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (e->signal_fd < 0)
		return -errno;
	w = source_new(e, EV_SOURCE_SIGNALFD, NULL);
	if (!w)
		return -ENOMEM;
	e->signal_watch = w;
	return ev_source_set_enabled(w, EV_ON);
}

int ev_add_signal(EvLoop *e, EvSource **ret, int sig, ev_signal_handler_t cb, void *userdata)
{
	sigset_t one;
	EvSource *s;
	int r;

	if (!e || !cb || sig <= 0 || sig >= _NSIG || sig == SIGKILL || sig == SIGSTOP)
		return -EINVAL;
	if (e->signal_sources[sig])
		return -EBUSY;
	sigemptyset(&one);
	sigaddset(&one, sig);
	if (sigprocmask(SIG_BLOCK, &one, NULL) < 0)
		return -errno;
	sigaddset(&e->sigmask, sig);
	r = loop_ensure_signalfd(e);
	if (r < 0) {
		sigdelset(&e->sigmask, sig);
		return r;
	}
	signal_mask_update(e);
	s = source_new(e, EV_SOURCE_SIGNAL, userdata);
	if (!s) {
		sigdelset(&e->sigmask, sig);
		signal_mask_update(e);
		return -ENOMEM;
	}
	s->signal.sig = sig;
	s->signal.cb = cb;
	e->signal_sources[sig] = s;
	return source_finish_add(s, EV_ON, ret);
}

int ev_add_child_pidfd(EvLoop *e, EvSource **ret, int pidfd, ev_child_handler_t cb, void *userdata)
{
	EvSource *s;
	int r;

	if (!e || pidfd < 0 || !cb)
		return -EINVAL;
	s = source_new(e, EV_SOURCE_CHILD, userdata);
	if (!s)
		return -ENOMEM;
	s->child.pidfd = pidfd;
	s->child.pid = -1;
	s->child.cb = cb;
	r = source_finish_add(s, EV_ONESHOT, ret);
	return r;
}

int ev_add_child(EvLoop *e, EvSource **ret, pid_t pid, ev_child_handler_t cb, void *userdata)
{
	EvSource *s = NULL;
	int fd, r;

	if (pid <= 0)
		return -EINVAL;
	fd = pidfd_open(pid, 0);
	if (fd < 0)
		return -errno;
	r = ev_add_child_pidfd(e, &s, fd, cb, userdata);
	if (r < 0) {
		safe_close(fd);
		return r;
	}
	s->child.pid = pid;
	if (ret)
		*ret = s;
	return 0;
}

static int add_plain(EvLoop *e, EvSource **ret, EvSourceType type, int enabled, ev_handler_t cb,
		     void *userdata)
{
	EvSource *s;

	if (!e || !cb)
		return -EINVAL;
	s = source_new(e, type, userdata);
	if (!s)
		return -ENOMEM;
	s->plain.cb = cb;
	return source_finish_add(s, enabled, ret);
}

int ev_add_defer(EvLoop *e, EvSource **ret, ev_handler_t cb, void *userdata)
{
	return add_plain(e, ret, EV_SOURCE_DEFER, EV_ONESHOT, cb, userdata);
}

int ev_add_post(EvLoop *e, EvSource **ret, ev_handler_t cb, void *userdata)
{
	return add_plain(e, ret, EV_SOURCE_POST, EV_ON, cb, userdata);
}

/* ---- accessors ---- */

EvLoop *ev_source_get_loop(EvSource *s)
{
	return s ? s->loop : NULL;
}

int ev_source_set_io_events(EvSource *s, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = s};

	if (!s || s->dead || s->type != EV_SOURCE_IO)
		return -EINVAL;
	if (s->io.events == events)
		return 0;
	if (s->in_epoll && epoll_ctl(s->loop->epoll_fd, EPOLL_CTL_MOD, s->io.fd, &ev) < 0)
		return -errno;
	s->io.events = events;
	return 0;
}

int ev_source_set_io_fd_own(EvSource *s, bool own)
{
	if (!s || s->dead || s->type != EV_SOURCE_IO)
		return -EINVAL;
	s->io.own = own;
	return 0;
}

static int ev_source_set_time(EvSource *s, uint64_t usec)
{
	if (!s || s->dead || s->type != EV_SOURCE_TIME)
		return -EINVAL;
	s->time.usec = usec;
	if (s->time.pending) {
		/* Due in the current iteration but not dispatched yet: the new deadline wins. */
		s->time.pending = false;
		if (s->enabled != EV_OFF && s->time.heap_idx == SIZE_MAX)
			return heap_push(s->loop, s);
	}
	if (s->time.heap_idx != SIZE_MAX)
		heap_fix(s->loop, s->time.heap_idx);
	return 0;
}

int ev_source_set_time_relative(EvSource *s, uint64_t usec)
{
	uint64_t now = ev_time_now();

	return ev_source_set_time(s, usec > UINT64_MAX - now ? UINT64_MAX : now + usec);
}

pid_t ev_source_get_child_pid(EvSource *s)
{
	if (!s || s->type != EV_SOURCE_CHILD)
		return -EINVAL;
	if (s->child.reaped)
		return -ESRCH;
	return s->child.pid;
}

int ev_source_send_child_signal(EvSource *s, int sig)
{
	if (!s || s->type != EV_SOURCE_CHILD)
		return -EINVAL;
	if (s->child.reaped || s->child.pidfd < 0)
		return -ESRCH;
	return RET_NERRNO(pidfd_send_signal(s->child.pidfd, sig, NULL, 0));
}

int ev_exit(EvLoop *e, int code)
{
	if (!e)
		return -EINVAL;
	e->exiting = true;
	e->exit_code = code;
	return 0;
}

bool ev_is_exiting(EvLoop *e)
{
	return e && e->exiting;
}

/* ---- dispatch ---- */

/* Run a callback with sd-event's rules: oneshot sources are off before the call, and an
 * error disables the source. */
static void source_dispatch(EvSource *s, const void *arg, uint32_t revents)
{
	int r = 0;

	if (s->enabled == EV_ONESHOT)
		(void)ev_source_set_enabled(s, EV_OFF);
	switch (s->type) {
	case EV_SOURCE_IO:
		r = s->io.cb(s, s->io.fd, revents, s->userdata);
		break;
	case EV_SOURCE_TIME:
		r = s->time.cb(s, s->time.usec, s->userdata);
		break;
	case EV_SOURCE_SIGNAL:
		r = s->signal.cb(s, arg, s->userdata);
		break;
	case EV_SOURCE_CHILD:
		r = s->child.cb(s, arg, s->userdata);
		break;
	case EV_SOURCE_DEFER:
	case EV_SOURCE_POST:
		r = s->plain.cb(s, s->userdata);
		break;
	case EV_SOURCE_SIGNALFD:
		break;
	}
	if (r < 0 && !s->dead) {
		log_debug_errno(r, "Event source callback failed, disabling source: %m");
		(void)ev_source_set_enabled(s, EV_OFF);
	}
}

static int dispatch_signalfd(EvLoop *e)
{
	struct signalfd_siginfo si;
	int n = 0;

	for (;;) {
		ssize_t k = read(e->signal_fd, &si, sizeof(si));
		EvSource *s;

		if (k < 0 && errno == EINTR)
			continue;
		if (k != (ssize_t)sizeof(si))
			break;
		if (si.ssi_signo >= _NSIG)
			continue;
		s = e->signal_sources[si.ssi_signo];
		if (s && !s->dead && s->enabled != EV_OFF) {
			source_dispatch(s, &si, 0);
			n++;
		}
	}
	return n;
}

static int dispatch_child(EvSource *s)
{
	siginfo_t si = {};

	if (waitid(P_PIDFD, (id_t)s->child.pidfd, &si, WEXITED | WNOHANG) < 0) {
		int r = -errno;

		if (r == -EINTR)
			return 0;
		/* ECHILD: reaped by someone else first (a waitpid(-1) reaper in PID 1 can win
		 * the race) or never our child. The pidfd stays readable, so the source must
		 * go; the callback learns of the exit with si_code 0 (status unknown). */
		if (r != -ECHILD)
			log_debug_errno(r, "waitid(P_PIDFD) failed: %m");
		si = (siginfo_t){.si_signo = SIGCHLD, .si_code = 0};
		si.si_pid = s->child.pid > 0 ? s->child.pid : 0;
	} else if (si.si_pid == 0)
		return 0; /* spurious wakeup */
	s->child.reaped = true;
	if (s->child.pid <= 0)
		s->child.pid = si.si_pid;
	/* The pidfd stays readable once the child is gone; take it out of the set. */
	if (s->enabled == EV_ON)
		s->enabled = EV_ONESHOT;
	source_dispatch(s, &si, 0);
	if (!s->dead && s->enabled != EV_OFF)
		(void)ev_source_set_enabled(s, EV_OFF);
	return 1;
}

static int loop_timeout_ms(EvLoop *e, uint64_t timeout_usec)
{
	uint64_t now, wait = timeout_usec;

	if (e->n_defer_enabled > 0 || e->exiting)
		return 0;
	if (e->n_heap > 0) {
		now = ev_time_now();
		wait = e->heap[0]->time.usec <= now ? 0 : MIN(wait, e->heap[0]->time.usec - now);
	}
	if (wait == EV_USEC_INFINITY)
		return -1;
	/* Round up: waking early would just spin until the deadline. */
	wait = (wait + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
	return wait > INT32_MAX ? INT32_MAX : (int)wait;
}

static int dispatch_timers(EvLoop *e)
{
	size_t n_due = 0;
	int n = 0;

	/* Take every due timer out of the heap first, in deadline order, so a callback that
	 * re-arms a timer at or before "now" runs it on the next iteration instead of looping
	 * here. */
	while (e->n_heap > 0 && e->heap[0]->time.usec <= e->now) {
		EvSource *s = e->heap[0];

		if (n_due == e->due_alloc) {
			size_t k = e->due_alloc ? e->due_alloc * 2 : 16;
			EvSource **d = reallocarray(e->due, k, sizeof(*d));

			if (!d)
				break; /* the rest stay in the heap for the next iteration */
			e->due = d;
			e->due_alloc = k;
		}
		heap_remove(e, s);
		s->time.pending = true;
		e->due[n_due++] = s;
	}
	for (size_t i = 0; i < n_due; i++) {
		EvSource *s = e->due[i];

		/* An earlier callback may have freed, disabled or re-armed it. */
		if (!s->time.pending)
			continue;
		s->time.pending = false;
		if (s->dead || s->enabled == EV_OFF)
			continue;
		if (s->enabled == EV_ON && s->time.heap_idx == SIZE_MAX) {
			/* An EV_ON timer stays armed with its old deadline until the callback
			 * moves it, as in sd-event. */
			(void)heap_push(e, s);
		}
		source_dispatch(s, NULL, 0);
		n++;
	}
	return n;
}

static int dispatch_plain(EvLoop *e, EvSourceType type)
{
	EvSource *s, *last = e->sources_tail;
	int n = 0;

	/* Sources added by these callbacks wait for the next iteration. */
	for (s = e->sources; s; s = s == last ? NULL : s->next) {
		if (s->type != type || s->dead || s->enabled == EV_OFF)
			continue;
		source_dispatch(s, NULL, 0);
		n++;
	}
	return n;
}

int ev_run(EvLoop *e, uint64_t timeout_usec)
{
	struct epoll_event events[EV_EVENTS_MAX];
	int n, dispatched = 0;

	if (!e || e->dispatching)
		return -EINVAL;
	n = epoll_wait(e->epoll_fd, events, EV_EVENTS_MAX, loop_timeout_ms(e, timeout_usec));
	if (n < 0) {
		if (errno != EINTR)
			return -errno;
		n = 0;
	}
	e->now = ev_time_now();
	e->dispatching = true;
	for (int i = 0; i < n; i++) {
		EvSource *s = events[i].data.ptr;

		/* A callback earlier in this batch may have freed or disabled @s. */
		if (s->dead || s->enabled == EV_OFF)
			continue;
		switch (s->type) {
		case EV_SOURCE_SIGNALFD:
			dispatched += dispatch_signalfd(e);
			break;
		case EV_SOURCE_CHILD:
			dispatched += dispatch_child(s);
			break;
		case EV_SOURCE_IO:
			source_dispatch(s, NULL, events[i].events);
			dispatched++;
			break;
		case EV_SOURCE_TIME:
		case EV_SOURCE_SIGNAL:
		case EV_SOURCE_DEFER:
		case EV_SOURCE_POST:
			break;
		}
	}
	dispatched += dispatch_timers(e);
	dispatched += dispatch_plain(e, EV_SOURCE_DEFER);
	if (dispatched > 0)
		(void)dispatch_plain(e, EV_SOURCE_POST);
	e->dispatching = false;
	loop_gc(e);
	return dispatched > 0;
}

int ev_loop(EvLoop *e)
{
	if (!e)
		return -EINVAL;
	while (!e->exiting) {
		int r = ev_run(e, EV_USEC_INFINITY);

		if (r < 0)
			return r;
	}
	/* Consumed: a later ev_loop() runs again until the next ev_exit(). */
	e->exiting = false;
	return e->exit_code;
}
