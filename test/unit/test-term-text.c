/* SPDX-License-Identifier: Apache-2.0 */
/* Peer text on its way to a terminal (src/basic/term-text.c), with hostile inputs. */
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <termios.h>

#include "term-text.h"
#include "utf8.h"
#include "tests.h"

/* What term_text_write() makes of @n bytes of @s, NUL-terminated; *@ret_len its length. */
static char *clean_n(const char *s, size_t n, unsigned flags, size_t *ret_len)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		TEST_FAIL("open_memstream: %m");
	term_text_write(f, s, n, flags);
	if (fclose(f) != 0)
		TEST_FAIL("fclose: %m");
	if (ret_len)
		*ret_len = size;
	return buf;
}

static char *clean(const char *s, unsigned flags)
{
	return clean_n(s, strlen(s), flags, NULL);
}

#define ASSERT_CLEAN(in, flags, want)              \
	do {                                       \
		char *_out = clean((in), (flags)); \
		ASSERT_STREQ(_out, (want));        \
		free(_out);                        \
	} while (0)
#define ASSERT_CLEAN_N(in, n, flags, want)                      \
	do {                                                    \
		char *_out = clean_n((in), (n), (flags), NULL); \
		ASSERT_STREQ(_out, (want));                     \
		free(_out);                                     \
	} while (0)

/* One code point of valid UTF-8 at @s; its length. */
static size_t decode(const unsigned char *s, uint32_t *cp)
{
	if (s[0] < 0x80)
		return *cp = s[0], 1;
	if (s[0] < 0xe0)
		return *cp = (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f), 2;
	if (s[0] < 0xf0)
		return *cp = (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 |
			     (s[2] & 0x3f),
		       3;
	return *cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 |
		     (uint32_t)(s[2] & 0x3f) << 6 | (s[3] & 0x3f),
	       4;
}

/* @s (@n bytes) is valid UTF-8 without a hostile character, but those @allowed lets be. */
static bool harmless(const char *s, size_t n, const char *allowed)
{
	if (!utf8_valid(s, n))
		return false;
	for (size_t i = 0; i < n;) {
		uint32_t cp;

		i += decode((const unsigned char *)s + i, &cp);
		if (term_text_is_hostile(cp) && !(cp && cp < 0x80 && strchr(allowed, (int)cp)))
			return false;
	}
	return true;
}

TEST(plain_text_passes_unchanged)
{
	const char *s = "hello, wörld — 日本語 🙂 \\x1b is only text; ‍ZWJ stays";

	ASSERT_CLEAN(s, 0, s);
	ASSERT_CLEAN("", 0, "");
}

TEST(osc52_clipboard_write)
{
	ASSERT_CLEAN("copy \x1b]52;c;cHduZWQ=\x07 done", 0, "copy \\x1b]52;c;cHduZWQ=\\x07 done");
	/* The string-terminator form, ESC \ */
	ASSERT_CLEAN("\x1b]52;c;cHduZWQ=\x1b\\", 0, "\\x1b]52;c;cHduZWQ=\\x1b\\");
}

TEST(csi_clear_screen_and_cursor_moves)
{
	ASSERT_CLEAN("\x1b[2J\x1b[H\x1b[1A\x1b[2K\x1b[31mred", 0,
		     "\\x1b[2J\\x1b[H\\x1b[1A\\x1b[2K\\x1b[31mred");
}

TEST(title_set)
{
	ASSERT_CLEAN("\x1b]0;pwned\x07\x1b]2;pwned\x1b\\", 0,
		     "\\x1b]0;pwned\\x07\\x1b]2;pwned\\x1b\\");
}

TEST(c1_controls_8bit_and_utf8)
{
	/* A raw 0x9b is CSI to a terminal in 8-bit mode, and not UTF-8: a byte. */
	ASSERT_CLEAN("\x9b"
		     "2J",
		     0, "\\x9b2J");
	/* U+009B, CSI, as UTF-8 (c2 9b), and NEL, OSC, ST. */
	ASSERT_CLEAN("\xc2\x9b"
		     "2J \xc2\x85 \xc2\x9d \xc2\x9c \xc2\x80 \xc2\x9f",
		     0, "\\u009b2J \\u0085 \\u009d \\u009c \\u0080 \\u009f");
	/* U+00A0 is past the C1 range: text. */
	ASSERT_CLEAN("\xc2\xa0", 0, "\xc2\xa0");
}

TEST(other_c0_and_del)
{
	ASSERT_CLEAN_N("a\0b\x01\x07\x08\x0b\x0c\x0e\x1f\x7f"
		       "c",
		       12, 0, "a\\x00b\\x01\\x07\\x08\\x0b\\x0c\\x0e\\x1f\\x7fc");
	ASSERT_CLEAN("a\tb\nc\rd", 0, "a\\tb\\nc\\rd");
}

TEST(invalid_utf8)
{
	/* A stray continuation byte, cut-off sequences, bytes that begin nothing. */
	ASSERT_CLEAN("a\x80"
		     "b",
		     0, "a\\x80b");
	ASSERT_CLEAN("\xe2\x82", 0, "\\xe2\\x82");
	ASSERT_CLEAN("\xe2\x82x", 0, "\\xe2\\x82x");
	ASSERT_CLEAN("\xf0\x9f\x99", 0, "\\xf0\\x9f\\x99");
	ASSERT_CLEAN("\xff\xfe\xf8\x88\x80\x80\x80", 0, "\\xff\\xfe\\xf8\\x88\\x80\\x80\\x80");
	/* UTF-16 surrogates and past U+10FFFF. */
	ASSERT_CLEAN("\xed\xa0\x80\xed\xbf\xbf", 0, "\\xed\\xa0\\x80\\xed\\xbf\\xbf");
	ASSERT_CLEAN("\xf4\x90\x80\x80", 0, "\\xf4\\x90\\x80\\x80");
	/* A lead byte followed by an ESC: the ESC is not swallowed into the sequence. */
	ASSERT_CLEAN("\xc3\x1b[2J", 0, "\\xc3\\x1b[2J");
}

TEST(overlong_encodings)
{
	/* Overlong forms of '/', of NUL, of ESC and of U+009B: none decodes to anything. */
	ASSERT_CLEAN("\xc0\xaf", 0, "\\xc0\\xaf");
	ASSERT_CLEAN("\xe0\x80\xaf", 0, "\\xe0\\x80\\xaf");
	ASSERT_CLEAN("\xf0\x80\x80\xaf", 0, "\\xf0\\x80\\x80\\xaf");
	ASSERT_CLEAN("\xc0\x80", 0, "\\xc0\\x80");
	ASSERT_CLEAN("\xc0\x9b[2J", 0, "\\xc0\\x9b[2J");
	ASSERT_CLEAN("\xe0\x82\x9b", 0, "\\xe0\\x82\\x9b");
	ASSERT_CLEAN("\xc1\xbf", 0, "\\xc1\\xbf");
}

TEST(bidi_controls_and_separators)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"\xd8\x9c", "\\u061c"},     {"\xe2\x80\x8e", "\\u200e"},
		{"\xe2\x80\x8f", "\\u200f"}, {"\xe2\x80\xaa", "\\u202a"},
		{"\xe2\x80\xab", "\\u202b"}, {"\xe2\x80\xac", "\\u202c"},
		{"\xe2\x80\xad", "\\u202d"}, {"\xe2\x80\xae", "\\u202e"},
		{"\xe2\x81\xa6", "\\u2066"}, {"\xe2\x81\xa7", "\\u2067"},
		{"\xe2\x81\xa8", "\\u2068"}, {"\xe2\x81\xa9", "\\u2069"},
		{"\xe2\x80\xa8", "\\u2028"}, {"\xe2\x80\xa9", "\\u2029"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ASSERT_CLEAN(cases[i].in, 0, cases[i].out);
	/* Trojan Source: an override that would show "if admin" reversed. */
	ASSERT_CLEAN("access \xe2\x80\xae nimda fi\xe2\x81\xa6 ok", 0,
		     "access \\u202e nimda fi\\u2066 ok");
	/* Their neighbours are text. */
	ASSERT_CLEAN("\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xaa", 0,
		     "\xe2\x80\x8d\xe2\x80\xaf\xe2\x81\xaa");
}

TEST(tabs_newlines_carriage_returns)
{
	ASSERT_CLEAN("a\tb", TERM_TEXT_TAB, "a\tb");
	ASSERT_CLEAN("a\nb", TERM_TEXT_NEWLINE, "a\nb");
	ASSERT_CLEAN("a\nb", TERM_TEXT_NEWLINE_ESCAPED, "a\\nb");
	/* A CRLF's CR goes, a bare one (which would overwrite the line) is shown. */
	ASSERT_CLEAN("line\r", TERM_TEXT_CRLF, "line");
	ASSERT_CLEAN("a\r\nb\r\n", TERM_TEXT_CRLF | TERM_TEXT_NEWLINE, "a\nb\n");
	ASSERT_CLEAN("safe\rforged", TERM_TEXT_CRLF, "safe\\rforged");
	ASSERT_CLEAN("a\r\r", TERM_TEXT_CRLF, "a\\r");
	ASSERT_CLEAN("x\r", 0, "x\\r");
	ASSERT_CLEAN("\tx\r", TERM_TEXT_LOG_LINE, "\tx");
}

/* The denial explainer's form, exactly as src/shared/denial.c wrote it before. */
TEST(space_form)
{
	ASSERT_CLEAN("a\tb\nc\x1b[2Jd\xff\xc2\x9b\xe2\x80\xae.", TERM_TEXT_SPACE,
		     "a b c [2Jd\xef\xbf\xbd  .");
	ASSERT_CLEAN("a\nb\rc", TERM_TEXT_SPACE | TERM_TEXT_NEWLINE_ESCAPED, "a\\nb c");
	/* One U+FFFD a byte. */
	ASSERT_CLEAN("\xc0\xaf", TERM_TEXT_SPACE, "\xef\xbf\xbd\xef\xbf\xbd");
}

/* berth audit list's form: what its put_safe() printed before, and bidi controls too. */
TEST(question_form)
{
	ASSERT_CLEAN("no answer from \"list\"\x1b[31m red", TERM_TEXT_QUESTION,
		     "no answer from \"list\"?[31m red");
	ASSERT_CLEAN("a\x7f\xc2\x9b\xc2\x85\tb\n", TERM_TEXT_QUESTION, "a???\?b?");
	ASSERT_CLEAN("BERTH CAPABILITY DENIAL — é", TERM_TEXT_QUESTION,
		     "BERTH CAPABILITY DENIAL — é");
	ASSERT_CLEAN("x\xe2\x80\xaey", TERM_TEXT_QUESTION, "x?y");
}

TEST(json_form_keeps_the_value)
{
	const char *in = "{\n  \"a\": \"\xc2\x9b\xe2\x80\xae\x7f\xe2\x80\xa8 é\",\n\t\"b\": 1\n}";
	char *out = clean(in, TERM_TEXT_JSON | TERM_TEXT_TAB | TERM_TEXT_NEWLINE);
	json_t *a = json_loads(in, 0, NULL), *b = json_loads(out, 0, NULL);

	ASSERT_STREQ(out, "{\n  \"a\": \"\\u009b\\u202e\\u007f\\u2028 é\",\n\t\"b\": 1\n}");
	ASSERT_NOT_NULL(a);
	ASSERT_NOT_NULL(b);
	ASSERT_TRUE(json_equal(a, b));
	json_decref(a);
	json_decref(b);
	free(out);
	/* Not JSON (a raw line of the log stream): still harmless. */
	ASSERT_CLEAN("x\x1b[2J\xff", TERM_TEXT_JSON, "x\\u001b[2J\\ufffd");
}

TEST(json_is_raw_unless_on_a_terminal)
{
	const char *in = "{\"a\":\"\xe2\x80\xae\x1b\"}";
	char *buf = NULL, got[256];
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	struct termios t;
	int master, slave;
	ssize_t n;

	term_text_json(f, in, strlen(in));
	ASSERT_EQ(fclose(f), 0);
	ASSERT_STREQ(buf, in);
	free(buf);

	master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	ASSERT_TRUE(master >= 0);
	ASSERT_EQ(grantpt(master), 0);
	ASSERT_EQ(unlockpt(master), 0);
	slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_CLOEXEC);
	ASSERT_TRUE(slave >= 0);
	ASSERT_EQ(tcgetattr(slave, &t), 0);
	cfmakeraw(&t);
	ASSERT_EQ(tcsetattr(slave, TCSANOW, &t), 0);
	f = fdopen(slave, "w");
	ASSERT_NOT_NULL(f);
	term_text_json(f, in, strlen(in));
	ASSERT_EQ(fclose(f), 0);
	n = read(master, got, sizeof(got) - 1);
	ASSERT_TRUE(n > 0);
	got[n] = '\0';
	ASSERT_STREQ(got, "{\"a\":\"\\u202e\\u001b\"}");
	close(master);
}

TEST(very_long_lines)
{
	size_t n = 4 * 1024 * 1024, len;
	char *in = malloc(n), *out;

	ASSERT_NOT_NULL(in);
	for (size_t i = 0; i < n; i += 4)
		memcpy(in + i, "\x1b[2J", 4);
	out = clean_n(in, n, 0, &len);
	ASSERT_EQ(len, n / 4 * 7);
	ASSERT_TRUE(memchr(out, 0x1b, len) == NULL);
	ASSERT_TRUE(harmless(out, len, ""));
	free(out);
	/* A long clean line passes as it is. */
	memset(in, 'a', n);
	out = clean_n(in, n, 0, &len);
	ASSERT_EQ(len, n);
	ASSERT_TRUE(memcmp(in, out, n) == 0);
	free(out);
	free(in);
}

TEST(cut_keeps_sequences_whole)
{
	const char *s = "a\xc3\xa9"
			"b\xf0\x9f\x99\x82"
			"c";

	ASSERT_EQ(term_text_cut(s, strlen(s), 100), strlen(s));
	ASSERT_EQ(term_text_cut(s, strlen(s), 2), 1);
	ASSERT_EQ(term_text_cut(s, strlen(s), 3), 3);
	ASSERT_EQ(term_text_cut(s, strlen(s), 5), 4);
	ASSERT_EQ(term_text_cut(s, strlen(s), 6), 4);
	ASSERT_EQ(term_text_cut(s, strlen(s), 7), 4);
	ASSERT_EQ(term_text_cut(s, strlen(s), 8), 8);
	/* A run of stray continuation bytes is cut where it is. */
	ASSERT_EQ(term_text_cut("\x80\x80\x80\x80\x80\x80", 6, 4), 4);
}

TEST(dup_and_line)
{
	char *s = term_text_dup("app \x1b]0;x\x07", 0), *buf = NULL;
	size_t size = 0;
	FILE *f;

	ASSERT_STREQ(s, "app \\x1b]0;x\\x07");
	free(s);
	ASSERT_TRUE(term_text_dup(NULL, 0) == NULL);
	f = open_memstream(&buf, &size);
	ASSERT_NOT_NULL(f);
	term_text_line(f, 0, "[%s] %d%%", "e\x1b[2Jv", 5);
	term_text_puts(f, NULL, 0);
	term_text_write(f, NULL, 0, 0); /* an absent field of zero length, as the explainer has */
	ASSERT_EQ(fclose(f), 0);
	ASSERT_STREQ(buf, "[e\\x1b[2Jv] 5%\n");
	free(buf);
}

/* Random bytes, heavy in the ones that matter: whatever comes in, every form writes valid
 * UTF-8 with nothing hostile, and the escaping form is stable (its output is text). */
TEST(random_input_comes_out_harmless)
{
	static const unsigned char alphabet[] = {
		0x1b, 0x07, '\n', '\r', '\t', 0x00, 0x7f, 0x9b, 0xc2, 0xe2, 0x80, 0xae, 0xa8,
		0x81, 0xf0, 0x9f, 0xc0, 0xed, 0xa0, 0xff, '[',	']',  '\\', 'a',  ';'};
	static const unsigned flags[] = {0,
					 TERM_TEXT_LOG_LINE,
					 TERM_TEXT_LOG_LINE | TERM_TEXT_NEWLINE,
					 TERM_TEXT_SPACE,
					 TERM_TEXT_SPACE | TERM_TEXT_NEWLINE_ESCAPED,
					 TERM_TEXT_QUESTION,
					 TERM_TEXT_JSON | TERM_TEXT_TAB | TERM_TEXT_NEWLINE};
	static const char *const allowed[] = {"", "\t", "\t\n", "", "", "", "\t\n"};
	unsigned seed = 12345;
	char in[256];

	for (int round = 0; round < 20000; round++) {
		size_t n = (size_t)(rand_r(&seed) % (int)sizeof(in));

		for (size_t i = 0; i < n; i++)
			in[i] = (char)(rand_r(&seed) % 4 == 0
					       ? rand_r(&seed) % 256
					       : alphabet[rand_r(&seed) % sizeof(alphabet)]);
		for (size_t k = 0; k < sizeof(flags) / sizeof(flags[0]); k++) {
			size_t len, len2;
			char *out = clean_n(in, n, flags[k], &len), *again;

			if (!harmless(out, len, allowed[k]))
				TEST_FAIL("round %d, flags %#x: hostile output", round, flags[k]);
			if (flags[k] == 0) {
				again = clean_n(out, len, 0, &len2);
				ASSERT_TRUE(len2 == len && memcmp(out, again, len) == 0);
				free(again);
			}
			free(out);
		}
	}
}

int main(void)
{
	return tests_run();
}
