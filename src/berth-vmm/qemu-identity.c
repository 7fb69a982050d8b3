/* SPDX-License-Identifier: Apache-2.0 */
/* A QEMU program's identity, its version remembered per file (qemu-identity.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <jansson.h>

#include "exec-util.h"
#include "fileio.h"
#include "macros.h"
#include "paths.h"
#include "qemu-identity.h"

char *qemu_resolve_program(const char *name)
{
	char *path = NULL;

	if (strchr(name, '/'))
		return realpath(name, NULL);
	return find_executable_in_path(name, &path) >= 0 ? path : NULL;
}

/*
 * Which file a QEMU program is, down to its last change: a version asked of one file holds
 * for as long as these do (a replaced or rewritten file has another inode or ctime).
 */
static json_t *program_file_id(const char *path)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return NULL;
	return json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "path", path, "dev",
			 (json_int_t)st.st_dev, "ino", (json_int_t)st.st_ino, "size",
			 (json_int_t)st.st_size, "mtimeNs",
			 (json_int_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec, "ctimeNs",
			 (json_int_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec);
}

/* The version QEMU said last time, remembered in ~/.berth/vm/qemu-version.json: asking
 * it again costs every VM's start an exec of QEMU (tens of milliseconds). */
static bool qemu_version_remembered(const char *cache, const json_t *id, char *ret, size_t size)
{
	_cleanup_(json_decrefp) json_t *o = cache ? json_load_file(cache, 0, NULL) : NULL;
	const char *v = json_string_value(json_object_get(o, "version"));

	if (!v || !id || !json_equal(json_object_get(o, "file"), (json_t *)id))
		return false;
	snprintf(ret, size, "%s", v);
	return true;
}

static void qemu_version_remember(const char *cache, const json_t *id, const char *version)
{
	_cleanup_(json_decrefp) json_t *o =
		id ? json_pack("{s:O, s:s}", "file", id, "version", version) : NULL;
	_cleanup_free_ char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (cache && text)
		(void)write_file_atomic(cache, text, strlen(text), 0600);
}

void qemu_identify(const char *qemu, QemuIdentity *ret)
{
	/* The probe's cache and the snapshot's key both ask: run it once per process. */
	static QemuIdentity last;
	static char last_name[PATH_MAX];
	_cleanup_free_ char *path = NULL, *out = NULL, *dir = berth_vm_dir(), *cache = NULL;
	_cleanup_(json_decrefp) json_t *id = NULL;
	int status;

	if (last_name[0] && streq(last_name, qemu)) {
		*ret = last;
		return;
	}
	*ret = (QemuIdentity){.version = "unknown"};
	path = qemu_resolve_program(qemu);
	snprintf(ret->path, sizeof(ret->path), "%s", path ?: qemu);
	ret->found = path != NULL;
	if (dir && asprintf(&cache, "%s/qemu-version.json", dir) < 0)
		cache = NULL;
	id = path ? program_file_id(path) : NULL;
	if (path && !qemu_version_remembered(cache, id, ret->version, sizeof(ret->version))) {
		char *argv[] = {path, "-version", NULL};

		if (run_capture(argv, 10 * 1000, 4096, &out, &status) >= 0 && WIFEXITED(status) &&
		    WEXITSTATUS(status) == 0) {
			snprintf(ret->version, sizeof(ret->version), "%.*s",
				 (int)strcspn(out, "\n"), out);
			qemu_version_remember(cache, id, ret->version);
		}
	}
	snprintf(last_name, sizeof(last_name), "%s", qemu);
	last = *ret;
}
