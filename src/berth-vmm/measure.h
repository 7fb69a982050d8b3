/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Measuring disks beside QEMU's start (docs/warm-start.md). The root image, the layers and
 * the state disk are block devices: QEMU reads them only once the guest runs. A child
 * process hashes them while QEMU starts and, for a restore, loads the snapshot; the guest
 * runs only once every digest is in and every pinned one matched (serve.c). So are the
 * kernel and the initramfs: a cold boot waits for them before QEMU starts, since QEMU
 * parses them; a restore's QEMU does not get them.
 */

#define MEASURE_JOBS_MAX 8
/* Hashing is local reads only; past this something is wrong with the disk. */
#define MEASURE_TIMEOUT_MS (5 * 60 * 1000)

typedef struct MeasureResult {
	int error;	/* 0, or a negative errno from reading the disk */
	uint64_t bytes; /* hashed (a chunked digest skips holes) */
	int64_t ms;
	char sha256[65];
} MeasureResult;

typedef struct Measure {
	pid_t pid; /* the child, until reaped; 0: none started */
	int fd;	   /* its results, one MeasureResult per job, in order */
	size_t n;  /* jobs */
	int error; /* once finished: 0, or why the results are missing */
	bool finished;
	MeasureResult results[MEASURE_JOBS_MAX];
} Measure;

/* Start hashing @fds[0..n) in a child: a plain sha256, or where @chunked[i] the chunked
 * digest of a sparse disk (sha256_chunked_fd_hex()). Descriptors are read with pread()
 * only. 0, or a negative errno (nothing started). */
int measure_start(Measure *m, const int *fds, const bool *chunked, size_t n);
/* Start copying @from into @to in a child (a snapshot's RAM into the VM's memory), with the
 * chunked digest of what it copied (sha256_chunked_copy_fd_hex(), @chunk-byte chunks) when
 * @hash, or only the copy (the result's sha256 empty). */
int measure_start_copy(Measure *m, int from, uint64_t chunk, int to, bool hash);

/* Wait until @deadline_ms (CLOCK_MONOTONIC, now_ms()) for every result. 0 with
 * m->results filled, or a negative errno (the child is killed); a second call returns the
 * first one's answer. */
int measure_finish(Measure *m, int64_t deadline_ms);

/* Kill and reap a child still running. */
void measure_cancel(Measure *m);
