/* SPDX-License-Identifier: Apache-2.0 */
/* berth attest <runId> | --verify FILE: the attestation record of a VM boot (docs/attest.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attest.h"
#include "audit-log.h"
#include "cli.h"
#include "commands.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "term-text.h"
#include "time-util.h"

#define KNOWN_RUNS_SHOWN 10

/* The boots with evidence, newest first by mtime, for the "unknown runId" message. */
static void list_known_runs(const char *runs)
{
	_cleanup_(json_decrefp) json_t *ids = json_array();
	DIR *d = opendir(runs);
	struct dirent *de;
	size_t shown = 0, i;
	json_t *v;

	if (!d) {
		fprintf(stderr, "  (no boot has ended yet: %s does not exist)\n", runs);
		return;
	}
	while ((de = readdir(d))) {
		_cleanup_free_ char *p = NULL;
		struct stat st;

		if (de->d_name[0] == '.' ||
		    asprintf(&p, "%s/%s/evidence.json", runs, de->d_name) < 0 || stat(p, &st) < 0)
			continue;
		json_array_append_new(ids, json_pack("{s:s, s:I}", "id", de->d_name, "mtime",
						     (json_int_t)st.st_mtime));
	}
	closedir(d);
	if (json_array_size(ids) == 0) {
		fprintf(stderr, "  (no evidence in %s yet)\n", runs);
		return;
	}
	fprintf(stderr, "  boots with evidence (newest first):\n");
	while (shown < KNOWN_RUNS_SHOWN && json_array_size(ids) > 0) {
		size_t best = 0;
		json_int_t bt = -1;

		json_array_foreach(ids, i, v) {
			json_int_t t = json_integer_value(json_object_get(v, "mtime"));
			if (t > bt) {
				bt = t;
				best = i;
			}
		}
		fprintf(stderr, "    %s\n",
			json_string_value(json_object_get(json_array_get(ids, best), "id")));
		json_array_remove(ids, best);
		shown++;
	}
	if (json_array_size(ids) > 0)
		fprintf(stderr, "    … and %zu more\n", json_array_size(ids));
}

static int write_out(const char *path, const char *text)
{
	_cleanup_close_ int fd = -EBADF;
	int r;

	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0600) < 0)
		return -errno;
	r = loop_write(fd, text, strlen(text));
	if (r < 0)
		return r;
	return fsync(fd) < 0 ? -errno : 0;
}

static int do_verify(const char *file, bool json)
{
	_cleanup_(json_decrefp) json_t *rec = NULL, *problems = NULL;
	_cleanup_free_ char *data = NULL;
	json_error_t err;
	json_t *p;
	size_t i;
	int r, n;

	r = read_full_file(file, ATTEST_EVIDENCE_MAX, &data, NULL);
	if (r < 0)
		return log_error_errno(r, "cannot read %s: %m; pass the file berth attest wrote",
				       file),
		       1;
	rec = json_loads(data, JSON_REJECT_DUPLICATES, &err);
	if (!rec) {
		if (json) {
			printf("{\"ok\":false,\"problems\":[{\"code\":\"kind-invalid\",\"message\":"
			       "\"not JSON\"}]}\n");
			return 1;
		}
		log_error("%s is not JSON (line %d: %s); is it an attestation record?", file,
			  err.line, err.text);
		return 1;
	}
	n = attest_verify(rec, &problems);
	if (n < 0)
		return log_error_errno(n, "cannot verify %s: %m", file), 1;
	if (json) {
		_cleanup_(json_decrefp) json_t *o =
			json_pack("{s:b, s:O}", "ok", n == 0, "problems", problems);
		_cleanup_free_ char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);

		term_text_json(stdout, s ?: "{}", strlen(s ?: "{}"));
		putchar('\n');
		return n == 0 ? 0 : 1;
	}
	if (n == 0) {
		json_t *enf = json_object_get(rec, "enforcement");

		term_text_line(stdout, 0, "%s: OK — recordSha256 %s, enforcement %s", file,
			       json_string_value(json_object_get(rec, "recordSha256")) ?: "?",
			       json_string_value(json_object_get(enf, "status")) ?: "?");
		return 0;
	}
	/* The messages may quote the record, which anyone may have written. */
	json_array_foreach(problems, i, p)
		term_text_line(stdout, 0, "%s: %s",
			       json_string_value(json_object_get(p, "code")) ?: "?",
			       json_string_value(json_object_get(p, "message")) ?: "?");
	fprintf(stderr,
		"%s: %d problem%s — this record was edited after berth attest wrote it, "
		"or was not written by it\n",
		file, n, n == 1 ? "" : "s");
	return 1;
}

int cmd_attest(int argc, char **argv)
{
	static const struct option options[] = {{"out", required_argument, NULL, 'o'},
						{"verify", required_argument, NULL, 'v'},
						{"json", no_argument, NULL, 'j'},
						{"help", no_argument, NULL, 'h'},
						{}};
	_cleanup_(json_decrefp) json_t *rec = NULL;
	_cleanup_free_ char *home = NULL, *runs = NULL, *path = NULL, *apath = NULL, *error = NULL,
			    *text = NULL, *shown = NULL;
	const char *out = NULL, *verify = NULL, *run_id, *status;
	char now[32];
	bool json = false;
	int c, r;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "o:", options)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'v':
			verify = optarg;
			break;
		case 'j':
			json = true;
			break;
		case CLI_OPT_HELP:
			cli_print_help();
			return 0;
		default:
			return CLI_EXIT_USAGE;
		}
	}
	if (verify) {
		if (optind != argc || out)
			return cli_usage_error("--verify takes only the record file (and --json)");
		return do_verify(verify, json);
	}
	if (optind + 1 != argc)
		return cli_usage_error("%s", optind == argc ? "which run? Give its run id"
							    : "one run id at a time");
	run_id = argv[optind];
	if (!attest_run_id_valid(run_id)) {
		log_error(
			"'%s' is not a run id: it is the boot id of a VM, the name of a directory "
			"in ~/.berth/runs, or the run id of a berth mcp session (letters, "
			"digits, '.', '_' and '-')",
			run_id);
		return CLI_EXIT_USAGE;
	}
	home = berth_home();
	if (!home || asprintf(&runs, "%s/runs", home) < 0 ||
	    asprintf(&path, "%s/%s/evidence.json", runs, run_id) < 0)
		return log_error("cannot tell where ~/.berth is: set HOME or BERTH_HOME"), 1;
	apath = audit_default_path();
	if (!apath)
		return log_error("cannot tell where the audit trail is: set BERTH_AUDIT_PATH"), 1;

	now_rfc3339(now, sizeof(now), false);
	r = attest_run_record(runs, apath, run_id, now, &rec, &error);
	/* The reason may quote the evidence, which holds what the guest reported. */
	shown = term_text_dup(error, TERM_TEXT_LOG_LINE);
	switch (r) {
	case 0:
		break;
	case -ENOENT:
		log_error("no boot evidence for run %s: %s does not exist, and no berth mcp "
			  "session record (sandbox.boot) in %s names it",
			  run_id, path, apath);
		fprintf(stderr,
			"  berth-vmm writes <BERTH_HOME or ~/.berth>/runs/<bootId>/evidence.json "
			"when a VM ends; for a\n"
			"  VM that is still running see 'berth vm status', stop it with 'berth vm "
			"stop NAME', then attest.\n");
		list_known_runs(runs);
		return 1;
	case -ENODATA:
		log_error("%s", shown ?: "out of memory");
		fprintf(stderr,
			"  berth-vmm writes the evidence when the VM ends: see 'berth vm status', "
			"stop it with\n"
			"  'berth vm stop NAME', then attest again.\n");
		return 1;
	case -ENOTUNIQ:
		return log_error("%s", shown ?: "out of memory"), 1;
	case -EBADMSG:
		return log_error("the audit trail's hash chain is broken: %s. It was edited or "
				 "damaged; no record can vouch for this run until it is restored "
				 "('berth audit verify' shows every segment)",
				 shown ?: "out of memory"),
		       1;
	default:
		return log_error_errno(r, "cannot attest run %s: %s", run_id,
				       shown ?: "out of memory"),
		       1;
	}

	{
		_cleanup_free_ char *dumped = json_dumps(rec, JSON_INDENT(2));

		if (!dumped || asprintf(&text, "%s\n", dumped) < 0)
			return log_error("out of memory"), 1;
	}
	if (out) {
		r = write_out(out, text);
		if (r < 0)
			return log_error_errno(r, "cannot write %s: %m", out), 1;
	} else /* raw to a pipe or a file, escaped (the same JSON) on a terminal */
		term_text_json(stdout, text, strlen(text));

	status = json_string_value(json_object_get(json_object_get(rec, "enforcement"), "status"));
	if (!streq(status, "ACTIVE")) {
		json_t *reasons = json_object_get(json_object_get(rec, "enforcement"), "reasons"),
		       *s;
		size_t i;

		log_warning("run %s: capability enforcement is %s, not ACTIVE:", run_id, status);
		/* The reasons quote the guest's reports (an app's name, the probe's words). */
		json_array_foreach(reasons, i, s)
			term_text_line(stderr, TERM_TEXT_LOG_LINE, "  - %s",
				       json_string_value(s) ?: "?");
	}
	if (out)
		fprintf(stderr, "wrote %s: enforcement %s, recordSha256 %s\n", out, status,
			json_string_value(json_object_get(rec, "recordSha256")));
	return 0;
}
