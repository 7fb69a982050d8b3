/* SPDX-License-Identifier: Apache-2.0 */
/*
 * audit-append PATH [--capture] [--rotate-bytes N]: append each JSON event read from stdin
 * (one a line) to the audit trail at PATH through the real sink, the way berth mcp does.
 * The CLI test (test/e2e/test-audit-cli.py) uses it to make trails for berth audit.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit-log.h"
#include "macros.h"

int main(int argc, char **argv)
{
	_cleanup_(audit_sink_freep) AuditSink *s = NULL;
	_cleanup_free_ char *line = NULL;
	unsigned long long rotate = 0;
	bool capture = false;
	size_t size = 0;
	int r;

	if (argc < 2) {
		fprintf(stderr,
			"usage: audit-append PATH [--capture] [--rotate-bytes N] <events\n");
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (streq(argv[i], "--capture"))
			capture = true;
		else if (streq(argv[i], "--rotate-bytes") && i + 1 < argc)
			rotate = strtoull(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "audit-append: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	r = audit_sink_open(argv[1], capture, &s);
	if (r < 0) {
		fprintf(stderr, "audit-append: cannot open %s: %s\n", argv[1], strerror(-r));
		return 1;
	}
	if (rotate > 0)
		audit_sink_set_rotate_bytes(s, rotate);
	while (getline(&line, &size, stdin) > 0) {
		json_error_t err;
		json_t *ev = json_loads(line, 0, &err);

		if (!ev) {
			fprintf(stderr, "audit-append: not JSON: %s\n", err.text);
			return 1;
		}
		r = audit_append(s, ev);
		json_decref(ev);
		if (r < 0) {
			fprintf(stderr, "audit-append: %s\n", strerror(-r));
			return 1;
		}
	}
	return 0;
}
