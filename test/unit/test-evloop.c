/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evloop.h"
#include "tests.h"

static int on_pipe_read(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	int *count = userdata;
	char c;

	ASSERT_TRUE(revents & EPOLLIN);
	ASSERT_EQ(read(fd, &c, 1), 1);
	(*count)++;
	if (*count == 3)
		ev_exit(ev_source_get_loop(s), 42);
	return 0;
}

TEST(io_source_and_exit_code)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	int p[2], count = 0;

	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(pipe2(p, O_CLOEXEC | O_NONBLOCK));
	ASSERT_EQ(write(p[1], "abc", 3), 3);
	ASSERT_OK(ev_add_io(e, NULL, p[0], EPOLLIN, on_pipe_read, &count));
	ASSERT_EQ(ev_loop(e), 42);
	ASSERT_EQ(count, 3);
	close(p[1]);
	close(p[0]);
}

static int order_pos;
static int order[8];

static int on_time_record(EvSource *s, uint64_t usec, void *userdata)
{
	order[order_pos++] = (int)(intptr_t)userdata;
	if (order_pos == 3)
		ev_exit(ev_source_get_loop(s), 0);
	return 0;
}

TEST(timers_fire_in_deadline_order)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	uint64_t start = ev_time_now();

	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(ev_add_time_relative(e, NULL, 30 * USEC_PER_MSEC, on_time_record, (void *)3));
	ASSERT_OK(ev_add_time_relative(e, NULL, 10 * USEC_PER_MSEC, on_time_record, (void *)1));
	ASSERT_OK(ev_add_time_relative(e, NULL, 20 * USEC_PER_MSEC, on_time_record, (void *)2));
	ASSERT_OK(ev_loop(e));
	ASSERT_EQ(order[0], 1);
	ASSERT_EQ(order[1], 2);
	ASSERT_EQ(order[2], 3);
	ASSERT_TRUE(ev_time_now() - start >= 30 * USEC_PER_MSEC);
}

static int on_rearm(EvSource *s, uint64_t usec, void *userdata)
{
	int *n = userdata;

	if (++(*n) == 5) {
		ev_exit(ev_source_get_loop(s), 0);
		return 0;
	}
	ASSERT_OK(ev_source_set_time_relative(s, 1 * USEC_PER_MSEC));
	ASSERT_OK(ev_source_set_enabled(s, EV_ONESHOT));
	return 0;
}

TEST(timers_due_together_fire_in_deadline_order)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	uint64_t now = ev_time_now();

	order_pos = 0;
	ASSERT_OK(ev_loop_new(&e));
	/* All three are overdue when the loop first looks; creation order is 3, 1, 2. */
	ASSERT_OK(ev_add_time(e, NULL, now - 10, on_time_record, (void *)3));
	ASSERT_OK(ev_add_time(e, NULL, now - 30, on_time_record, (void *)1));
	ASSERT_OK(ev_add_time(e, NULL, now - 20, on_time_record, (void *)2));
	ASSERT_EQ(ev_run(e, 0), 1);
	ASSERT_EQ(order_pos, 3);
	ASSERT_EQ(order[0], 1);
	ASSERT_EQ(order[1], 2);
	ASSERT_EQ(order[2], 3);
}

TEST(timer_rearm_from_callback)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	int n = 0;

	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(ev_add_time_relative(e, NULL, 0, on_rearm, &n));
	ASSERT_OK(ev_loop(e));
	ASSERT_EQ(n, 5);
}

static int on_count(EvSource *s, void *userdata)
{
	(*(int *)userdata)++;
	return 0;
}

TEST(defer_and_post)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	EvSource *d = NULL;
	int defers = 0, posts = 0;

	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(ev_add_defer(e, &d, on_count, &defers));
	ASSERT_OK(ev_add_post(e, NULL, on_count, &posts));
	/* The oneshot defer runs once and wakes the loop at once; post follows it. */
	ASSERT_EQ(ev_run(e, EV_USEC_INFINITY), 1);
	ASSERT_EQ(defers, 1);
	ASSERT_EQ(posts, 1);
	ASSERT_EQ(ev_source_get_enabled(d), EV_OFF);
	/* Nothing ready: no dispatch, so no post either. */
	ASSERT_EQ(ev_run(e, 1000), 0);
	ASSERT_EQ(posts, 1);
	ASSERT_OK(ev_source_set_enabled(d, EV_ON));
	ASSERT_EQ(ev_run(e, EV_USEC_INFINITY), 1);
	ASSERT_EQ(ev_run(e, EV_USEC_INFINITY), 1);
	ASSERT_EQ(defers, 3);
	ASSERT_EQ(posts, 3);
}

static int on_failing(EvSource *s, void *userdata)
{
	(*(int *)userdata)++;
	return -EIO;
}

TEST(failing_callback_disables_source)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	EvSource *d = NULL;
	int n = 0;

	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(ev_add_defer(e, &d, on_failing, &n));
	ASSERT_OK(ev_source_set_enabled(d, EV_ON));
	ASSERT_EQ(ev_run(e, 0), 1);
	ASSERT_EQ(ev_source_get_enabled(d), EV_OFF);
	ASSERT_EQ(ev_run(e, 0), 0);
	ASSERT_EQ(n, 1);
}

static int on_sig(EvSource *s, const struct signalfd_siginfo *si, void *userdata)
{
	ASSERT_EQ(si->ssi_signo, SIGUSR1);
	ev_exit(ev_source_get_loop(s), 7);
	return 0;
}

TEST(signal_source)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;

	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(ev_add_signal(e, NULL, SIGUSR1, on_sig, NULL));
	ASSERT_ERROR(ev_add_signal(e, NULL, SIGUSR1, on_sig, NULL), EBUSY);
	ASSERT_OK(kill(getpid(), SIGUSR1));
	ASSERT_EQ(ev_loop(e), 7);
}

static int on_child(EvSource *s, const siginfo_t *si, void *userdata)
{
	ASSERT_EQ(si->si_code, CLD_EXITED);
	ev_exit(ev_source_get_loop(s), si->si_status);
	return 0;
}

TEST(child_source_reaps_through_pidfd)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	EvSource *c = NULL;
	pid_t pid;

	ASSERT_OK(ev_loop_new(&e));
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0)
		_exit(9);
	ASSERT_OK(ev_add_child(e, &c, pid, on_child, NULL));
	ASSERT_EQ(ev_source_get_child_pid(c), pid);
	ASSERT_EQ(ev_loop(e), 9);
	/* Reaped: the pid is gone and waitpid() has nothing left. */
	ASSERT_EQ(ev_source_get_child_pid(c), -ESRCH);
	ASSERT_EQ(waitpid(pid, NULL, WNOHANG), -1);
}

TEST(child_signal_through_pidfd)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	EvSource *c = NULL;
	pid_t pid;

	ASSERT_OK(ev_loop_new(&e));
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		alarm(20); /* never outlive a failed test */
		pause();
		_exit(0);
	}
	ASSERT_OK(ev_add_child(e, &c, pid, on_child, NULL));
	ASSERT_OK(ev_source_send_child_signal(c, SIGKILL));
	/* on_child asserts CLD_EXITED; a killed child reports CLD_KILLED, so run by hand. */
	ev_source_free(c);
	ASSERT_TRUE(waitpid(pid, NULL, 0) == pid);
}

static int on_child_any(EvSource *s, const siginfo_t *si, void *userdata)
{
	*(int *)userdata = si->si_code;
	ev_exit(ev_source_get_loop(s), 0);
	return 0;
}

TEST(child_reaped_elsewhere_does_not_spin)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	int code = -1;
	pid_t pid;

	ASSERT_OK(ev_loop_new(&e));
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0)
		_exit(3);
	ASSERT_OK(ev_add_child(e, NULL, pid, on_child_any, &code));
	/* A PID 1 style reaper gets there first. */
	ASSERT_EQ(waitpid(pid, NULL, 0), pid);
	ASSERT_EQ(ev_loop(e), 0);
	ASSERT_EQ(code, 0);
	/* The source is off: nothing is ready any more. */
	ASSERT_EQ(ev_run(e, 10 * USEC_PER_MSEC), 0);
}

/* Two sources ready in the same iteration; the first frees the second. The second must
 * never run (it would touch freed memory otherwise: ASan/valgrind catch that). */
typedef struct Pair {
	EvSource *other;
	int runs;
} Pair;

static int on_free_other(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Pair *p = userdata;

	p->runs++;
	p->other = ev_source_free(p->other);
	ev_source_free(s); /* and itself, from its own callback */
	return 0;
}

TEST(free_sources_inside_callbacks)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	EvSource *a = NULL, *b = NULL;
	Pair pa = {}, pb = {};
	int p1[2], p2[2];

	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(pipe2(p1, O_CLOEXEC));
	ASSERT_OK(pipe2(p2, O_CLOEXEC));
	ASSERT_EQ(write(p1[1], "x", 1), 1);
	ASSERT_EQ(write(p2[1], "x", 1), 1);
	ASSERT_OK(ev_add_io(e, &a, p1[0], EPOLLIN, on_free_other, &pa));
	ASSERT_OK(ev_add_io(e, &b, p2[0], EPOLLIN, on_free_other, &pb));
	pa.other = b;
	pb.other = a;
	ASSERT_EQ(ev_run(e, 0), 1);
	ASSERT_EQ(pa.runs + pb.runs, 1);
	/* Both are gone; the pipes stay readable but nothing is watched any more. */
	ASSERT_EQ(ev_run(e, 0), 0);
	for (int i = 0; i < 2; i++) {
		close(p1[i]);
		close(p2[i]);
	}
}

static int on_free_timer(EvSource *s, uint64_t usec, void *userdata)
{
	EvSource **other = userdata;

	*other = ev_source_free(*other);
	return 0;
}

static int on_never(EvSource *s, uint64_t usec, void *userdata)
{
	TEST_FAIL("freed timer ran");
	return 0;
}

TEST(timer_freed_by_earlier_timer_in_same_iteration)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	EvSource *victim = NULL;
	uint64_t now = ev_time_now();

	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(ev_add_time(e, NULL, now - 2, on_free_timer, &victim));
	ASSERT_OK(ev_add_time(e, &victim, now - 1, on_never, NULL));
	ASSERT_EQ(ev_run(e, 0), 1);
	ASSERT_TRUE(victim == NULL);
}

TEST(io_fd_own_closes_on_free)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	EvSource *s = NULL;
	int p[2];

	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(pipe2(p, O_CLOEXEC));
	ASSERT_OK(ev_add_io(e, &s, p[0], EPOLLIN, on_pipe_read, NULL));
	ASSERT_OK(ev_source_set_io_fd_own(s, true));
	ev_source_free(s);
	ASSERT_TRUE(fcntl(p[0], F_GETFD) < 0 && errno == EBADF);
	close(p[1]);
}

TEST(disabled_io_does_not_spin_on_hup)
{
	_cleanup_(ev_loop_freep) EvLoop *e = NULL;
	EvSource *s = NULL;
	int p[2], n = 0;

	ASSERT_OK(ev_loop_new(&e));
	ASSERT_OK(pipe2(p, O_CLOEXEC));
	close(p[1]); /* EPOLLHUP forever */
	ASSERT_OK(ev_add_io(e, &s, p[0], EPOLLIN, on_pipe_read, &n));
	ASSERT_OK(ev_source_set_enabled(s, EV_OFF));
	ASSERT_EQ(ev_run(e, 10 * USEC_PER_MSEC), 0);
	ASSERT_EQ(n, 0);
	close(p[0]);
}

int main(void)
{
	return tests_run();
}
