/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-vmm's digests remembered while their files stay unchanged (hash-record.h): a record
 * holds only for the same file with the same size and times and the same digest of the same
 * kind; a file changed since it was opened, or changed too shortly before, is not
 * remembered; a damaged record, or one anyone else could have written, is no record; and
 * the directory stays bounded, the least recently used records going first.
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
	s.taken.tv_sec += HASH_RECORD_MARGIN_SEC + 1;
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
	HashStamp s = stamp_later(fd), t;

	ASSERT_OK(hash_record_save(records, fd, &s, "sha256", SHA_A));
	/* Each of the file's identity, size and times on its own: as a stamp would see them. */
	t = s;
	t.st.st_mtim.tv_nsec = (t.st.st_mtim.tv_nsec + 1) % 1000000000L;
	ASSERT_FALSE(hash_record_holds(records, &t, "sha256", SHA_A));
	t = s;
	t.st.st_mtim.tv_sec++;
	ASSERT_FALSE(hash_record_holds(records, &t, "sha256", SHA_A));
	t = s;
	t.st.st_ctim.tv_nsec = (t.st.st_ctim.tv_nsec + 1) % 1000000000L;
	ASSERT_FALSE(hash_record_holds(records, &t, "sha256", SHA_A));
	t = s;
	t.st.st_ctim.tv_sec--;
	ASSERT_FALSE(hash_record_holds(records, &t, "sha256", SHA_A));
	t = s;
	t.st.st_size++;
	ASSERT_FALSE(hash_record_holds(records, &t, "sha256", SHA_A));
	t = s;
	t.st.st_ino++;
	ASSERT_FALSE(hash_record_holds(records, &t, "sha256", SHA_A));
	t = s;
	t.st.st_dev++;
	ASSERT_FALSE(hash_record_holds(records, &t, "sha256", SHA_A));
	ASSERT_TRUE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* And a real change: an explicit modification time, which moves the change time too. */
	{
		struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000000000}};

		ASSERT_OK(futimens(fd, times));
		t = stamp_now(fd);
		ASSERT_FALSE(hash_record_holds(records, &t, "sha256", SHA_A));
	}
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

/* The text of @s's record, and its path. */
static void read_record(const HashStamp *s, char *path, size_t pathlen, char *text, size_t len)
{
	FILE *f;
	size_t n;

	snprintf(path, pathlen, "%s/%llx-%llx", records, (unsigned long long)s->st.st_dev,
		 (unsigned long long)s->st.st_ino);
	f = fopen(path, "re");
	ASSERT_NOT_NULL(f);
	n = fread(text, 1, len - 1, f);
	fclose(f);
	text[n] = '\0';
}

static void write_record(const char *path, const char *text)
{
	FILE *f = fopen(path, "we");

	ASSERT_NOT_NULL(f);
	fputs(text, f);
	fclose(f);
}

TEST(a_damaged_record_is_no_record)
{
	char path[sizeof(records) + 64], good[512], bad[600];
	int fd = make_file("damaged", "bytes");
	HashStamp s = stamp_later(fd);
	char *digest;

	ASSERT_OK(hash_record_save(records, fd, &s, "sha256", SHA_A));
	read_record(&s, path, sizeof(path), good, sizeof(good));
	ASSERT_TRUE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* Written back as it was, it holds: each damage below is what fails it. */
	write_record(path, good);
	ASSERT_TRUE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* Another version. */
	ASSERT_EQ(good[0], '1');
	snprintf(bad, sizeof(bad), "2%s", good + 1);
	write_record(path, bad);
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* A digest one digit longer, or with something after its line, or without its end. */
	digest = strstr(good, SHA_A);
	ASSERT_NOT_NULL(digest);
	snprintf(bad, sizeof(bad), "%.*s%sa\n", (int)(digest - good), good, SHA_A);
	write_record(path, bad);
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	snprintf(bad, sizeof(bad), "%sjunk\n", good);
	write_record(path, bad);
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	snprintf(bad, sizeof(bad), "%.*s", (int)strlen(good) - 1, good);
	write_record(path, bad);
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* Nothing, or nothing like a record. */
	write_record(path, "");
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	write_record(path, "garbage\n");
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* Nor is a bad digest or kind saved. */
	ASSERT_ERROR(hash_record_save(records, fd, &s, "sha256", "not-hex"), EINVAL);
	ASSERT_ERROR(hash_record_save(records, fd, &s, "a-kind-name-longer-than-thirty-two-bytes",
				      SHA_A),
		     EINVAL);
	ASSERT_ERROR(hash_record_save(records, fd, &s, "two words", SHA_A), EINVAL);
	close(fd);
}

TEST(a_record_anyone_else_could_have_written_is_no_record)
{
	char path[sizeof(records) + 64], text[512], dir[sizeof(root) + 16], link[sizeof(root) + 16];
	int fd = make_file("others", "bytes");
	HashStamp s = stamp_later(fd);

	ASSERT_OK(hash_record_save(records, fd, &s, "sha256", SHA_A));
	read_record(&s, path, sizeof(path), text, sizeof(text));
	/* Writable by its group, or by anyone. */
	ASSERT_OK(chmod(path, 0620));
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	ASSERT_OK(chmod(path, 0602));
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	ASSERT_OK(chmod(path, 0600));
	ASSERT_TRUE(hash_record_holds(records, &s, "sha256", SHA_A));
	/* Another uid's (the tests run as root, which may give it away). */
	if (geteuid() == 0) {
		ASSERT_OK(chown(path, 4242, 4242));
		ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
		ASSERT_OK(chown(path, 0, 0));
	}
	/* A link in the record's place, to a good record. */
	snprintf(link, sizeof(link), "%s/elsewhere", root);
	write_record(link, text);
	ASSERT_OK(unlink(path));
	ASSERT_OK(symlink(link, path));
	ASSERT_FALSE(hash_record_holds(records, &s, "sha256", SHA_A));
	ASSERT_OK(unlink(path));
	/* A directory anyone may write to, or a link to the directory. */
	snprintf(dir, sizeof(dir), "%s/open", root);
	ASSERT_OK(hash_record_save(dir, fd, &s, "sha256", SHA_A));
	ASSERT_TRUE(hash_record_holds(dir, &s, "sha256", SHA_A));
	ASSERT_OK(chmod(dir, 0777));
	ASSERT_FALSE(hash_record_holds(dir, &s, "sha256", SHA_A));
	ASSERT_ERROR(hash_record_save(dir, fd, &s, "sha256", SHA_A), EPERM);
	ASSERT_OK(chmod(dir, 0700));
	snprintf(link, sizeof(link), "%s/dirlink", root);
	ASSERT_OK(symlink(dir, link));
	ASSERT_FALSE(hash_record_holds(link, &s, "sha256", SHA_A));
	close(fd);
}

/* The records in @dir. */
static size_t count_records(const char *dir)
{
	char cmd[sizeof(root) + 64], line[256];
	size_t n = 0;
	FILE *ls;

	snprintf(cmd, sizeof(cmd), "ls -A %s", dir);
	ls = popen(cmd, "r");
	ASSERT_NOT_NULL(ls);
	while (fgets(line, sizeof(line), ls))
		n++;
	pclose(ls);
	return n;
}

TEST(the_records_stay_bounded_the_least_recently_used_going_first)
{
	char dir[sizeof(root) + 16];
	HashStamp first, s;
	int fd0;

	snprintf(dir, sizeof(dir), "%s/many", root);
	fd0 = make_file("file-first", "first");
	first = stamp_later(fd0);
	ASSERT_OK(hash_record_save(dir, fd0, &first, "sha256", SHA_A));
	for (int i = 0; i < HASH_RECORD_MAX + 10; i++) {
		char name[32];
		int fd;

		snprintf(name, sizeof(name), "file-%d", i);
		fd = make_file(name, name);
		s = stamp_later(fd);
		ASSERT_OK(hash_record_save(dir, fd, &s, "sha256", SHA_A));
		close(fd);
		/* The first one is used all along: it stays. */
		ASSERT_TRUE(hash_record_holds(dir, &first, "sha256", SHA_A));
		ASSERT_TRUE(count_records(dir) <= HASH_RECORD_MAX);
	}
	ASSERT_EQ(count_records(dir), (size_t)HASH_RECORD_MAX);
	/* Saving a record that is there already takes none of the others' places. */
	ASSERT_OK(hash_record_save(dir, fd0, &first, "sha256", SHA_B));
	ASSERT_EQ(count_records(dir), (size_t)HASH_RECORD_MAX);
	ASSERT_TRUE(hash_record_holds(dir, &first, "sha256", SHA_B));
	ASSERT_TRUE(hash_record_holds(dir, &s, "sha256", SHA_A));
	close(fd0);
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
