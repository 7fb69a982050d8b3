/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env-args.h"
#include "utf8.h"
#include "fileio.h"
#include "macros.h"
#include "tests.h"

/* Every value in these tests that could leak holds this, so one strstr() finds a leak. */
#define SECRET "s3cr3t-Value"

static EnvSet *parse_ok(const char *text)
{
	EnvSet *s = NULL;
	char err[512] = "";
	int r = env_set_parse_dotenv(&s, text, strlen(text), ".env", err, sizeof(err));

	if (r < 0)
		TEST_FAIL("refused (%d): %s\n---\n%s", r, err, text);
	return s;
}

static const char *get(const EnvSet *s, const char *name)
{
	return env_set_get(s, name, NULL);
}

/* The message for an invalid @text (@len bytes), checked never to hold SECRET. */
static void assert_refused(const char *text, size_t len, int want_r, const char *want_err)
{
	_cleanup_(env_set_freep) EnvSet *s = NULL;
	char err[512] = "";
	int r = env_set_parse_dotenv(&s, text, len, ".env", err, sizeof(err));

	if (r != want_r)
		TEST_FAIL("expected %d, got %d (%s) for:\n%s", want_r, r, err, text);
	ASSERT_STREQ(err, want_err);
	ASSERT_TRUE(strstr(err, SECRET) == NULL);
	ASSERT_TRUE(strstr(err, "s3cr3t") == NULL);
	/* Nothing of a refused file is kept. */
	ASSERT_EQ(env_set_size(s), 0);
}
#define REFUSED(text, r, err) assert_refused(text, strlen(text), r, err)

TEST(names)
{
	ASSERT_TRUE(env_name_valid("A", 1));
	ASSERT_TRUE(env_name_valid("_x9", 3));
	ASSERT_TRUE(env_name_valid("GITHUB_TOKEN", 12));
	ASSERT_FALSE(env_name_valid("", 0));
	ASSERT_FALSE(env_name_valid("9A", 2));
	ASSERT_FALSE(env_name_valid("A-B", 3));
	ASSERT_FALSE(env_name_valid("A.B", 3));
	{
		char n[ENV_NAME_LEN_MAX + 2];

		memset(n, 'A', sizeof(n));
		ASSERT_TRUE(env_name_valid(n, ENV_NAME_LEN_MAX));
		ASSERT_FALSE(env_name_valid(n, ENV_NAME_LEN_MAX + 1));
	}
}

TEST(utf8)
{
	ASSERT_TRUE(utf8_valid("plain", 5));
	ASSERT_TRUE(utf8_valid("\xc3\xa9t\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\x91", 14));
	ASSERT_FALSE(utf8_valid("\xff", 1));
	ASSERT_FALSE(utf8_valid("\xc3", 1));		 /* truncated */
	ASSERT_FALSE(utf8_valid("\xc0\xaf", 2));	 /* overlong */
	ASSERT_FALSE(utf8_valid("\xe0\x80\xaf", 3));	 /* overlong */
	ASSERT_FALSE(utf8_valid("\xed\xa0\x80", 3));	 /* a surrogate */
	ASSERT_FALSE(utf8_valid("\xf4\x90\x80\x80", 4)); /* past U+10FFFF */
}

TEST(blank_and_comment_lines_are_skipped)
{
	_cleanup_(env_set_freep) EnvSet *s =
		parse_ok("\n# a comment\n   \t\n  # indented comment\nA=1\n\n#B=2\n");

	ASSERT_EQ(env_set_size(s), 1);
	ASSERT_STREQ(get(s, "A"), "1");
	ASSERT_TRUE(get(s, "B") == NULL);
}

TEST(export_and_blanks_around_the_equals_sign)
{
	_cleanup_(env_set_freep) EnvSet *s =
		parse_ok("export A=1\nexport\tB = two\n  C\t=\tthree  \nexport=4\nexportD=5\n");

	ASSERT_STREQ(get(s, "A"), "1");
	ASSERT_STREQ(get(s, "B"), "two");
	ASSERT_STREQ(get(s, "C"), "three");
	ASSERT_STREQ(get(s, "export"), "4");
	ASSERT_STREQ(get(s, "exportD"), "5");
}

TEST(unquoted_values_and_inline_comments)
{
	_cleanup_(env_set_freep) EnvSet *s = parse_ok("A=value # a comment\n"
						      "B=pa#ss\n"
						      "C=http://host/x#frag\n"
						      "D=#not-a-comment\n"
						      "E= # only a comment\n"
						      "F=\n"
						      "G=a b  c   \n"
						      "H=it's \"inner\" `quotes`\n"
						      "I=back\\slash\\n\n"
						      "J=x\t# tab before the comment");

	ASSERT_STREQ(get(s, "A"), "value");
	ASSERT_STREQ(get(s, "B"), "pa#ss");
	ASSERT_STREQ(get(s, "C"), "http://host/x#frag");
	ASSERT_STREQ(get(s, "D"), "#not-a-comment");
	ASSERT_STREQ(get(s, "E"), "");
	ASSERT_STREQ(get(s, "F"), "");
	ASSERT_STREQ(get(s, "G"), "a b  c");
	ASSERT_STREQ(get(s, "H"), "it's \"inner\" `quotes`");
	ASSERT_STREQ(get(s, "I"), "back\\slash\\n");
	ASSERT_STREQ(get(s, "J"), "x");
}

TEST(single_quotes_are_raw_and_may_span_lines)
{
	_cleanup_(env_set_freep) EnvSet *s = parse_ok("A='raw \\n \\t \\\\ # not a comment'\n"
						      "B='line one\nline two\n'\n"
						      "C='x' # a comment after the quote\n"
						      "D=''\n"
						      "E='has \"double\" and `back`'");

	ASSERT_STREQ(get(s, "A"), "raw \\n \\t \\\\ # not a comment");
	ASSERT_STREQ(get(s, "B"), "line one\nline two\n");
	ASSERT_STREQ(get(s, "C"), "x");
	ASSERT_STREQ(get(s, "D"), "");
	ASSERT_STREQ(get(s, "E"), "has \"double\" and `back`");
}

TEST(double_quotes_expand_five_escapes_only)
{
	_cleanup_(env_set_freep) EnvSet *s = parse_ok("A=\"n:\\n r:\\r t:\\t q:\\\" b:\\\\ end\"\n"
						      "B=\"other: \\x \\$ \\' stay\"\n"
						      "C=\"real\nnewline\" #c\n"
						      "D=\"a # b\"\n"
						      "E=\"trailing backslash \\\\\"\n"
						      "F=\"\"#c");

	ASSERT_STREQ(get(s, "A"), "n:\n r:\r t:\t q:\" b:\\ end");
	ASSERT_STREQ(get(s, "B"), "other: \\x \\$ \\' stay");
	ASSERT_STREQ(get(s, "C"), "real\nnewline");
	ASSERT_STREQ(get(s, "D"), "a # b");
	ASSERT_STREQ(get(s, "E"), "trailing backslash \\");
	ASSERT_STREQ(get(s, "F"), "");
}

TEST(backticks_are_raw_and_may_span_lines)
{
	_cleanup_(env_set_freep) EnvSet *s =
		parse_ok("KEY=`-----BEGIN KEY-----\nabc\\n'\"\n-----END KEY-----`\nNEXT=1\n");

	ASSERT_STREQ(get(s, "KEY"), "-----BEGIN KEY-----\nabc\\n'\"\n-----END KEY-----");
	ASSERT_STREQ(get(s, "NEXT"), "1");
}

TEST(crlf_reads_as_lf)
{
	_cleanup_(env_set_freep) EnvSet *s =
		parse_ok("A=1\r\nB=\"x\r\ny\"\r\n# c\r\nC='lone\rcr'\r\n");

	ASSERT_STREQ(get(s, "A"), "1");
	ASSERT_STREQ(get(s, "B"), "x\ny");
	ASSERT_STREQ(get(s, "C"), "lone\rcr");
}

TEST(later_lines_win_and_the_first_appearance_decides_the_order)
{
	_cleanup_(env_set_freep) EnvSet *s = parse_ok("B=1\nA=2\nB=3\n");

	ASSERT_EQ(env_set_size(s), 2);
	ASSERT_STREQ(env_set_name(s, 0), "B");
	ASSERT_STREQ(env_set_value(s, 0, NULL), "3");
	ASSERT_STREQ(env_set_name(s, 1), "A");
}

TEST(utf8_values)
{
	_cleanup_(env_set_freep) EnvSet *s = parse_ok("A=caf\xc3\xa9\nB=\"\xf0\x9f\x94\x91\"\n");
	size_t len;

	ASSERT_STREQ(get(s, "A"), "caf\xc3\xa9");
	ASSERT_STREQ(env_set_get(s, "B", &len), "\xf0\x9f\x94\x91");
	ASSERT_EQ(len, 4);
}

TEST(errors_name_the_place_and_never_the_value)
{
	REFUSED("A=1\nB='" SECRET "\nC=2\n", -EBADMSG,
		".env:2:3: the ' quote opened here is never closed; close it, or escape it");
	REFUSED("A=\"" SECRET "\\\"", -EBADMSG,
		".env:1:3: the \" quote opened here is never closed; close it, or escape it");
	REFUSED("\n\nTOKEN=`" SECRET, -EBADMSG,
		".env:3:7: the ` quote opened here is never closed; close it, or escape it");
	REFUSED("A='" SECRET "'x", -EBADMSG,
		".env:1:17: unexpected text after the closing quote; only a # comment may follow it");
	REFUSED("A=\"" SECRET "\" " SECRET, -EBADMSG,
		".env:1:18: unexpected text after the closing quote; only a # comment may follow it");
	/* A value pasted without its name: it looks like a name, and is still not quoted. */
	REFUSED("A=1\ns3cr3t_pasted_token\n", -EBADMSG,
		".env:2:20: expected '=' after the variable name: each line is NAME=value (quote a value that spans lines)");
	REFUSED("A=1\n  s3cr3t-with-dash=1\n", -EBADMSG,
		".env:2:9: expected '=' after the variable name: each line is NAME=value (quote a value that spans lines)");
	REFUSED("9s3cr3t=1", -EBADMSG,
		".env:1:1: expected NAME=value, where NAME is letters, digits and _, not starting with a digit");
	REFUSED("=" SECRET, -EBADMSG,
		".env:1:1: expected NAME=value, where NAME is letters, digits and _, not starting with a digit");
	REFUSED("A=1\nB=multi\nline " SECRET "\n", -EBADMSG,
		".env:3:6: expected '=' after the variable name: each line is NAME=value (quote a value that spans lines)");
	REFUSED("export s3cr3t", -EBADMSG,
		".env:1:14: expected '=' after the variable name: each line is NAME=value (quote a value that spans lines)");
}

TEST(nul_and_invalid_utf8_are_refused)
{
	static const char nul[] = "A=1\nB=" SECRET "\0tail\n";

	assert_refused(
		nul, sizeof(nul) - 1, -EBADMSG,
		".env:2:15: a NUL byte: values may not contain NUL, and this is not a text file");
	REFUSED("A=1\nB=" SECRET "\xff\n", -EBADMSG,
		".env:2:3: the value of B is not valid UTF-8 (values travel as JSON text)");
	REFUSED("B=\"" SECRET "\xc0\xaf\"", -EBADMSG,
		".env:1:3: the value of B is not valid UTF-8 (values travel as JSON text)");
}

TEST(caps)
{
	size_t big = ENV_VALUE_SIZE_MAX + 10;
	_cleanup_free_ char *text = malloc(big + 16);
	char name[ENV_NAME_LEN_MAX + 8];

	/* A value past the cap, unquoted and quoted. */
	memcpy(text, "A=", 2);
	memset(text + 2, 's', big);
	text[2 + big] = '\0';
	memcpy(text + 2, SECRET, strlen(SECRET));
	assert_refused(
		text, strlen(text), -E2BIG,
		".env:1:3: the value starting here is longer than 128 KiB, the most a value may hold");
	text[2] = '"';
	strcpy(text + 2 + big, "\"\n");
	assert_refused(
		text, strlen(text), -E2BIG,
		".env:1:3: the value starting here is longer than 128 KiB, the most a value may hold");
	/* Exactly at the cap is fine. */
	text[2 + ENV_VALUE_SIZE_MAX + 1] = '"';
	text[2 + ENV_VALUE_SIZE_MAX + 2] = '\0';
	{
		_cleanup_(env_set_freep) EnvSet *s = parse_ok(text);
		size_t len;

		ASSERT_NOT_NULL(env_set_get(s, "A", &len));
		ASSERT_EQ(len, ENV_VALUE_SIZE_MAX);
	}

	memset(name, 'N', ENV_NAME_LEN_MAX + 1);
	strcpy(name + ENV_NAME_LEN_MAX + 1, "=1");
	REFUSED(name, -EBADMSG, ".env:1:1: the variable name is longer than 128 characters");
}

TEST(too_many_names)
{
	_cleanup_(env_set_freep) EnvSet *s = NULL;
	_cleanup_free_ char *text = malloc((ENV_NAMES_MAX + 1) * 16);
	char err[512];
	size_t n = 0;

	for (int i = 0; i <= ENV_NAMES_MAX; i++)
		n += (size_t)sprintf(text + n, "V%d=x\n", i);
	ASSERT_ERROR(env_set_parse_dotenv(&s, text, n, ".env", err, sizeof(err)), E2BIG);
	ASSERT_STREQ(err, ".env:513:1: more than 512 variables in all");
	/* The cap counts the whole set: a file that would push it past is refused whole. */
	ASSERT_OK(env_set_parse_dotenv(&s, text, n - strlen("V512=x\n"), ".env", err, sizeof(err)));
	ASSERT_EQ(env_set_size(s), ENV_NAMES_MAX);
	ASSERT_ERROR(env_set_parse_dotenv(&s, "NEW=1", 5, "more.env", err, sizeof(err)), E2BIG);
	ASSERT_STREQ(err, "more.env: more than 512 variables in all");
	ASSERT_ERROR(env_set_add_env(&s, "NEW=1", err, sizeof(err)), E2BIG);
	ASSERT_STREQ(err, "--env NEW: more than 512 variables in all");
	ASSERT_OK(env_set_add_env(&s, "V3=replaced", err, sizeof(err)));
	ASSERT_EQ(env_set_size(s), ENV_NAMES_MAX);
}

TEST(env_flag)
{
	_cleanup_(env_set_freep) EnvSet *s = NULL;
	char err[512] = "";

	ASSERT_OK(env_set_add_env(&s, "A=" SECRET, err, sizeof(err)));
	ASSERT_OK(env_set_add_env(&s, "B=", err, sizeof(err)));
	ASSERT_OK(env_set_add_env(&s, "C=x=y", err, sizeof(err)));
	ASSERT_OK(env_set_add_env(&s, "D=multi\nline", err, sizeof(err)));
	ASSERT_STREQ(get(s, "A"), SECRET);
	ASSERT_STREQ(get(s, "B"), "");
	ASSERT_STREQ(get(s, "C"), "x=y");
	ASSERT_STREQ(get(s, "D"), "multi\nline");

	ASSERT_EQ(setenv("BERTH_TEST_FROM_SHELL", "shell " SECRET, 1), 0);
	ASSERT_OK(env_set_add_env(&s, "BERTH_TEST_FROM_SHELL", err, sizeof(err)));
	ASSERT_STREQ(get(s, "BERTH_TEST_FROM_SHELL"), "shell " SECRET);
	/* Exported but empty is set. */
	ASSERT_EQ(setenv("BERTH_TEST_EMPTY", "", 1), 0);
	ASSERT_OK(env_set_add_env(&s, "BERTH_TEST_EMPTY", err, sizeof(err)));
	ASSERT_STREQ(get(s, "BERTH_TEST_EMPTY"), "");

	unsetenv("BERTH_TEST_UNSET");
	ASSERT_ERROR(env_set_add_env(&s, "BERTH_TEST_UNSET", err, sizeof(err)), EINVAL);
	ASSERT_STREQ(
		err,
		"--env BERTH_TEST_UNSET: BERTH_TEST_UNSET isn't set in this shell (export it first, or use --env-file)");
}

TEST(env_flag_errors_never_quote_the_argument)
{
	static const char *const bad[] = {
		"", "=" SECRET, "9A=" SECRET, "A-B=" SECRET, "s3cr3t-pasted", "A B=" SECRET};
	_cleanup_(env_set_freep) EnvSet *s = NULL;
	char err[512];

	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		ASSERT_ERROR(env_set_add_env(&s, bad[i], err, sizeof(err)), EINVAL);
		ASSERT_TRUE(strstr(err, "--env takes NAME or NAME=value") == err);
		ASSERT_TRUE(strstr(err, "s3cr3t") == NULL);
	}
	ASSERT_ERROR(env_set_add_env(&s, "A=" SECRET "\xff", err, sizeof(err)), EINVAL);
	ASSERT_STREQ(err, "--env A: the value is not valid UTF-8 (values travel as JSON text)");
	{
		_cleanup_free_ char *big = malloc(ENV_VALUE_SIZE_MAX + 32);
		size_t n = strlen("A=" SECRET);

		strcpy(big, "A=" SECRET);
		memset(big + n, 'x', ENV_VALUE_SIZE_MAX);
		big[n + ENV_VALUE_SIZE_MAX] = '\0';
		ASSERT_ERROR(env_set_add_env(&s, big, err, sizeof(err)), E2BIG);
		ASSERT_STREQ(
			err,
			"--env A: the value is longer than 128 KiB, the most a value may hold");
	}
	ASSERT_EQ(env_set_size(s), 0);
}

static char *write_temp(const char *text)
{
	char *path = strdup("/tmp/test-env-args.XXXXXX");
	int fd = mkstemp(path);

	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(loop_write(fd, text, strlen(text)));
	close(fd);
	return path;
}

TEST(env_wins_over_every_file_whatever_the_order)
{
	_cleanup_(env_set_freep) EnvSet *s = NULL;
	_cleanup_free_ char *f1 = write_temp("A=file1\nB=file1\nC=file1\nD=file1\n");
	_cleanup_free_ char *f2 = write_temp("A=file2\nB=file2\nE=file2\n");
	char err[512];

	/* --env A=flag --env-file f1 --env B=flag1 --env-file f2 --env B=flag2 */
	ASSERT_OK(env_set_add_env(&s, "A=flag", err, sizeof(err)));
	ASSERT_OK(env_set_add_env_file(&s, f1, err, sizeof(err)));
	ASSERT_OK(env_set_add_env(&s, "B=flag1", err, sizeof(err)));
	ASSERT_OK(env_set_add_env_file(&s, f2, err, sizeof(err)));
	ASSERT_OK(env_set_add_env(&s, "B=flag2", err, sizeof(err)));
	ASSERT_STREQ(get(s, "A"), "flag");  /* before the file, still wins */
	ASSERT_STREQ(get(s, "B"), "flag2"); /* the later --env wins */
	ASSERT_STREQ(get(s, "C"), "file1");
	ASSERT_STREQ(get(s, "D"), "file1");
	ASSERT_STREQ(get(s, "E"), "file2");
	ASSERT_EQ(env_set_size(s), 5);
	ASSERT_STREQ(env_set_name(s, 0), "A");
	ASSERT_STREQ(env_set_name(s, 1), "B");
	ASSERT_STREQ(env_set_name(s, 4), "E");
	unlink(f1);
	unlink(f2);
}

TEST(later_file_wins_over_earlier)
{
	_cleanup_(env_set_freep) EnvSet *s = NULL;
	_cleanup_free_ char *f1 = write_temp("A=1\nB=1\n"), *f2 = write_temp("A=2\n");
	char err[512];

	ASSERT_OK(env_set_add_env_file(&s, f1, err, sizeof(err)));
	ASSERT_OK(env_set_add_env_file(&s, f2, err, sizeof(err)));
	ASSERT_STREQ(get(s, "A"), "2");
	ASSERT_STREQ(get(s, "B"), "1");
	unlink(f1);
	unlink(f2);
}

TEST(env_file_errors)
{
	_cleanup_(env_set_freep) EnvSet *s = NULL;
	_cleanup_free_ char *bad = write_temp("OK=1\nBROKEN='" SECRET "\n");
	char err[1024], want[1024], link[64];
	FILE *f;

	ASSERT_ERROR(env_set_add_env_file(&s, "/nonexistent/.env", err, sizeof(err)), ENOENT);
	ASSERT_STREQ(err, "--env-file /nonexistent/.env: No such file or directory");
	ASSERT_ERROR(env_set_add_env_file(&s, "/", err, sizeof(err)), EISDIR);

	ASSERT_ERROR(env_set_add_env_file(&s, bad, err, sizeof(err)), EBADMSG);
	snprintf(want, sizeof(want),
		 "%s:2:8: the ' quote opened here is never closed; close it, or escape it", bad);
	ASSERT_STREQ(err, want);
	ASSERT_EQ(env_set_size(s), 0);

	/* Larger than the cap. */
	f = fopen(bad, "w");
	ASSERT_NOT_NULL(f);
	for (int i = 0; i < ENV_FILE_SIZE_MAX / 8 + 1; i++)
		fputs("A=xxxxx\n", f);
	fclose(f);
	ASSERT_ERROR(env_set_add_env_file(&s, bad, err, sizeof(err)), EFBIG);
	snprintf(want, sizeof(want),
		 "--env-file %s: larger than 1024 KiB; keep it to the variables this app needs",
		 bad);
	ASSERT_STREQ(err, want);

	/* A symlink to a .env is read (O_NOFOLLOW is for paths Berth picks, not the user). */
	f = fopen(bad, "w");
	fputs("VIA_LINK=yes\n", f);
	fclose(f);
	snprintf(link, sizeof(link), "%s.link", bad);
	ASSERT_EQ(symlink(bad, link), 0);
	ASSERT_OK(env_set_add_env_file(&s, link, err, sizeof(err)));
	ASSERT_STREQ(get(s, "VIA_LINK"), "yes");
	unlink(link);
	unlink(bad);
}

TEST(env_file_from_a_pipe)
{
	_cleanup_(env_set_freep) EnvSet *s = NULL;
	char err[512], path[64];
	int p[2];

	ASSERT_EQ(pipe(p), 0);
	ASSERT_OK(loop_write(p[1], "PIPED=1\n", 8));
	close(p[1]);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[0]);
	ASSERT_OK(env_set_add_env_file(&s, path, err, sizeof(err)));
	ASSERT_STREQ(get(s, "PIPED"), "1");
	close(p[0]);
}

int main(void)
{
	return tests_run();
}
