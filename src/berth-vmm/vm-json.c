/* SPDX-License-Identifier: Apache-2.0 */
/* vm.json: what other commands learn about a running VM from its run dir. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "missing-landlock.h"
#include "mux.h"
#include "pins.h"
#include "vm-json.h"
#include "vmm-run.h"

static json_t *artifact_json(const Artifact *a, const char *name)
{
	/* Until it is measured, a disk says only what it must turn out to be. */
	json_t *o = a->pending ? json_pack("{s:b, s:s, s:I}", "pending", true, "pinnedSha256",
					   a->sha256, "sizeBytes", (json_int_t)a->size)
			       : json_pack("{s:s, s:b, s:I, s:I, s:s}", "sha256", a->sha256,
					   "pinned", a->pinned, "sizeBytes", (json_int_t)a->size,
					   "hashMs", (json_int_t)a->hash_ms, "checkedBy",
					   a->by_record ? "record" : "hash");

	if (o && (streq(name, "rootfs") || strneq(name, "layer-", 6))) {
		json_object_set_new(o, "fstype", json_string("erofs"));
		json_object_set_new(o, "readOnly", json_true());
	}
	return o;
}

static json_t *run_dir_path(const Vmm *v, const char *file)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/%s", v->run_dir, file);
	return json_string(p);
}

/* [{port, muxPort, socket, app}]: where the host reaches each published guest port. */
static json_t *published_json(const Vmm *v)
{
	json_t *list = json_array();

	for (size_t i = 0; list && i < v->args.n_publish; i++) {
		char file[32];

		snprintf(file, sizeof(file), "publish-%u.sock", v->args.publish[i]);
		json_array_append_new(list,
				      json_pack("{s:i, s:I, s:o, s:s}", "port", v->args.publish[i],
						"muxPort", (json_int_t)(MUX_PORT_PUBLISH_BASE + i),
						"socket", run_dir_path(v, file), "app",
						v->apps[v->publish_app[i]].name));
	}
	return list;
}

static json_t *endpoints_json(const Vmm *v)
{
	json_t *rpc = json_array(), *o = json_object();

	for (size_t i = 0; i < v->n_apps; i++) {
		char file[32];

		snprintf(file, sizeof(file), "rpc-%zu.sock", i);
		json_array_append_new(rpc, json_pack("{s:I, s:s, s:I, s:o}", "index", (json_int_t)i,
						     "app", v->apps[i].name, "port",
						     (json_int_t)(5000 + i), "socket",
						     run_dir_path(v, file)));
	}
	json_object_set_new(o, "runDir", json_string(v->run_dir));
	json_object_set_new(o, "control", run_dir_path(v, "control.sock"));
	json_object_set_new(o, "logs", run_dir_path(v, "logs.sock"));
	json_object_set_new(o, "rpc", rpc);
	json_object_set_new(o, "console", json_string(v->console_path ? v->console_path : ""));
	json_object_set_new(o, "egress", egress_config_to_json(&v->args.egress));
	json_object_set_new(o, "published", published_json(v));
	return o;
}

/* A container: the image it runs (docker-image.h), and the kernel that enforces its apps'
 * policies, which is this host's. */
static json_t *container_json(const Vmm *v)
{
	struct utsname u = {};

	(void)uname(&u);
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:i}, s:s?}", "name",
			 v->container_name ? v->container_name : "", "image", v->docker_image.id,
			 "imageTag", v->docker_image.tag, "layerSha256", v->docker_image.layer,
			 "fromRootfsSha256", v->artifacts.a[ARTIFACT_ROOTFS].sha256, "hostKernel",
			 "release", u.release, "landlockAbi", landlock_abi_version(), "volumes",
			 v->volume_prefix);
}

/* How this VM started: restored from which snapshot, or booted cold and why. */
static json_t *boot_json(const Vmm *v)
{
	if (!v->restore)
		return json_pack("{s:s, s:s}", "mode", "cold", "reason",
				 v->boot_reason[0] ? v->boot_reason : "no snapshot");
	return json_pack(
		"{s:s, s:{s:s, s:I, s:s, s:s, s:I, s:s, s:s, s:o}}", "mode", "restored", "snapshot",
		"sha256", v->snapshot.sha256, "size", (json_int_t)v->snapshot.size, "ramSha256",
		v->snapshot.ram_sha256, "ramCheckedBy", v->ram_by_record ? "record" : "hash",
		"ramSize", (json_int_t)v->snapshot.ram_size, "createdAt", v->snapshot.created_at,
		"dir", v->snapshot.dir, "madeFrom", snapshot_key_to_json(&v->snapshot_key));
}

int vmm_write_state(Vmm *v, const char *state)
{
	_cleanup_(json_decrefp) json_t *doc = NULL;
	_cleanup_free_ char *text = NULL, *path = NULL, *cmdline = NULL;
	json_t *apps = json_array(), *measurements, *endpoints;
	char self[PATH_MAX] = "";
	ssize_t n;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0)
		self[n] = '\0';
	for (size_t i = 0; i < v->n_apps; i++)
		json_array_append_new(apps,
				      json_pack("{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:s, s:I}",
						"index", (json_int_t)i, "name", v->apps[i].name,
						"share", v->apps[i].image, "appDir", v->apps[i].dir,
						"treeSha256", v->apps[i].digest.tree_sha256,
						"files", (json_int_t)v->apps[i].digest.files,
						"bytes", (json_int_t)v->apps[i].digest.bytes,
						"policySha256", v->apps[i].policy_sha256, "reloads",
						(json_int_t)v->apps[i].reloads));
	cmdline = v->vm.cmdline ? strdup(v->vm.cmdline) : vm_kernel_cmdline(&v->vm);
	measurements =
		json_pack("{s:o, s:o, s:o}", "kernel",
			  artifact_json(&v->artifacts.a[ARTIFACT_KERNEL], "kernel"), "initrd",
			  artifact_json(&v->artifacts.a[ARTIFACT_INITRD], "initrd"), "rootfs",
			  artifact_json(&v->artifacts.a[ARTIFACT_ROOTFS], "rootfs"));
	json_object_set_new(json_object_get(measurements, "kernel"), "linux",
			    json_string(pin_linux_release()));
	json_object_set_new(json_object_get(measurements, "kernel"), "cmdline",
			    json_string(cmdline ? cmdline : ""));
	/* A container boots neither: the kernel is the host's (container_json()). */
	if (v->args.docker) {
		json_object_del(measurements, "kernel");
		json_object_del(measurements, "initrd");
	}
	/* The layers attached, measured like the root image (docs/browser.md). */
	for (int k = ARTIFACT_BASE_MAX; k < _ARTIFACT_KIND_MAX; k++)
		if (v->layers[k].fd >= 0)
			json_object_set_new(
				measurements, artifact_kind_to_string(k),
				artifact_json(&v->layers[k], artifact_kind_to_string(k)));
	if (v->state_fd >= 0 && v->state_pending)
		json_object_set_new(measurements, "state",
				    json_pack("{s:s, s:I, s:b, s:b}", "path", v->args.state,
					      "sizeBytes", (json_int_t)v->state_size, "created",
					      v->state_created, "pending", true));
	else if (v->state_fd >= 0)
		json_object_set_new(measurements, "state",
				    json_pack("{s:s, s:I, s:b, s:s, s:i, s:I, s:I}", "path",
					      v->args.state, "sizeBytes", (json_int_t)v->state_size,
					      "created", v->state_created, "chunkedSha256",
					      v->state_sha256, "chunkBytes", 1048576, "hashedBytes",
					      (json_int_t)v->state_hashed_bytes, "hashMs",
					      (json_int_t)v->state_hash_ms));
	endpoints = endpoints_json(v);
	doc = json_pack(
		"{s:i, s:s, s:i, s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o}",
		"schema", 1, "name", v->name, "pid", (int)getpid(), "owner", (int)getuid(), "vmm",
		self, "runDir", v->run_dir, "startedAt", v->started_at, "bootId", v->boot_id,
		"state", state, "engine", v->args.docker ? "docker" : "qemu", "accelerator",
		v->args.docker ? "none" : accel_to_string(v->vm.accel), "apps", apps, "endpoints",
		endpoints, "vmConfig",
		json_pack("{s:i, s:i, s:i, s:b}", "cpus", (int)v->vm.cpus, "memMiB",
			  (int)v->vm.mem_mib, "nics", 0, "tsi", 0),
		"measurements", measurements);
	if (!doc)
		return -ENOMEM;
	if (v->engine.pid > 0)
		json_object_set_new(doc, "enginePid", json_integer(v->engine.pid));
	json_object_set_new(doc, "hostSandbox", host_sandbox_to_json(&v->host_sandbox));
	if (v->args.docker)
		json_object_set_new(doc, "container", container_json(v));
	else
		json_object_set_new(doc, "accel", accel_choice_to_json(&v->accel));
	json_object_set_new(doc, "boot", boot_json(v));
	if (v->failure)
		json_object_set_new(doc, "failure", json_pack("{s:s}", "reason", v->failure));
	text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!text || asprintf(&path, "%s/vm.json", v->run_dir) < 0)
		return -ENOMEM;
	return write_file_atomic(path, text, strlen(text), 0600);
}
