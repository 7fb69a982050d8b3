/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>

/*
 * The secrets disk (SPEC §7.3): "BERTHSEC1\n", then JSON
 * {"shared":{NAME:value},"apps":{"<app>":{NAME:value}}}, then NUL padding; at most 1 MiB.
 * It is read once, as root, before anything else starts, and its device node is removed.
 */

#define SECRETS_MAX_BYTES (1024 * 1024)

/*
 * secrets_parse() - validate a secrets disk image held in @buf.
 * On success *@ret holds the JSON object. On failure returns -EBADMSG with a message in
 * @err that names what is wrong but never quotes a value.
 */
int secrets_parse(const char *buf, size_t len, json_t **ret, char *err, size_t errlen);

/* Read @dev (at most SECRETS_MAX_BYTES), unlink its node, and parse it as above. */
int secrets_read_device(const char *dev, json_t **ret, char *err, size_t errlen);

/* The names only, for the boot event: {"apps":{"gh":["T"]},"shared":["A"]}. */
json_t *secrets_names(const json_t *secrets);

int secrets_name_valid(const char *name);
