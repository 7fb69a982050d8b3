/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replay a fuzz target's corpus as an ordinary TAP test (built with gcc, no libFuzzer).
 * Usage: fuzz-<name> DIR|FILE...  Each input runs in its own child, so one crash is one
 * failed test with the file named, not a dead run.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"

/* Under ASan each input's child checks for leaks itself: it ends with _exit(), which
 * LeakSanitizer's own check at exit never sees. */
#if defined(__SANITIZE_ADDRESS__)
#define REPLAY_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REPLAY_LSAN 1
#endif
#endif
#ifdef REPLAY_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#define REPLAY_INPUT_MAX (4u * 1024u * 1024u)
#define REPLAY_FILES_MAX 100000u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int add_path(char ***list, size_t *n, const char *path)
{
	char **l;

	if (*n >= REPLAY_FILES_MAX)
		return -E2BIG;
	l = reallocarray(*list, *n + 1, sizeof(char *));
	if (!l)
		return -ENOMEM;
	*list = l;
	l[*n] = strdup(path);
	if (!l[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int collect(const char *arg, char ***list, size_t *n)
{
	struct dirent *de;
	struct stat st;
	DIR *d;
	int r = 0;

	if (stat(arg, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return add_path(list, n, arg);
	d = opendir(arg);
	if (!d)
		return -errno;
	while (r >= 0 && (de = readdir(d))) {
		char *p;

		if (de->d_name[0] == '.')
			continue;
		if (asprintf(&p, "%s/%s", arg, de->d_name) < 0) {
			r = -ENOMEM;
			break;
		}
		r = add_path(list, n, p);
		free(p);
	}
	closedir(d);
	return r;
}

static int run_one(const char *path)
{
	_cleanup_free_ char *buf = NULL;
	size_t size = 0;
	int r;

	r = read_full_file(path, REPLAY_INPUT_MAX, &buf, &size);
	if (r < 0)
		return r;
	(void)LLVMFuzzerTestOneInput((const uint8_t *)buf, size);
#ifdef REPLAY_LSAN
	free(TAKE_PTR(buf));
	__lsan_do_leak_check(); /* a leak ends the child here, with LeakSanitizer's report */
#endif
	return 0;
}

int main(int argc, char **argv)
{
	char **files = NULL;
	size_t n = 0;
	int failed = 0;

	if (argc < 2) {
		fprintf(stderr, "Usage: %s CORPUS-DIR|FILE...\n", argv[0]);
		return EXIT_FAILURE;
	}
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		int r = collect(argv[i], &files, &n);

		if (r < 0) {
			printf("Bail out! %s: %s\n", argv[i], strerror(-r));
			return EXIT_FAILURE;
		}
	}
	qsort(files, n, sizeof(char *), cmp_str);
	printf("1..%zu\n", n);
	fflush(stdout);
	for (size_t i = 0; i < n; i++) {
		int status = 0;
		pid_t pid = fork();

		if (pid == 0)
			_exit(run_one(files[i]) < 0 ? 2 : 0);
		if (pid < 0 || waitpid(pid, &status, 0) < 0)
			status = 1 << 8;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			printf("ok %zu - %s\n", i + 1, files[i]);
		else {
			failed++;
			printf("not ok %zu - %s (%s %d)\n", i + 1, files[i],
			       WIFSIGNALED(status) ? "signal" : "exit",
			       WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		}
		fflush(stdout);
		free(files[i]);
	}
	free(files);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
