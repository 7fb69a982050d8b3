/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "confine.h"
#include "digest.h"
#include "fileio.h"
#include "journal.h"
#include "macros.h"
#include "manifest.h"
#include "policy.h"

#define BERTH_GID 9999
/* The only cgroup files ever written, and what their values may look like. */
static const char *const cgroup_keys[] = {"cpu.max", "cpu.weight", "memory.max", "memory.swap.max",
					  "pids.max"};

static const char *warning_app;

static void policy_warning(const char *line, void *userdata)
{
	journal_log(warning_app ? warning_app : "berth-init", "policy", line, strlen(line));
}

int confine_compile_policy(const char *name, const char *dir, uid_t uid, AppConfinement *ret,
			   char *why, size_t whylen)
{
	_cleanup_free_ char *manifest_path = NULL, *summary = NULL, *line = NULL;
	_cleanup_(json_decrefp) json_t *norm = NULL;
	ManifestError merr = {};
	Manifest *m = NULL;
	json_t *policy = NULL;
	uint64_t size;
	int r;

	if (asprintf(&manifest_path, "%s/berth.yml", dir) < 0)
		return -ENOMEM;
	r = manifest_load_at(AT_FDCWD, manifest_path, &m, &merr);
	if (r < 0) {
		snprintf(why, whylen, "%s", merr.text ? merr.text : strerror(-r));
		manifest_error_done(&merr);
		return r;
	}
	norm = manifest_to_json(m);
	manifest_free(m);
	if (!norm)
		return -ENOMEM;
	warning_app = name;
	policy_set_warning_sink(policy_warning, NULL);
	r = policy_compile(name, json_object_get(norm, "capabilities"),
			   json_object_get(norm, "resources"), dir, &policy, &summary);
	warning_app = NULL;
	if (r < 0) {
		snprintf(why, whylen, "cannot compile the capability policy: %s", strerror(-r));
		return r;
	}
	(void)mkdir("/run/berth", 0755);
	(void)mkdir(POLICY_DIR, 0755);
	snprintf(ret->policy_path, sizeof(ret->policy_path), POLICY_DIR "/%s.json", name);
	r = policy_write(ret->policy_path, policy, (gid_t)uid);
	/* What is hashed is exactly the bytes agent-init will read. */
	if (r >= 0)
		r = sha256_file_hex(ret->policy_path, ret->policy_sha256, &size);
	if (r < 0) {
		json_decref(policy);
		snprintf(why, whylen, "cannot write %s: %s", ret->policy_path, strerror(-r));
		return r;
	}
	ret->policy = policy;
	if (asprintf(&line, "[berth:capability-policy] wrote %s: %s", ret->policy_path, summary) >=
	    0)
		journal_log(name, "policy", line, strlen(line));
	journal_event("policy_compiled",
		      json_pack("{s:s, s:s, s:s, s:I}", "app", name, "path", ret->policy_path,
				"sha256", ret->policy_sha256, "bytes", (json_int_t)size));
	return 0;
}

/* Paths under these get created and given out by berth-init; the baselines (/dev/null,
 * /tmp/<app>, /run/berth/<app>) are made elsewhere. */
static bool precreatable(const char *p)
{
	static const char *const roots[] = {"/workspace", "/context", "/tmp", "/app"};

	if (strstr(p, "node_modules") || strchr(p, '*'))
		return false;
	for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
		size_t n = strlen(roots[i]);

		if (strneq(p, roots[i], n) && (p[n] == '\0' || p[n] == '/'))
			return !streq(p, "/tmp") && !streq(p, "/app");
	}
	return false;
}

int confine_precreate(const char *const *names, const AppConfinement *const *apps,
		      const uid_t *uids, size_t n)
{
	_cleanup_(json_decrefp) json_t *owners = json_object(); /* path -> [app index] */
	const char *path;
	json_t *who;
	int r = 0;

	for (size_t i = 0; i < n; i++) {
		json_t *p;
		size_t k;
		char own_tmp[64];

		snprintf(own_tmp, sizeof(own_tmp), "/tmp/%s", names[i]);
		json_array_foreach(json_object_get(apps[i]->policy, "writePaths"), k, p) {
			const char *s = json_string_value(p);

			if (!s || !precreatable(s) || strneq(s, own_tmp, strlen(own_tmp)))
				continue;
			if (!json_object_get(owners, s))
				json_object_set_new(owners, s, json_array());
			json_array_append_new(json_object_get(owners, s),
					      json_integer((json_int_t)i));
		}
	}
	json_object_foreach(owners, path, who) {
		bool shared = json_array_size(who) > 1;
		uid_t u = shared ? 0 : uids[json_integer_value(json_array_get(who, 0))];
		gid_t g = shared ? BERTH_GID : u;
		mode_t mode = shared ? 02775 : 0755;
		struct stat st;
		bool existed = stat(path, &st) == 0;

		r = mkdir_p(path, 0755);
		if (r < 0)
			break;
		/* Existing paths stay as they are, except our own mounts (fresh every boot). */
		if (existed && !streq(path, "/workspace") && !streq(path, "/context"))
			continue;
		if (chown(path, u, g) < 0 || chmod(path, mode) < 0) {
			r = -errno;
			break;
		}
	}
	return r;
}

static int write_text(const char *path, const char *text)
{
	_cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	return loop_write(fd, text, strlen(text));
}

static int read_text(const char *path, char *buf, size_t size)
{
	_cleanup_free_ char *t = NULL;
	int r = read_full_file(path, 4096, &t, NULL);

	if (r < 0)
		return r;
	t[strcspn(t, "\n")] = '\0';
	snprintf(buf, size, "%s", t);
	return 0;
}

static long long mem_total_bytes(void)
{
	_cleanup_free_ char *t = NULL;
	char *p;

	if (read_full_file("/proc/meminfo", 64 * 1024, &t, NULL) < 0)
		return -1;
	p = strstr(t, "MemTotal:");
	return p ? strtoll(p + 9, NULL, 10) * 1024 : -1;
}

int confine_cgroups_setup(void)
{
	static const char *const dirs[] = {CGROUP_ROOT "/berth", CGROUP_ROOT "/berth/daemons",
					   CGROUP_ROOT "/berth/apps"};
	long long mem = mem_total_bytes(), reserve = 256LL << 20;
	char buf[64];
	int r;

	for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
		if (mkdir(dirs[i], 0755) < 0 && errno != EEXIST)
			return -errno;
	/* berth-init leaves the root so that /berth may delegate controllers. */
	r = write_text(CGROUP_ROOT "/berth/daemons/cgroup.procs", "0");
	if (r >= 0)
		r = write_text(CGROUP_ROOT "/cgroup.subtree_control", "+cpu +memory +pids");
	if (r >= 0)
		r = write_text(CGROUP_ROOT "/berth/cgroup.subtree_control", "+cpu +memory +pids");
	if (r >= 0)
		r = write_text(CGROUP_ROOT "/berth/apps/cgroup.subtree_control",
			       "+cpu +memory +pids");
	if (r < 0)
		return r;
	(void)write_text(CGROUP_ROOT "/berth/daemons/cpu.weight", "1000");
	/* All apps together leave the guest's own services some memory. */
	if (mem > 0 && mem - reserve >= (32LL << 20)) {
		snprintf(buf, sizeof(buf), "%lld", mem - reserve);
		(void)write_text(CGROUP_ROOT "/berth/apps/memory.max", buf);
	}
	return 0;
}

static bool value_ok(const char *v)
{
	if (!*v || strlen(v) > 40)
		return false;
	for (const char *c = v; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || *c == ' '))
			return false;
	return true;
}

int confine_app_cgroup(const char *name, AppConfinement *c, char *why, size_t whylen)
{
	json_t *want = json_object_get(c->policy, "cgroupLimits"), *v;
	const char *key;

	snprintf(c->cgroup, sizeof(c->cgroup), CGROUP_ROOT "/berth/apps/%s", name);
	if (mkdir(c->cgroup, 0755) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "cannot create %s: %s", c->cgroup, strerror(errno));
		return -errno;
	}
	c->cgroup_limits = json_object();
	json_object_foreach(want, key, v) {
		const char *value = json_string_value(v);
		char path[192], back[64];
		bool known = false;

		for (size_t i = 0; i < ELEMENTSOF(cgroup_keys); i++)
			known |= streq(key, cgroup_keys[i]);
		if (!known || !value || !value_ok(value)) {
			journal_logf(
				"app \"%s\": skipping cgroup limit %s (not one berth-init writes)",
				name, key);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%s", c->cgroup, key);
		/* Without swap in the VM there may be no swap knob: nothing to limit. */
		if (streq(key, "memory.swap.max") && access(path, F_OK) < 0)
			continue;
		if (write_text(path, value) < 0 || read_text(path, back, sizeof(back)) < 0 ||
		    !streq(back, value)) {
			snprintf(why, whylen, "cgroup limit %s=%s did not apply (read back \"%s\")",
				 key, value, back);
			return -EPERM;
		}
		json_object_set_new(c->cgroup_limits, key, json_string(back));
	}
	journal_event("cgroup_limits_applied",
		      json_pack("{s:s, s:s, s:O}", "app", name, "cgroup",
				c->cgroup + strlen(CGROUP_ROOT), "limits", c->cgroup_limits));
	return 0;
}

void confine_done(AppConfinement *c)
{
	json_decref(c->policy);
	json_decref(c->cgroup_limits);
	c->policy = c->cgroup_limits = NULL;
}
