/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-vmm's restore stream (snapshot_stream()): the file goes into QEMU's pipe, hashed as
 * it goes, and only a whole stream that matches its record is accepted. The reader here
 * stands in for QEMU: a child process that reads the pipe, one that is gone, one that never
 * reads. The file is larger than the pipe, so writer and reader must overlap.
 *
 * And the record (snapshot_find()): a snapshot is found only with its stream and its
 * memory there at the sizes recorded, the memory the VM's size; anything else is removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accel.h"
#include "digest.h"
#include "fileio.h"
#include "qemu-identity.h"
#include "snapshot.h"
#include "tests.h"
#include "time-util.h"

#define SIZE (3u * 1024u * 1024u + 123u)

/* snapshot.c's key functions, which these tests do not reach, want these from berth-vmm. */
const char *accel_to_string(Accel a)
{
	return "tcg";
}
void qemu_identify(const char *qemu, QemuIdentity *ret)
{
	memset(ret, 0, sizeof(*ret));
}

static char dir[] = "/tmp/test-snapshot-stream.XXXXXX";

/* A snapshot file of SIZE bytes and its record; @extra bytes more on the file than recorded,
 * and with @flip, one byte in the middle changed after the record was made. */
static void make_snapshot(Snapshot *s, size_t extra, bool flip)
{
	uint8_t *data = malloc(SIZE + extra);
	int fd;

	ASSERT_NOT_NULL(data);
	for (size_t i = 0; i < SIZE + extra; i++)
		data[i] = (uint8_t)(i * 31 + (i >> 12));
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "%s", dir);
	snprintf(s->path, sizeof(s->path), "%s/vm.snap", dir);
	ASSERT_OK(sha256_buffer_hex(data, SIZE, s->sha256));
	s->size = SIZE;
	if (flip)
		data[SIZE / 2] ^= 0xff;
	fd = open(s->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, data, SIZE + extra), (ssize_t)(SIZE + extra));
	close(fd);
	free(data);
}

/* A stand-in QEMU reading the pipe to its end: exits 0 if it got exactly the record's bytes. */
static pid_t reader(int rd, int wr, const char *want_sha256)
{
	pid_t pid = fork();

	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		Sha256 *h = sha256_new();
		uint8_t buf[65536];
		char got[65];
		ssize_t n;

		close(wr); /* the EOF comes when the writer's end is the last one closed */
		while ((n = read(rd, buf, sizeof(buf))) > 0)
			(void)sha256_update(h, buf, (size_t)n);
		_exit(n == 0 && sha256_final_hex(h, got) == 0 && strcmp(got, want_sha256) == 0 ? 0
											       : 1);
	}
	return pid;
}

static int stream(const Snapshot *s, void (*with_reader)(int p[2], const Snapshot *s, pid_t *pid),
		  int64_t deadline_ms, char *why, size_t whylen, int *ret_reader_status)
{
	int p[2], r;
	pid_t pid = 0;
	int fd = snapshot_open_stream(s, p, why, whylen);

	ASSERT_OK(fd);
	with_reader(p, s, &pid);
	r = snapshot_stream(s, fd, p[1], deadline_ms, why, whylen);
	close(fd);
	close(p[1]);
	if (p[0] >= 0)
		close(p[0]);
	*ret_reader_status = -1;
	if (pid > 0) {
		ASSERT_EQ(waitpid(pid, ret_reader_status, 0), pid);
	}
	return r;
}

static void reads_it(int p[2], const Snapshot *s, pid_t *pid)
{
	*pid = reader(p[0], p[1], s->sha256);
}

static void gone(int p[2], const Snapshot *s, pid_t *pid)
{
	/* The only read end closed: QEMU exited, and the writes meet EPIPE. */
	close(p[0]);
	p[0] = -1;
}

static void never_reads(int p[2], const Snapshot *s, pid_t *pid)
{
	/* The read end is held open, and nobody reads. */
}

TEST(a_sound_snapshot_reaches_the_reader_whole)
{
	Snapshot s;
	char why[1024] = "";
	int status;

	make_snapshot(&s, 0, false);
	ASSERT_OK(stream(&s, reads_it, now_ms() + 20000, why, sizeof(why), &status));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(a_changed_byte_fails_the_check)
{
	Snapshot s;
	char why[1024] = "";
	int status;

	make_snapshot(&s, 0, true);
	ASSERT_ERROR(stream(&s, reads_it, now_ms() + 20000, why, sizeof(why), &status), EBADMSG);
	ASSERT_TRUE(strstr(why, "failed its check (sha256") != NULL);
	/* The reader got the changed bytes, not the recorded ones. */
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1);
}

TEST(a_longer_file_fails_the_check)
{
	Snapshot s;
	char why[1024] = "";
	int status;

	make_snapshot(&s, 4096, false);
	ASSERT_ERROR(stream(&s, reads_it, now_ms() + 20000, why, sizeof(why), &status), EBADMSG);
	ASSERT_TRUE(strstr(why, "failed its check") != NULL);
}

TEST(a_reader_that_went_away_is_told_from_a_bad_snapshot)
{
	Snapshot s;
	char why[1024] = "";
	int status;

	/* QEMU gone, the snapshot sound: QEMU is the one to blame. */
	make_snapshot(&s, 0, false);
	ASSERT_ERROR(stream(&s, gone, now_ms() + 20000, why, sizeof(why), &status), EPIPE);
	ASSERT_TRUE(strstr(why, "QEMU stopped reading the snapshot") != NULL);
	/* QEMU gone, the snapshot bad (QEMU may have stopped on it): the rest is still hashed,
	 * and the snapshot is the one to blame, so it is removed. */
	make_snapshot(&s, 0, true);
	ASSERT_ERROR(stream(&s, gone, now_ms() + 20000, why, sizeof(why), &status), EBADMSG);
	ASSERT_TRUE(strstr(why, "failed its check") != NULL);
}

TEST(a_reader_that_never_reads_times_out)
{
	Snapshot s;
	char why[1024] = "";
	int status;

	make_snapshot(&s, 0, false);
	ASSERT_ERROR(stream(&s, never_reads, now_ms() + 300, why, sizeof(why), &status), ETIMEDOUT);
	ASSERT_TRUE(strstr(why, "QEMU stopped reading the snapshot") != NULL);
}

/* A snapshot directory for @k in $BERTH_HOME: its record (@schema, a memory of @ram_size
 * recorded), a 4 KiB stream and, unless @ram_file_size is 0, a memory file of that size. */
static char *make_record(const SnapshotKey *k, int schema, uint64_t ram_size,
			 uint64_t ram_file_size)
{
	char *sdir = snapshot_dir_for(k), path[PATH_MAX];
	json_t *meta;
	int fd;

	ASSERT_NOT_NULL(sdir);
	ASSERT_OK(mkdir_p(sdir, 0700));
	meta = json_pack("{s:i, s:o, s:s, s:i, s:{s:s, s:I}, s:s, s:s}", "schema", schema, "key",
			 snapshot_key_to_json(k), "sha256",
			 "0000000000000000000000000000000000000000000000000000000000000000", "size",
			 4096, "ram", "sha256",
			 "1111111111111111111111111111111111111111111111111111111111111111", "size",
			 (json_int_t)ram_size, "createdAt", "2026-12-03T00:00:00Z", "kernelCmdline",
			 "console=ttyS0");
	ASSERT_NOT_NULL(meta);
	snprintf(path, sizeof(path), "%s/snapshot.json", sdir);
	ASSERT_OK(json_dump_file(meta, path, 0));
	json_decref(meta);
	snprintf(path, sizeof(path), "%s/vm.snap", sdir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(ftruncate(fd, 4096));
	close(fd);
	snprintf(path, sizeof(path), "%s/ram", sdir);
	(void)unlink(path);
	if (ram_file_size > 0) {
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		ASSERT_TRUE(fd >= 0);
		ASSERT_OK(ftruncate(fd, (off_t)ram_file_size));
		close(fd);
	}
	return sdir;
}

static bool exists_in(const char *sdir, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", sdir, name);
	return access(path, F_OK) == 0;
}

TEST(a_record_is_found_only_with_its_memory_at_the_vm_size)
{
	SnapshotKey k = {.cpus = 2, .mem_mib = 512};
	const uint64_t mem = 512ULL << 20;
	char why[1024], *sdir;
	Snapshot s;

	snprintf(k.kernel, sizeof(k.kernel), "%064d", 1);
	snprintf(k.qemu, sizeof(k.qemu), "/usr/bin/qemu-system-x86_64");
	/* Whole: found, with the memory's record. */
	sdir = make_record(&k, SNAPSHOT_SCHEMA, mem, mem);
	ASSERT_OK(snapshot_find(&k, &s, why, sizeof(why)));
	ASSERT_EQ(s.ram_size, mem);
	ASSERT_STREQ(s.ram_sha256,
		     "1111111111111111111111111111111111111111111111111111111111111111");
	ASSERT_TRUE(strstr(s.ram_path, "/ram") != NULL);
	free(sdir);
	/* No memory file: refused, and the rest removed. */
	sdir = make_record(&k, SNAPSHOT_SCHEMA, mem, 0);
	ASSERT_ERROR(snapshot_find(&k, &s, why, sizeof(why)), ESTALE);
	ASSERT_TRUE(strstr(why, "memory") != NULL);
	ASSERT_FALSE(exists_in(sdir, "vm.snap") || exists_in(sdir, "snapshot.json"));
	free(sdir);
	/* A memory file of another size than recorded. */
	sdir = make_record(&k, SNAPSHOT_SCHEMA, mem, mem / 2);
	ASSERT_ERROR(snapshot_find(&k, &s, why, sizeof(why)), ESTALE);
	ASSERT_FALSE(exists_in(sdir, "ram"));
	free(sdir);
	/* A record whose memory is not the VM's size. */
	sdir = make_record(&k, SNAPSHOT_SCHEMA, mem / 2, mem / 2);
	ASSERT_ERROR(snapshot_find(&k, &s, why, sizeof(why)), ESTALE);
	ASSERT_TRUE(strstr(why, "not one this berth-vmm wrote") != NULL);
	free(sdir);
	/* An older berth-vmm's record, the memory in its stream. */
	sdir = make_record(&k, 1, mem, mem);
	ASSERT_ERROR(snapshot_find(&k, &s, why, sizeof(why)), ESTALE);
	ASSERT_FALSE(exists_in(sdir, "ram") || exists_in(sdir, "snapshot.json"));
	free(sdir);
	/* None at all. */
	ASSERT_ERROR(snapshot_find(&k, &s, why, sizeof(why)), ENOENT);
}

int main(void)
{
	char path[sizeof(dir) + 16], home[sizeof(dir) + 16];
	int r;

	signal(SIGPIPE, SIG_IGN);
	if (!mkdtemp(dir))
		return 1;
	/* snapshot_find() looks in $BERTH_HOME/vm/snapshots. */
	snprintf(home, sizeof(home), "%s/home", dir);
	setenv("BERTH_HOME", home, 1);
	r = tests_run();
	snprintf(path, sizeof(path), "%s/vm.snap", dir);
	(void)unlink(path);
	(void)rm_rf(home);
	(void)rmdir(dir);
	return r;
}
