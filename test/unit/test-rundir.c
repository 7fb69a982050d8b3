/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Run dirs under racing starts and sweeps. Several processes take one name over and over
 * while others remove it whenever it looks stale: at no moment may two hold it, and a
 * holder's run dir may never be removed under it. The counts are iterations, not time;
 * a race needs the scheduler's help to show, so the scenario runs TRIALS times.
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "fileio.h"
#include "macros.h"
#include "rundir.h"
#include "tests.h"

#define HOLDERS 3
#define SWEEPERS 2
#define ROUNDS 400
#define TRIALS 8

typedef struct Shared {
	int holders_now;     /* processes that believe they hold the name */
	int double_holds;    /* times a second one did */
	int lost_under_us;   /* times a holder's pid file vanished or changed while held */
	int acquired;        /* successful takes, to see the test did something */
} Shared;

static char root[64];

static void holder(Shared *sh, const char *dir)
{
	for (int i = 0; i < ROUNDS; i++) {
		_cleanup_free_ char *pidfile = NULL;
		struct stat before, after;
		pid_t owner;
		bool stale;
		int fd = rundir_acquire(dir, &owner, &stale);

		if (fd < 0)
			continue;
		if (__atomic_add_fetch(&sh->holders_now, 1, __ATOMIC_SEQ_CST) > 1)
			__atomic_add_fetch(&sh->double_holds, 1, __ATOMIC_SEQ_CST);
		__atomic_add_fetch(&sh->acquired, 1, __ATOMIC_SEQ_CST);
		ASSERT_TRUE(asprintf(&pidfile, "%s/berth-vmm.pid", dir) > 0);
		ASSERT_EQ(fstat(fd, &before), 0);
		for (int spin = 0; spin < 50; spin++)
			sched_yield();
		if (stat(pidfile, &after) < 0 || after.st_ino != before.st_ino)
			__atomic_add_fetch(&sh->lost_under_us, 1, __ATOMIC_SEQ_CST);
		/* Leave as berth-vmm does after a clean power-off: remove, then let go. */
		__atomic_sub_fetch(&sh->holders_now, 1, __ATOMIC_SEQ_CST);
		(void)rundir_remove(dir);
		close(fd);
	}
}

static void sweeper(const char *dir)
{
	for (int i = 0; i < ROUNDS * 2; i++) {
		if (i % 2)
			(void)rundir_remove_if_stale(dir);
		else
			(void)rundir_sweep(root, true, NULL, NULL);
	}
}

static void trial(Shared *sh)
{
	_cleanup_free_ char *dir = NULL;
	pid_t kids[HOLDERS + SWEEPERS];
	int status;

	snprintf(root, sizeof(root), "/tmp/test-rundir-XXXXXX");
	ASSERT_TRUE(mkdtemp(root) != NULL);
	ASSERT_TRUE(asprintf(&dir, "%s/race", root) > 0);
	for (int k = 0; k < HOLDERS + SWEEPERS; k++) {
		kids[k] = fork();
		ASSERT_TRUE(kids[k] >= 0);
		if (kids[k] == 0) {
			if (k < HOLDERS)
				holder(sh, dir);
			else
				sweeper(dir);
			_exit(0);
		}
	}
	for (int k = 0; k < HOLDERS + SWEEPERS; k++) {
		ASSERT_EQ(waitpid(kids[k], &status, 0), kids[k]);
		ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	(void)rm_rf(root);
}

TEST(racing_starts_and_sweeps_never_share_or_lose_a_run_dir)
{
	Shared *sh = mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			  -1, 0);

	ASSERT_TRUE(sh != MAP_FAILED);
	*sh = (Shared){};
	for (int t = 0; t < TRIALS; t++)
		trial(sh);
	printf("# %d takes, %d double holds, %d run dirs removed under their holder\n",
	       sh->acquired, sh->double_holds, sh->lost_under_us);
	ASSERT_TRUE(sh->acquired > 0);
	ASSERT_EQ(sh->double_holds, 0);
	ASSERT_EQ(sh->lost_under_us, 0);
}

/* A stale dir (no live lock) is removed; one whose lock is held is not. */
TEST(remove_if_stale_spares_a_held_dir)
{
	char tmp[] = "/tmp/test-rundir-XXXXXX";
	_cleanup_free_ char *dir = NULL;
	pid_t owner;
	bool stale;
	int fd;

	ASSERT_TRUE(mkdtemp(tmp) != NULL);
	ASSERT_TRUE(asprintf(&dir, "%s/vm", tmp) > 0);
	fd = rundir_acquire(dir, &owner, &stale);
	ASSERT_TRUE(fd >= 0);
	ASSERT_FALSE(stale);
	ASSERT_EQ(rundir_remove_if_stale(dir), 0);
	ASSERT_EQ(access(dir, F_OK), 0);
	close(fd);
	ASSERT_EQ(rundir_remove_if_stale(dir), 1);
	ASSERT_TRUE(access(dir, F_OK) < 0);
	(void)rm_rf(tmp);
}

int main(void)
{
	return tests_run();
}
