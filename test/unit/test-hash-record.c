/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-vmm's digests remembered while their files stay unchanged (hash-record.h): a record
 * holds only for the same file with the same size and times and the same digest of the same
 * kind; a file changed since it was opened, or changed too shortly before, is not
 * remembered; a damaged record is no record; and the directory stays bounded.
 *
 * "Opened a while after its last change" is a stamp whose time is moved on: the tests do
 * not wait for the clock.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hash-record.h"
#include "tests.h"

#define SHA_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define SHA_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static char root[] = "/tmp/test-hash-record.XXXXXX";
static char records[sizeof(root) + 16];

static int make_file(const char *name, const char *content)
{
	char path[sizeof(root) + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", root, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	return fd;
}

/* The stamp of @fd as if it were opened well after its last change. */
static HashStamp stamp_later(int fd)
{
	HashStamp s;

	ASSERT_OK(hash_stamp_take(fd, &s));
	s.taken_ns += HASH_RECORD_MARGIN_NS + 1000000000LL;
	return s;
}

static HashStamp stamp_now(int fd)
{
	HashStamp s;

	ASSERT_OK(hash_stamp_take(fd, &s));
	return s;
}

TEST(a_remembered_file_holds_while_unchanged)
{
	int fd = make_file("same", "the root image");
	HashStamp s = stamp_later(fd);

	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	ASSERT_OK(hash_record_save(records, fd, &s, "sha256", SHA_A));
	ASSERT_TRUE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* Opened again, the same file. */
	s = stamp_now(fd);
	ASSERT_TRUE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* Another digest, or the same digits of another kind, is not what was recorded. */
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_B));
	ASSERT_FALSE(hash_record_holds(records, &s, "chunked-64KiB-sha256", SHA_A));
	close(fd);
}

TEST(a_changed_file_is_hashed_again)
{
	int fd = make_file("changed", "the kernel");
	HashStamp s = stamp_later(fd);
	struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000000000}};

	ASSERT_OK(hash_record_save(records, fd, &s, "sha256", SHA_A));
	/* A change of its modification time alone... */
	ASSERT_OK(futimens(fd, times));
	s = stamp_now(fd);
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* ...or of its size. */
	s = stamp_later(fd);
	ASSERT_OK(hash_record_save(records, fd, &s, "sha256", SHA_A));
	ASSERT_EQ(write(fd, "!", 1), 1);
	s = stamp_now(fd);
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* ...or of its change time, with all else as it was. */
	s = stamp_later(fd);
	ASSERT_OK(hash_record_save(records, fd, &s, "sha256", SHA_A));
	s.st.st_ctim.tv_nsec = (s.st.st_ctim.tv_nsec + 1) % 1000000000L;
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	close(fd);
}

TEST(a_file_written_after_its_stamp_is_not_unchanged)
{
	int fd = make_file("copied", "a snapshot's memory");
	HashStamp s = stamp_now(fd);
	struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000000000}};

	ASSERT_TRUE(hash_stamp_unchanged(fd, &s));
	ASSERT_OK(futimens(fd, times));
	ASSERT_FALSE(hash_stamp_unchanged(fd, &s));
	s = stamp_now(fd);
	ASSERT_OK(ftruncate(fd, 5));
	ASSERT_FALSE(hash_stamp_unchanged(fd, &s));
	s.valid = false;
	ASSERT_FALSE(hash_stamp_unchanged(fd, &s));
	close(fd);
}

TEST(another_file_at_the_same_path_has_no_record)
{
	char path[sizeof(root) + 64], tmp[sizeof(root) + 64];
	int fd = make_file("replaced", "pinned bytes"), other;
	HashStamp s = stamp_later(fd);

	ASSERT_OK(hash_record_save(records, fd, &s, "sha256", SHA_A));
	close(make_file("replacement", "other bytes!"));
	snprintf(path, sizeof(path), "%s/replaced", root);
	snprintf(tmp, sizeof(tmp), "%s/replacement", root);
	ASSERT_OK(rename(tmp, path));
	other = open(path, O_RDONLY | O_CLOEXEC);
	ASSERT_TRUE(other >= 0);
	s = stamp_later(other);
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	close(fd);
	close(other);
}

TEST(a_file_changed_while_or_just_before_it_was_hashed_is_not_remembered)
{
	int fd = make_file("racy", "a snapshot's memory");
	HashStamp s = stamp_now(fd);

	/* Changed just before it was opened: a write in the same tick could hide. */
	ASSERT_ERROR(hash_record_save(records, fd, &s, "sha256", SHA_A), ESTALE);
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* Changed after it was opened, while it was hashed. */
	s = stamp_later(fd);
	ASSERT_EQ(write(fd, "more", 4), 4);
	ASSERT_ERROR(hash_record_save(records, fd, &s, "sha256", SHA_A), ESTALE);
	close(fd);
}

TEST(a_damaged_record_is_no_record)
{
	static const char *const damaged[] = {"", "1 sha256", "2 sha256 1 1 1 1 1 " SHA_A "\n",
					      "garbage\n", "1 sha256 x y z w v " SHA_A "\n"};
	char path[sizeof(records) + 64];
	int fd = make_file("damaged", "bytes");
	HashStamp s = stamp_later(fd);

	ASSERT_OK(hash_record_save(records, fd, &s, "sha256", SHA_A));
	snprintf(path, sizeof(path), "%s/%llx-%llx", records, (unsigned long long)s.st.st_dev,
		 (unsigned long long)s.st.st_ino);
	for (size_t i = 0; i < sizeof(damaged) / sizeof(damaged[0]); i++) {
		FILE *f = fopen(path, "we");

		ASSERT_NOT_NULL(f);
		fputs(damaged[i], f);
		fclose(f);
		ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	}
	/* Nor is a saved one with a bad digest or kind. */
	ASSERT_ERROR(hash_record_save(records, fd, &s, "sha256", "not-hex"), EINVAL);
	ASSERT_ERROR(hash_record_save(records, fd, &s, "a-kind-name-longer-than-thirty-two-bytes",
				      SHA_A),
		     EINVAL);
	close(fd);
}

TEST(the_records_stay_bounded)
{
	char dir[sizeof(root) + 16];
	size_t n = 0;
	FILE *ls;
	char cmd[sizeof(dir) + 32], line[256];

	snprintf(dir, sizeof(dir), "%s/many", root);
	for (int i = 0; i < HASH_RECORD_MAX + 10; i++) {
		char name[32];
		int fd;
		HashStamp s;

		snprintf(name, sizeof(name), "file-%d", i);
		fd = make_file(name, name);
		s = stamp_later(fd);
		ASSERT_OK(hash_record_save(dir, fd, &s, "sha256", SHA_A));
		close(fd);
	}
	snprintf(cmd, sizeof(cmd), "ls -A %s", dir);
	ls = popen(cmd, "r");
	ASSERT_NOT_NULL(ls);
	while (fgets(line, sizeof(line), ls))
		n++;
	pclose(ls);
	ASSERT_TRUE(n <= HASH_RECORD_MAX);
	ASSERT_TRUE(n >= HASH_RECORD_MAX - 1);
}

int main(void)
{
	char cmd[sizeof(root) + 16];
	int r;

	if (!mkdtemp(root))
		return 1;
	snprintf(records, sizeof(records), "%s/hashed", root);
	r = tests_run();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	(void)!system(cmd);
	return r;
}
