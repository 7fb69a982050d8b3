/* SPDX-License-Identifier: Apache-2.0 */
/* The boot disk (src/shared/boot-disk.c): what berth-vmm writes, berth-init reads back,
 * and what the reader refuses. */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "boot-disk.h"
#include "macros.h"
#include "policy.h"
#include "tests.h"

#define MAGIC_LEN (sizeof(BOOT_DISK_MAGIC) - 1)

static char tmpdir[] = "/tmp/test-boot-disk.XXXXXX";

static void tmpdir_make(void)
{
	ASSERT_NOT_NULL(mkdtemp(tmpdir));
}

/* A new file in tmpdir, open read-write, already unlinked. */
static int temp_file(const char *name)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ASSERT_OK(fd);
	ASSERT_OK(unlink(path));
	return fd;
}

static void write_all(int fd, const void *buf, size_t len)
{
	for (size_t done = 0; done < len;) {
		ssize_t n = write(fd, (const char *)buf + done, len - done);

		ASSERT_TRUE(n > 0);
		done += (size_t)n;
	}
}

/* The whole file, in a buffer of exactly its size (so that a read past the end shows). */
static char *read_back(int fd, size_t *ret_len)
{
	struct stat st;
	char *buf;

	ASSERT_OK(fstat(fd, &st));
	ASSERT_TRUE(st.st_size > 0);
	buf = malloc((size_t)st.st_size);
	ASSERT_NOT_NULL(buf);
	ASSERT_EQ(pread(fd, buf, (size_t)st.st_size, 0), st.st_size);
	*ret_len = (size_t)st.st_size;
	return buf;
}

/* A boot plan as berth-vmm makes one: each app's compiled policy and its warnings. */
static json_t *plan_for(size_t n_apps, const char *padding)
{
	json_t *apps = json_array();

	for (size_t i = 0; i < n_apps; i++) {
		char name[32], share[16];
		json_t *caps = json_pack("[s]", "filesystem:write:/workspace");
		CapabilityPolicy *p = NULL;

		snprintf(name, sizeof(name), "app-%zu", i);
		snprintf(share, sizeof(share), "app%zu", i);
		PolicyInput in = {.app_name = name, .capabilities = caps, .cwd = "/app"};
		ASSERT_OK(capability_policy_compile(&in, NULL, NULL, &p));
		json_array_append_new(apps,
				      json_pack("{s:s, s:s, s:o, s:[s]}", "name", name, "share",
						share, "policy", capability_policy_to_json(p),
						"warnings", padding ? padding : "none"));
		capability_policy_free(p);
		json_decref(caps);
	}
	return json_pack("{s:o}", "apps", apps);
}

/* A BERTHSEC1 image as the CLI writes one: magic, JSON, NULs to @size. */
static int secrets_file(size_t size)
{
	static const char body[] =
		"BERTHSEC1\n{\"shared\":{\"TOKEN\":\"s3cret\"},\"apps\":{\"app-0\":{\"KEY\":\"v\"}}}";
	char *img = calloc(1, size);
	int fd = temp_file("secrets.img");

	ASSERT_TRUE(size >= sizeof(body));
	memcpy(img, body, sizeof(body) - 1);
	for (size_t i = sizeof(body); i < size; i += 97)
		img[i] = (char)('a' + i % 26); /* bytes that must arrive as they are */
	write_all(fd, img, size);
	free(img);
	/* Left at the end of the file: the writer must read it from offset 0 anyway. */
	return fd;
}

static size_t round_up(size_t n)
{
	return (n + BOOT_DISK_SECTOR - 1) / BOOT_DISK_SECTOR * BOOT_DISK_SECTOR;
}

/* Write @plan (and @secrets_fd) to a disk, check its layout, parse it back. */
static void round_trip(const json_t *plan, int secrets_fd)
{
	char err[256] = "", *buf, *sec_expected = NULL;
	size_t len, header_len, sec_size = 0, sec_len = SIZE_MAX;
	const char *sec = (const char *)1;
	json_t *got = NULL, *header;
	int fd = temp_file("boot.img");

	if (secrets_fd >= 0) {
		struct stat st;

		ASSERT_OK(fstat(secrets_fd, &st));
		sec_size = (size_t)st.st_size;
		sec_expected = malloc(sec_size);
		ASSERT_EQ(pread(secrets_fd, sec_expected, sec_size, 0), (ssize_t)sec_size);
	}
	if (boot_disk_write(fd, plan, secrets_fd, err, sizeof(err)) < 0)
		TEST_FAIL("boot_disk_write: %s", err);
	buf = read_back(fd, &len);
	ASSERT_EQ(len % BOOT_DISK_SECTOR, 0);
	ASSERT_TRUE(memcmp(buf, BOOT_DISK_MAGIC, MAGIC_LEN) == 0);
	/* The header: compact JSON, then NULs to the end of its sector. */
	header_len = strnlen(buf + MAGIC_LEN, len - MAGIC_LEN);
	ASSERT_TRUE(header_len < len - MAGIC_LEN);
	header = json_loadb(buf + MAGIC_LEN, header_len, JSON_REJECT_DUPLICATES, NULL);
	ASSERT_NOT_NULL(header);
	ASSERT_EQ(json_integer_value(json_object_get(header, "schema")), BOOT_DISK_SCHEMA);
	ASSERT_TRUE(json_equal(json_object_get(header, "plan"), (json_t *)plan));

	if (boot_disk_parse(buf, len, &got, &sec, &sec_len, err, sizeof(err)) < 0)
		TEST_FAIL("boot_disk_parse: %s", err);
	ASSERT_NOT_NULL(got);
	ASSERT_TRUE(json_equal(got, (json_t *)plan));
	if (secrets_fd < 0) {
		ASSERT_TRUE(json_is_null(json_object_get(header, "secrets")));
		ASSERT_TRUE(sec == NULL);
		ASSERT_EQ(sec_len, 0);
		ASSERT_EQ(len, round_up(MAGIC_LEN + header_len + 1));
		for (size_t i = MAGIC_LEN + header_len; i < len; i++)
			ASSERT_EQ(buf[i], 0);
	} else {
		size_t off = (size_t)(sec - buf);

		ASSERT_TRUE(sec > buf && sec < buf + len);
		ASSERT_EQ(off % BOOT_DISK_SECTOR, 0);
		ASSERT_EQ(off, round_up(MAGIC_LEN + header_len + 1));
		ASSERT_EQ(json_integer_value(
				  json_object_get(json_object_get(header, "secrets"), "offset")),
			  off);
		ASSERT_EQ(sec_len, sec_size);
		ASSERT_TRUE(memcmp(sec, sec_expected, sec_size) == 0);
		ASSERT_EQ(len, round_up(off + sec_size));
		for (size_t i = MAGIC_LEN + header_len; i < off; i++)
			ASSERT_EQ(buf[i], 0);
		for (size_t i = off + sec_size; i < len; i++)
			ASSERT_EQ(buf[i], 0);
	}
	json_decref(header);
	json_decref(got);
	free(buf);
	free(sec_expected);
	close(fd);
}

TEST(round_trip_without_secrets)
{
	json_t *plan;

	tmpdir_make();
	plan = plan_for(1, NULL);
	round_trip(plan, -1);
	json_decref(plan);
	plan = plan_for(12, NULL);
	round_trip(plan, -1);
	json_decref(plan);
	plan = json_object();
	round_trip(plan, -1);
	json_decref(plan);
	rmdir(tmpdir);
}

TEST(round_trip_with_secrets)
{
	static const size_t sizes[] = {512, 1000, 4096, 70001, BOOT_DISK_SECRETS_MAX};
	json_t *plan;

	tmpdir_make();
	plan = plan_for(3, NULL);
	for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
		int sfd = secrets_file(sizes[i]);

		round_trip(plan, sfd);
		close(sfd);
	}
	json_decref(plan);
	rmdir(tmpdir);
}

/* The secrets' offset is written into the header it follows: every header length, across
 * several sector boundaries, gets an offset that is its own rounded-up end. */
TEST(secrets_offset_settles_at_every_header_length)
{
	char padding[1400];
	int sfd;

	tmpdir_make();
	sfd = secrets_file(600);
	for (size_t n = 0; n < sizeof(padding) - 1; n += 7) {
		json_t *plan;

		memset(padding, 'p', n);
		padding[n] = '\0';
		plan = plan_for(1, padding);
		round_trip(plan, sfd);
		json_decref(plan);
	}
	close(sfd);
	rmdir(tmpdir);
}

TEST(write_refuses_empty_or_oversized_secrets)
{
	char err[256] = "";
	json_t *plan;
	int fd, sfd;

	tmpdir_make();
	plan = plan_for(1, NULL);
	fd = temp_file("boot.img");
	sfd = temp_file("empty.img");
	ASSERT_ERROR(boot_disk_write(fd, plan, sfd, err, sizeof(err)), EBADMSG);
	ASSERT_STREQ(err, "the secrets image is empty or larger than 1048576 bytes");
	close(sfd);
	err[0] = '\0';
	sfd = secrets_file(BOOT_DISK_SECRETS_MAX + 1);
	ASSERT_ERROR(boot_disk_write(fd, plan, sfd, err, sizeof(err)), EBADMSG);
	ASSERT_STREQ(err, "the secrets image is empty or larger than 1048576 bytes");
	close(sfd);
	close(fd);
	json_decref(plan);
	rmdir(tmpdir);
}

TEST(write_refuses_a_plan_over_the_header_cap)
{
	size_t n = BOOT_DISK_HEADER_MAX;
	char err[256] = "", *big = malloc(n + 1);
	json_t *plan;
	struct stat st;
	int fd;

	tmpdir_make();
	memset(big, 'w', n);
	big[n] = '\0';
	plan = json_pack("{s:[s]}", "apps", big);
	fd = temp_file("boot.img");
	ASSERT_ERROR(boot_disk_write(fd, plan, -1, err, sizeof(err)), EBADMSG);
	ASSERT_STREQ(err, "the boot plan is larger than 4194304 bytes; boot fewer apps");
	ASSERT_OK(fstat(fd, &st));
	ASSERT_EQ(st.st_size, 0);
	close(fd);
	json_decref(plan);
	free(big);
	rmdir(tmpdir);
}

/* --- the reader's refusals ------------------------------------------------------------- */

/* A disk of exactly @len bytes: the magic, @header, then NULs. */
static char *disk(const char *header, size_t len)
{
	char *buf = malloc(len);

	ASSERT_NOT_NULL(buf);
	memset(buf, 0, len);
	ASSERT_TRUE(MAGIC_LEN + strlen(header) <= len);
	memcpy(buf, BOOT_DISK_MAGIC, MAGIC_LEN);
	memcpy(buf + MAGIC_LEN, header, strlen(header));
	return buf;
}

/* boot_disk_parse() of @buf must fail with -EBADMSG and say @want (a prefix with @prefix),
 * leaving the plan alone. */
static void refused(const char *buf, size_t len, const char *want, bool prefix)
{
	char err[256] = "";
	json_t *plan = NULL;
	const char *sec = NULL;
	size_t sec_len = 0;

	ASSERT_ERROR(boot_disk_parse(buf, len, &plan, &sec, &sec_len, err, sizeof(err)), EBADMSG);
	ASSERT_TRUE(plan == NULL);
	if (prefix ? !strneq(err, want, strlen(want)) : !streq(err, want))
		TEST_FAIL("expected \"%s\"%s, got \"%s\"", want, prefix ? "..." : "", err);
}

static void refused_header_as(const char *header, size_t len, const char *want, bool prefix)
{
	char *buf = disk(header, len);

	refused(buf, len, want, prefix);
	free(buf);
}

static void refused_header(const char *header, size_t len, const char *want)
{
	refused_header_as(header, len, want, false);
}

/* Refused, the message starting with @want (jansson's own words follow). */
static void refused_header_prefix(const char *header, size_t len, const char *want)
{
	refused_header_as(header, len, want, true);
}

static void accepted_header(const char *header, size_t len, size_t want_offset, size_t want_len)
{
	char err[256] = "", *buf = disk(header, len);
	json_t *plan = NULL;
	const char *sec = NULL;
	size_t sec_len = 0;

	if (boot_disk_parse(buf, len, &plan, &sec, &sec_len, err, sizeof(err)) < 0)
		TEST_FAIL("refused %s: %s", header, err);
	ASSERT_TRUE(json_is_object(plan));
	if (want_len) {
		ASSERT_EQ(sec - buf, want_offset);
		ASSERT_EQ(sec_len, want_len);
	} else
		ASSERT_TRUE(sec == NULL && sec_len == 0);
	json_decref(plan);
	free(buf);
}

#define OUTSIDE "boot disk: the secrets lie outside the disk"

TEST(parse_refuses_bad_magic)
{
	char *buf;

	buf = disk("{\"schema\":1,\"plan\":{},\"secrets\":null}", 512);
	buf[9] = '2'; /* BERTHBOOT2 */
	refused(buf, 512, "boot disk: not a BERTHBOOT1 disk", false);
	buf[9] = '1';
	buf[10] = '\r';
	refused(buf, 512, "boot disk: not a BERTHBOOT1 disk", false);
	buf[10] = '\n';
	/* Shorter than the magic, down to nothing. */
	for (size_t n = 0; n < MAGIC_LEN; n++) {
		char *shrt = malloc(n ?: 1);

		memcpy(shrt, buf, n);
		refused(shrt, n, "boot disk: not a BERTHBOOT1 disk", false);
		free(shrt);
	}
	/* A secrets image is not a boot disk. */
	memcpy(buf, "BERTHSEC1\n{}", 12);
	refused(buf, 512, "boot disk: not a BERTHBOOT1 disk", false);
	free(buf);
	/* The magic alone: no header to end. */
	buf = disk("", MAGIC_LEN);
	refused(buf, MAGIC_LEN, "boot disk: the header has no end within 4194304 bytes", false);
	free(buf);
}

TEST(parse_refuses_a_header_without_its_end)
{
	const char *no_end = "boot disk: the header has no end within 4194304 bytes";
	static const char head[] = "{\"schema\":1,\"plan\":{}}";
	size_t big = MAGIC_LEN + BOOT_DISK_HEADER_MAX;
	char *buf;

	/* A short disk with no NUL at all. */
	buf = disk("", 600);
	memset(buf + MAGIC_LEN, ' ', 600 - MAGIC_LEN);
	memcpy(buf + MAGIC_LEN, head, strlen(head));
	refused(buf, 600, no_end, false);
	free(buf);

	/* The NUL just past the cap: not looked for. */
	buf = disk("", big + 1);
	memset(buf + MAGIC_LEN, ' ', BOOT_DISK_HEADER_MAX);
	memcpy(buf + MAGIC_LEN, head, strlen(head));
	buf[big] = '\0';
	refused(buf, big + 1, no_end, false);
	/* The disk ends at the cap, without a NUL. */
	refused(buf, big, no_end, false);
	/* The last byte within the cap is a NUL: a header of HEADER_MAX - 1 bytes is read. */
	buf[big - 1] = '\0';
	json_t *plan = NULL;
	const char *sec = NULL;
	size_t sec_len = 0;
	char err[256] = "";
	if (boot_disk_parse(buf, big, &plan, &sec, &sec_len, err, sizeof(err)) < 0)
		TEST_FAIL("refused a header of the largest size: %s", err);
	ASSERT_TRUE(json_is_object(plan));
	ASSERT_TRUE(sec == NULL);
	json_decref(plan);
	free(buf);
}

TEST(parse_refuses_what_is_not_a_header)
{
	refused_header_prefix("nope", 512, "boot disk: the header is not a JSON object (");
	refused_header_prefix("{\"schema\":1,", 512,
			      "boot disk: the header is not a JSON object (");
	refused_header("[]", 512, "boot disk: the header is not a JSON object (wrong type)");
	refused_header("[{\"schema\":1,\"plan\":{}}]", 512,
		       "boot disk: the header is not a JSON object (wrong type)");
	refused_header_prefix("", 512, "boot disk: the header is not a JSON object (");
	refused_header_prefix("{\"schema\":1,\"plan\":{}} {}", 512,
			      "boot disk: the header is not a JSON object (");
	/* Duplicate keys: another reader could take the other one. */
	refused_header_prefix("{\"schema\":1,\"plan\":{},\"plan\":{\"apps\":[]}}", 512,
			      "boot disk: the header is not a JSON object (");
	refused_header_prefix("{\"schema\":1,\"plan\":{\"apps\":[],\"apps\":[]}}", 512,
			      "boot disk: the header is not a JSON object (");
}

TEST(parse_refuses_another_schema)
{
	refused_header("{\"schema\":2,\"plan\":{}}", 512, "boot disk: schema 2, not 1");
	refused_header("{\"schema\":0,\"plan\":{}}", 512, "boot disk: schema 0, not 1");
	refused_header("{\"schema\":-1,\"plan\":{}}", 512, "boot disk: schema -1, not 1");
	refused_header("{\"plan\":{}}", 512, "boot disk: schema 0, not 1");
	refused_header("{\"schema\":\"1\",\"plan\":{}}", 512, "boot disk: schema 0, not 1");
	refused_header("{\"schema\":1.0,\"plan\":{}}", 512, "boot disk: schema 0, not 1");
}

TEST(parse_refuses_no_plan)
{
	refused_header("{\"schema\":1}", 512, "boot disk: no plan");
	refused_header("{\"schema\":1,\"plan\":null}", 512, "boot disk: no plan");
	refused_header("{\"schema\":1,\"plan\":[]}", 512, "boot disk: no plan");
	refused_header("{\"schema\":1,\"plan\":\"x\"}", 512, "boot disk: no plan");
	refused_header("{\"schema\":1,\"plan\":{},\"secrets\":\"x\"}", 512,
		       "boot disk: secrets is neither an object nor null");
	refused_header("{\"schema\":1,\"plan\":{},\"secrets\":[512,1]}", 512,
		       "boot disk: secrets is neither an object nor null");
	accepted_header("{\"schema\":1,\"plan\":{}}", 512, 0, 0);
	accepted_header("{\"schema\":1,\"plan\":{},\"secrets\":null}", 512, 0, 0);
}

TEST(parse_refuses_secrets_outside_the_disk)
{
	char header[160];
#define SECRETS(off, n)                                                                      \
	(snprintf(header, sizeof(header), "{\"schema\":1,\"plan\":{},\"secrets\":%s%s%s%s}", \
		  "{\"offset\":", off, ",\"length\":", n "}"),                               \
	 header)

	/* A disk of 2048 bytes: the secrets fit from 512 to 2048. */
	accepted_header(SECRETS("512", "1536"), 2048, 512, 1536);
	accepted_header(SECRETS("512", "1"), 2048, 512, 1);
	accepted_header(SECRETS("2047", "1"), 2048, 2047, 1);
	refused_header(SECRETS("512", "1537"), 2048, OUTSIDE);
	refused_header(SECRETS("2048", "1"), 2048, OUTSIDE);
	refused_header(SECRETS("2049", "1"), 2048, OUTSIDE);
	refused_header(SECRETS("1024", "4096"), 2048, OUTSIDE);
	refused_header(SECRETS("4611686018427387904", "512"), 2048, OUTSIDE);
	refused_header(SECRETS("9223372036854775807", "1"), 2048, OUTSIDE);
	refused_header(SECRETS("512", "9223372036854775807"), 2048, OUTSIDE);
	refused_header_prefix(SECRETS("512", "18446744073709551104"), 2048,
			      "boot disk: the header is not a JSON object (");
	/* Empty, negative, or more than a secrets image may hold. */
	refused_header(SECRETS("512", "0"), 2048, OUTSIDE);
	refused_header(SECRETS("512", "-1"), 2048, OUTSIDE);
	refused_header(SECRETS("-512", "512"), 2048, OUTSIDE);
	{
		size_t len = 512 + BOOT_DISK_SECRETS_MAX + 512;

		accepted_header(SECRETS("512", "1048576"), len, 512, BOOT_DISK_SECRETS_MAX);
		refused_header(SECRETS("512", "1048577"), len, OUTSIDE);
	}
	/* Not numbers. */
	refused_header(SECRETS("\"512\"", "1"), 2048, OUTSIDE);
	refused_header(SECRETS("512", "\"1\""), 2048, OUTSIDE);
	refused_header(SECRETS("512.5", "1"), 2048, OUTSIDE);
	refused_header("{\"schema\":1,\"plan\":{},\"secrets\":{}}", 2048, OUTSIDE);
	refused_header("{\"schema\":1,\"plan\":{},\"secrets\":{\"offset\":512}}", 2048, OUTSIDE);
#undef SECRETS
}

TEST(parse_refuses_secrets_overlapping_the_header)
{
	char header[160], off[32];
	size_t end;

	/* Where the header's NUL lies, the secrets may not start; one byte later they may. */
	snprintf(header, sizeof(header),
		 "{\"schema\":1,\"plan\":{},\"secrets\":{\"offset\":%-4d,\"length\":8}}", 0);
	end = MAGIC_LEN + strlen(header); /* the NUL's offset */
	for (size_t o = 0; o <= end + 1; o++) {
		snprintf(off, sizeof(off), "%-4zu", o);
		snprintf(header, sizeof(header),
			 "{\"schema\":1,\"plan\":{},\"secrets\":{\"offset\":%s,\"length\":8}}",
			 off);
		ASSERT_EQ(MAGIC_LEN + strlen(header), end);
		if (o <= end)
			refused_header(header, 1024, OUTSIDE);
		else
			accepted_header(header, 1024, o, 8);
	}
}

TEST(parse_messages_fit_a_small_buffer)
{
	char *buf = disk("{\"schema\":7,\"plan\":{}}", 512), err[8];
	json_t *plan = NULL;
	const char *sec;
	size_t sec_len;

	memset(err, 'x', sizeof(err));
	ASSERT_ERROR(boot_disk_parse(buf, 512, &plan, &sec, &sec_len, err, sizeof(err)), EBADMSG);
	ASSERT_STREQ(err, "boot di");
	free(buf);
}

int main(void)
{
	return tests_run();
}
