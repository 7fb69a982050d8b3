/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a client of the semantic-fs socket sends: one frame's body through the request
 * parser, the query text through the FTS5 quoting, and the same bytes as the apps file
 * berth-init writes. Whatever is accepted must be within the caps, a path must come out
 * normalised (normalising it again changes nothing), a MATCH expression must be nothing
 * but quoted terms, and every answer must encode.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "request.h"

static void check(int ok)
{
	if (!ok)
		abort();
}

static void check_match(const char *m)
{
	size_t terms = 0;

	for (const char *p = m; *p;) {
		check(*p == '"');
		p++;
		check(*p && *p != '"');
		while (*p && *p != '"')
			check(*p++ != ' ');
		check(*p == '"');
		p++;
		terms++;
		if (*p) {
			check(strncmp(p, " OR ", 4) == 0);
			p += 4;
		}
	}
	check(terms <= SFS_QUERY_TERMS_MAX);
}

static void encode(json_t *a)
{
	char *buf = NULL;
	size_t len = 0;

	check(a != NULL);
	check(sfs_frame_encode(a, 1 << 24, &buf, &len) == 0);
	check(len >= 4);
	check(((size_t)(unsigned char)buf[2] << 8 | (unsigned char)buf[3]) == ((len - 4) & 0xffff));
	free(buf);
	json_decref(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	SfsRequest rq;
	SfsApps apps;
	char err[512], norm[SFS_PATH_MAX + 1];
	int r = sfs_request_parse((const char *)data, size, &rq, err, sizeof(err));

	check(rq.id != NULL);
	if (r < 0) {
		check(r == -EINVAL || r == -ENOMEM);
		check(r == -ENOMEM || err[0] != 0);
		encode(sfs_answer_error(rq.id, err));
	} else {
		check(rq.op >= 0 && rq.op < _SFS_OP_MAX);
		encode(sfs_answer_ok(rq.id));
		if (rq.op == SFS_OP_TAG) {
			check(rq.path && strlen(rq.path) <= SFS_PATH_MAX);
			check(sfs_path_normalize(rq.path, "/context", norm, sizeof(norm), err,
						 sizeof(err)) == 0);
			check(strcmp(norm, rq.path) == 0);
			check(rq.n_related <= SFS_RELATED_MAX);
			check(!rq.task || strlen(rq.task) <= SFS_TASK_MAX);
		}
		if (rq.op == SFS_OP_QUERY) {
			char *m;

			check(rq.limit >= 1 && rq.limit <= SFS_LIMIT_MAX);
			check(strlen(rq.text) <= SFS_QUERY_TEXT_MAX);
			m = sfs_query_match(rq.text);
			check(m != NULL);
			check_match(m);
			free(m);
		}
	}
	sfs_request_done(&rq);
	if (sfs_apps_parse((const char *)data, size, &apps, err, sizeof(err)) == 0) {
		check(apps.n <= SFS_APPS_MAX);
		for (size_t i = 0; i < apps.n; i++)
			check(apps.v[i].uid != 0 && apps.v[i].name[0]);
	}
	/* The bytes as a query's text, where any of them may land. */
	if (size <= SFS_QUERY_TEXT_MAX) {
		char *t = strndup((const char *)data, size), *m = t ? sfs_query_match(t) : NULL;

		if (m)
			check_match(m);
		free(m);
		free(t);
	}
	return 0;
}
