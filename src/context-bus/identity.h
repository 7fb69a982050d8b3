/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Who is on the other end of a context bus connection: the app whose uid the kernel gave
 * (SO_PEERCRED), never the name the client claims (SPEC 5). The uid → app table is a file
 * berth-init writes before it starts the bus (docs/context-bus.md):
 *
 *     {"schema": 1, "apps": [{"uid": 10000, "name": "notes"}, {"uid": 10001, "name": "feed"}]}
 *
 * Unknown keys are refused, as are duplicate uids or names, uid 0, names that are not
 * manifest names (capability_app_name_valid) and more than BUS_IDENTITY_APPS_MAX entries.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define BUS_IDENTITY_FILE_MAX (64u * 1024u)
#define BUS_IDENTITY_APPS_MAX 256u
#define BUS_IDENTITY_SCHEMA 1
/* "uid-4294967295" and a manifest name (64) both fit. */
#define BUS_NAME_MAX 72
/* The uid SPEC 5 names a connection whose credentials could not be read. */
#define BUS_UID_UNKNOWN ((uid_t)-1)

typedef struct BusIdentityEntry {
	uid_t uid;
	char name[BUS_NAME_MAX];
} BusIdentityEntry;

typedef struct BusIdentity {
	BusIdentityEntry *v;
	size_t n;
} BusIdentity;

/*
 * bus_identity_load() - read the table at @path into @ret. Returns 0, or -errno with a
 * message in *@reterr (the caller frees it) saying what is wrong with the file.
 */
int bus_identity_load(const char *path, BusIdentity *ret, char **reterr);

/* Parse a table held in memory (@len bytes); as bus_identity_load(). */
int bus_identity_parse(const char *text, size_t len, BusIdentity *ret, char **reterr);

void bus_identity_done(BusIdentity *id);

/*
 * bus_identity_name() - the name of a connection from @uid: the table's app for it,
 * "root" for uid 0 (whose claimed name may replace it), "uid-<n>" otherwise; @have_creds
 * false gives "uid-4294967295". Writes @ret (BUS_NAME_MAX bytes); returns whether the
 * name came from the table.
 */
bool bus_identity_name(const BusIdentity *id, uid_t uid, bool have_creds, char ret[BUS_NAME_MAX]);
