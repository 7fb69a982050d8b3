/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "artifacts.h"
#include "digest.h"
#include "macros.h"
#include "time-util.h"

/* The refusal of an artifact that is not what its pin says. */
static int mismatch(const Artifact *a, const Pin *pin, char *err, size_t errlen)
{
	snprintf(
		err, errlen,
		"%s %s does not match the pin this berth-vmm was built with:\n"
		"  pinned:   %s\n  this file: %s\n"
		"Refusing to boot it. Reinstall the pinned artifacts with 'berth vm install --force'.",
		pin->name, a->path, pin->sha256, a->sha256);
	return -EPERM;
}

#define RECORD_KIND "sha256"

/* A pinned file that matched: remembered, so that an unchanged one is not hashed again. */
static void remember(const Artifact *a)
{
	_cleanup_free_ char *dir = NULL;

	if (a->pinned && !a->by_record && (dir = hash_record_dir()))
		(void)hash_record_save(dir, a->fd, &a->stamp, RECORD_KIND, a->sha256);
}

/* How one artifact is opened: @must_match its pin (else only recorded, as for --rootfs);
 * @defer: open it and leave the hash to artifact_measured(), the pin's digest standing in
 * until then (only for a pinned disk, which is refused unless they match). */
typedef struct OpenSpec {
	const Pin *pin;
	bool must_match;
	bool defer;
} OpenSpec;

static int open_one(Artifact *a, const char *path, const OpenSpec *o, char *err, size_t errlen)
{
	const Pin *pin = o->pin;
	bool must_match = o->must_match, defer = o->defer;
	struct stat st;
	long t0 = now_ms();
	int r;

	a->path = strdup(path);
	if (!a->path)
		return -ENOMEM;
	a->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (a->fd < 0 && errno == ENOENT && pin->kind >= ARTIFACT_BASE_MAX)
		return -ENOENT; /* the caller says how to install a layer */
	if (a->fd < 0) {
		r = -errno;
		snprintf(
			err, errlen,
			"%s: cannot open %s: %s. Install it with 'berth vm install' (or pass --artifacts)",
			pin->name, path, strerror(errno));
		return r;
	}
	if (fstat(a->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: %s is not a regular file", pin->name, path);
		return -EBADFD;
	}
	(void)hash_stamp_take(a->fd, &a->stamp);
	if (must_match) {
		_cleanup_free_ char *dir = hash_record_dir();

		/* The user's own records, wherever the artifacts are (hash-record.h). */
		a->by_record = hash_record_holds(dir, &a->stamp, RECORD_KIND, pin->sha256);
	}
	/* Unchanged since it matched, or to be hashed beside QEMU's start: the pin's digest. */
	if (a->by_record || (defer && must_match)) {
		snprintf(a->sha256, sizeof(a->sha256), "%s", pin->sha256);
		a->size = (uint64_t)st.st_size;
		a->pinned = a->by_record;
		a->pending = !a->by_record;
		return 0;
	}
	r = sha256_fd_hex(a->fd, a->sha256, &a->size);
	if (r < 0) {
		snprintf(err, errlen, "%s: cannot read %s: %s", pin->name, path, strerror(-r));
		return r;
	}
	a->hash_ms = now_ms() - t0;
	a->pinned = streq(a->sha256, pin->sha256);
	if (must_match && !a->pinned)
		return mismatch(a, pin, err, errlen);
	if (must_match)
		remember(a);
	return 0;
}

int artifact_measured(Artifact *a, ArtifactKind kind, const char *sha256, uint64_t size,
		      long hash_ms, char *err, size_t errlen)
{
	const Pin *pin = pin_get(kind);

	snprintf(a->sha256, sizeof(a->sha256), "%s", sha256);
	a->size = size;
	a->hash_ms = hash_ms;
	a->pending = false;
	a->pinned = streq(a->sha256, pin->sha256);
	if (!a->pinned)
		return mismatch(a, pin, err, errlen);
	remember(a);
	return 0;
}

int artifacts_open_verified(const char *vm_dir, const char *rootfs_override, bool defer,
			    Artifacts *ret, char *err, size_t errlen)
{
	int r = 0;

	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++)
		ret->a[k] = (Artifact){.fd = -EBADF};

	for (int k = 0; k < ARTIFACT_BASE_MAX && r >= 0; k++) {
		_cleanup_free_ char *path = NULL;
		bool override = k == ARTIFACT_ROOTFS && rootfs_override;

		path = override ? strdup(rootfs_override) : pin_install_path(vm_dir, k);
		if (!path)
			return -ENOMEM;
		r = open_one(
			&ret->a[k], path,
			&(OpenSpec){.pin = pin_get(k), .must_match = !override, .defer = defer},
			err, errlen);
	}
	if (r < 0)
		artifacts_done(ret);
	return r;
}

void artifact_done(Artifact *a)
{
	safe_close(a->fd);
	a->fd = -EBADF;
	free(a->path);
	a->path = NULL;
}

void artifacts_done(Artifacts *a)
{
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++)
		artifact_done(&a->a[k]);
}

int artifact_open_layer(const char *vm_dir, ArtifactKind kind, bool defer, Artifact *ret, char *err,
			size_t errlen)
{
	_cleanup_free_ char *path = NULL;
	int r;

	*ret = (Artifact){.fd = -EBADF};
	if (!pin_layer_known(kind)) {
		snprintf(err, errlen,
			 "this berth-vmm was built without a pin for the %s, so it boots none: "
			 "build it with the layer's manifest (docs/browser.md)",
			 artifact_kind_to_string(kind));
		return -ENOENT;
	}
	path = pin_install_path(vm_dir, kind);
	if (!path)
		return -ENOMEM;
	r = open_one(ret, path,
		     &(OpenSpec){.pin = pin_get(kind), .must_match = true, .defer = defer}, err,
		     errlen);
	if (r == -ENOENT)
		snprintf(err, errlen,
			 "%s: %s is not installed. Install it with 'berth vm install --layer %s'",
			 pin_get(kind)->name, path, pin_get(kind)->name + strlen("layer-"));
	if (r < 0)
		artifact_done(ret);
	return r;
}
