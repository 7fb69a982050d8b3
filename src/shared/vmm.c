/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "digest.h"
#include "exec-util.h"
#include "fileio.h"
#include "macros.h"
#include "paths.h"
#include "vmm.h"

#define PINS_JSON_MAX (64 * 1024)
/* A broken binary must not hang whoever asks (berth doctor, berth vm install, berth dev). */
#define PINS_QUERY_TIMEOUT_MS 10000

static int executable_at(const char *path)
{
	return access(path, X_OK) == 0;
}

static int try_candidate(const char *path, char **ret_path)
{
	if (!path || !*path || !executable_at(path))
		return -ENOENT;
	*ret_path = strdup(path);
	return *ret_path ? 0 : -ENOMEM;
}

/* Absolute $PATH entries only: a relative one names whatever directory berth was started
 * in, an app's folder for berth dev. */
static int search_path(char **ret_path)
{
	return find_executable_in_path("berth-vmm", ret_path);
}

static int search_build_tree(char **ret_path)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	_cleanup_free_ char *p = NULL;
	char *slash;

	if (n <= 0)
		return -ENOENT;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	if (asprintf(&p, "%s/../berth-vmm/berth-vmm", self) < 0)
		return -ENOMEM;
	return try_candidate(p, ret_path);
}

int vmm_locate(const char *configured, char **ret_path)
{
	_cleanup_free_ char *vm_dir = berth_vm_dir(), *installed = NULL;

	if (try_candidate(getenv("BERTH_VMM"), ret_path) == 0)
		return 0;
	if (try_candidate(configured, ret_path) == 0)
		return 0;
	if (vm_dir && asprintf(&installed, "%s/bin/berth-vmm", vm_dir) >= 0 &&
	    try_candidate(installed, ret_path) == 0)
		return 0;
	if (search_path(ret_path) == 0)
		return 0;
	return search_build_tree(ret_path);
}

/* The base three decide; a layer only when both have a pin for it (a berth-vmm refuses a
 * layer it does not trust, so a VM without one is the same on either). */
static bool pins_equal(const PinSet *a, const PinSet *b)
{
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++) {
		if (k >= ARTIFACT_BASE_MAX && (!a->sha256[k][0] || !b->sha256[k][0]))
			continue;
		if (!streq(a->sha256[k], b->sha256[k]))
			return false;
	}
	return true;
}

int vmm_locate_for_pins(const char *configured, const PinSet *want, char **ret_path,
			bool *ret_matches)
{
	_cleanup_free_ char *vm_dir = berth_vm_dir(), *installed = NULL;
	const char *fixed[3] = {getenv("BERTH_VMM"), configured, NULL};
	char *first = NULL;

	if (vm_dir && asprintf(&installed, "%s/bin/berth-vmm", vm_dir) >= 0)
		fixed[2] = installed;
	/* An explicit choice is taken as it is. */
	for (int i = 0; i < 2; i++)
		if (try_candidate(fixed[i], ret_path) == 0) {
			*ret_matches = true;
			return 0;
		}
	for (int i = 0; i < 3; i++) {
		char *p = NULL;
		PinSet pins;
		int r = i == 0	 ? try_candidate(fixed[2], &p)
			: i == 1 ? search_path(&p)
				 : search_build_tree(&p);

		if (r < 0)
			continue;
		if (vmm_query_pins(p, &pins) >= 0 && pins_equal(&pins, want)) {
			free(first);
			*ret_path = p;
			*ret_matches = true;
			return 0;
		}
		if (!first)
			first = p;
		else
			free(p);
	}
	if (!first)
		return -ENOENT;
	*ret_path = first;
	*ret_matches = false;
	return 0;
}

/* Parse the `berth-vmm pins --json` form. */
static int pinset_from_json_text(const char *text, PinSet *ret)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	PinSet set = {};
	const char *linux_release = "";

	doc = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	if (!doc || !json_is_object(doc))
		return -EBADMSG;
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++) {
		json_t *e = json_object_get(doc, artifact_kind_to_string(k));
		const char *sha = json_string_value(json_object_get(e, "sha256"));
		json_t *size = json_object_get(e, "size");

		/* A layer is optional: a berth-vmm without its pin cannot boot it, that is all. */
		if (k >= ARTIFACT_BASE_MAX && !e)
			continue;
		if (!sha256_hex_valid(sha) || !json_is_integer(size) ||
		    json_integer_value(size) <= 0)
			return -EBADMSG;
		memcpy(set.sha256[k], sha, SHA256_HEX_LEN + 1);
		set.size[k] = (uint64_t)json_integer_value(size);
	}
	if (json_is_string(json_object_get(doc, "linux")))
		linux_release = json_string_value(json_object_get(doc, "linux"));
	snprintf(set.linux_release, sizeof(set.linux_release), "%s", linux_release);
	*ret = set;
	return 0;
}

char *pinset_to_json_text(const PinSet *set)
{
	_cleanup_(json_decrefp) json_t *doc = json_object();

	if (!doc)
		return NULL;
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++)
		if (set->sha256[k][0])
			json_object_set_new(doc, artifact_kind_to_string(k),
					    json_pack("{s:s, s:I}", "sha256", set->sha256[k],
						      "size", (json_int_t)set->size[k]));
	json_object_set_new(doc, "linux", json_string(set->linux_release));
	return json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT);
}

int vmm_query_pins(const char *path, PinSet *ret)
{
	_cleanup_free_ char *out = NULL;
	int r, status;

	r = run_capture((char *const[]){(char *)path, (char *)"pins", (char *)"--json", NULL},
			PINS_QUERY_TIMEOUT_MS, PINS_JSON_MAX, &out, &status);
	if (r < 0)
		return r;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -EBADMSG;
	return pinset_from_json_text(out, ret);
}
