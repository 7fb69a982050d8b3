/* SPDX-License-Identifier: Apache-2.0 */
/* Measuring disks in a child while QEMU starts (measure.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "digest.h"
#include "exec-util.h"
#include "macros.h"
#include "measure.h"
#include "time-util.h"

#define CHUNK_BYTES (1024 * 1024)

/* One job of the child's: hash @fd (a plain sha256, or with @chunk the chunked digest of a
 * sparse file), copying what it reads into @copy_to when that is a descriptor; a copy
 * without @hash only copies. */
typedef struct MeasureJob {
	int fd;
	uint64_t chunk;
	int copy_to;
	bool hash;
} MeasureJob;

static int run_job(const MeasureJob *job, MeasureResult *res)
{
	if (job->copy_to >= 0 && !job->hash)
		return chunked_copy_fd(job->fd, job->chunk, job->copy_to, &res->bytes);
	if (job->copy_to >= 0)
		return sha256_chunked_copy_fd_hex(job->fd, job->chunk, job->copy_to, res->sha256,
						  &res->bytes);
	if (job->chunk > 0)
		return sha256_chunked_fd_hex(job->fd, job->chunk, res->sha256, &res->bytes);
	return sha256_fd_hex(job->fd, res->sha256, &res->bytes);
}

static _noreturn_ void measure_child(int out, const MeasureJob *jobs, size_t n)
{
	/* Nothing outlives the berth-vmm it measures for. */
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (size_t i = 0; i < n; i++) {
		MeasureResult res = {};
		int64_t t0 = now_ms();

		res.error = MIN(run_job(&jobs[i], &res), 0);
		res.ms = now_ms() - t0;
		if (write(out, &res, sizeof(res)) != (ssize_t)sizeof(res))
			_exit(EXIT_FAILURE);
	}
	_exit(EXIT_SUCCESS);
}

static int start_jobs(Measure *m, const MeasureJob *jobs, size_t n)
{
	int fd = -EBADF;
	pid_t pid;

	*m = (Measure){.fd = -EBADF, .n = n};
	if (n > MEASURE_JOBS_MAX)
		return -E2BIG;
	pid = fork_pipe(&fd);
	if (pid < 0)
		return pid;
	if (pid == 0)
		measure_child(fd, jobs, n);
	m->pid = pid;
	m->fd = fd;
	return 0;
}

int measure_start(Measure *m, const int *fds, const bool *chunked, size_t n)
{
	MeasureJob jobs[MEASURE_JOBS_MAX];

	/* More than fit is refused by start_jobs(). */
	for (size_t i = 0; i < MIN(n, (size_t)MEASURE_JOBS_MAX); i++)
		jobs[i] = (MeasureJob){
			.fd = fds[i], .chunk = chunked[i] ? CHUNK_BYTES : 0, .copy_to = -EBADF};
	return start_jobs(m, jobs, n);
}

int measure_start_copy(Measure *m, int from, uint64_t chunk, int to, bool hash)
{
	MeasureJob job = {.fd = from, .chunk = chunk, .copy_to = to, .hash = hash};

	return start_jobs(m, &job, 1);
}

static void reap(Measure *m, bool kill_it)
{
	if (m->pid <= 0)
		return;
	if (kill_it)
		(void)kill(m->pid, SIGKILL);
	while (waitpid(m->pid, NULL, 0) < 0 && errno == EINTR)
		;
	m->pid = 0;
}

static int read_results(Measure *m, int64_t deadline_ms)
{
	uint8_t *buf = (uint8_t *)m->results;
	size_t want = m->n * sizeof(MeasureResult), got = 0;

	while (got < want) {
		struct pollfd pfd = {.fd = m->fd, .events = POLLIN};
		int64_t left = deadline_ms - now_ms();
		ssize_t k;
		int r;

		if (left <= 0)
			return -ETIMEDOUT;
		r = poll(&pfd, 1, (int)MIN(left, (int64_t)INT32_MAX));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		k = read(m->fd, buf + got, want - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		if (k == 0)
			return -EPIPE; /* the child died before it said all */
		got += (size_t)k;
	}
	return 0;
}

int measure_finish(Measure *m, int64_t deadline_ms)
{
	if (m->finished)
		return m->error;
	if (m->pid <= 0 || m->fd < 0)
		return -ECHILD;
	m->error = read_results(m, deadline_ms);
	m->fd = safe_close(m->fd);
	reap(m, m->error < 0);
	m->finished = true;
	return m->error;
}

void measure_cancel(Measure *m)
{
	if (m->pid <= 0) /* none started, or finished: nothing is open */
		return;
	m->fd = safe_close(m->fd);
	reap(m, true);
}
