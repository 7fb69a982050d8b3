/* SPDX-License-Identifier: Apache-2.0 */
/* The terminal web view's checks of what a peer sends: the login, the origin, the
 * websocket messages and their assembly (src/terminal-view/auth.h, message.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "message.h"
#include "tests.h"

#define CRED "berth:AAAAbbbbCCCCdddd0123456789-_xyz"

static bool auth(const char *value)
{
	return view_auth_ok(value, value ? strlen(value) : 0, CRED);
}

TEST(credential_shape)
{
	ASSERT_TRUE(view_credential_valid(CRED, strlen(CRED)));
	ASSERT_FALSE(view_credential_valid("berth:short", 11));
	ASSERT_FALSE(view_credential_valid("admin:AAAAbbbbCCCCdddd0123", 26));
	ASSERT_FALSE(view_credential_valid("berth:AAAAbbbbCCCCdddd01+/", 26));
	ASSERT_FALSE(view_credential_valid("berth:AAAAbbbb CCCCdddd0123", 27));
	ASSERT_FALSE(view_credential_valid(NULL, 0));
}

TEST(basic_auth)
{
	/* base64("berth:AAAAbbbbCCCCdddd0123456789-_xyz") */
	ASSERT_TRUE(auth("Basic YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eg=="));
	ASSERT_TRUE(auth("basic   YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eg==  "));
	ASSERT_TRUE(auth("\tBASIC\tYmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eg=="));
	/* Absent, another scheme, no blank after the scheme, nothing after it. */
	ASSERT_FALSE(auth(NULL));
	ASSERT_FALSE(auth(""));
	ASSERT_FALSE(auth("Bearer YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eg=="));
	ASSERT_FALSE(auth("BasicYmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eg=="));
	ASSERT_FALSE(auth("Basic"));
	ASSERT_FALSE(auth("Basic "));
	/* The padding is required, and only at the end; no other character. */
	ASSERT_FALSE(auth("Basic YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eg"));
	ASSERT_FALSE(auth("Basic YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eg=="
			  "YmVy"));
	ASSERT_FALSE(auth("Basic YmVy=GRkZA=="));
	ASSERT_FALSE(auth("Basic YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eg==,x"));
	ASSERT_FALSE(auth("Basic YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eg== x"));
	/* Base64url is not base64. */
	ASSERT_FALSE(auth("Basic YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eg-_"));
	/* Non-zero bits under the padding: not the canonical form. */
	ASSERT_FALSE(auth("Basic YR=="));
	/* The right user with another password, the right password with another user, a
	 * prefix, the login with something after it. */
	ASSERT_FALSE(auth("Basic YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5eA=="));
	ASSERT_FALSE(auth("Basic cm9vdDpBQUFBYmJiYkNDQ0NkZGRkMDEyMzQ1Njc4OS1feHl6"));
	ASSERT_FALSE(auth("Basic YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5"));
	ASSERT_FALSE(auth("Basic YmVydGg6QUFBQWJiYmJDQ0NDZGRkZDAxMjM0NTY3ODktX3h5ejA="));
}

TEST(basic_auth_caps)
{
	char *big = malloc(VIEW_HEADER_MAX + 16);

	ASSERT_NOT_NULL(big);
	memset(big, 'A', VIEW_HEADER_MAX + 15);
	memcpy(big, "Basic ", 6);
	big[VIEW_HEADER_MAX + 15] = '\0';
	/* Too long a header, and a decoded value longer than any login: refused, not read. */
	ASSERT_FALSE(view_auth_ok(big, strlen(big), CRED));
	big[200] = '\0';
	ASSERT_FALSE(view_auth_ok(big, strlen(big), CRED));
	free(big);
	ASSERT_FALSE(view_auth_ok("Basic YmVydGg6", 14, NULL));
}

TEST(origin)
{
	ASSERT_TRUE(view_origin_ok(NULL, "127.0.0.1:7681"));
	ASSERT_TRUE(view_origin_ok(NULL, NULL));
	ASSERT_TRUE(view_origin_ok("http://127.0.0.1:51234", "127.0.0.1:51234"));
	ASSERT_TRUE(view_origin_ok("http://LocalHost:5", "localhost:5"));
	ASSERT_FALSE(view_origin_ok("http://evil.example", "127.0.0.1:51234"));
	ASSERT_FALSE(view_origin_ok("http://127.0.0.1:51235", "127.0.0.1:51234"));
	ASSERT_FALSE(view_origin_ok("https://127.0.0.1:51234", "127.0.0.1:51234"));
	ASSERT_FALSE(view_origin_ok("null", "127.0.0.1:51234"));
	ASSERT_FALSE(view_origin_ok("http://127.0.0.1:51234", NULL));
	ASSERT_FALSE(view_origin_ok("http://", ""));
}

static int parse(const char *s, ViewMessage *m)
{
	return view_message_parse((const uint8_t *)s, strlen(s), m);
}

TEST(messages)
{
	ViewMessage m;

	ASSERT_OK(parse("0ls -l\r", &m));
	ASSERT_EQ(m.kind, VIEW_MESSAGE_INPUT);
	ASSERT_EQ(m.len, 6);
	ASSERT_TRUE(memcmp(m.data, "ls -l\r", 6) == 0);
	ASSERT_OK(parse("0", &m));
	ASSERT_EQ(m.len, 0);
	ASSERT_OK(parse("1120,40", &m));
	ASSERT_EQ(m.kind, VIEW_MESSAGE_RESIZE);
	ASSERT_EQ(m.cols, 120);
	ASSERT_EQ(m.rows, 40);
	ASSERT_OK(parse("11000,500", &m));
	ASSERT_ERROR(parse("11001,40", &m), EBADMSG);
	ASSERT_ERROR(parse("1120,501", &m), EBADMSG);
	ASSERT_ERROR(parse("10,40", &m), EBADMSG);
	ASSERT_ERROR(parse("1120,0", &m), EBADMSG);
	ASSERT_ERROR(parse("1080,040", &m), EBADMSG);
	ASSERT_ERROR(parse("1120,", &m), EBADMSG);
	ASSERT_ERROR(parse("1,40", &m), EBADMSG);
	ASSERT_ERROR(parse("1120 40", &m), EBADMSG);
	ASSERT_ERROR(parse("1120,40 ", &m), EBADMSG);
	ASSERT_ERROR(parse("1-1,40", &m), EBADMSG);
	ASSERT_ERROR(parse("199999999999999999999,1", &m), EBADMSG);
	ASSERT_ERROR(parse("2hello", &m), EBADMSG);
	ASSERT_ERROR(parse("", &m), EBADMSG);
	ASSERT_ERROR(view_message_parse(NULL, 0, &m), EBADMSG);
}

TEST(assembly)
{
	static ViewAssembler a;
	static uint8_t big[VIEW_MESSAGE_MAX];

	ASSERT_EQ(view_assembler_add(&a, "0ab", 3, false), 0);
	ASSERT_EQ(view_assembler_add(&a, "cd", 2, true), 1);
	ASSERT_EQ(a.len, 5);
	ASSERT_TRUE(memcmp(a.buf, "0abcd", 5) == 0);
	/* The next fragment starts a new message. */
	ASSERT_EQ(view_assembler_add(&a, "1", 1, false), 0);
	ASSERT_EQ(view_assembler_add(&a, "", 0, false), 0);
	ASSERT_EQ(view_assembler_add(&a, "80,24", 5, true), 1);
	ASSERT_EQ(a.len, 6);
	/* Exactly the cap fits; one byte more is refused and leaves it empty. */
	memset(big, '0', sizeof(big));
	ASSERT_EQ(view_assembler_add(&a, big, sizeof(big), true), 1);
	ASSERT_EQ(a.len, VIEW_MESSAGE_MAX);
	ASSERT_EQ(view_assembler_add(&a, big, sizeof(big) - 1, false), 0);
	ASSERT_ERROR(view_assembler_add(&a, "xy", 2, true), EMSGSIZE);
	ASSERT_EQ(a.len, 0);
	ASSERT_EQ(view_assembler_add(&a, "0z", 2, true), 1);
	ASSERT_EQ(a.len, 2);
}

int main(void)
{
	return tests_run();
}
