/* SPDX-License-Identifier: Apache-2.0 */
/* berth dev's reload in place (dev-reload.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dev-reload.h"
#include "fileio.h"
#include "line-conn.h"
#include "macros.h"
#include "manifest.h"
#include "share.h"
#include "time-util.h"
#include "vm-client.h"

/* The names berth-vmm takes them by, in the run dir (reload.h). */
#define RELOAD_IMAGE "reload-0.erofs"
#define RELOAD_MANIFEST "reload-0.yml"
#define ANSWER_MAX (16 * 1024)

struct DevReload {
	LineConn *conn;
	dev_reload_done_t done;
	void *userdata;
	DevReloadResult res;
	bool answered;
};

static int load_bundle_manifest(const char *dir, Manifest **ret)
{
	_cleanup_free_ char *path = NULL;
	ManifestError err = {};
	int r;

	if (asprintf(&path, "%s/berth.yml", dir) < 0)
		return -ENOMEM;
	r = manifest_load_at(AT_FDCWD, path, ret, &err);
	manifest_error_done(&err);
	return r;
}

/* The secrets disk of the VM's boot was scoped by the berth.yml it booted: a change of the
 * declared names needs a new disk, so a new VM. */
static bool same_secrets(const Manifest *a, const Manifest *b)
{
	const char *const *la, *const *lb;
	size_t na = manifest_secrets(a, &la), nb = manifest_secrets(b, &lb);

	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++)
		if (!streq(la[i], lb[i]))
			return false;
	return true;
}

static void finish(DevReload *r, int k)
{
	if (r->answered)
		return;
	r->answered = true;
	r->done(k, &r->res, r->userdata);
}

static void on_answer(LineConn *c, char *line, size_t len, void *userdata)
{
	DevReload *r = userdata;
	_cleanup_(json_decrefp) json_t *o = json_loadb(line, len, 0, NULL);

	if (!json_is_object(o)) {
		r->res.restart = true;
		snprintf(r->res.why, sizeof(r->res.why), "berth-vmm's answer is not JSON");
		finish(r, -EPROTO);
		return;
	}
	r->res.stop_ms = json_integer_value(json_object_get(o, "stopMs"));
	r->res.copy_ms = json_integer_value(json_object_get(o, "copyMs"));
	r->res.start_ms = json_integer_value(json_object_get(o, "startMs"));
	if (json_is_true(json_object_get(o, "ok"))) {
		finish(r, 0);
		return;
	}
	r->res.restart = json_is_true(json_object_get(o, "restart"));
	snprintf(r->res.why, sizeof(r->res.why), "%s",
		 json_string_value(json_object_get(o, "error")) ?: "no reason given");
	finish(r, -EIO);
}

static void on_close(LineConn *c, int error, void *userdata)
{
	DevReload *r = userdata;

	r->conn = NULL;
	r->res.restart = true;
	snprintf(r->res.why, sizeof(r->res.why), "berth-vmm went away during the reload");
	finish(r, -ECONNRESET);
}

int dev_reload_start(EvLoop *loop, const char *run_dir, const char *name, const char *bundle_dir,
		     const char *booted_bundle_dir, unsigned timeout_ms, dev_reload_done_t done,
		     void *userdata, DevReload **ret, char *why, size_t whylen)
{
	_cleanup_free_ DevReload *r = calloc(1, sizeof(*r));
	_cleanup_(manifest_freep) Manifest *now = NULL, *booted = NULL;
	_cleanup_free_ char *image = NULL, *yml = NULL, *src_yml = NULL, *text = NULL,
			    *req_text = NULL;
	_cleanup_(json_decrefp) json_t *req = NULL;
	ShareDigest d;
	size_t len;
	long long t0 = now_ms();
	int fd, k;

	if (!r || asprintf(&image, "%s/%s", run_dir, RELOAD_IMAGE) < 0 ||
	    asprintf(&yml, "%s/%s", run_dir, RELOAD_MANIFEST) < 0 ||
	    asprintf(&src_yml, "%s/berth.yml", bundle_dir) < 0)
		return -ENOMEM;
	if (load_bundle_manifest(bundle_dir, &now) < 0 ||
	    load_bundle_manifest(booted_bundle_dir, &booted) < 0) {
		snprintf(why, whylen, "cannot read the bundles' berth.yml");
		return -EINVAL;
	}
	if (!same_secrets(now, booted)) {
		snprintf(why, whylen, "the secrets it declares changed");
		return -ESTALE;
	}
	/* The other apps' ways in to a governor are made at boot (berth-init's grants.h). */
	if (manifest_governs(now) != manifest_governs(booted)) {
		snprintf(why, whylen, "whether it governs the other apps changed");
		return -ESTALE;
	}
	k = share_digest(bundle_dir, &d, why, whylen);
	if (k >= 0)
		k = share_pack(bundle_dir, image, why, whylen);
	if (k >= 0)
		k = read_full_file(src_yml, 1024 * 1024, &text, &len);
	if (k >= 0)
		k = write_file_atomic(yml, text, len, 0600);
	if (k < 0) {
		if (!why[0])
			snprintf(why, whylen, "cannot stage the new share: %s", strerror(-k));
		(void)unlink(image);
		(void)unlink(yml);
		return k;
	}
	r->res.pack_ms = now_ms() - t0;
	req = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I}", "op", "reload", "app", name,
			"image", RELOAD_IMAGE, "manifest", RELOAD_MANIFEST, "appDir", bundle_dir,
			"treeSha256", d.tree_sha256, "files", (json_int_t)d.files, "bytes",
			(json_int_t)d.bytes, "timeoutMs", (json_int_t)timeout_ms);
	req_text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	fd = req_text ? vm_socket_connect(run_dir, "vmm.sock") : -ENOMEM;
	if (fd < 0) {
		snprintf(why, whylen, "cannot reach berth-vmm's vmm.sock: %s", strerror(-fd));
		(void)unlink(image);
		(void)unlink(yml);
		return fd;
	}
	k = line_conn_new(loop, fd, ANSWER_MAX, 64 * 1024, on_answer, on_close, r, &r->conn);
	if (k >= 0)
		k = line_conn_write(r->conn, req_text, strlen(req_text));
	if (k < 0) {
		snprintf(why, whylen, "cannot ask berth-vmm: %s", strerror(-k));
		r->conn = line_conn_free(r->conn);
		return k;
	}
	r->done = done;
	r->userdata = userdata;
	*ret = TAKE_PTR(r);
	return 0;
}

DevReload *dev_reload_free(DevReload *r)
{
	if (!r)
		return NULL;
	line_conn_free(r->conn);
	free(r);
	return NULL;
}
