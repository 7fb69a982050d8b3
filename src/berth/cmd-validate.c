/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth validate [DIR|FILE]: check an app's berth.yml and say exactly what is wrong with
 * it, every problem with its line. Exit status 0 when valid, 1 when not (or unreadable).
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "commands.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "manifest.h"
#include "term-text.h"

#define MANIFEST_FILE "berth.yml"

/* The file to read and how messages name it: the path as the user wrote it. */
static char *manifest_path(const char *arg)
{
	struct stat st;
	char *p;

	if (!arg || streq(arg, ".") || streq(arg, "./"))
		return strdup(MANIFEST_FILE);
	if (stat(arg, &st) < 0 || !S_ISDIR(st.st_mode))
		return strdup(arg);
	if (asprintf(&p, "%s%s" MANIFEST_FILE, arg, arg[strlen(arg) - 1] == '/' ? "" : "/") < 0)
		return NULL;
	return p;
}

static int print_normalised(const Manifest *m)
{
	_cleanup_(json_decrefp) json_t *doc = manifest_to_json(m);

	if (!doc || json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII) < 0)
		return log_error_errno(-ENOMEM, "cannot print the manifest: %m"), 1;
	putchar('\n');
	return 0;
}

int cmd_validate(int argc, char **argv)
{
	static const struct option options[] = {
		{"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {}};
	_cleanup_(manifest_freep) Manifest *m = NULL;
	_cleanup_free_ char *path = NULL, *resolved = NULL, *buf = NULL;
	ManifestError err = {};
	bool json = false;
	size_t size = 0;
	int c, r;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "", options)) != -1) {
		if (c == 'j')
			json = true;
		else if (c == CLI_OPT_HELP) {
			cli_print_help();
			return 0;
		} else
			return CLI_EXIT_USAGE;
	}
	if (argc - optind > 1)
		return cli_usage_error("one manifest at a time, not '%s' too", argv[optind + 1]);
	path = manifest_path(optind < argc ? argv[optind] : NULL);
	if (!path)
		return log_error_errno(-ENOMEM, "%m"), 1;
	/* An app directory may hold berth.yml as a symlink (a monorepo sharing one); the
	 * reader does not follow a final symlink, so read the resolved path. */
	resolved = realpath(path, NULL);
	r = resolved ? read_full_file(resolved, MANIFEST_SIZE_MAX, &buf, &size) : -errno;
	if (r == -EFBIG)
		return log_error("%s is larger than %u KiB, which no berth.yml is", path,
				 MANIFEST_SIZE_MAX / 1024),
		       1;
	if (r < 0)
		return log_error_errno(r, "cannot read %s: %m", path), 1;
	r = manifest_parse(buf, size, path, &m, &err);
	if (r == -EBADMSG) {
		/* The message quotes berth.yml, which is the app's text. */
		term_text_puts(stderr, err.text, TERM_TEXT_LOG_LINE | TERM_TEXT_NEWLINE);
		fputc('\n', stderr);
		manifest_error_done(&err);
		return 1;
	}
	if (r < 0)
		return log_error_errno(r, "cannot validate %s: %m", path), 1;
	if (json)
		return print_normalised(m);
	printf("berth.yml is valid.\n");
	return 0;
}
