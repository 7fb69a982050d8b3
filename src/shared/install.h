/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "fetch.h"
#include "pins.h"

/*
 * Putting the pinned guest artifacts in place under ~/.berth/vm (see pinset_install_path()),
 * from a local directory or a download, each verified against its pin before an atomic
 * rename. The pins are a parameter: the CLI passes those of the berth-vmm that will boot
 * the files, tests pass small made-up ones.
 */

typedef enum InstallOrigin {
	INSTALL_ORIGIN_ALREADY,	 /* was in place and matched its pin */
	INSTALL_ORIGIN_DIR,	 /* copied from the --from directory */
	INSTALL_ORIGIN_DOWNLOAD, /* downloaded */
	INSTALL_ORIGIN_MISSING,	 /* no source has it (see install_artifact()) */
	_INSTALL_ORIGIN_MAX,
	_INSTALL_ORIGIN_INVALID = -22,
} InstallOrigin;

typedef struct InstallOptions {
	const char *from_dir;	  /* NULL: no local directory */
	const char *url_template; /* NULL or "": no download URL (see artifact-url.h) */
	const char *url_hint;	  /* what a user changes to fix the URL, e.g. "--url" */
	bool no_download;	  /* copy from @from_dir only */
	bool force;		  /* replace files that are in place and match */
	unsigned max_attempts;	  /* passed to fetch_file(); 0 for its default */
	uint64_t stall_ms;	  /* likewise */
	FetchProgressFn progress; /* download progress, may be NULL */
	void *userdata;
} InstallOptions;

typedef struct InstallResult {
	InstallOrigin origin;
	char path[PATH_MAX];	    /* where the artifact is installed */
	char source[PATH_MAX + 64]; /* the file copied or the URL downloaded */
	char note[1024];	    /* something worth telling the user, "" for nothing */
	FetchReport fetch;	    /* for downloads */
} InstallResult;

/*
 * install_artifact() - make sure artifact @kind of @pins is installed under @vm_dir.
 * Order: the installed file when it matches (unless @o->force; a damaged one is replaced),
 * then @o->from_dir in each layout it may have (flat build output, release asset names,
 * one subdirectory per sha256, the installed layout), then a download.
 * Every file is copied or downloaded to a temporary file beside the destination and
 * checked for size and sha256 before it is renamed into place with mode 0444.
 * @ret: what was done; @ret->note explains a replaced damaged file or a --from file that did
 * not match.
 * @err, @errlen: on failure, one line starting with the artifact's kind that says what to do.
 * On failure @ret->origin is the source that failed (INSTALL_ORIGIN_DOWNLOAD for a refused
 * or failed download).
 * Returns 0; -ENOENT with @ret->origin INSTALL_ORIGIN_MISSING when no allowed source has
 * the file (@err then says where it looked; install_missing_hint() says what to do);
 * -EFBIG/-EBADMSG when a download is not the pinned file; other -errno from fetch_file() or the
 * file system.
 */
int install_artifact(const PinSet *pins, const char *vm_dir, ArtifactKind kind,
		     const InstallOptions *o, InstallResult *ret, char *err, size_t errlen);

/* What to do about artifacts install_artifact() found nowhere, given the sources in @o. */
const char *install_missing_hint(const InstallOptions *o);

/*
 * install_vmm() - copy the berth-vmm binary @src to @vm_dir/bin/berth-vmm (0755, atomic).
 * @ret_path: the installed path (PATH_MAX bytes).
 * Returns 1 when copied, 0 when @src already is that file, or -errno with @err set.
 */
int install_vmm(const char *src, const char *vm_dir, char ret_path[PATH_MAX], char *err,
		size_t errlen);

/* The name the flat build output gives @kind: vmlinux, initrd.cpio, rootfs.erofs. */
const char *install_flat_name(ArtifactKind kind);
