/* SPDX-License-Identifier: Apache-2.0 */
#include "parse-util.h"
#include "tests.h"

static int port(const char *s, size_t len)
{
	uint16_t v = 0;
	int r = parse_port(s, len, &v);

	return r < 0 ? r : v;
}

TEST(ports)
{
	ASSERT_EQ(port("1", 1), 1);
	ASSERT_EQ(port("8090", 4), 8090);
	ASSERT_EQ(port("65535", 5), 65535);
	ASSERT_EQ(port("0443", 4), 443);
	ASSERT_EQ(port("80", 1), 8); /* only @len bytes */
	ASSERT_EQ(port("0", 1), -EINVAL);
	ASSERT_EQ(port("00000", 5), -EINVAL);
	ASSERT_EQ(port("65536", 5), -EINVAL);
	ASSERT_EQ(port("99999", 5), -EINVAL);
	ASSERT_EQ(port("100000", 6), -EINVAL);
	ASSERT_EQ(port("000080", 6), -EINVAL);
	ASSERT_EQ(port("", 0), -EINVAL);
	ASSERT_EQ(port(NULL, 0), -EINVAL);
	ASSERT_EQ(port("-1", 2), -EINVAL);
	ASSERT_EQ(port("+80", 3), -EINVAL);
	ASSERT_EQ(port(" 80", 3), -EINVAL);
	ASSERT_EQ(port("8a", 2), -EINVAL);
	ASSERT_EQ(port("80\0", 3), -EINVAL);
	ASSERT_EQ(port("*", 1), -EINVAL);
}

TEST(uint_range)
{
	unsigned v = 0;

	ASSERT_OK(parse_uint_range("16", 16, 1024, &v));
	ASSERT_EQ(v, 16);
	ASSERT_ERROR(parse_uint_range("15", 16, 1024, &v), ERANGE);
	ASSERT_ERROR(parse_uint_range("1025", 16, 1024, &v), ERANGE);
	ASSERT_ERROR(parse_uint_range(" 20", 16, 1024, &v), EINVAL);
	ASSERT_ERROR(parse_uint_range("20x", 16, 1024, &v), EINVAL);
	ASSERT_ERROR(parse_uint_range("", 16, 1024, &v), EINVAL);
	ASSERT_ERROR(parse_uint_range(NULL, 16, 1024, &v), EINVAL);
	ASSERT_EQ(v, 16);
}

int main(void)
{
	return tests_run();
}
