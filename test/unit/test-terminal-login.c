/* SPDX-License-Identifier: Apache-2.0 */
/* The terminal's login as the CLI makes it (src/shared/terminal-login.c), and as the web
 * view takes it (src/terminal-view/auth.c). */
#include <string.h>

#include "auth.h"
#include "terminal-login.h"
#include "tests.h"

TEST(shape)
{
	char a[TERMINAL_LOGIN_LEN + 1], b[TERMINAL_LOGIN_LEN + 1];

	ASSERT_OK(terminal_login_new(a));
	ASSERT_OK(terminal_login_new(b));
	ASSERT_EQ(strlen(a), 38);
	ASSERT_TRUE(strncmp(a, "berth:", 6) == 0);
	ASSERT_EQ(strspn(a + 6, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
		  TERMINAL_LOGIN_SECRET_LEN);
	ASSERT_STREQ(terminal_login_secret(a), a + 6);
	ASSERT_TRUE(strcmp(a, b) != 0);
	/* The web view takes it. */
	ASSERT_TRUE(view_credential_valid(a, strlen(a)));
}

TEST(every_character_shows_up)
{
	/* 24 bytes are 192 bits, 6 a character: over many logins, all 64 characters come. */
	char seen[256] = {}, login[TERMINAL_LOGIN_LEN + 1];
	unsigned distinct = 0;

	for (int i = 0; i < 400; i++) {
		ASSERT_OK(terminal_login_new(login));
		for (const char *c = terminal_login_secret(login); *c; c++)
			seen[(unsigned char)*c] = 1;
	}
	for (int c = 0; c < 256; c++)
		distinct += seen[c];
	ASSERT_EQ(distinct, 64);
}

int main(void)
{
	return tests_run();
}
