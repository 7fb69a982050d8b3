/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "digest.h"
#include "macros.h"
#include "tests.h"

TEST(sha256_known_vectors)
{
	char hex[SHA256_HEX_LEN + 1];

	ASSERT_OK(sha256_buffer_hex("", 0, hex));
	ASSERT_STREQ(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	ASSERT_OK(sha256_buffer_hex("abc", 3, hex));
	ASSERT_STREQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(sha256_file_matches_buffer)
{
	char path[] = "/tmp/berth-test-digest-XXXXXX", a[SHA256_HEX_LEN + 1], b[SHA256_HEX_LEN + 1];
	static char data[200000];
	uint64_t size = 0;
	int fd = mkstemp(path);

	ASSERT_TRUE(fd >= 0);
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7);
	ASSERT_EQ(write(fd, data, sizeof(data)), sizeof(data));
	close(fd);
	ASSERT_OK(sha256_file_hex(path, a, &size));
	unlink(path);
	ASSERT_OK(sha256_buffer_hex(data, sizeof(data), b));
	ASSERT_STREQ(a, b);
	ASSERT_EQ(size, sizeof(data));
}

TEST(sha256_hex_valid)
{
	ASSERT_TRUE(sha256_hex_valid(
		"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
	ASSERT_FALSE(sha256_hex_valid(
		"E3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
	ASSERT_FALSE(sha256_hex_valid("e3b0"));
	ASSERT_FALSE(sha256_hex_valid(NULL));
}

TEST(chunked_digest_sparse_equals_dense)
{
	char sparse[] = "/tmp/berth-test-sparse-XXXXXX", dense[] = "/tmp/berth-test-dense-XXXXXX";
	char a[SHA256_HEX_LEN + 1], b[SHA256_HEX_LEN + 1];
	static char zeros[1 << 20];
	uint64_t hashed_a = 0, hashed_b = 0;
	int fa = mkstemp(sparse), fb = mkstemp(dense);

	ASSERT_TRUE(fa >= 0 && fb >= 0);
	unlink(sparse);
	unlink(dense);
	/* 4 MiB: data only in the third MiB of the sparse one; the dense one written in full. */
	ASSERT_OK(ftruncate(fa, 4 << 20));
	ASSERT_EQ(pwrite(fa, "hello", 5, (2 << 20) + 7), 5);
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(write(fb, zeros, sizeof(zeros)), sizeof(zeros));
	ASSERT_EQ(pwrite(fb, "hello", 5, (2 << 20) + 7), 5);
	ASSERT_OK(sha256_chunked_fd_hex(fa, 1 << 20, a, &hashed_a));
	ASSERT_OK(sha256_chunked_fd_hex(fb, 1 << 20, b, &hashed_b));
	ASSERT_STREQ(a, b);
	ASSERT_TRUE(hashed_a < hashed_b);
	ASSERT_EQ(hashed_b, 4 << 20);
	/* and a byte changed changes it */
	ASSERT_EQ(pwrite(fb, "j", 1, (2 << 20) + 7), 1);
	ASSERT_OK(sha256_chunked_fd_hex(fb, 1 << 20, b, NULL));
	ASSERT_FALSE(strcmp(a, b) == 0);
	close(fa);
	close(fb);
}

TEST(chunked_copy_writes_what_it_hashes_and_no_zero_page)
{
	char src_path[] = "/tmp/berth-test-src-XXXXXX";
	char a[SHA256_HEX_LEN + 1], b[SHA256_HEX_LEN + 1];
	static unsigned char page[4096], back[3 << 20];
	int src = mkstemp(src_path), out = memfd_create("test-copy", MFD_CLOEXEC);
	struct stat st;

	ASSERT_TRUE(src >= 0 && out >= 0);
	unlink(src_path);
	/* 3 MiB: a page of data, a page of written zeros, data at the very end (a short tail). */
	ASSERT_OK(ftruncate(src, 3 << 20));
	ASSERT_OK(ftruncate(out, 3 << 20));
	memset(page, 0xAB, sizeof(page));
	ASSERT_EQ(pwrite(src, page, sizeof(page), 8192), sizeof(page));
	memset(page, 0, sizeof(page));
	ASSERT_EQ(pwrite(src, page, sizeof(page), 1 << 20), sizeof(page));
	ASSERT_EQ(pwrite(src, "end", 3, (3 << 20) - 3), 3);
	ASSERT_OK(sha256_chunked_copy_fd_hex(src, 64 * 1024, out, a, NULL));
	ASSERT_OK(sha256_chunked_fd_hex(src, 64 * 1024, b, NULL));
	ASSERT_STREQ(a, b);
	/* the copy is the source, byte for byte */
	ASSERT_OK(sha256_chunked_fd_hex(out, 64 * 1024, b, NULL));
	ASSERT_STREQ(a, b);
	ASSERT_EQ(pread(out, back, sizeof(back), 0), sizeof(back));
	ASSERT_EQ(back[8192], 0xAB);
	ASSERT_EQ(back[(3 << 20) - 1], 'd');
	/* and only the two pages with data were written */
	ASSERT_OK(fstat(out, &st));
	ASSERT_EQ(st.st_blocks * 512, 2 * 4096);
	close(src);
	close(out);
}

/*
 * The digest is read by several workers, each taking every n-th chunk, in rounds of 1024
 * chunks: over 2000 chunks of 4 KiB, data in scattered ones and a short tail, it
 * must still be the sha256 of the chunks' sha256s in file order, and the copy the source
 * (its last page too, shorter than a page).
 */
TEST(chunked_digest_in_order_over_rounds_and_workers)
{
	enum { CHUNK = 4096, CHUNKS = 2051 };
	const size_t size = (size_t)CHUNKS * CHUNK - 100;
	char path[] = "/tmp/berth-test-rounds-XXXXXX", a[SHA256_HEX_LEN + 1], b[SHA256_HEX_LEN + 1],
	     want[SHA256_HEX_LEN + 1];
	unsigned char *data = calloc(1, size), *digests = malloc((size_t)CHUNKS * 32);
	int fd = mkstemp(path), out = memfd_create("test-rounds", MFD_CLOEXEC);

	ASSERT_TRUE(data && digests && fd >= 0 && out >= 0);
	unlink(path);
	ASSERT_OK(ftruncate(fd, (off_t)size));
	ASSERT_OK(ftruncate(out, (off_t)size));
	for (size_t c = 0; c < CHUNKS; c += 7) {
		size_t off = c * CHUNK + (c % CHUNK);

		if (off < size) {
			data[off] = (unsigned char)(c | 1);
			ASSERT_EQ(pwrite(fd, &data[off], 1, (off_t)off), 1);
		}
	}
	data[size - 1] = 'z';
	ASSERT_EQ(pwrite(fd, "z", 1, (off_t)(size - 1)), 1);
	for (size_t c = 0; c < CHUNKS; c++)
		SHA256(data + c * CHUNK, MIN((size_t)CHUNK, size - c * CHUNK), digests + c * 32);
	ASSERT_OK(sha256_buffer_hex(digests, (size_t)CHUNKS * 32, want));
	/* However many workers there are, whatever this machine's CPUs: one to four. */
	for (unsigned workers = 1; workers <= 4; workers++) {
		uint64_t hashed = 0;

		ASSERT_OK(ftruncate(out, 0));
		ASSERT_OK(ftruncate(out, (off_t)size));
		ASSERT_OK(sha256_chunked_copy_fd_hex_workers(fd, CHUNK, out, workers, a, &hashed));
		ASSERT_STREQ(a, want);
		ASSERT_TRUE(hashed > 0 && hashed < size);
		ASSERT_OK(sha256_chunked_fd_hex(out, CHUNK, b, NULL));
		ASSERT_STREQ(b, want);
		/* a worker's failed write fails the whole, whichever worker it was */
		ASSERT_EQ(sha256_chunked_copy_fd_hex_workers(fd, CHUNK, 9999, workers, a, NULL),
			  -EBADF);
	}
	/* and the one callers use, one worker per CPU */
	ASSERT_OK(sha256_chunked_fd_hex(fd, CHUNK, a, NULL));
	ASSERT_STREQ(a, want);
	free(data);
	free(digests);
	close(fd);
	close(out);
}

int main(void)
{
	return tests_run();
}
