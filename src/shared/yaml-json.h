/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>

/*
 * YAML to jansson json_t, for files a peer may have written (berth.yml comes from app
 * authors, registries and pull requests).
 *
 * Only the JSON subset of YAML gets through: mappings, sequences and scalars, one
 * document. Anchors, aliases, tags (including %TAG directives), merge keys ("<<"),
 * non-scalar mapping keys, duplicate mapping keys and a second document are refused with
 * the line they are on, and every size the input controls has a hard cap.
 *
 * Plain (unquoted) scalars are resolved by the YAML 1.2 core schema, never 1.1, so
 * `no`, `yes`, `on` and `off` stay strings:
 *   null   ~  null  Null  NULL  and the empty scalar
 *   bool   true  True  TRUE  false  False  FALSE
 *   int    [-+]?[0-9]+ (decimal, so 012 is 12), 0o[0-7]+, 0x[0-9a-fA-F]+
 *   float  [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
 *   anything else is a string.
 * JSON has no infinity or NaN, so `.inf`, `-.inf`, `.nan` (all spellings) and floats too
 * large for a double are refused, with a hint to quote them; they are never turned into
 * strings behind the author's back. Integers outside int64 become reals. Quoted, literal
 * (|) and folded (>) scalars are always strings. Mapping keys are always the key's text.
 *
 * Each node's line and column are kept in a side table (YamlPositions) keyed by the
 * node's path from the root, because jansson shares one json_t for every true, false and
 * null, so a table keyed by pointer could not tell two of them apart.
 */

#define YAML_JSON_SIZE_MAX (1024u * 1024u) /* input bytes */
#define YAML_JSON_DEPTH_MAX 64u		   /* nested mappings and sequences */
#define YAML_JSON_SCALAR_MAX (64u * 1024u) /* bytes in one scalar or key */
#define YAML_JSON_NODES_MAX 65536u	   /* scalars, mappings and sequences */

/* Hard caps for one conversion; a field left 0 takes the default above. */
typedef struct YamlLimits {
	size_t size_max;
	size_t depth_max;
	size_t scalar_max;
	size_t nodes_max;
} YamlLimits;

/* Where and why a document was refused. @line and @column are 1-based, 0 when unknown. */
typedef struct YamlError {
	unsigned line;
	unsigned column;
	char path[256]; /* dotted path of the node concerned ("exports.0.name"), "" for the root */
	char message[256];
} YamlError;

/* One step of a path: a mapping key, or (when @key is NULL) a sequence index. */
typedef struct YamlPathSegment {
	const char *key;
	size_t index;
} YamlPathSegment;

typedef struct YamlPositions YamlPositions;

/*
 * yaml_to_json() - convert one YAML document to a json_t.
 * @buf, @size: the document; it need not be NUL-terminated.
 * @limits: caps, NULL for the defaults.
 * @ret: the value (new reference). An empty stream is json null.
 * @ret_positions (may be NULL): where each node starts; free with yaml_positions_free().
 * @reterr (may be NULL): on -EBADMSG and -EFBIG, the line, path and reason.
 * Returns 0; -EFBIG when @size is over the size cap; -EBADMSG for a syntax error, a
 * refused construct or another cap; -ENOMEM. Nothing is returned on failure.
 * SECURITY: no construct makes the output larger than the input (aliases are refused),
 * and the caps bound memory and time for any input.
 */
int yaml_to_json(const char *buf, size_t size, const YamlLimits *limits, json_t **ret,
		 YamlPositions **ret_positions, YamlError *reterr);

/*
 * yaml_positions_lookup() - where the node at @path starts.
 * Walks @path (@n segments) from the root as far as the document has nodes, and gives the
 * line and column of the deepest node reached, so a path to a missing key gives the place
 * of the mapping it is missing from.
 * Returns how many segments were matched (@n when the whole path exists).
 */
size_t yaml_positions_lookup(const YamlPositions *p, const YamlPathSegment *path, size_t n,
			     unsigned *ret_line, unsigned *ret_column);

YamlPositions *yaml_positions_free(YamlPositions *p);
static inline void yaml_positions_freep(YamlPositions **p)
{
	yaml_positions_free(*p);
}
