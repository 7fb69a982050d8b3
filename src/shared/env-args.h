/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/*
 * The values a command passes to its apps with --env and --env-file (docs/secrets.md):
 * an ordered set of NAME -> value, every value a secret.
 *
 *   --env NAME          the value of NAME in the CLI's own environment
 *   --env NAME=value    this value
 *   --env-file PATH     NAME=value lines, dotenv style
 *
 * A later --env wins over an earlier one and over every file, whatever the order on the
 * command line; a later file (or line) wins over an earlier one. The first appearance of
 * a name decides its place in the order.
 *
 * Every message names the argument, or the file, line and column, and never quotes a
 * value (nor anything of a line before its '=', which may be a pasted value).
 *
 * A set starts as NULL ("no --env given") and is created by the first flag:
 *
 *   case 'e': r = env_set_add_env(&set, optarg, err, sizeof(err)); ...
 *   case 'f': r = env_set_add_env_file(&set, optarg, err, sizeof(err)); ...
 *
 * A command that boots a VM through VmLaunch calls vm_launch_add_env() and
 * vm_launch_add_env_file() (src/berth/vm-launch.h) instead, which do this into l->env
 * and print the message.
 */

#define ENV_FILE_SIZE_MAX (1024 * 1024) /* an --env-file */
#define ENV_VALUE_SIZE_MAX (128 * 1024) /* one value, in bytes */
#define ENV_NAME_LEN_MAX 128		/* what the guest's berth-init accepts */
#define ENV_NAMES_MAX 512		/* names in one set */

typedef struct EnvSet EnvSet;

/* Frees @s, zeroing every value first. NULL-safe; returns NULL. */
EnvSet *env_set_free(EnvSet *s);
static inline void env_set_freep(EnvSet **s)
{
	env_set_free(*s);
}

/*
 * env_set_add_env() - one --env argument, "NAME" or "NAME=value". *@set is created when
 * NULL. Returns 0, -EINVAL (bad name, NAME unset in this shell, invalid UTF-8),
 * -E2BIG (a cap), -ENOMEM; on failure @err (@errlen bytes) says why.
 */
int env_set_add_env(EnvSet **set, const char *arg, char *err, size_t errlen);

/*
 * env_set_add_env_file() - read @path (at most ENV_FILE_SIZE_MAX) and add its variables
 * as env_set_parse_dotenv() does. Returns 0, the -errno of reading it, -EFBIG, or as
 * env_set_parse_dotenv(); on failure @err says why.
 */
int env_set_add_env_file(EnvSet **set, const char *path, char *err, size_t errlen);

/*
 * env_set_parse_dotenv() - add the variables of a dotenv text held in @buf (@len bytes),
 * naming it @file in messages:
 *   - blank lines and lines whose first non-blank character is # are skipped;
 *   - a line is [export ]NAME=value, blanks allowed around the '=';
 *     NAME is [A-Za-z_][A-Za-z0-9_]*, at most ENV_NAME_LEN_MAX characters;
 *   - a value quoted with ' " or ` may span lines; only within "..." are
 *     \n \r \t \" and \\ expanded (any other backslash stays as it is);
 *   - after an unquoted value, " #" (a blank, then #) starts a comment; the value's
 *     trailing blanks are dropped; after a quoted one only blanks and a comment may follow;
 *   - CRLF line ends are read as LF; a NUL byte anywhere is refused.
 * The whole text is checked before anything is added: on failure @set is unchanged.
 * Returns 0, -EBADMSG (syntax, NUL, invalid UTF-8), -E2BIG (a cap), -ENOMEM.
 */
int env_set_parse_dotenv(EnvSet **set, const char *buf, size_t len, const char *file, char *err,
			 size_t errlen);

size_t env_set_size(const EnvSet *s); /* 0 for NULL */
const char *env_set_name(const EnvSet *s, size_t i);
const char *env_set_value(const EnvSet *s, size_t i, size_t *ret_len);
/* The value of @name, NULL when not in the set. */
const char *env_set_get(const EnvSet *s, const char *name, size_t *ret_len);

/* [A-Za-z_][A-Za-z0-9_]*, 1 to ENV_NAME_LEN_MAX characters. */
bool env_name_valid(const char *name, size_t len);
