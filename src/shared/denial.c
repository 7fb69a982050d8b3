/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "denial.h"
#include "macros.h"
#include "parse-util.h"
#include "policy.h"
#include "term-text.h"

/*
 * What an app may touch without declaring it is what the policy compiler grants it
 * (src/capability/policy.c): the explainer compiles the app's policy from its berth.yml and
 * asks it, rather than knowing the rules a second time.
 */
#define FS_PREFIXES_TEXT CAPABILITY_FS_PREFIXES_TEXT
#define APP_CWD_DEFAULT "/app"
#define APP_NAME_SHOWN_MAX 128 /* bytes of an app name kept for the tally of log statements */
#define LOG_APPS_MAX 64	       /* more than a VM holds (4, berth-vmm's VMM_APPS_MAX) */
#define DOCS_LINE "docs: docs/mcp.md (Denials), docs/confinement.md, docs/manifest.md"

/* --- text ---------------------------------------------------------------------------- */

/*
 * Write @n bytes of peer text as valid UTF-8 with nothing hostile left: invalid bytes
 * become U+FFFD, a line feed the two characters "\n" (or a space with @flat), every other
 * hostile character a space (term-text.h).
 */
static void put_clean(FILE *f, const char *s, size_t n, bool flat)
{
	term_text_write(f, s, n, TERM_TEXT_SPACE | (flat ? 0 : TERM_TEXT_NEWLINE_ESCAPED));
}

/* The echo of an app's error: at most DENIAL_RAW_MAX bytes, cleaned. */
static void put_raw(FILE *f, const char *raw)
{
	size_t n = strnlen(raw, DENIAL_RAW_MAX + 1);

	if (n <= DENIAL_RAW_MAX) {
		put_clean(f, raw, n, false);
		return;
	}
	put_clean(f, raw, term_text_cut(raw, n, DENIAL_RAW_MAX), false);
	fprintf(f, " … (cut at %d bytes)", DENIAL_RAW_MAX);
}

static void put_str(FILE *f, const char *s)
{
	put_clean(f, s, strlen(s), false);
}

/* A malloc()ed copy of @len bytes of @s, cleaned as put_clean() does but with line feeds as
 * spaces, trimmed, at most @max bytes. */
static char *clean_copy(const char *s, size_t len, size_t max)
{
	char *buf = NULL;
	size_t size = 0, start = 0;
	FILE *f = open_memstream(&buf, &size);

	if (!f)
		return NULL;
	put_clean(f, s, MIN(len, max * 4), true);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	while (start < size && buf[start] == ' ')
		start++;
	while (size > start && buf[size - 1] == ' ')
		size--;
	size -= start;
	memmove(buf, buf + start, size);
	size = term_text_cut(buf, size, max);
	buf[size] = '\0';
	return buf;
}

/* Finish a memstream opened on @buf: the text, or NULL (and nothing leaked) when any write
 * failed. */
static char *memstream_done(FILE *f, char **buf)
{
	bool bad = ferror(f);

	if (fclose(f) != 0 || bad) {
		free(*buf);
		*buf = NULL;
	}
	return TAKE_PTR(*buf);
}

/* --- enforcement ----------------------------------------------------------------------- */

static const char *const enforcement_names[_ENFORCEMENT_MAX] = {
	[ENFORCEMENT_ENFORCED] = "enforced",
	[ENFORCEMENT_PARTIAL] = "partially-enforced",
	[ENFORCEMENT_NOT_ENFORCED] = "not-enforced",
	[ENFORCEMENT_UNKNOWN] = "unknown",
};

const char *enforcement_status_to_string(EnforcementStatus s)
{
	return s >= 0 && s < _ENFORCEMENT_MAX ? enforcement_names[s] : NULL;
}

EnforcementStatus enforcement_status_from_string(const char *s)
{
	for (int i = 0; s && i < _ENFORCEMENT_MAX; i++)
		if (streq(s, enforcement_names[i]))
			return (EnforcementStatus)i;
	return _ENFORCEMENT_INVALID;
}

/* Worse is larger: a status that is not known to hold must not hide behind one that does. */
static int severity(EnforcementStatus s)
{
	switch (s) {
	case ENFORCEMENT_ENFORCED:
		return 0;
	case ENFORCEMENT_PARTIAL:
		return 1;
	case ENFORCEMENT_UNKNOWN:
		return 2;
	case ENFORCEMENT_NOT_ENFORCED:
	case _ENFORCEMENT_MAX:
	case _ENFORCEMENT_INVALID:
		break;
	}
	return 3;
}

/* agent-init's RulesetStatus name (src/agent-init/ruleset.c). */
static EnforcementStatus from_ruleset(const char *s, size_t len)
{
	if (len == 13 && memcmp(s, "FullyEnforced", len) == 0)
		return ENFORCEMENT_ENFORCED;
	if (len == 17 && memcmp(s, "PartiallyEnforced", len) == 0)
		return ENFORCEMENT_PARTIAL;
	if (len == 11 && memcmp(s, "NotEnforced", len) == 0)
		return ENFORCEMENT_NOT_ENFORCED;
	return ENFORCEMENT_UNKNOWN;
}

/* The first statement of each kind per app. An empty name: a statement naming no app. */
typedef struct AppStatement {
	char app[APP_NAME_SHOWN_MAX + 1];
	bool has_json, has_text;
	EnforcementStatus json, text;
} AppStatement;

typedef struct Tally {
	AppStatement apps[LOG_APPS_MAX];
	size_t n;
} Tally;

static void tally_add(Tally *t, const char *app, size_t len, EnforcementStatus st, bool json)
{
	AppStatement *a = NULL;

	if (!app) {
		app = "";
		len = 0;
	}
	if (len > APP_NAME_SHOWN_MAX)
		return;
	for (size_t i = 0; i < t->n && !a; i++)
		if (strlen(t->apps[i].app) == len && memcmp(t->apps[i].app, app, len) == 0)
			a = &t->apps[i];
	if (!a) {
		if (t->n == LOG_APPS_MAX || (len > 0 && memchr(app, '\0', len)))
			return;
		a = &t->apps[t->n++];
		*a = (AppStatement){};
		if (len > 0)
			memcpy(a->app, app, len);
	}
	if (json && !a->has_json) {
		a->has_json = true;
		a->json = st;
	} else if (!json && !a->has_text) {
		a->has_text = true;
		a->text = st;
	}
}

static EnforcementStatus tally_result(const Tally *t, const char *app)
{
	EnforcementStatus worst = ENFORCEMENT_UNKNOWN;
	bool any = false;

	for (size_t i = 0; i < t->n; i++) {
		const AppStatement *a = &t->apps[i];
		EnforcementStatus st = a->has_json ? a->json : a->text;

		if (app && a->app[0] && !streq(a->app, app))
			continue;
		if (!any || severity(st) > severity(worst))
			worst = st;
		any = true;
	}
	return worst;
}

static bool json_streq(json_t *o, const char *key, const char *want)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v && streq(v, want);
}

/* One element: an agent_init_report event, an agent-init audit object, or a bare
 * {"app","ruleset"} report. @src: who printed it, when known (a log line's "src"). */
static void tally_object(Tally *t, json_t *o, const char *src)
{
	json_t *ruleset, *app;
	const char *event = json_string_value(json_object_get(o, "event"));

	if (event && streq(event, "agent_init_report")) {
		json_t *report = json_object_get(o, "report");

		app = json_object_get(o, "app");
		ruleset = json_object_get(report, "ruleset");
		if (json_is_string(app) && json_is_string(ruleset) &&
		    json_streq(report, "event", "capability_policy_applied"))
			tally_add(t, json_string_value(app), json_string_length(app),
				  from_ruleset(json_string_value(ruleset),
					       json_string_length(ruleset)),
				  true);
		return;
	}
	ruleset = json_object_get(o, "ruleset");
	if (!json_is_string(ruleset) || (event && !streq(event, "capability_policy_applied")))
		return;
	app = json_object_get(o, "app");
	if (src && json_is_string(app) && !streq(json_string_value(app), src))
		return; /* one app printing a report about another */
	if (json_is_string(app))
		tally_add(t, json_string_value(app), json_string_length(app),
			  from_ruleset(json_string_value(ruleset), json_string_length(ruleset)),
			  true);
	else
		tally_add(t, src, src ? strlen(src) : 0,
			  from_ruleset(json_string_value(ruleset), json_string_length(ruleset)),
			  true);
}

static const char *memmem_str(const char *s, size_t len, const char *needle)
{
	return memmem(s, len, needle, strlen(needle));
}

/* The word after @key in @s, if it is one ([A-Za-z]+). */
static bool word_after(const char *s, size_t len, const char *key, const char **ret,
		       size_t *ret_len)
{
	const char *p = memmem_str(s, len, key), *end = s + len, *w;

	if (!p)
		return false;
	w = p += strlen(key);
	while (p < end && ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
		p++;
	*ret = w;
	*ret_len = (size_t)(p - w);
	return p > w;
}

/* A line that is not JSON but carries `"ruleset":"X"`, escaped or not (a cut-off line). */
static void tally_loose(Tally *t, const char *s, size_t len, const char *src)
{
	const char *w;
	size_t wl;

	if (word_after(s, len, "\"ruleset\":\"", &w, &wl) ||
	    word_after(s, len, "\\\"ruleset\\\":\\\"", &w, &wl))
		tally_add(t, src, src ? strlen(src) : 0, from_ruleset(w, wl), true);
}

/* agent-init's human lines (src/agent-init/main.c): [agent-init] restricted "<app>" (<status>)
 * and [agent-init] NOT RESTRICTED "<app>"; the restrict_self() line names no app. */
static void tally_human(Tally *t, const char *s, size_t len, const char *src)
{
	static const char tag[] = "[agent-init] ";
	const char *end = s + len, *name, *q, *w;
	EnforcementStatus st;
	size_t wl;

	if (len < sizeof(tag) - 1 || memcmp(s, tag, sizeof(tag) - 1) != 0)
		return;
	s += sizeof(tag) - 1;
	if ((size_t)(end - s) > 16 && memcmp(s, "NOT RESTRICTED \"", 16) == 0) {
		name = s + 16;
		st = ENFORCEMENT_NOT_ENFORCED;
	} else if ((size_t)(end - s) > 12 && memcmp(s, "restricted \"", 12) == 0) {
		name = s + 12;
		st = ENFORCEMENT_UNKNOWN;
	} else {
		if (word_after(s, (size_t)(end - s),
			       "landlock restrict_self() status: ruleset=", &w, &wl) &&
		    src)
			tally_add(t, src, strlen(src), from_ruleset(w, wl), false);
		return;
	}
	q = memchr(name, '"', (size_t)(end - name));
	if (!q)
		return;
	/* Without a policy agent-init calls the app "unknown"; saying "not restricted" can only
	 * lower what is believed of the app that printed it, so it counts for that app. */
	if (src && st == ENFORCEMENT_NOT_ENFORCED) {
		tally_add(t, src, strlen(src), st, false);
		return;
	}
	if (src && ((size_t)(q - name) != strlen(src) || memcmp(name, src, strlen(src))))
		return;
	if (st == ENFORCEMENT_UNKNOWN) {
		if (end - q < 3 || q[1] != ' ' || q[2] != '(')
			return;
		w = q + 3;
		for (wl = 0; w + wl < end && w[wl] != ')'; wl++)
			;
		if (w + wl == end)
			return;
		st = from_ruleset(w, wl);
	}
	tally_add(t, name, (size_t)(q - name), st, false);
}

static void tally_line(Tally *t, const char *s, size_t len, const char *src, bool inner);

static void tally_json_line(Tally *t, const char *s, size_t len, const char *src, bool inner)
{
	json_t *o = json_loadb(s, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *line = json_object_get(o, "line"), *from = json_object_get(o, "src");

	if (!json_is_object(o))
		tally_loose(t, s, len, src);
	else if (!inner && json_is_string(line) && json_is_string(from)) {
		/* The log port: "src" is berth-init's word for who printed "line". */
		_cleanup_free_ char *who = strndup(json_string_value(from), APP_NAME_SHOWN_MAX);

		if (who)
			tally_line(t, json_string_value(line), json_string_length(line), who, true);
	} else
		tally_object(t, o, src);
	json_decref(o);
}

static void tally_line(Tally *t, const char *s, size_t len, const char *src, bool inner)
{
	_cleanup_free_ char *prefix = NULL;

	if (len > 0 && s[len - 1] == '\r')
		len--;
	/* A console or `berth vm logs` prefix, "[<src>] ", but not agent-init's own tag. */
	if (!inner && len > 3 && s[0] == '[') {
		const char *close = memchr(s, ']', MIN(len, (size_t)APP_NAME_SHOWN_MAX + 2));

		if (close && (size_t)(close - s) + 1 < len && close[1] == ' ' &&
		    !(close - s == 11 && memcmp(s, "[agent-init", 11) == 0)) {
			prefix = strndup(s + 1, (size_t)(close - s - 1));
			if (!prefix)
				return;
			if (!streq(prefix, "event"))
				src = prefix;
			len -= (size_t)(close - s) + 2;
			s = close + 2;
		}
	}
	if (len > 0 && s[0] == '{')
		tally_json_line(t, s, len, src, inner);
	else {
		tally_human(t, s, len, src);
		tally_loose(t, s, len, src);
	}
}

EnforcementStatus enforcement_from_app_logs(const char *text, const char *app)
{
	_cleanup_free_ Tally *t = calloc(1, sizeof(Tally));
	size_t len, start = 0;

	if (!t || !text)
		return ENFORCEMENT_UNKNOWN;
	len = strnlen(text, DENIAL_LOGS_MAX);
	while (start < len) {
		const char *nl = memchr(text + start, '\n', len - start);
		size_t end = nl ? (size_t)(nl - text) : len;

		if (end - start <= DENIAL_LOG_LINE_MAX)
			tally_line(t, text + start, end - start, NULL, false);
		start = end + 1;
	}
	return tally_result(t, app);
}

EnforcementStatus enforcement_from_logs(const char *text)
{
	return enforcement_from_app_logs(text, NULL);
}

EnforcementStatus enforcement_from_reports(json_t *items, const char *app)
{
	_cleanup_free_ Tally *t = calloc(1, sizeof(Tally));
	json_t *o;
	size_t i;

	if (!t)
		return ENFORCEMENT_UNKNOWN;
	json_array_foreach(items, i, o) {
		if (json_is_object(o))
			tally_object(t, o, NULL);
	}
	return tally_result(t, app);
}

/* --- parsing an app's error ------------------------------------------------------------ */

typedef struct FsError {
	char code[8]; /* EACCES, EPERM, EROFS */
	const char *desc, *syscall;
	size_t desc_len, syscall_len; /* syscall_len 0: Python, which does not name it */
	char *path[2];		      /* as printed */
	size_t n_paths;
} FsError;

static void fs_error_done(FsError *e)
{
	free(e->path[0]);
	free(e->path[1]);
}

static bool is_upper(char c)
{
	return c >= 'A' && c <= 'Z';
}

static bool is_syscall_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/*
 * The quoted path(s) at @s (just after the opening quote @q) up to @end, the end of the
 * first line. Node prints paths raw, so a name may hold a quote itself; its messages end
 * with the closing quote, so when the line does, the last quote closes. Otherwise the first
 * does (an app that wrapped the message). Two paths: "<a>' -> '<b>".
 */
static int parse_quoted(FsError *e, const char *s, const char *end, char q, bool allow_two)
{
	char sep[] = {q, ' ', '-', '>', ' ', q, '\0'};
	const char *arrow = allow_two ? memmem_str(s, (size_t)(end - s), sep) : NULL;
	const char *close, *first = s;

	while (end > s && end[-1] == ' ')
		end--;
	if (arrow) {
		e->path[0] = strndup(s, (size_t)(arrow - s));
		s = arrow + strlen(sep);
	}
	close = end > s && end[-1] == q ? end - 1 : memchr(s, q, (size_t)(end - s));
	if (!close || close == s || (arrow && arrow == first))
		return 0;
	e->path[e->n_paths = arrow ? 1 : 0] = strndup(s, (size_t)(close - s));
	e->n_paths++;
	if (!e->path[0] || (arrow && !e->path[1]))
		return -ENOMEM;
	return 1;
}

/* Node: ^(E[A-Z]+): ([^,]+), ([a-z0-9_]+) '([^']+)'(?: -> '([^']+)')? */
static int parse_node(FsError *e, const char *s, const char *end)
{
	const char *p = s, *comma;

	if (p == end || *p != 'E')
		return 0;
	for (p++; p < end && is_upper(*p); p++)
		;
	if (p - s < 2 || (size_t)(p - s) >= sizeof(e->code) || end - p < 2 || p[0] != ':' ||
	    p[1] != ' ')
		return 0;
	memcpy(e->code, s, (size_t)(p - s));
	e->desc = p += 2;
	comma = memchr(p, ',', (size_t)(end - p));
	if (!comma || comma == p || end - comma < 2 || comma[1] != ' ')
		return 0;
	e->desc_len = (size_t)(comma - p);
	e->syscall = p = comma + 2;
	while (p < end && is_syscall_char(*p))
		p++;
	e->syscall_len = (size_t)(p - e->syscall);
	if (e->syscall_len == 0 || end - p < 2 || p[0] != ' ' || p[1] != '\'')
		return 0;
	return parse_quoted(e, p + 2, end, '\'', true);
}

/* Python's OSError: [Errno 13] Permission denied: '/etc/x' (repr() quotes the name). */
static int parse_python(FsError *e, const char *s, const char *end)
{
	static const struct {
		int errno_value;
		const char *code;
	} codes[] = {{EACCES, "EACCES"}, {EPERM, "EPERM"}, {EROFS, "EROFS"}};
	const char *p = s, *colon;
	int n = 0;

	while (p < end && ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
		p++;
	if (p > s && end - p > 2 && p[0] == ':' && p[1] == ' ')
		p += 2; /* "PermissionError: " as a traceback prints it */
	else
		p = s;
	if (end - p < 8 || memcmp(p, "[Errno ", 7) != 0)
		return 0;
	for (p += 7; p < end && *p >= '0' && *p <= '9' && n < 10000; p++)
		n = n * 10 + (*p - '0');
	if (end - p < 2 || p[0] != ']' || p[1] != ' ')
		return 0;
	for (size_t i = 0; i < ELEMENTSOF(codes); i++)
		if (codes[i].errno_value == n)
			memcpy(e->code, codes[i].code, strlen(codes[i].code) + 1);
	e->desc = p += 2;
	colon = memmem_str(p, (size_t)(end - p), ": ");
	if (!e->code[0] || !colon || colon == p || end - colon < 4 ||
	    (colon[2] != '\'' && colon[2] != '"'))
		return 0;
	e->desc_len = (size_t)(colon - p);
	if (memmem_str(colon, (size_t)(end - colon), " -> "))
		return 0; /* two names and no operation: too little to go on */
	return parse_quoted(e, colon + 3, end, colon[2], false);
}

/* Returns 1 and fills @e when @raw (its first line) is an fs error, 0 when not, -ENOMEM. */
static int fs_error_parse(const char *raw, FsError *e)
{
	size_t n = strnlen(raw, DENIAL_RAW_MAX);
	const char *nl = memchr(raw, '\n', n), *end = nl ? nl : raw + n;
	int r;

	*e = (FsError){};
	r = parse_node(e, raw, end);
	if (r == 0) {
		fs_error_done(e);
		*e = (FsError){};
		r = parse_python(e, raw, end);
	}
	if (r <= 0)
		fs_error_done(e);
	return r;
}

/* --- paths ------------------------------------------------------------------------------ */

static bool path_beneath(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return strneq(path, dir, n) && (path[n] == '\0' || path[n] == '/');
}

static const char *allowed_prefix(const char *path)
{
	for (size_t i = 0; i < ELEMENTSOF(capability_fs_prefixes); i++)
		if (path_beneath(path, capability_fs_prefixes[i]))
			return capability_fs_prefixes[i];
	return NULL;
}

/* @p made absolute against @cwd and canonical, as the kernel walks it ("." and ".." by
 * name; ".." at the root stays there). Symlinks are not known here. */
static char *path_absolute(const char *p, const char *cwd)
{
	_cleanup_free_ char *joined = NULL;
	char *out, *save = NULL;
	size_t n = 0;

	if (asprintf(&joined, "%s/%s", p[0] == '/' ? "" : cwd, p) < 0)
		return NULL;
	out = malloc(strlen(joined) + 2);
	if (!out)
		return NULL;
	for (char *seg = strtok_r(joined, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
		if (streq(seg, "."))
			continue;
		if (streq(seg, "..")) {
			while (n > 0 && out[--n] != '/')
				;
			continue;
		}
		out[n++] = '/';
		memcpy(out + n, seg, strlen(seg));
		n += strlen(seg);
	}
	if (n == 0)
		out[n++] = '/';
	out[n] = '\0';
	return out;
}

/* The scope a fix names: the directory of @target, never above the prefix it is under. */
static char *scope_for(const char *target, const char *prefix)
{
	const char *slash = strrchr(target, '/');
	size_t len = slash ? (size_t)(slash - target) : 0;

	return strndup(target, MAX(len, strlen(prefix)));
}

/* --- what the manifest grants ----------------------------------------------------------- */

enum { NEED_WRITE = 1, NEED_READ = 2 };

typedef enum Cover {
	COVER_NONE,
	COVER_DECLARED,	     /* a capability line (@by) */
	COVER_OWN_DIRS,	     /* /tmp/<app>, /run/berth/<app>, /dev/null */
	COVER_TERMINAL,	     /* /dev/pts, /dev/ptmx with a terminal: capability */
	COVER_READ_BASELINE, /* /usr, /etc, ..., the app's own directories */
} Cover;

typedef struct Grants {
	const char *app, *cwd;
	const char *const *caps;
	size_t n_caps;
	CapabilityPolicy *policy; /* compiled from caps; NULL when the app name is not valid */
} Grants;

static const char *action_name(unsigned action)
{
	return action == NEED_WRITE ? "write" : "read";
}

/* A filesystem:<action>: capability that grants @path: the §1.3 match of the scope asked
 * for, or a granted directory @path or @scope lies beneath (Landlock rules are trees). */
static const char *declared_for_action(const Grants *g, unsigned action, const char *scope,
				       const char *path)
{
	_cleanup_free_ char *wanted = NULL;
	char prefix[32];
	size_t plen;

	if (asprintf(&wanted, "filesystem:%s:%s", action_name(action), scope) < 0)
		return NULL;
	plen = (size_t)snprintf(prefix, sizeof(prefix), "filesystem:%s:", action_name(action));
	for (size_t i = 0; i < g->n_caps; i++) {
		const char *c = g->caps[i];
		_cleanup_free_ char *dir = NULL;
		size_t len;

		if (capability_matches(c, wanted))
			return c;
		if (!strneq(c, prefix, plen))
			continue;
		len = strlen(c + plen);
		if (len >= 2 && streq(c + plen + len - 2, "/*"))
			len -= 2;
		dir = strndup(c + plen, len);
		if (dir && dir[0] == '/' && (path_beneath(scope, dir) || path_beneath(path, dir)))
			return c;
	}
	return NULL;
}

/* The declaration that covers it: a read is granted by a read line or, since an app may
 * read back what it may write, by a write line. */
static const char *declared_for(const Grants *g, unsigned action, const char *scope,
				const char *path)
{
	const char *by = declared_for_action(g, action, scope, path);

	if (!by && action == NEED_READ)
		by = declared_for_action(g, NEED_WRITE, scope, path);
	return by;
}

/* Whether the policy grants it, and on what grounds: a declaration, or what every app
 * gets. The policy answers; the wording only names its grounds. */
static Cover cover_for(const Grants *g, unsigned action, const char *path, const char *scope,
		       const char **ret_by)
{
	const char *rule;

	*ret_by = scope ? declared_for(g, action, scope, path) : NULL;
	if (*ret_by)
		return COVER_DECLARED;
	rule = g->policy ? capability_policy_grants(g->policy, path,
						    action == NEED_WRITE ? POLICY_ACCESS_WRITE
									 : POLICY_ACCESS_READ)
			 : NULL;
	if (!rule)
		return COVER_NONE;
	if (action == NEED_READ)
		return COVER_READ_BASELINE;
	return streq(rule, "/dev/pts") || streq(rule, "/dev/ptmx") ? COVER_TERMINAL
								   : COVER_OWN_DIRS;
}

/* --- the explanation --------------------------------------------------------------------- */

typedef struct Need {
	const char *path; /* absolute */
	unsigned actions; /* NEED_WRITE | NEED_READ: either one (the syscall does both) */
} Need;

/* One access the failed call may have needed, and what the manifest says about it. */
typedef struct Check {
	const char *path;
	unsigned action;
	Cover cover;
	const char *by; /* COVER_DECLARED: the capability */
	char *scope;	/* COVER_NONE under a prefix: the scope a line would name */
	char *issue;	/* COVER_NONE: why no line can name it (NULL: one can) */
	bool outside;	/* COVER_NONE: not under /workspace, /context, /tmp, /app */
} Check;

static const char *const write_syscalls[] = {
	"mkdir",     "rmdir",	"unlink",  "rename",	       "write",	 "truncate",
	"ftruncate", "symlink", "link",	   "copyfile",	       "chmod",	 "chown",
	"utimes",    "futimes", "mkdtemp", "appendfile",       "lchown", "lchmod",
	"fchmod",    "fchown",	"lutimes", "mkdtempdisposable"};
static const char *const read_syscalls[] = {"read",  "readlink", "readdir",  "scandir", "stat",
					    "lstat", "fstat",	 "realpath", "opendir"};

static bool syscall_in(const FsError *e, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(list[i]) == e->syscall_len &&
		    strneq(e->syscall, list[i], e->syscall_len))
			return true;
	return false;
}

static bool syscall_is(const FsError *e, const char *name)
{
	return strlen(name) == e->syscall_len && strneq(e->syscall, name, e->syscall_len);
}

/* What the call needed, in the order a fix lists it. Returns how many (1 or 2). */
static size_t needs_for(const FsError *e, char *const abs[2], Need ret[2])
{
	unsigned act = syscall_in(e, write_syscalls, ELEMENTSOF(write_syscalls)) ? NEED_WRITE
		       : syscall_in(e, read_syscalls, ELEMENTSOF(read_syscalls))
			       ? NEED_READ
			       : NEED_WRITE | NEED_READ;

	if (e->n_paths == 2) {
		/* rename(2) takes the name out of one directory and puts it into another;
		 * copyfile reads one and writes the other; a link only adds the new name. */
		if (syscall_is(e, "rename")) {
			ret[0] = (Need){abs[0], NEED_WRITE};
			ret[1] = (Need){abs[1], NEED_WRITE};
			return 2;
		}
		if (syscall_is(e, "copyfile")) {
			ret[0] = (Need){abs[0], NEED_READ};
			ret[1] = (Need){abs[1], NEED_WRITE};
			return 2;
		}
		if (syscall_is(e, "link") || syscall_is(e, "symlink")) {
			ret[0] = (Need){abs[1], NEED_WRITE};
			return 1;
		}
	}
	ret[0] = (Need){abs[0], act};
	return 1;
}

static int check_one(const Grants *g, const char *path, unsigned action, Check *c)
{
	const char *prefix = allowed_prefix(path);
	int r;

	*c = (Check){.path = path, .action = action};
	if (prefix) {
		c->scope = scope_for(path, prefix);
		if (!c->scope)
			return -ENOMEM;
	}
	c->cover = cover_for(g, action, path, c->scope, &c->by);
	if (c->cover != COVER_NONE)
		return 0;
	if (!prefix) {
		c->outside = true;
		return 0;
	}
	r = capability_fs_scope_issue(c->scope, strlen(c->scope), &c->issue);
	return r < 0 ? r : 0;
}

static void checks_done(Check *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(c[i].scope);
		free(c[i].issue);
	}
}

static void put_denied_by(FILE *f, const char *app, EnforcementStatus st)
{
	fputs("denied-by: ", f);
	switch (st) {
	case ENFORCEMENT_ENFORCED:
		fprintf(f,
			"the kernel — a Landlock ruleset compiled from \"%s\"'s berth.yml and applied before the app's first line ran",
			app);
		break;
	case ENFORCEMENT_PARTIAL:
		fprintf(f,
			"the kernel, but this VM reported a PARTIALLY enforced ruleset for \"%s\" — its kernel could not handle every right the policy needs, so treat the boundary as incomplete; agent-init's line in `berth vm logs` names what is missing",
			app);
		break;
	case ENFORCEMENT_NOT_ENFORCED:
		fprintf(f,
			"NOT the Landlock policy — agent-init reported that the kernel applied no ruleset for \"%s\", so its capabilities are recorded and not enforced. Something else refused this call (file ownership, a read-only mount, or the app's own code); do not read it as enforcement. Run `berth doctor` and see docs/confinement.md",
			app);
		break;
	case ENFORCEMENT_UNKNOWN:
	case _ENFORCEMENT_MAX:
	case _ENFORCEMENT_INVALID:
		fprintf(f,
			"unknown — agent-init's report of \"%s\"'s ruleset could not be read from the VM, so it cannot be said whether the kernel refused this or something else did. Run `berth doctor` before treating it as a kernel boundary",
			app);
		break;
	}
	fputc('\n', f);
}

static void put_declared(FILE *f, const Grants *g, const char *ns_prefix, const char *none)
{
	bool first = true;

	fputs("declared: ", f);
	for (size_t i = 0; i < g->n_caps; i++) {
		if (ns_prefix && !strneq(g->caps[i], ns_prefix, strlen(ns_prefix)))
			continue;
		if (!first)
			fputs(", ", f);
		put_str(f, g->caps[i]);
		first = false;
	}
	fprintf(f, "%s\n", first ? none : "");
}

/* A capability as a YAML list item: plain when nothing in it needs quoting. */
static void put_cap_item(FILE *f, const char *action, const char *scope)
{
	_cleanup_free_ char *cap = NULL, *quoted = NULL;
	bool plain = true;
	json_t *s;

	if (asprintf(&cap, "filesystem:%s:%s", action, scope) < 0) {
		fputs("  - ?\n", f);
		return;
	}
	for (const char *p = cap; *p && plain; p++)
		plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			(*p >= '0' && *p <= '9') || strchr("/._-:+@=~,", *p);
	if (!plain) {
		s = json_string(cap);
		quoted = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
		json_decref(s);
	}
	fputs("  - ", f);
	put_str(f, quoted ?: cap);
	fputc('\n', f);
}

static void put_header(FILE *f, const char *raw, const char *app, const char *manifest_path,
		       const FsError *e, char *const abs[2], const char *cwd)
{
	fputs(DENIAL_HEADING "\napp: ", f);
	put_str(f, app);
	fputs("\nmanifest: ", f);
	put_str(f, manifest_path);
	fputs("\nraw: ", f);
	put_raw(f, raw);
	fputs("\ndenied: ", f);
	if (e->syscall_len > 0) {
		put_clean(f, e->syscall, e->syscall_len, false);
		fputs("(2) on ", f);
	} else
		fputs("a file operation on ", f);
	put_str(f, abs[0]);
	if (e->n_paths == 2) {
		fputs(" -> ", f);
		put_str(f, abs[1]);
	}
	fprintf(f, " (%s: ", e->code);
	put_clean(f, e->desc, e->desc_len, false);
	fputs(")\n", f);
	for (size_t i = 0; i < e->n_paths; i++)
		if (e->path[i][0] != '/') {
			fputs("path: '", f);
			put_str(f, e->path[i]);
			fputs("' is relative to the app's working directory, ", f);
			put_str(f, cwd);
			fputs(", so it names ", f);
			put_str(f, abs[i]);
			fputc('\n', f);
		}
}

static void put_erofs(FILE *f, const char *app, const char *target)
{
	fputs("denied-by: the kernel, at a read-only mount rather than the capability policy — in the VM the root image and the app's own share under /app are mounted read-only, so no process there can write ",
	      f);
	put_str(f, target);
	fputs(", whatever berth.yml declares\nfix: write under the app's data directory instead (BERTH_WORKSPACE_ROOT, which is /workspace in the VM, declared with a filesystem:write: line) or under /tmp/",
	      f);
	put_str(f, app);
	fputs(", which the app may always write. Adding a capability line will NOT change this.\n"
	      "docs: docs/mcp.md (Denials), docs/vm.md\n",
	      f);
}

static void put_outside(FILE *f, const Grants *g, const Check *c)
{
	if (c->outside) {
		fputs("fix: none available — a berth.yml filesystem scope may only name " FS_PREFIXES_TEXT
		      ", so no declaration grants ",
		      f);
		put_str(f, c->path);
		fputs(". Use a path under one of those instead.\n", f);
	} else {
		fputs("fix: none available — no berth.yml line can name ", f);
		put_str(f, c->scope);
		fputs(" (", f);
		put_str(f, c->issue);
		fputs("). Use a path without it instead.\n", f);
	}
	put_declared(f, g, NULL, "(none)");
	fputs(DOCS_LINE "\n", f);
}

static void put_cover_reason(FILE *f, const Grants *g, const Check *c)
{
	switch (c->cover) {
	case COVER_DECLARED:
		fprintf(f, "\"%s\" already declares ", g->app);
		put_str(f, c->by);
		break;
	case COVER_OWN_DIRS:
		fprintf(f,
			"every app may write /dev/null, its own /tmp/%s and /run/berth/%s without declaring them",
			g->app, g->app);
		break;
	case COVER_TERMINAL:
		fputs("a terminal: capability already grants /dev/pts and /dev/ptmx", f);
		break;
	case COVER_READ_BASELINE:
		fprintf(f,
			"reads under " CAPABILITY_READ_BASELINE_TEXT
			", %s, /tmp/%s and /run/berth/%s are always allowed",
			g->cwd, g->app, g->app);
		break;
	case COVER_NONE:
		break;
	}
}

static void put_not_missing(FILE *f, const Grants *g, const Check *c, size_t n)
{
	fputs("fix: not a missing declaration — ", f);
	for (size_t i = 0, shown = 0; i < n; i++) {
		bool again = false;

		/* A write line grants the read too: one reason, said once. */
		for (size_t k = 0; k < i; k++)
			again |= c[k].cover == c[i].cover && c[k].by == c[i].by;
		if (again)
			continue;
		if (shown++ > 0)
			fputs("; ", f);
		put_cover_reason(f, g, &c[i]);
	}
	fputs(". Likely file ownership (each app runs as its own uid, 10000 and up, so what root or another app created may not be writable by this one) or a symlink leading out of the granted directory (the kernel checks where it leads). agent-init's \"restricted\" line in `berth vm logs` lists the paths the ruleset actually got.\n",
	      f);
	put_declared(f, g, NULL, "(none)");
	fputs(DOCS_LINE "\n", f);
}

static void put_alternative(FILE *f, const Grants *g, unsigned action)
{
	char prefix[32];
	size_t plen =
		(size_t)snprintf(prefix, sizeof(prefix), "filesystem:%s:", action_name(action));

	fprintf(f,
		"alternative: leave berth.yml as it is and have the export %s where \"%s\" already may: ",
		action_name(action), g->app);
	for (size_t i = 0; i < g->n_caps; i++)
		if (strneq(g->caps[i], prefix, plen)) {
			put_str(f, g->caps[i] + plen);
			fputs(", ", f);
		}
	if (action == NEED_WRITE)
		fprintf(f, "/tmp/%s\n", g->app);
	else
		fprintf(f, "/tmp, %s\n", g->cwd);
}

/*
 * The fix for @c[0..@n): with @either, the syscall did one of the two accesses and each
 * check is one of them; otherwise every check was needed.
 */
static void put_fix(FILE *f, const Grants *g, const char *manifest_path, const FsError *e,
		    const Check *c, size_t n, bool either)
{
	const Check *missing[2], *covered = NULL;
	size_t n_missing = 0;

	for (size_t i = 0; i < n; i++) {
		if (c[i].cover == COVER_NONE)
			missing[n_missing++] = &c[i];
		else
			covered = &c[i];
	}
	fprintf(f, "fix: add %s to `capabilities:` in ",
		n_missing == 1 ? "this line"
		: either       ? "one of these lines"
			       : "these lines");
	put_str(f, manifest_path);
	fputs(", then restart the app — a Landlock ruleset cannot be widened on a running process, so the change takes effect on the next boot, never live:\n",
	      f);
	for (size_t i = 0; i < n_missing; i++)
		put_cap_item(f, action_name(missing[i]->action), missing[i]->scope);
	if (either && n_missing == 2) {
		fputs("note: ", f);
		put_clean(f, e->syscall, e->syscall_len, false);
		if (e->syscall_len > 0)
			fputs("(2) is used for both reading and writing, so declare whichever this export actually needs — not both.\n",
			      f);
		else
			fputs("the error does not name the operation, so declare whichever this export actually needs — not both.\n",
			      f);
	} else if (either && covered) {
		fputs("note: ", f);
		if (e->syscall_len > 0) {
			put_clean(f, e->syscall, e->syscall_len, false);
			fputs("(2)", f);
		} else
			fputs("the operation", f);
		fprintf(f,
			" could have been a read or a write, but only the %s can have been refused by the ruleset: ",
			action_name(missing[0]->action));
		put_cover_reason(f, g, covered);
		fprintf(f,
			". If this export only %ss there, something else refused it (file ownership, most likely).\n",
			action_name(covered->action));
	}
	put_declared(f, g, NULL, "(none)");
	put_alternative(f, g, missing[0]->action);
	fputs(DOCS_LINE "\n", f);
}

static int explain_fs(FILE *f, const char *raw, const Grants *g, const char *manifest_path,
		      EnforcementStatus st, const FsError *e)
{
	_cleanup_free_ char *abs0 = NULL, *abs1 = NULL;
	char *abs[2];
	Check checks[2] = {};
	size_t n_checks = 0, n_needs;
	Need needs[2];
	bool either;
	int r = 0;

	abs0 = path_absolute(e->path[0], g->cwd);
	abs1 = e->n_paths == 2 ? path_absolute(e->path[1], g->cwd) : NULL;
	if (!abs0 || (e->n_paths == 2 && !abs1))
		return -ENOMEM;
	abs[0] = abs0;
	abs[1] = abs1;
	put_header(f, raw, g->app, manifest_path, e, abs, g->cwd);
	if (streq(e->code, "EROFS")) {
		put_erofs(f, g->app, abs[e->n_paths - 1]);
		return 1;
	}
	put_denied_by(f, g->app, st);

	n_needs = needs_for(e, abs, needs);
	either = n_needs == 1 && needs[0].actions == (NEED_WRITE | NEED_READ);
	for (size_t i = 0; i < n_needs && r >= 0; i++)
		for (unsigned a = NEED_WRITE; a <= NEED_READ && r >= 0; a <<= 1)
			if (needs[i].actions & a)
				r = check_one(g, needs[i].path, a, &checks[n_checks++]);
	if (r < 0) {
		checks_done(checks, n_checks);
		return r;
	}

	for (size_t i = 0; i < n_checks; i++)
		if (checks[i].cover == COVER_NONE && (checks[i].outside || checks[i].issue)) {
			put_outside(f, g, &checks[i]);
			checks_done(checks, n_checks);
			return 1;
		}
	for (size_t i = 0; i < n_checks; i++)
		if (checks[i].cover == COVER_NONE) {
			put_fix(f, g, manifest_path, e, checks, n_checks, either);
			checks_done(checks, n_checks);
			return 1;
		}
	put_not_missing(f, g, checks, n_checks);
	checks_done(checks, n_checks);
	return 1;
}

/* --- network ------------------------------------------------------------------------------ */

static bool is_word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

/* @word in @s as a whole word (a regex \b on both sides). */
static const char *find_word(const char *s, size_t len, const char *word)
{
	size_t wl = strlen(word);
	const char *p = s, *end = s + len;

	while (p < end && (p = memmem(p, (size_t)(end - p), word, wl))) {
		if ((p == s || !is_word_char(p[-1])) && (p + wl == end || !is_word_char(p[wl])))
			return p;
		p++;
	}
	return NULL;
}

/*
 * Where @raw names a network error: a connection or lookup error code anywhere, or EACCES
 * or EPERM on a line that also says connect (Node: "connect EACCES 1.1.1.1:80 - Local
 * (0.0.0.0:0)", the code after the word). Returns the code's position, NULL when none.
 */
static const char *network_code(const char *raw, size_t n)
{
	static const char *const codes[] = {"ECONNREFUSED", "ENETUNREACH", "EHOSTUNREACH",
					    "EAI_AGAIN", "ENOTFOUND"};
	const char *best = NULL;

	for (size_t i = 0; i < ELEMENTSOF(codes); i++) {
		const char *p = find_word(raw, n, codes[i]);

		if (p && (!best || p < best))
			best = p;
	}
	for (size_t start = 0; !best && start < n;) {
		const char *nl = memchr(raw + start, '\n', n - start), *line = raw + start, *p;
		size_t len = nl ? (size_t)(nl - line) : n - start;

		p = find_word(line, len, "EACCES") ?: find_word(line, len, "EPERM");
		if (p && find_word(line, len, "connect"))
			best = p;
		start += len + 1;
	}
	return best;
}

/* The port in the @len bytes at @s, -1 when they are not one. */
static int port_value(const char *s, size_t len)
{
	uint16_t v;

	return parse_port(s, len, &v) < 0 ? -1 : v;
}

/* The address after the code ("127.0.0.1:8090", "example.com"): host and port (-1: none);
 * else the first ":<1-5 digits>" anywhere that is a port. */
static char *network_target(const char *raw, size_t n, const char *code, int *ret_port)
{
	const char *p = code, *end = raw + n, *tok, *colon;
	size_t len;

	*ret_port = -1;
	while (p < end && is_word_char(*p))
		p++;
	while (p < end && *p == ' ')
		p++;
	tok = p;
	while (p < end && !strchr(" \n,()", *p))
		p++;
	len = (size_t)(p - tok);
	colon = len > 0 ? memrchr(tok, ':', len) : NULL;
	if (colon)
		*ret_port = port_value(colon + 1, (size_t)(tok + len - colon - 1));
	if (*ret_port > 0)
		len = (size_t)(colon - tok);
	else
		for (const char *q = raw; q < end && *ret_port < 0; q++) {
			const char *d = q + 1;

			if (*q != ':')
				continue;
			while (d < end && d - q <= 6 && *d >= '0' && *d <= '9')
				d++;
			if (d - q <= 6 && (d == end || !is_word_char(*d)))
				*ret_port = port_value(q + 1, (size_t)(d - q - 1));
		}
	return len > 0 ? clean_copy(tok, len, 256) : strdup("");
}

static bool host_is_loopback(const char *host)
{
	return strneq(host, "127.", 4) || streq(host, "::1") || streq(host, "[::1]") ||
	       streq(host, "localhost") || streq(host, "0.0.0.0");
}

/* Returns 1 when written, 0 when @raw is not a network denial, -ENOMEM. */
static int explain_network(FILE *f, const char *raw, const Grants *g, const char *manifest_path,
			   EnforcementStatus st)
{
	size_t n = strnlen(raw, DENIAL_RAW_MAX);
	const char *code = network_code(raw, n), *by = NULL;
	_cleanup_free_ char *host = NULL, *wanted = NULL;
	bool any_network = false, dns;
	int port;

	if (!code)
		return 0;
	host = network_target(raw, n, code, &port);
	if (!host)
		return -ENOMEM;
	/* "connect EACCES /run/berth/b/rpc.sock": a unix socket's file mode, not a TCP port */
	if (host[0] == '/')
		return 0;
	dns = strneq(code, "EAI_AGAIN", 9) || strneq(code, "ENOTFOUND", 9);
	for (size_t i = 0; i < g->n_caps; i++)
		any_network = any_network || strneq(g->caps[i], "network:", 8);
	if (port > 0) {
		if (asprintf(&wanted, "network:connect:%d", port) < 0)
			return -ENOMEM;
		for (size_t i = 0; i < g->n_caps && !by; i++)
			if (capability_matches(g->caps[i], wanted))
				by = g->caps[i];
	}
	/* The connection was let out and the other end said no: nothing of Berth's. */
	if (by && strneq(code, "ECONNREFUSED", 12))
		return 0;

	fputs(DENIAL_HEADING " (network)\napp: ", f);
	put_str(f, g->app);
	fputs("\nmanifest: ", f);
	put_str(f, manifest_path);
	fputs("\nraw: ", f);
	put_raw(f, raw);
	fputc('\n', f);
	put_denied_by(f, g->app, st);
	if (!any_network)
		fputs("denied: this app declares no network capability at all, so the kernel lets it open no TCP connection (Landlock) and no UDP or raw socket (seccomp) — a host name lookup fails for the same reason\n",
		      f);
	else
		fputs("denied: outbound access not covered by this app's declared network capabilities\n",
		      f);
	if (by) {
		fprintf(f, "fix: not a missing declaration — \"%s\" already declares ", g->app);
		put_str(f, by);
		fprintf(f, ", which covers port %d.\n", port);
	} else {
		fputs("fix: add `network:connect:", f);
		if (port > 0)
			fprintf(f, "%d", port);
		else
			fputs("<port>", f);
		fputs("` to `capabilities:` in ", f);
		put_str(f, manifest_path);
		fputs(" and restart the app. Scoping is by TCP port, not by host name.\n", f);
	}
	if (dns || (host[0] && !host_is_loopback(host))) {
		fputs("note: the VM has no network device besides loopback, so a port line only reaches that port inside the VM; ",
		      f);
		if (host[0])
			put_str(f, host);
		else
			fputs("a host outside the VM", f);
		fputs(" is reached only through the egress broker, declared as `network:host:<pattern>` together with `network:connect:8090` (docs/egress.md).\n",
		      f);
	}
	put_declared(f, g, "network:", "(no network capabilities)");
	fputs("docs: docs/mcp.md (Denials), docs/confinement.md\n", f);
	return 1;
}

/* --- entry points ------------------------------------------------------------------------- */

/* An error passed on as it is, unless it poses as one of our texts: then it is marked as
 * the app's, so that neither the reader nor the audit takes it for Berth's word. */
static char *verbatim(const char *raw)
{
	char *s = NULL;

	if (!denial_text_is_denial(raw) &&
	    !strneq(raw, DENIAL_REFUSAL_HEADING, strlen(DENIAL_REFUSAL_HEADING)))
		return strdup(raw);
	return asprintf(&s, "the app's own error text (not Berth's): %s", raw) < 0 ? NULL : s;
}

static bool is_fs_denial_code(const char *code)
{
	return streq(code, "EACCES") || streq(code, "EPERM") || streq(code, "EROFS");
}

static void ignore_warning(const char *line, void *userdata)
{
}

/* The policy agent-init would enforce for @g's app: the one source of what it may touch. */
static CapabilityPolicy *grants_policy(const Grants *g)
{
	_cleanup_(json_decrefp) json_t *caps = json_array();
	CapabilityPolicy *p = NULL;
	PolicyInput in = {.app_name = g->app, .capabilities = caps, .cwd = g->cwd};

	for (size_t i = 0; caps && i < g->n_caps; i++)
		json_array_append_new(caps, json_string(g->caps[i]));
	if (!caps || capability_policy_compile(&in, ignore_warning, NULL, &p) < 0)
		return NULL;
	return p;
}

char *denial_explain_at(const char *raw_error, const char *app, const Manifest *m,
			const char *manifest_path, EnforcementStatus st, const char *cwd)
{
	const char *raw = raw_error ?: "";
	_cleanup_free_ char *clean_app = clean_copy(app ?: "", strlen(app ?: ""), 128),
			    *clean_cwd = NULL;
	char *buf = NULL;
	size_t size = 0;
	_cleanup_(capability_policy_freep) CapabilityPolicy *policy = NULL;
	Grants g = {};
	FsError e;
	FILE *f;
	int r;

	if (!cwd || cwd[0] != '/')
		cwd = APP_CWD_DEFAULT;
	clean_cwd = clean_copy(cwd, strlen(cwd), 1024);
	if (!clean_app || !clean_cwd)
		return NULL;
	g = (Grants){.app = clean_app[0] ? clean_app : "?", .cwd = clean_cwd};
	if (m)
		g.n_caps = manifest_capabilities(m, &g.caps);
	policy = grants_policy(&g);
	g.policy = policy;
	manifest_path = manifest_path ?: "berth.yml";

	r = fs_error_parse(raw, &e);
	if (r < 0)
		return NULL;
	if (r > 0 && !is_fs_denial_code(e.code)) {
		fs_error_done(&e);
		return verbatim(raw);
	}
	f = open_memstream(&buf, &size);
	if (!f) {
		if (r > 0)
			fs_error_done(&e);
		return NULL;
	}
	if (r > 0) {
		r = explain_fs(f, raw, &g, manifest_path, st, &e);
		fs_error_done(&e);
	} else
		r = explain_network(f, raw, &g, manifest_path, st);
	buf = memstream_done(f, &buf);
	if (r < 0 || !buf) {
		free(buf);
		return NULL;
	}
	if (r == 0) {
		free(buf);
		return verbatim(raw);
	}
	/* Every line above ends in "\n"; the explanation does not. */
	size = strlen(buf);
	if (size > 0 && buf[size - 1] == '\n')
		buf[size - 1] = '\0';
	return buf;
}

char *denial_explain(const char *raw_error, const char *app, const Manifest *m,
		     const char *manifest_path, EnforcementStatus st)
{
	return denial_explain_at(raw_error, app, m, manifest_path, st, NULL);
}

bool denial_text_is_denial(const char *text)
{
	return text && strneq(text, DENIAL_HEADING, strlen(DENIAL_HEADING));
}

/* --- possible refusals inside a successful call ------------------------------------------- */

bool denial_export_reports_denials(const Manifest *m, const char *export_name)
{
	const ManifestExport *e = m && export_name ? manifest_find_export(m, export_name) : NULL;
	const char *type = e ? manifest_field_type(json_object_get(e->output, "denials")) : NULL;

	return type && streq(type, "array");
}

/* The entries of @result's "denials" that count, cleaned: @ret_lines may be NULL. */
static int reported_collect(json_t *result, json_t *ret_paths, json_t *ret_lines)
{
	json_t *entry;
	size_t i, n = 0;

	json_array_foreach(json_object_get(result, "denials"), i, entry) {
		json_t *path = json_object_get(entry, "path"),
		       *line = json_object_get(entry, "line");
		_cleanup_free_ char *p = NULL, *l = NULL;

		if (n == DENIAL_REPORTED_MAX)
			break;
		if (!json_is_string(path) || !json_is_string(line) ||
		    json_string_value(path)[0] != '/')
			continue;
		p = clean_copy(json_string_value(path), json_string_length(path),
			       DENIAL_REPORTED_CHARS);
		l = clean_copy(json_string_value(line), json_string_length(line),
			       DENIAL_REPORTED_CHARS);
		if (!p || !l || json_array_append_new(ret_paths, json_string(p)) < 0 ||
		    (ret_lines && json_array_append_new(ret_lines, json_string(l)) < 0))
			return -ENOMEM;
		n++;
	}
	return 0;
}

json_t *denial_reported_paths(json_t *result)
{
	json_t *paths = json_array();

	if (paths && reported_collect(result, paths, NULL) < 0) {
		json_decref(paths);
		return NULL;
	}
	return paths;
}

static const char *enforcement_phrase(EnforcementStatus st)
{
	switch (st) {
	case ENFORCEMENT_ENFORCED:
		return "the kernel (Landlock and seccomp) is enforcing the app's declared capabilities";
	case ENFORCEMENT_PARTIAL:
		return "partially-enforced — this kernel could not handle every right the app's policy needs";
	case ENFORCEMENT_NOT_ENFORCED:
		return "not-enforced — the app's capabilities are recorded here, not enforced";
	case ENFORCEMENT_UNKNOWN:
	case _ENFORCEMENT_MAX:
	case _ENFORCEMENT_INVALID:
		break;
	}
	return "unknown — agent-init's report could not be read from the VM";
}

char *denial_possible_refusal(const Manifest *m, const char *export_name, json_t *result,
			      EnforcementStatus st)
{
	json_auto_t *paths = json_array(), *lines = json_array();
	_cleanup_free_ char *app = NULL;
	const char *const *caps;
	size_t n_caps, i;
	char *buf = NULL;
	size_t size = 0;
	json_t *p;
	FILE *f;

	if (!paths || !lines || !denial_export_reports_denials(m, export_name) ||
	    reported_collect(result, paths, lines) < 0 || json_array_size(paths) == 0)
		return NULL;
	app = clean_copy(manifest_name(m), strlen(manifest_name(m)), 128);
	f = app ? open_memstream(&buf, &size) : NULL;
	if (!f)
		return NULL;
	fprintf(f, "POSSIBLE SANDBOX REFUSAL (reported by %s, inside a call that succeeded)\n",
		app);
	json_array_foreach(paths, i, p) {
		fprintf(f, "reported: %s — \"%s\"\n", json_string_value(p),
			json_string_value(json_array_get(lines, i)));
	}
	fprintf(f,
		"source: lines of the call's own output that %s picked out as permission errors; the bridge did not see these refusals happen\n",
		app);
	fprintf(f, "enforcement in this VM: %s\n", enforcement_phrase(st));
	n_caps = manifest_capabilities(m, &caps);
	fputs("declared: ", f);
	for (i = 0; i < n_caps; i++) {
		if (i > 0)
			fputs(", ", f);
		put_str(f, caps[i]);
	}
	fprintf(f,
		"%s\nif it was the sandbox: the path is outside what %s declares, and the same operation will be refused again until a capabilities: line grants it and the app restarts",
		n_caps == 0 ? "(none)" : "", app);
	return memstream_done(f, &buf);
}
