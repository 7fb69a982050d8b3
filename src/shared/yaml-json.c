/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "utf8.h"
#include "macros.h"
#include "yaml-json.h"

#define POS_NONE UINT32_MAX
#define YAML_CORE_TAG_PREFIX "tag:yaml.org,2002:"

/* One node's place in the document; @parent indexes the same array. */
typedef struct YamlPos {
	uint32_t parent;
	uint32_t line;
	uint32_t column;
	size_t index; /* in the parent sequence, when @key is NULL */
	char *key;    /* in the parent mapping */
} YamlPos;

struct YamlPositions {
	YamlPos *v;
	size_t n;
	size_t alloc;
	uint32_t *order; /* indexes of @v sorted by (parent, key or index), for lookup */
};

/* An open mapping or sequence. @node is borrowed: its parent (or Converter.root) owns it. */
typedef struct Frame {
	json_t *node;
	uint32_t pos;
	size_t index; /* sequences: the next index */
	char *key;    /* mappings: the key waiting for its value, NULL when a key comes next */
} Frame;

typedef struct Converter {
	YamlLimits limits;
	Frame *stack;
	size_t depth;
	json_t *root;
	YamlPositions *pos;
	size_t nodes;
	unsigned documents;
	bool done;
	YamlError *err;
} Converter;

YamlPositions *yaml_positions_free(YamlPositions *p)
{
	if (!p)
		return NULL;
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].key);
	free(p->v);
	free(p->order);
	free(p);
	return NULL;
}

static int positions_add(YamlPositions *p, uint32_t parent, const char *key, size_t index,
			 const yaml_mark_t *mark, uint32_t *ret)
{
	YamlPos *e;

	if (p->n == p->alloc) {
		size_t want = p->alloc ? p->alloc * 2 : 64;
		YamlPos *v = reallocarray(p->v, want, sizeof(YamlPos));

		if (!v)
			return -ENOMEM;
		p->v = v;
		p->alloc = want;
	}
	e = &p->v[p->n];
	*e = (YamlPos){
		.parent = parent,
		.line = (uint32_t)MIN(mark->line + 1, (size_t)UINT32_MAX),
		.column = (uint32_t)MIN(mark->column + 1, (size_t)UINT32_MAX),
		.index = index,
	};
	if (key) {
		e->key = strdup(key);
		if (!e->key)
			return -ENOMEM;
	}
	*ret = (uint32_t)p->n++;
	return 0;
}

static int pos_cmp(const YamlPos *a, uint32_t parent, const char *key, size_t index)
{
	if (a->parent != parent)
		return a->parent < parent ? -1 : 1;
	if (!a->key != !key)
		return a->key ? 1 : -1; /* indexes first */
	if (key)
		return strcmp(a->key, key);
	return a->index < index ? -1 : a->index > index;
}

static int order_cmp(const void *x, const void *y, void *userdata)
{
	const YamlPositions *p = userdata;
	const YamlPos *a = &p->v[*(const uint32_t *)x];
	const YamlPos *b = &p->v[*(const uint32_t *)y];

	return pos_cmp(a, b->parent, b->key, b->index);
}

static int positions_seal(YamlPositions *p)
{
	p->order = reallocarray(NULL, p->n ? p->n : 1, sizeof(uint32_t));
	if (!p->order)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++)
		p->order[i] = (uint32_t)i;
	qsort_r(p->order, p->n, sizeof(uint32_t), order_cmp, p);
	return 0;
}

static uint32_t positions_find_child(const YamlPositions *p, uint32_t parent,
				     const YamlPathSegment *seg)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = pos_cmp(&p->v[p->order[mid]], parent, seg->key, seg->index);

		if (c == 0)
			return p->order[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return POS_NONE;
}

size_t yaml_positions_lookup(const YamlPositions *p, const YamlPathSegment *path, size_t n,
			     unsigned *ret_line, unsigned *ret_column)
{
	uint32_t cur = 0;
	size_t matched = 0;

	if (ret_line)
		*ret_line = 0;
	if (ret_column)
		*ret_column = 0;
	if (!p || p->n == 0 || !p->order)
		return 0;
	for (; matched < n; matched++) {
		uint32_t next = positions_find_child(p, cur, &path[matched]);

		if (next == POS_NONE)
			break;
		cur = next;
	}
	if (ret_line)
		*ret_line = p->v[cur].line;
	if (ret_column)
		*ret_column = p->v[cur].column;
	return matched;
}

/* The dotted path of node @idx, then @extra_key or @extra_index when given. */
static void path_format(const YamlPositions *p, uint32_t idx, const char *extra_key,
			const size_t *extra_index, char *buf, size_t len)
{
	uint32_t chain[YAML_JSON_DEPTH_MAX * 4];
	size_t n = 0, off = 0;

	buf[0] = '\0';
	for (uint32_t i = idx; i != POS_NONE && i < p->n && n < ELEMENTSOF(chain);
	     i = p->v[i].parent)
		chain[n++] = i;
	/* chain[n - 1] is the root, which has no segment of its own. */
	for (size_t k = n; k-- > 0;) {
		const YamlPos *e = &p->v[chain[k]];
		int w;

		if (e->parent == POS_NONE)
			continue;
		if (e->key)
			w = snprintf(buf + off, len - off, "%s%s", off ? "." : "", e->key);
		else
			w = snprintf(buf + off, len - off, "%s%zu", off ? "." : "", e->index);
		if (w < 0 || (size_t)w >= len - off)
			return;
		off += (size_t)w;
	}
	if (extra_key)
		snprintf(buf + off, len - off, "%s%s", off ? "." : "", extra_key);
	else if (extra_index)
		snprintf(buf + off, len - off, "%s%zu", off ? "." : "", *extra_index);
}

/* The path of the node being read: inside the open collection, at its pending key or its
 * next index; @key names a key that is being read. */
static void current_path(const Converter *c, const char *key, char *buf, size_t len)
{
	const Frame *top;

	buf[0] = '\0';
	if (!c->depth) {
		snprintf(buf, len, "%s", key ? key : "");
		return;
	}
	top = &c->stack[c->depth - 1];
	if (json_is_array(top->node))
		path_format(c->pos, top->pos, NULL, &top->index, buf, len);
	else
		path_format(c->pos, top->pos, key ? key : top->key, NULL, buf, len);
}

_printf_(4, 5) static int fail(Converter *c, const yaml_mark_t *mark, const char *key,
			       const char *fmt, ...)
{
	va_list ap;

	if (!c->err)
		return -EBADMSG;
	memset(c->err, 0, sizeof(*c->err));
	if (mark) {
		c->err->line = (unsigned)MIN(mark->line + 1, (size_t)UINT32_MAX);
		c->err->column = (unsigned)MIN(mark->column + 1, (size_t)UINT32_MAX);
	}
	current_path(c, key, c->err->path, sizeof(c->err->path));
	va_start(ap, fmt);
	vsnprintf(c->err->message, sizeof(c->err->message), fmt, ap);
	va_end(ap);
	return -EBADMSG;
}

static bool all_in(const char *s, size_t len, const char *set)
{
	if (len == 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!s[i] || !strchr(set, s[i]))
			return false;
	return true;
}

static bool one_of(const char *s, size_t len, const char *const *words)
{
	for (; *words; words++)
		if (strlen(*words) == len && memcmp(s, *words, len) == 0)
			return true;
	return false;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static bool is_core_float(const char *s, size_t len)
{
	size_t i = 0, digits = 0, frac = 0;

	if (i < len && (s[i] == '-' || s[i] == '+'))
		i++;
	while (i < len && s[i] >= '0' && s[i] <= '9')
		i++, digits++;
	if (i < len && s[i] == '.') {
		i++;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++, frac++;
	}
	if (digits == 0 && frac == 0)
		return false;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		size_t exp = 0;

		i++;
		if (i < len && (s[i] == '-' || s[i] == '+'))
			i++;
		while (i < len && s[i] >= '0' && s[i] <= '9')
			i++, exp++;
		if (exp == 0)
			return false;
	}
	return i == len;
}

/* Digits in base 8 or 16, as an integer when int64 holds it, else as a real. */
static json_t *radix_value(const char *digits, size_t len, unsigned base)
{
	uint64_t v = 0;
	double d = 0;
	bool big = false;

	for (size_t i = 0; i < len; i++) {
		char ch = digits[i];
		unsigned x = ch <= '9' ? (unsigned)(ch - '0') : (unsigned)((ch | 0x20) - 'a' + 10);

		d = d * base + x;
		if (v > (UINT64_MAX - x) / base)
			big = true;
		else
			v = v * base + x;
	}
	if (big || v > INT64_MAX)
		return json_real(d);
	return json_integer((json_int_t)v);
}

static json_t *decimal_value(const char *s, bool *ret_range)
{
	long long v;
	double d;

	errno = 0;
	v = strtoll(s, NULL, 10);
	if (errno != ERANGE)
		return json_integer(v);
	d = strtod(s, NULL);
	*ret_range = !isfinite(d);
	return *ret_range ? NULL : json_real(d);
}

/*
 * A plain scalar by the YAML 1.2 core schema. @s is NUL-terminated (libyaml's buffer).
 * Returns 0 with *ret set, -EDOM for a number JSON cannot hold, -ENOMEM.
 */
static int resolve_plain(const char *s, size_t len, json_t **ret)
{
	static const char *const nulls[] = {"~", "null", "Null", "NULL", NULL};
	static const char *const trues[] = {"true", "True", "TRUE", NULL};
	static const char *const falses[] = {"false", "False", "FALSE", NULL};
	static const char *const specials[] = {".inf",	".Inf",	 ".INF",  "+.inf", "+.Inf",
					       "+.INF", "-.inf", "-.Inf", "-.INF", ".nan",
					       ".NaN",	".NAN",	 NULL};
	size_t sign = len > 0 && (s[0] == '-' || s[0] == '+');
	bool range = false;
	json_t *v;

	if (len == 0 || one_of(s, len, nulls))
		v = json_null();
	else if (one_of(s, len, trues))
		v = json_true();
	else if (one_of(s, len, falses))
		v = json_false();
	else if (one_of(s, len, specials))
		return -EDOM;
	else if (all_in(s + sign, len - sign, "0123456789"))
		v = decimal_value(s, &range);
	else if (len > 2 && strneq(s, "0o", 2) && all_in(s + 2, len - 2, "01234567"))
		v = radix_value(s + 2, len - 2, 8);
	else if (len > 2 && strneq(s, "0x", 2) && all_in(s + 2, len - 2, "0123456789abcdefABCDEF"))
		v = radix_value(s + 2, len - 2, 16);
	else if (is_core_float(s, len)) {
		double d = strtod(s, NULL);

		if (!isfinite(d))
			return -EDOM;
		v = json_real(d);
	} else
		v = json_stringn_nocheck(s, len);
	if (range)
		return -EDOM;
	if (!v)
		return -ENOMEM;
	*ret = v;
	return 0;
}

static int check_node(Converter *c, const yaml_event_t *ev, const yaml_char_t *anchor,
		      const yaml_char_t *tag)
{
	if (anchor)
		return fail(c, &ev->start_mark, NULL,
			    "anchors (&%.64s) are not allowed; write the value out in full",
			    (const char *)anchor);
	if (tag) {
		const char *t = (const char *)tag;
		bool core = strneq(t, YAML_CORE_TAG_PREFIX, strlen(YAML_CORE_TAG_PREFIX));

		/* libyaml hands "!!str" over expanded; show it as written. */
		return fail(
			c, &ev->start_mark, NULL,
			"tags (%s%.64s) are not allowed; write a plain value, quoted if it must be a string",
			core ? "!!" : "", core ? t + strlen(YAML_CORE_TAG_PREFIX) : t);
	}
	if (c->nodes >= c->limits.nodes_max)
		return fail(c, &ev->start_mark, NULL, "more than %zu values in the document",
			    c->limits.nodes_max);
	c->nodes++;
	return 0;
}

/* Attach @v (reference taken over) where the document is now: root, sequence or mapping. */
static int add_node(Converter *c, json_t *v, const yaml_mark_t *mark, uint32_t *ret_pos)
{
	Frame *top = c->depth ? &c->stack[c->depth - 1] : NULL;
	_cleanup_free_ char *key = NULL;
	uint32_t pos;
	int r;

	if (!top) {
		c->root = v;
		return positions_add(c->pos, POS_NONE, NULL, 0, mark, ret_pos ? ret_pos : &pos);
	}
	if (json_is_array(top->node)) {
		if (json_array_append_new(top->node, v) < 0)
			return -ENOMEM;
		r = positions_add(c->pos, top->pos, NULL, top->index++, mark, &pos);
	} else {
		key = TAKE_PTR(top->key);
		if (json_object_set_new_nocheck(top->node, key, v) < 0)
			return -ENOMEM;
		r = positions_add(c->pos, top->pos, key, 0, mark, &pos);
	}
	if (r >= 0 && ret_pos)
		*ret_pos = pos;
	return r;
}

static bool expecting_key(const Converter *c)
{
	const Frame *top = c->depth ? &c->stack[c->depth - 1] : NULL;

	return top && json_is_object(top->node) && !top->key;
}

static int on_key(Converter *c, const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	Frame *top = &c->stack[c->depth - 1];

	if (memchr(s, '\0', len))
		return fail(c, &ev->start_mark, NULL, "mapping keys must not contain a NUL byte");
	if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && streq(s, "<<"))
		return fail(c, &ev->start_mark, NULL,
			    "merge keys (<<) are not allowed; write the keys out in full");
	if (json_object_get(top->node, s))
		return fail(c, &ev->start_mark, s, "duplicate key \"%.64s\"", s);
	top->key = strdup(s);
	return top->key ? 0 : -ENOMEM;
}

static int on_scalar(Converter *c, const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	size_t len = ev->data.scalar.length;
	json_t *v = NULL;
	int r;

	r = check_node(c, ev, ev->data.scalar.anchor, ev->data.scalar.tag);
	if (r < 0)
		return r;
	if (len > c->limits.scalar_max)
		return fail(c, &ev->start_mark, NULL, "a value longer than %zu bytes",
			    c->limits.scalar_max);
	if (!utf8_valid(s, len))
		return fail(c, &ev->start_mark, NULL, "a value is not valid UTF-8");
	if (expecting_key(c))
		return on_key(c, ev);
	if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
		r = resolve_plain(s, len, &v);
		if (r == -EDOM)
			return fail(
				c, &ev->start_mark, NULL,
				"%.64s is not a finite number, which JSON cannot hold; quote it if it is meant as a string",
				s);
		if (r < 0)
			return r;
	} else {
		v = json_stringn_nocheck(s, len);
		if (!v)
			return -ENOMEM;
	}
	return add_node(c, v, &ev->start_mark, NULL);
}

static int on_collection_start(Converter *c, const yaml_event_t *ev, bool mapping)
{
	const yaml_char_t *anchor =
		mapping ? ev->data.mapping_start.anchor : ev->data.sequence_start.anchor;
	const yaml_char_t *tag = mapping ? ev->data.mapping_start.tag : ev->data.sequence_start.tag;
	json_t *v;
	uint32_t pos;
	int r;

	r = check_node(c, ev, anchor, tag);
	if (r < 0)
		return r;
	if (expecting_key(c))
		return fail(c, &ev->start_mark, NULL,
			    "mapping keys must be plain values, not mappings or sequences");
	if (c->depth >= c->limits.depth_max)
		return fail(c, &ev->start_mark, NULL, "nested deeper than %zu levels",
			    c->limits.depth_max);
	v = mapping ? json_object() : json_array();
	if (!v)
		return -ENOMEM;
	r = add_node(c, v, &ev->start_mark, &pos);
	if (r < 0)
		return r;
	c->stack[c->depth++] = (Frame){.node = v, .pos = pos};
	return 0;
}

static int on_document_start(Converter *c, const yaml_event_t *ev)
{
	if (++c->documents > 1)
		return fail(c, &ev->start_mark, NULL,
			    "a second document (---) is not allowed; keep one document per file");
	if (ev->data.document_start.tag_directives.start !=
	    ev->data.document_start.tag_directives.end)
		return fail(c, &ev->start_mark, NULL, "%%TAG directives are not allowed");
	return 0;
}

static int on_event(Converter *c, const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_STREAM_START_EVENT:
	case YAML_DOCUMENT_END_EVENT:
	case YAML_NO_EVENT:
		return 0;
	case YAML_STREAM_END_EVENT:
		c->done = true;
		return 0;
	case YAML_DOCUMENT_START_EVENT:
		return on_document_start(c, ev);
	case YAML_ALIAS_EVENT:
		return fail(c, &ev->start_mark, NULL,
			    "aliases (*%.64s) are not allowed; write the value out in full",
			    (const char *)ev->data.alias.anchor);
	case YAML_SCALAR_EVENT:
		return on_scalar(c, ev);
	case YAML_SEQUENCE_START_EVENT:
		return on_collection_start(c, ev, false);
	case YAML_MAPPING_START_EVENT:
		return on_collection_start(c, ev, true);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		if (c->depth == 0)
			return -EBADMSG;
		c->depth--;
		free(TAKE_PTR(c->stack[c->depth].key));
		return 0;
	}
	return 0;
}

/* Where a byte offset is, for the reader's errors (bad UTF-8, control characters), which
 * come with an offset instead of a mark. */
static yaml_mark_t mark_at(const char *buf, size_t size, size_t offset)
{
	yaml_mark_t m = {.index = offset};

	for (size_t i = 0; i < offset && i < size; i++) {
		if (buf[i] == '\n') {
			m.line++;
			m.column = 0;
		} else
			m.column++;
	}
	return m;
}

static int syntax_error(Converter *c, const yaml_parser_t *parser, const char *buf, size_t size)
{
	const yaml_mark_t *mark = &parser->problem_mark;
	yaml_mark_t reader_mark;

	if (parser->error == YAML_MEMORY_ERROR)
		return -ENOMEM;
	if (parser->error == YAML_READER_ERROR) {
		reader_mark = mark_at(buf, size, parser->problem_offset);
		mark = &reader_mark;
	}
	if (parser->context)
		return fail(c, mark, NULL, "invalid YAML: %.100s %.100s", parser->problem,
			    parser->context);
	return fail(c, mark, NULL, "invalid YAML: %.100s",
		    parser->problem ? parser->problem : "cannot be parsed");
}

static int convert(Converter *c, const char *buf, size_t size)
{
	yaml_parser_t parser;
	int r = 0;

	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, size);
	while (r >= 0 && !c->done) {
		yaml_event_t ev;

		if (!yaml_parser_parse(&parser, &ev)) {
			r = syntax_error(c, &parser, buf, size);
			break;
		}
		r = on_event(c, &ev);
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	return r;
}

static void limits_fill(YamlLimits *l, const YamlLimits *in)
{
	*l = in ? *in : (YamlLimits){};
	if (!l->size_max)
		l->size_max = YAML_JSON_SIZE_MAX;
	if (!l->depth_max)
		l->depth_max = YAML_JSON_DEPTH_MAX;
	if (!l->scalar_max)
		l->scalar_max = YAML_JSON_SCALAR_MAX;
	if (!l->nodes_max)
		l->nodes_max = YAML_JSON_NODES_MAX;
	l->depth_max = MIN(l->depth_max, (size_t)YAML_JSON_DEPTH_MAX * 4);
	l->nodes_max = MIN(l->nodes_max, (size_t)UINT32_MAX - 1);
}

static int finish(Converter *c)
{
	static const yaml_mark_t start = {};
	int r;

	if (!c->root) {
		/* An empty stream: no document at all is the null document. */
		r = add_node(c, json_null(), &start, NULL);
		if (r < 0)
			return r;
	}
	return positions_seal(c->pos);
}

int yaml_to_json(const char *buf, size_t size, const YamlLimits *limits, json_t **ret,
		 YamlPositions **ret_positions, YamlError *reterr)
{
	Converter c = {.err = reterr};
	int r;

	limits_fill(&c.limits, limits);
	if (reterr)
		memset(reterr, 0, sizeof(*reterr));
	if (size > c.limits.size_max) {
		if (reterr)
			snprintf(reterr->message, sizeof(reterr->message),
				 "the file is larger than %zu KiB", c.limits.size_max / 1024);
		return -EFBIG;
	}
	c.stack = calloc(c.limits.depth_max, sizeof(Frame));
	c.pos = calloc(1, sizeof(YamlPositions));
	if (!c.stack || !c.pos) {
		r = -ENOMEM;
		goto out;
	}
	r = convert(&c, buf, size);
	if (r >= 0)
		r = finish(&c);
	if (r >= 0) {
		*ret = TAKE_PTR(c.root);
		if (ret_positions)
			*ret_positions = TAKE_PTR(c.pos);
	}
out:
	while (c.stack && c.depth > 0)
		free(c.stack[--c.depth].key);
	free(c.stack);
	json_decref(c.root);
	yaml_positions_free(c.pos);
	return r;
}
