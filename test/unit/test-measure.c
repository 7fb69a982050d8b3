/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-vmm's disk measurement beside QEMU's start (measure.h): a child hashes the disks and
 * its digests are the ones berth-vmm would have taken itself, a plain one and the chunked
 * one of a sparse disk; an unreadable disk says so, not a digest; the answer is given once
 * and kept; and a child that is still hashing is killed, not left behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "digest.h"
#include "measure.h"
#include "tests.h"
#include "time-util.h"

static char dir[] = "/tmp/test-measure.XXXXXX";

/* A file of @len bytes of pattern at @offset in an otherwise sparse file of @size. */
static int make_file(const char *name, long long size, off_t offset, size_t len)
{
	char path[sizeof(dir) + 32];
	uint8_t *data = malloc(len);
	int fd;

	ASSERT_NOT_NULL(data);
	for (size_t i = 0; i < len; i++)
		data[i] = (uint8_t)(i * 7 + 3);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(ftruncate(fd, (off_t)size));
	ASSERT_EQ(pwrite(fd, data, len, offset), (ssize_t)len);
	free(data);
	(void)unlink(path);
	return fd;
}

TEST(the_child_digests_are_the_ones_taken_in_place)
{
	int plain = make_file("rootfs", 3 * 1024 * 1024 + 17, 0, 3 * 1024 * 1024 + 17);
	int sparse = make_file("state", 64 * 1024 * 1024, 40 * 1024 * 1024, 5000);
	int fds[2] = {plain, sparse};
	bool chunked[2] = {false, true};
	char want_plain[65], want_sparse[65];
	uint64_t size, hashed;
	Measure m;

	ASSERT_OK(sha256_fd_hex(plain, want_plain, &size));
	ASSERT_OK(sha256_chunked_fd_hex(sparse, 1024 * 1024, want_sparse, &hashed));
	ASSERT_OK(measure_start(&m, fds, chunked, 2));
	ASSERT_OK(measure_finish(&m, now_ms() + 20000));
	ASSERT_EQ(m.results[0].error, 0);
	ASSERT_STREQ(m.results[0].sha256, want_plain);
	ASSERT_EQ(m.results[0].bytes, size);
	ASSERT_EQ(m.results[1].error, 0);
	ASSERT_STREQ(m.results[1].sha256, want_sparse);
	/* The holes were skipped, not read. */
	ASSERT_EQ(m.results[1].bytes, hashed);
	ASSERT_TRUE(hashed < 4 * 1024 * 1024);
	ASSERT_EQ(m.pid, 0);
	close(plain);
	close(sparse);
}

/* A snapshot's memory copied into a VM's by the child, with its digest (@hash) or without. */
static void copy_into_memory(bool hash)
{
	int image = make_file(hash ? "ram" : "ram-only", 8 * 1024 * 1024, 3 * 1024 * 1024 + 4096,
			      70000);
	int mem = memfd_create("test-measure-ram", MFD_CLOEXEC);
	char want[65], got[65];
	struct stat st;
	Measure m;

	ASSERT_TRUE(mem >= 0);
	ASSERT_OK(ftruncate(mem, 8 * 1024 * 1024));
	ASSERT_OK(sha256_chunked_fd_hex(image, 64 * 1024, want, NULL));
	ASSERT_OK(measure_start_copy(&m, image, 64 * 1024, mem, hash));
	ASSERT_OK(measure_finish(&m, now_ms() + 20000));
	ASSERT_EQ(m.results[0].error, 0);
	ASSERT_STREQ(m.results[0].sha256, hash ? want : "");
	ASSERT_TRUE(m.results[0].bytes > 0);
	/* What the child wrote into the memory is the image... */
	ASSERT_OK(sha256_chunked_fd_hex(mem, 64 * 1024, got, NULL));
	ASSERT_STREQ(got, want);
	/* ...its data's pages only: the memory holds no more than the image. */
	ASSERT_OK(fstat(mem, &st));
	ASSERT_TRUE((uint64_t)st.st_blocks * 512 <= 2 * 1024 * 1024);
	ASSERT_EQ(m.pid, 0);
	close(image);
	close(mem);
}

TEST(a_copy_fills_the_memory_and_digests_what_it_wrote)
{
	copy_into_memory(true);
}

TEST(a_copy_without_its_digest_copies_the_same)
{
	copy_into_memory(false);
}

TEST(an_unreadable_disk_is_an_error_not_a_digest)
{
	int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool chunked = false;
	Measure m;

	ASSERT_TRUE(d >= 0);
	ASSERT_OK(measure_start(&m, &d, &chunked, 1));
	ASSERT_OK(measure_finish(&m, now_ms() + 20000));
	ASSERT_EQ(m.results[0].error, -EISDIR);
	ASSERT_STREQ(m.results[0].sha256, "");
	close(d);
}

TEST(the_answer_is_given_once_and_kept)
{
	int fd = make_file("once", 4096, 0, 4096);
	bool chunked = false;
	char first[65];
	Measure m;

	ASSERT_OK(measure_start(&m, &fd, &chunked, 1));
	ASSERT_OK(measure_finish(&m, now_ms() + 20000));
	memcpy(first, m.results[0].sha256, sizeof(first));
	ASSERT_OK(measure_finish(&m, now_ms() + 20000));
	ASSERT_STREQ(m.results[0].sha256, first);
	close(fd);
}

/* 64 GiB of holes, hashed plainly: far longer than any deadline here. */
static int endless_disk(void)
{
	return make_file("endless", 64LL * 1024 * 1024 * 1024, 0, 1);
}

TEST(a_child_still_hashing_is_killed_and_reaped)
{
	int fd = endless_disk();
	bool chunked = false;
	Measure m;

	ASSERT_OK(measure_start(&m, &fd, &chunked, 1));
	ASSERT_ERROR(measure_finish(&m, now_ms() + 200), ETIMEDOUT);
	ASSERT_EQ(m.pid, 0);
	ASSERT_TRUE(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
	close(fd);
}

TEST(cancel_ends_a_running_child)
{
	int fd = endless_disk();
	bool chunked = false;
	Measure m;

	ASSERT_OK(measure_start(&m, &fd, &chunked, 1));
	measure_cancel(&m);
	ASSERT_EQ(m.pid, 0);
	ASSERT_TRUE(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD);
	measure_cancel(&m); /* nothing left: a no-op */
	close(fd);
}

TEST(too_many_disks_are_refused)
{
	int fds[MEASURE_JOBS_MAX + 1] = {};
	bool chunked[MEASURE_JOBS_MAX + 1] = {};
	Measure m;

	ASSERT_ERROR(measure_start(&m, fds, chunked, MEASURE_JOBS_MAX + 1), E2BIG);
	ASSERT_EQ(m.pid, 0);
}

int main(void)
{
	int r;

	if (!mkdtemp(dir))
		return 1;
	r = tests_run();
	(void)rmdir(dir);
	return r;
}
