/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * A tiny unit-test harness that prints TAP (meson runs it with protocol: 'tap').
 *
 *   TEST(name) { ASSERT_EQ(1 + 1, 2); }
 *   int main(void) { return tests_run(); }
 *
 * Tests register themselves through a constructor; each runs in a forked child
 * so that one crash fails one test, not the whole file.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct TestCase {
	const char *name;
	void (*func)(void);
} TestCase;

#define TESTS_MAX 256
static TestCase tests_table[TESTS_MAX];
static int tests_count;

static inline void tests_register(const char *name, void (*func)(void))
{
	if (tests_count < TESTS_MAX)
		tests_table[tests_count++] = (TestCase){name, func};
}

#define TEST(n)                                                          \
	static void test_##n(void);                                      \
	__attribute__((constructor)) static void test_register_##n(void) \
	{                                                                \
		tests_register(#n, test_##n);                            \
	}                                                                \
	static void test_##n(void)

#define TEST_FAIL(...)                                   \
	do {                                             \
		printf("# %s:%d: ", __FILE__, __LINE__); \
		printf(__VA_ARGS__);                     \
		printf("\n");                            \
		fflush(stdout);                          \
		_exit(1);                                \
	} while (0)

#define ASSERT_TRUE(expr)                                      \
	do {                                                   \
		if (!(expr))                                   \
			TEST_FAIL("expected true: %s", #expr); \
	} while (0)
#define ASSERT_FALSE(expr) ASSERT_TRUE(!(expr))
#define ASSERT_EQ(a, b)                                                      \
	do {                                                                 \
		long long _a = (long long)(a), _b = (long long)(b);          \
		if (_a != _b)                                                \
			TEST_FAIL("%s == %s: %lld != %lld", #a, #b, _a, _b); \
	} while (0)
#define ASSERT_OK(expr)                                                                   \
	do {                                                                              \
		long long _r = (long long)(expr);                                         \
		if (_r < 0)                                                               \
			TEST_FAIL("%s failed: %lld (%s)", #expr, _r, strerror((int)-_r)); \
	} while (0)
#define ASSERT_ERROR(expr, err)                                                   \
	do {                                                                      \
		long long _r = (long long)(expr);                                 \
		if (_r != -(long long)(err))                                      \
			TEST_FAIL("%s: expected -%s, got %lld", #expr, #err, _r); \
	} while (0)
#define ASSERT_STREQ(a, b)                                                                  \
	do {                                                                                \
		const char *_a = (a), *_b = (b);                                            \
		if (!_a || !_b || strcmp(_a, _b) != 0)                                      \
			TEST_FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, _a ? _a : "(null)", \
				  _b ? _b : "(null)");                                      \
	} while (0)
#define ASSERT_NOT_NULL(p) ASSERT_TRUE((p) != NULL)

static inline int tests_run(void)
{
	int failed = 0;

	printf("1..%d\n", tests_count);
	fflush(stdout);
	for (int i = 0; i < tests_count; i++) {
		pid_t pid = fork();
		int status = 0;

		if (pid == 0) {
			tests_table[i].func();
			fflush(stdout);
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &status, 0) < 0)
			status = 1 << 8;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			printf("ok %d - %s\n", i + 1, tests_table[i].name);
		else {
			failed++;
			if (WIFSIGNALED(status))
				printf("not ok %d - %s (signal %d)\n", i + 1, tests_table[i].name,
				       WTERMSIG(status));
			else
				printf("not ok %d - %s\n", i + 1, tests_table[i].name);
		}
		fflush(stdout);
	}
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
