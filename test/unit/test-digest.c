/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "digest.h"
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

int main(void)
{
	return tests_run();
}
