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
#include "fileio.h"
#include "macros.h"
#include "paths.h"
#include "vmm.h"

#define PINS_JSON_MAX (64 * 1024)

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

static int search_path(char **ret_path)
{
	_cleanup_free_ char *copy = NULL;
	const char *path = getenv("PATH");
	char *save = NULL;

	if (!path)
		return -ENOENT;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
		_cleanup_free_ char *p = NULL;

		if (asprintf(&p, "%s/berth-vmm", dir) < 0)
			return -ENOMEM;
		if (try_candidate(p, ret_path) == 0)
			return 0;
	}
	return -ENOENT;
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

static bool pins_equal(const PinSet *a, const PinSet *b)
{
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++)
		if (!streq(a->sha256[k], b->sha256[k]))
			return false;
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

int pinset_from_json_text(const char *text, PinSet *ret)
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
		json_object_set_new(doc, artifact_kind_to_string(k),
				    json_pack("{s:s, s:I}", "sha256", set->sha256[k], "size",
					      (json_int_t)set->size[k]));
	json_object_set_new(doc, "linux", json_string(set->linux_release));
	return json_dumps(doc, JSON_SORT_KEYS | JSON_COMPACT);
}

int vmm_query_pins(const char *path, PinSet *ret)
{
	_cleanup_free_ char *out = NULL;
	size_t size = 0, alloc = 0;
	int pipefd[2], status;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		safe_close(pipefd[0]);
		safe_close(pipefd[1]);
		return -errno;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		dup2(null, STDIN_FILENO);
		dup2(pipefd[1], STDOUT_FILENO);
		dup2(null, STDERR_FILENO);
		execl(path, path, "pins", "--json", (char *)NULL);
		_exit(127);
	}
	safe_close(pipefd[1]);
	for (;;) {
		ssize_t n;

		if (size + 1 >= alloc) {
			char *p;

			if (alloc >= PINS_JSON_MAX)
				break;
			alloc = alloc ? alloc * 2 : 4096;
			p = realloc(out, alloc);
			if (!p)
				break;
			out = p;
		}
		n = read(pipefd[0], out + size, alloc - size - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		size += (size_t)n;
	}
	safe_close(pipefd[0]);
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	if (!out || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -EBADMSG;
	out[size] = '\0';
	return pinset_from_json_text(out, ret);
}
