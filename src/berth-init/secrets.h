/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stddef.h>

/*
 * The secrets image (SPEC §7.3, docs/secrets.md), which berth-vmm puts on the boot disk as
 * the CLI wrote it: "BERTHSEC2\n", then JSON
 * {"shared":{NAME:value},"apps":{"<app>":{NAME:value}},"daemons":{"<daemon>":{NAME:value}}},
 * then NUL padding; at most 1 MiB. Version 1 ("BERTHSEC1\n") is the same without
 * "daemons", and is still read. It is read once, as root, before anything else starts, and
 * its device node is removed.
 */

#define SECRETS_MAX_BYTES (1024 * 1024)

/*
 * secrets_parse() - validate a secrets disk image held in @buf.
 * On success *@ret holds the JSON object. On failure returns -EBADMSG with a message in
 * @err that names what is wrong but never quotes a value.
 */
int secrets_parse(const char *buf, size_t len, json_t **ret, char *err, size_t errlen);

/*
 * boot_read_device() - read the boot disk @dev (boot-disk.h), unlink its node so nothing
 * opens it again, and return its plan and its secrets (parsed as above; NULL when none).
 * The buffer that held the values is zeroed before it is freed.
 */
int boot_read_device(const char *dev, json_t **ret_plan, json_t **ret_secrets, char *err,
		     size_t errlen);

/* The names only, for the boot event: {"apps":{"gh":["T"]},"shared":["A"]}, and
 * "daemons":{"github-api-broker":["GITHUB_TOKEN"]} when that scope holds any daemon. */
json_t *secrets_names(const json_t *secrets);

/* The variables of daemon @daemon (its scope, {NAME: value}), or NULL. Borrowed. */
const json_t *secrets_for_daemon(const json_t *secrets, const char *daemon);
