/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hash-record.h"
#include "pins.h"

/*
 * The guest artifacts, opened once and hashed through the same descriptors QEMU will
 * be given, so what was verified is what boots (a rename after the check changes nothing).
 */
typedef struct Artifact {
	int fd;
	char *path;
	char sha256[65];
	uint64_t size;
	bool pinned;	/* sha256 equals the compiled-in pin */
	bool pending;	/* not hashed yet: sha256 is the pin's until artifact_measured() */
	bool by_record; /* not hashed: unchanged since it was hashed and matched (hash-record.h) */
	long hash_ms;
	HashStamp stamp; /* the file as it was opened */
} Artifact;

typedef struct Artifacts {
	Artifact a[_ARTIFACT_KIND_MAX];
} Artifacts;

/*
 * artifacts_open_verified() - open the kernel, initrd and root image installed under @vm_dir
 * for the compiled-in pins and check each against its pin. A pinned file unchanged since it
 * last matched is not hashed again (hash-record.h; the user's records, whatever @vm_dir).
 * @rootfs_override: a root image to boot instead (reported as not pinned), or NULL.
 * @defer: open them but leave the checks of the pinned ones to artifact_measured()
 * (measure.h): each is marked pending until then, and used by nothing before it is
 * checked but a restore's QEMU, which reads the root image only once the guest runs.
 * On a mismatch returns -EPERM and a message in @err naming the file and both hashes.
 */
int artifacts_open_verified(const char *vm_dir, const char *rootfs_override, bool defer,
			    Artifacts *ret, char *err, size_t errlen);
/* The digest of a pending artifact of @kind, measured: recorded, and checked against the
 * pin as at its opening (-EPERM with the same message in @err). */
int artifact_measured(Artifact *a, ArtifactKind kind, const char *sha256, uint64_t size,
		      long hash_ms, char *err, size_t errlen);
void artifacts_done(Artifacts *a);

/*
 * artifact_open_layer() - open the layer @kind installed under @vm_dir and check it against
 * the compiled-in pin, as artifacts_open_verified() does the others. A build without that
 * layer's pin refuses it (-ENOENT); @defer as for the root image. Close it with
 * artifact_done().
 */
int artifact_open_layer(const char *vm_dir, ArtifactKind kind, bool defer, Artifact *ret, char *err,
			size_t errlen);
void artifact_done(Artifact *a);
