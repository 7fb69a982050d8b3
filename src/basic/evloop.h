/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * A small single-threaded epoll event loop, modelled on sd-event.
 *
 * Sources: io (fd + epoll events), timers (CLOCK_MONOTONIC, microseconds, kept in a
 * min-heap; the epoll_wait() timeout wakes the loop), signals (one signalfd per loop),
 * children (pidfd, reaped with waitid(P_PIDFD)), defer (runs on every iteration while
 * enabled) and post (runs after any other source was dispatched in an iteration).
 *
 * Ownership: every source belongs to the loop. The EvSource pointer handed back is a
 * borrowed handle, valid until ev_source_free() or ev_loop_free(). Freeing a source is
 * allowed at any time, also from inside any callback (its own included): the source is
 * disarmed at once and its memory released at the end of the iteration, so a freed source
 * is never dispatched again.
 *
 * Enable states follow sd-event: EV_OFF, EV_ON (stays armed), EV_ONESHOT (switched to
 * EV_OFF right before its callback runs). Defaults: io, signal and post sources are EV_ON;
 * time, child and defer sources are EV_ONESHOT.
 *
 * A callback that returns a negative errno gets its source disabled (EV_OFF), as sd-event
 * does; the loop itself carries on.
 *
 * libc only, so it links into the guest's static PID 1.
 */

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/signalfd.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "macros.h"
#include "time-util.h"

typedef struct EvLoop EvLoop;
typedef struct EvSource EvSource;

#define EV_USEC_INFINITY UINT64_MAX

enum {
	EV_OFF = 0,
	EV_ON = 1,
	EV_ONESHOT = -1,
};

typedef int (*ev_io_handler_t)(EvSource *s, int fd, uint32_t revents, void *userdata);
typedef int (*ev_time_handler_t)(EvSource *s, uint64_t usec, void *userdata);
typedef int (*ev_signal_handler_t)(EvSource *s, const struct signalfd_siginfo *si, void *userdata);
typedef int (*ev_child_handler_t)(EvSource *s, const siginfo_t *si, void *userdata);
typedef int (*ev_handler_t)(EvSource *s, void *userdata);

/* The loop's clock: now_usec(), CLOCK_MONOTONIC in microseconds. */
uint64_t ev_time_now(void);

/*
 * ev_loop_new() - create an event loop (an epoll fd, O_CLOEXEC).
 * Returns 0 and the loop in *@ret, or -errno.
 */
int ev_loop_new(EvLoop **ret);

/*
 * ev_loop_free() - free the loop and every source still attached to it (fds owned by
 * io sources, see ev_source_set_io_fd_own(), and pidfds are closed). Must not be called
 * from inside a callback of the same loop. Accepts NULL; returns NULL.
 */
EvLoop *ev_loop_free(EvLoop *e);
static inline void ev_loop_freep(EvLoop **e)
{
	ev_loop_free(*e);
}

/*
 * ev_add_io() - watch @fd for @events (EPOLLIN, EPOLLOUT, ...; level-triggered).
 * @ret: where to store the handle, or NULL for a source that lives until the loop is freed.
 * The fd is not owned unless ev_source_set_io_fd_own() says so; free the source before
 * closing a borrowed fd. Returns 0 or -errno (-EPERM for fds epoll cannot watch).
 */
int ev_add_io(EvLoop *e, EvSource **ret, int fd, uint32_t events, ev_io_handler_t cb,
	      void *userdata);

/*
 * ev_add_time() - call @cb once CLOCK_MONOTONIC reaches @usec (absolute, microseconds).
 * ev_add_time_relative() takes a delay from now. Both are EV_ONESHOT: re-arm with
 * ev_source_set_time_relative() and ev_source_set_enabled().
 */
int ev_add_time(EvLoop *e, EvSource **ret, uint64_t usec, ev_time_handler_t cb, void *userdata);
int ev_add_time_relative(EvLoop *e, EvSource **ret, uint64_t usec, ev_time_handler_t cb,
			 void *userdata);

/*
 * ev_add_signal() - deliver @sig through the loop's signalfd. The signal is blocked with
 * sigprocmask() (the loop is single-threaded by design). One source per signal: -EBUSY if
 * @sig already has one. Children inherit the blocked mask: reset it before exec().
 */
int ev_add_signal(EvLoop *e, EvSource **ret, int sig, ev_signal_handler_t cb, void *userdata);

/*
 * ev_add_child() - watch child @pid through a pidfd; when it exits it is reaped with
 * waitid(P_PIDFD, WEXITED) and @cb gets the siginfo. ev_add_child_pidfd() takes an existing
 * pidfd (for example from clone3(CLONE_PIDFD)) and takes ownership of it on success.
 * If the child was reaped elsewhere first (a waitpid(-1) reaper), @cb still runs once, with
 * si_code 0 and no status.
 * SECURITY: a pidfd names the process itself, so a recycled pid can never be signalled or
 * reaped by mistake.
 */
int ev_add_child(EvLoop *e, EvSource **ret, pid_t pid, ev_child_handler_t cb, void *userdata);
int ev_add_child_pidfd(EvLoop *e, EvSource **ret, int pidfd, ev_child_handler_t cb, void *userdata);

/* ev_add_defer() - run @cb on the next iteration (EV_ONESHOT; EV_ON runs it on every one). */
int ev_add_defer(EvLoop *e, EvSource **ret, ev_handler_t cb, void *userdata);
/* ev_add_post() - run @cb at the end of every iteration that dispatched another source. */
int ev_add_post(EvLoop *e, EvSource **ret, ev_handler_t cb, void *userdata);

/*
 * ev_source_free() - detach and free @s. Safe from any callback, including @s's own.
 * Accepts NULL; returns NULL.
 */
EvSource *ev_source_free(EvSource *s);

int ev_source_set_enabled(EvSource *s, int enabled);
int ev_source_get_enabled(EvSource *s);
EvLoop *ev_source_get_loop(EvSource *s);

int ev_source_set_io_events(EvSource *s, uint32_t events);
/* Close the io fd when the source is freed. */
int ev_source_set_io_fd_own(EvSource *s, bool own);

int ev_source_set_time_relative(EvSource *s, uint64_t usec);

/* The child's pid, or -ESRCH once it has been reaped. */
pid_t ev_source_get_child_pid(EvSource *s);
/* Send @sig through the pidfd; -ESRCH once reaped. */
int ev_source_send_child_signal(EvSource *s, int sig);

/*
 * ev_run() - run one iteration: wait up to @timeout_usec (EV_USEC_INFINITY: no limit) for
 * something to happen, then dispatch everything that is ready.
 * Returns 1 if any source was dispatched, 0 if none, or -errno.
 */
int ev_run(EvLoop *e, uint64_t timeout_usec);

/* ev_loop() - iterate until ev_exit(); returns the exit code, or -errno on failure. The exit
 * request is consumed, so ev_loop() may be called again. */
int ev_loop(EvLoop *e);

/* Ask ev_loop() to return @code after the current iteration. */
int ev_exit(EvLoop *e, int code);
bool ev_is_exiting(EvLoop *e);
