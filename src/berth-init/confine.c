/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
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
#include "mkdir-beneath.h"

#define BERTH_GID 9999
#define WARNINGS_MAX 64	      /* compiler warnings logged per app */
#define WARNING_LINE_MAX 2048 /* bytes of each */

int confine_install_policy(const char *name, uid_t uid, const json_t *policy,
			   const json_t *warnings, AppConfinement *ret, char *why, size_t whylen)
{
	_cleanup_(capability_policy_freep) CapabilityPolicy *p = NULL;
	_cleanup_free_ char *summary = NULL, *line = NULL, *err = NULL;
	uint64_t size;
	size_t i;
	json_t *w;
	int r;

	/* What the compiler said on the host, in the app's log where its author looks. */
	json_array_foreach(warnings, i, w) {
		if (i >= WARNINGS_MAX || !json_is_string(w))
			break;
		journal_log(name, "policy", json_string_value(w),
			    MIN(json_string_length(w), (size_t)WARNING_LINE_MAX));
	}
	r = capability_policy_from_json(policy, &p, &err);
	if (r < 0) {
		snprintf(why, whylen, "the capability policy from the host is not valid: %s",
			 err ? err : strerror(-r));
		return r;
	}
	if (!streq(p->app_name, name)) {
		snprintf(why, whylen,
			 "the capability policy from the host is \"%s\"'s, not this app's",
			 p->app_name);
		return -EINVAL;
	}
	(void)mkdir("/run/berth", 0755);
	(void)mkdir(POLICY_DIR, 0755);
	snprintf(ret->policy_path, sizeof(ret->policy_path), POLICY_DIR "/%s.json", name);
	r = capability_policy_write(ret->policy_path, p, (gid_t)uid);
	/* What is hashed is exactly the bytes agent-init will read. */
	if (r >= 0)
		r = sha256_file_hex(ret->policy_path, ret->policy_sha256, &size);
	if (r < 0) {
		snprintf(why, whylen, "cannot write %s: %s", ret->policy_path, strerror(-r));
		return r;
	}
	summary = capability_policy_summary(p);
	ret->policy = TAKE_PTR(p);
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
	size_t n = strlen(p);

	if (strstr(p, "node_modules") || strchr(p, '*') || streq(p, "/tmp") || streq(p, "/app"))
		return false;
	for (size_t i = 0; i < ELEMENTSOF(capability_fs_prefixes); i++)
		if (capability_path_beneath(p, n, capability_fs_prefixes[i]))
			return true;
	return false;
}

/*
 * Create @path, an allowed write path, one component at a time from "/", as root, and
 * give the last one to @uid:@gid with @mode when it was made now (or is one of our own
 * mounts, fresh every boot). No component may be a symlink: a link the app left in
 * /workspace on an earlier boot is refused, never followed (it would make root create and
 * give away a directory outside the app's scopes).
 */
static int create_write_path(const char *path, uid_t uid, gid_t gid, mode_t mode, char *why,
			     size_t whylen)
{
	_cleanup_close_ int dir = -EBADF, fd = -EBADF;
	char bad[256] = "";
	bool created = false;
	int r;

	dir = mkdir_beneath(path, 0755, (uid_t)-1, (gid_t)-1, &created, bad, sizeof(bad));
	if (dir < 0) {
		snprintf(
			why, whylen,
			"cannot create %s: \"%s\" in it is %s; berth-init never follows a link there (remove it from the state disk, or change the filesystem:write: line)",
			path, bad,
			dir == -ELOOP	  ? "a symbolic link"
			: dir == -ENOTDIR ? "not a directory"
					  : strerror(-dir));
		return dir;
	}
	if (!created && !streq(path, "/workspace") && !streq(path, "/context"))
		return 0; /* Existing paths stay as they are. */
	/* fchown() and fchmod() want a real descriptor, not an O_PATH one. */
	fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r = fd < 0 ? -errno : RET_NERRNO(fchown(fd, uid, gid));
	if (r >= 0)
		r = RET_NERRNO(fchmod(fd, mode));
	if (r < 0)
		snprintf(why, whylen, "cannot give %s to the app: %s", path, strerror(-r));
	return r;
}

int confine_precreate(const char *const *names, const AppConfinement *const *apps,
		      const uid_t *uids, size_t n, char (*ret_why)[CONFINE_WHY_MAX])
{
	_cleanup_(json_decrefp) json_t *owners = json_object(); /* path -> [app index] */
	const char *path;
	json_t *who;

	if (!owners)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const PolicyStrings *paths = &apps[i]->policy->write_paths;
		char own_tmp[96];

		ret_why[i][0] = '\0';
		snprintf(own_tmp, sizeof(own_tmp), "/tmp/%s", names[i]);
		for (size_t k = 0; k < paths->n; k++) {
			const char *s = paths->v[k];

			if (!precreatable(s) || capability_path_beneath(s, strlen(s), own_tmp))
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
		char why[CONFINE_WHY_MAX];
		size_t k;
		json_t *idx;

		/* A path that cannot be made fails the apps that declare it, not the VM. */
		if (create_write_path(path, u, shared ? BERTH_GID : u, shared ? 02775 : 0755, why,
				      sizeof(why)) >= 0)
			continue;
		json_array_foreach(who, k, idx) {
			char *dst = ret_why[json_integer_value(idx)];

			if (!dst[0])
				snprintf(dst, CONFINE_WHY_MAX, "%s", why);
		}
	}
	return 0;
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

int confine_cgroup_hold_cpu_quota(void)
{
	if (mkdir(CGROUP_ROOT "/berth/static-keys", 0755) < 0 && errno != EEXIST)
		return -errno;
	return write_text(CGROUP_ROOT "/berth/static-keys/cpu.max", "100000 100000");
}

/* The limits are the policy decoder's: known keys, values of [0-9a-z ] only. */
int confine_app_cgroup(const char *name, AppConfinement *c, char *why, size_t whylen)
{
	snprintf(c->cgroup, sizeof(c->cgroup), CGROUP_ROOT "/berth/apps/%s", name);
	if (mkdir(c->cgroup, 0755) < 0 && errno != EEXIST) {
		snprintf(why, whylen, "cannot create %s: %s", c->cgroup, strerror(errno));
		return -errno;
	}
	c->cgroup_limits = json_object();
	for (size_t i = 0; i < c->policy->n_limits; i++) {
		const char *key = c->policy->limits[i].key, *value = c->policy->limits[i].value;
		char path[192], back[64] = "";

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
