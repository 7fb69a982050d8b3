/* SPDX-License-Identifier: Apache-2.0 */
/* berth audit verify | list: check and read the hash-chained audit trail (docs/audit.md). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit-log.h"
#include "cli.h"
#include "commands.h"
#include "log.h"
#include "macros.h"
#include "parse-util.h"
#include "term-text.h"

#define LIST_LIMIT_DEFAULT 50
#define LIST_LIMIT_MAX 1000000

static void no_trail(FILE *out, const char *path)
{
	fprintf(out, "No audit trail at %s yet.\n", path);
	fprintf(stderr,
		"  berth mcp creates it with its first record (one per session boot and per tool "
		"call);\n"
		"  BERTH_AUDIT_PATH or --file name another trail.\n");
}

static char *trail_path(const char *file)
{
	char *p = file ? strdup(file) : audit_default_path();

	if (!p)
		log_error("cannot tell where the audit trail is: set HOME, BERTH_HOME or "
			  "BERTH_AUDIT_PATH, or pass --file");
	return p;
}

/* ---- verify ---- */

static int print_segment(const char *segment, uint64_t records, void *userdata)
{
	(void)userdata;
	printf("%s: %" PRIu64 " record%s OK\n", segment, records, records == 1 ? "" : "s");
	return 0;
}

int cmd_audit_verify(int argc, char **argv)
{
	static const struct option options[] = {
		{"file", required_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'}, {}};
	static const AuditWalkOps ops = {.segment_done = print_segment};
	_cleanup_free_ char *path = NULL, *error = NULL;
	const char *file = NULL;
	AuditChain chain;
	int c, r;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "f:", options)) != -1) {
		switch (c) {
		case 'f':
			file = optarg;
			break;
		case CLI_OPT_HELP:
			cli_print_help();
			return 0;
		default:
			return CLI_EXIT_USAGE;
		}
	}
	if (optind != argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind]);
	path = trail_path(file);
	if (!path)
		return 1;

	r = audit_chain_walk(path, &ops, NULL, &chain, &error);
	if (r == -EBADMSG) {
		printf("%s\n", error);
		fflush(stdout);
		fprintf(stderr,
			"The record was edited, removed or damaged after it was written; it and "
			"every record after it\n"
			"cannot be trusted. Restore the trail from a copy to make it verify again.\n");
		return 1;
	}
	if (r < 0)
		return log_error_errno(r, "%s", error ? error : "cannot read the audit trail"), 1;
	if (chain.segments == 0) {
		no_trail(stdout, path);
		return 0;
	}
	printf("Chain intact across %" PRIu64 " record%s. Head: %.16s…\n", chain.records,
	       chain.records == 1 ? "" : "s", chain.head);
	if (!streq(chain.anchor, AUDIT_GENESIS_HASH))
		printf("Anchored at %.16s…: the segments before %s.%d were rotated away.\n",
		       chain.anchor, path, AUDIT_ROTATED_MAX);
	if (chain.torn_lines > 0)
		printf("%" PRIu64 " torn line%s skipped (an append cut short by a crash).\n",
		       chain.torn_lines, chain.torn_lines == 1 ? "" : "s");
	return 0;
}

/* ---- list ---- */

typedef struct ListFilter {
	const char *decision, *actor, *action;
	unsigned limit; /* 0: all, printed as they come */
	bool json;
	json_t *kept; /* the last @limit matches */
	uint64_t matched;
} ListFilter;

/* @s with control characters (C0, DEL, C1), line separators and bidi controls shown as
 * '?': records carry text from apps and agents, which must not drive the terminal. */
static void put_safe(const char *s)
{
	term_text_puts(stdout, s, TERM_TEXT_QUESTION);
}

static const char *str_or(json_t *v, const char *dflt)
{
	return json_is_string(v) ? json_string_value(v) : dflt;
}

static void print_record(json_t *rec, bool json)
{
	json_t *actor = json_object_get(rec, "actor");
	const char *decision = str_or(json_object_get(rec, "decision"), "?");
	char upper[16];
	size_t i;

	if (json) {
		_cleanup_free_ char *s = json_dumps(rec, JSON_COMPACT);

		if (s) {
			term_text_json(stdout, s, strlen(s));
			putchar('\n');
		}
		return;
	}
	for (i = 0; decision[i] && i < sizeof(upper) - 1; i++)
		upper[i] = (char)(decision[i] >= 'a' && decision[i] <= 'z' ? decision[i] - 'a' + 'A'
									   : decision[i]);
	upper[i] = '\0';
	put_safe(str_or(json_object_get(rec, "ts"), "?"));
	fputs("  ", stdout);
	put_safe(upper);
	printf("%*s  ", (int)(11 - MIN(strlen(upper), (size_t)11)), "");
	put_safe(str_or(json_object_get(actor, "id"), "?"));
	fputs(" (", stdout);
	put_safe(str_or(json_object_get(actor, "kind"), "?"));
	fputs(", ", stdout);
	put_safe(str_or(json_object_get(actor, "verifiedBy"), "?"));
	fputs(")  ", stdout);
	put_safe(str_or(json_object_get(rec, "action"), "?"));
	if (json_is_string(json_object_get(rec, "target"))) {
		fputs("  ", stdout);
		put_safe(json_string_value(json_object_get(rec, "target")));
	}
	if (json_is_string(json_object_get(rec, "reason"))) {
		fputs("  — ", stdout);
		put_safe(json_string_value(json_object_get(rec, "reason")));
	}
	putchar('\n');
}

static int list_record(const char *segment, uint64_t line, json_t *rec, void *userdata)
{
	ListFilter *f = userdata;
	const char *action = str_or(json_object_get(rec, "action"), "");
	const char *id = str_or(json_object_get(json_object_get(rec, "actor"), "id"), NULL);
	const char *decision = str_or(json_object_get(rec, "decision"), NULL);

	(void)segment;
	(void)line;
	if (f->decision && (!decision || !streq(decision, f->decision)))
		return 0;
	if (f->actor && (!id || !streq(id, f->actor)))
		return 0;
	if (f->action && !strneq(action, f->action, strlen(f->action)))
		return 0;
	f->matched++;
	if (f->limit == 0) {
		print_record(rec, f->json);
		return 0;
	}
	if (json_array_append(f->kept, rec) < 0)
		return -ENOMEM;
	if (json_array_size(f->kept) > f->limit)
		json_array_remove(f->kept, 0);
	return 0;
}

int cmd_audit_list(int argc, char **argv)
{
	static const struct option options[] = {
		{"file", required_argument, NULL, 'f'},	 {"decision", required_argument, NULL, 'd'},
		{"actor", required_argument, NULL, 'a'}, {"action", required_argument, NULL, 'A'},
		{"limit", required_argument, NULL, 'n'}, {"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},	 {}};
	static const AuditWalkOps ops = {.record = list_record};
	_cleanup_(json_decrefp) json_t *kept = json_array();
	_cleanup_free_ char *path = NULL, *error = NULL;
	ListFilter f = {.limit = LIST_LIMIT_DEFAULT, .kept = kept};
	const char *file = NULL;
	AuditChain chain;
	json_t *rec;
	size_t i;
	int c, r;

	if (!kept)
		return log_error("out of memory"), 1;
	optind = 0;
	while ((c = cli_getopt(argc, argv, "f:n:", options)) != -1) {
		switch (c) {
		case 'f':
			file = optarg;
			break;
		case 'd':
			if (!streq(optarg, "allowed") && !streq(optarg, "denied") &&
			    !streq(optarg, "unavailable"))
				return cli_usage_error(
					"--decision is allowed, denied or unavailable, not '%s'",
					optarg);
			f.decision = optarg;
			break;
		case 'a':
			f.actor = optarg;
			break;
		case 'A':
			f.action = optarg;
			break;
		case 'n':
			if (parse_uint_range(optarg, 0, LIST_LIMIT_MAX, &f.limit) < 0)
				return cli_usage_error(
					"--limit takes a count from 0 (all) to %d, not '%s'",
					LIST_LIMIT_MAX, optarg);
			break;
		case 'j':
			f.json = true;
			break;
		case CLI_OPT_HELP:
			cli_print_help();
			return 0;
		default:
			return CLI_EXIT_USAGE;
		}
	}
	if (optind != argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind]);
	path = trail_path(file);
	if (!path)
		return 1;

	r = audit_chain_walk(path, &ops, &f, &chain, &error);
	if (r < 0 && r != -EBADMSG)
		return log_error_errno(r, "%s", error ? error : "cannot read the audit trail"), 1;
	json_array_foreach(kept, i, rec)
		print_record(rec, f.json);
	fflush(stdout);
	if (r == -EBADMSG) {
		log_error("%s", error);
		fprintf(stderr,
			"  Only the records before it are shown: from there on the trail was "
			"edited or damaged.\n"
			"  'berth audit verify' checks every segment.\n");
		return 1;
	}
	if (chain.segments == 0) {
		no_trail(stderr, path);
		return 0;
	}
	if (f.matched == 0)
		fprintf(stderr, "No record of the %" PRIu64 " in %s matches.\n", chain.records,
			path);
	else if (f.limit > 0 && f.matched > f.limit)
		fprintf(stderr,
			"(the last %u of %" PRIu64 " matching records; --limit 0 shows all)\n",
			f.limit, f.matched);
	return 0;
}
