/* SPDX-License-Identifier: Apache-2.0 */
#include <stdbool.h>
#include <string.h>

#include "macros.h"
#include "random-util.h"
#include "tests.h"

static bool all_hex(const char *s)
{
	return strspn(s, "0123456789abcdef") == strlen(s);
}

TEST(hex_ids)
{
	char a[2 * 100 + 1], b[2 * 100 + 1];

	memset(a, 'x', sizeof(a));
	random_hex(a, 3);
	ASSERT_EQ(strlen(a), 6);
	ASSERT_TRUE(all_hex(a));
	/* Longer than one getrandom() chunk of random_hex. */
	random_hex(a, 100);
	random_hex(b, 100);
	ASSERT_EQ(strlen(a), 200);
	ASSERT_TRUE(all_hex(a));
	ASSERT_FALSE(streq(a, b));
	random_hex(a, 0);
	ASSERT_STREQ(a, "");
}

TEST(uuid_v4)
{
	char u[RANDOM_UUID_LEN + 1], v[RANDOM_UUID_LEN + 1];

	random_uuid(u);
	random_uuid(v);
	ASSERT_EQ(strlen(u), RANDOM_UUID_LEN);
	ASSERT_TRUE(u[8] == '-' && u[13] == '-' && u[18] == '-' && u[23] == '-');
	ASSERT_EQ(u[14], '4');
	ASSERT_TRUE(strchr("89ab", u[19]) != NULL);
	ASSERT_FALSE(streq(u, v));
}

TEST(bytes_fill_everything)
{
	unsigned char b[4096] = {};
	size_t zero = 0;

	random_bytes(b, sizeof(b));
	for (size_t i = 0; i < sizeof(b); i++)
		zero += b[i] == 0;
	ASSERT_TRUE(zero < 64); /* about 16 expected */
}

int main(void)
{
	return tests_run();
}
