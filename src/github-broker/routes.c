/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capability.h"
#include "macros.h"
#include "routes.h"
#include "utf8.h"

/* One kept segment: as written (what goes upstream) and decoded (what is classified). */
typedef struct Segment {
	const char *raw;
	size_t raw_len;
	char *decoded;
} Segment;

typedef struct Path {
	Segment *v;
	size_t n;
	const char *query; /* from the '?' on, or "" */
} Path;

static void path_done(Path *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].decoded);
	free(p->v);
	*p = (Path){};
}

void github_route_done(GithubRoute *r)
{
	free(r->path);
	free(r->requested);
	*r = (GithubRoute){};
}

static int hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode @len bytes at @s. -ENOENT for what no route may hold: a bad escape, bytes
 * that are not UTF-8, a control character or a line separator, or a separator ('/' or
 * '\') once decoded. */
static int decode_segment(const char *s, size_t len, char **ret)
{
	_cleanup_free_ char *out = malloc(len + 1);
	size_t n = 0;

	if (!out)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '%') {
			int hi = i + 2 < len ? hex(s[i + 1]) : -1;
			int lo = hi >= 0 ? hex(s[i + 2]) : -1;

			if (hi < 0 || lo < 0)
				return -ENOENT;
			c = (unsigned char)(hi * 16 + lo);
			i += 2;
		}
		/* A separator smuggled into a segment is one to some parsers and not to others:
		 * a broker that had to guess could be made to check another path than GitHub
		 * serves. */
		if (c == '/' || c == '\\' || c < 0x20 || c == 0x7f)
			return -ENOENT;
		out[n++] = (char)c;
	}
	out[n] = '\0';
	if (!utf8_valid(out, n))
		return -ENOENT;
	/* U+2028 and U+2029 end a line for a capability's ".+" (SPEC 1.3) as \n does: a scope
	 * holding one is no capability anybody could declare, so it is no route rather than a
	 * denial that names something the manifest would refuse. */
	if (memmem(out, n, "\xe2\x80\xa8", 3) || memmem(out, n, "\xe2\x80\xa9", 3))
		return -ENOENT;
	*ret = TAKE_PTR(out);
	return 0;
}

/* Split, decode and resolve the path of @target into @ret (see routes.h). */
static int path_parse(const char *target, Path *ret)
{
	_cleanup_(path_done) Path p = {};
	const char *end, *s;
	size_t max = 1;

	if (target[0] != '/' || strchr(target, '#'))
		return -ENOENT;
	end = target + strcspn(target, "?");
	for (s = target; s < end; s++)
		max += *s == '/';
	p.v = calloc(max, sizeof(Segment));
	if (!p.v)
		return -ENOMEM;
	p.query = end;
	for (s = target + 1; s <= end;) {
		const char *slash = memchr(s, '/', (size_t)(end - s));
		size_t len = (size_t)((slash ? slash : end) - s);
		char *d = NULL;
		int r = decode_segment(s, len, &d);

		if (r < 0)
			return r;
		if (streq(d, "") || streq(d, ".")) {
			free(d);
		} else if (streq(d, "..")) {
			free(d);
			/* Above the API's root there is nothing to resolve to. */
			if (p.n == 0)
				return -ENOENT;
			free(p.v[--p.n].decoded);
		} else
			p.v[p.n++] = (Segment){s, len, d};
		s += len + 1;
	}
	*ret = p;
	p = (Path){};
	return 0;
}

static int path_join(const Path *p, char **ret)
{
	size_t size = strlen(p->query) + 2;
	char *out, *o;

	for (size_t i = 0; i < p->n; i++)
		size += p->v[i].raw_len + 1;
	out = o = malloc(size);
	if (!out)
		return -ENOMEM;
	if (p->n == 0)
		*o++ = '/';
	for (size_t i = 0; i < p->n; i++) {
		*o++ = '/';
		memcpy(o, p->v[i].raw, p->v[i].raw_len);
		o += p->v[i].raw_len;
	}
	strcpy(o, p->query);
	*ret = out;
	return 0;
}

int github_path_normalize(const char *target, char **ret)
{
	_cleanup_(path_done) Path p = {};
	int r = path_parse(target, &p);

	return r < 0 ? r : path_join(&p, ret);
}

static bool seg_is(const Path *p, size_t i, const char *word)
{
	return i < p->n && streq(p->v[i].decoded, word);
}

/* The route table (routes.h), first match. Returns a malloc()ed scope, NULL for no route
 * (errno ENOENT) or OOM (ENOMEM). */
static char *route_scope(const Path *p)
{
	static const struct {
		const char *root;
		const char *prefix; /* of the sub-resource's scope */
	} owned[] = {
		{"user", "user:"},
		{"users", "users:"},
		{"orgs", "orgs:"},
	};
	char *scope = NULL;

	errno = ENOENT;
	if (seg_is(p, 0, "repos") && p->n == 3)
		return strdup("repos");
	if (seg_is(p, 0, "repos") && p->n >= 4)
		return strdup(p->v[3].decoded);
	/* /user names the caller; /users/x and /orgs/x one more segment, the account. */
	for (size_t i = 0; i < ELEMENTSOF(owned); i++) {
		size_t base = i == 0 ? 1 : 2;

		if (!seg_is(p, 0, owned[i].root) || p->n < base)
			continue;
		if (p->n == base)
			return strdup(owned[i].root);
		if (asprintf(&scope, "%s%s", owned[i].prefix, p->v[base].decoded) < 0) {
			errno = ENOMEM;
			return NULL;
		}
		return scope;
	}
	if (seg_is(p, 0, "gists"))
		return strdup("gists");
	if (seg_is(p, 0, "notifications"))
		return strdup("notifications");
	if (seg_is(p, 0, "search") && p->n == 2 &&
	    asprintf(&scope, "search:%s", p->v[1].decoded) >= 0)
		return scope;
	if (seg_is(p, 0, "search") && p->n == 2)
		errno = ENOMEM;
	return NULL;
}

int github_route_classify(const char *method, const char *target, GithubRoute *ret)
{
	_cleanup_(path_done) Path p = {};
	_cleanup_free_ char *scope = NULL, *path = NULL;
	bool read = streq(method, "GET") || streq(method, "HEAD");
	char *requested = NULL;
	int r;

	r = path_parse(target, &p);
	if (r < 0)
		return r;
	scope = route_scope(&p);
	if (!scope)
		return errno == ENOMEM ? -ENOMEM : -ENOENT;
	r = path_join(&p, &path);
	if (r < 0)
		return r;
	if (asprintf(&requested, "github:%s:%s", read ? "read" : "write", scope) < 0)
		return -ENOMEM;
	*ret = (GithubRoute){.path = TAKE_PTR(path), .requested = requested};
	return 0;
}

static bool is_github(const char *cap)
{
	return strneq(cap, "github:", 7);
}

bool github_policy_allows(const CapabilityPolicy *policy, const char *requested)
{
	for (size_t i = 0; policy && i < policy->declared.n; i++)
		if (is_github(policy->declared.v[i]) &&
		    capability_matches(policy->declared.v[i], requested))
			return true;
	return false;
}

size_t github_policy_count(const CapabilityPolicy *policy)
{
	size_t n = 0;

	for (size_t i = 0; policy && i < policy->declared.n; i++)
		n += is_github(policy->declared.v[i]);
	return n;
}

/* {"message": @text} as compact JSON (the JSON.stringify() of the original's bodies). */
static char *message_body(char *text)
{
	json_t *o = text ? json_pack("{s:s}", "message", text) : NULL;
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	free(text);
	return s;
}

char *github_denial_no_route(const char *method, const char *target)
{
	char *text = NULL;

	if (asprintf(&text,
		     "denied: no route covers %s %s — this broker maps paths to capabilities explicitly and denies by default",
		     method, target) < 0)
		text = NULL;
	return message_body(text);
}

char *github_denial_not_covered(const char *requested)
{
	char *text = NULL;

	if (asprintf(&text, "denied: no declared capability covers %s", requested) < 0)
		text = NULL;
	return message_body(text);
}
