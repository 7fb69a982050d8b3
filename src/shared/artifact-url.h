/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "pins.h"

/*
 * Download URL templates for the pinned guest artifacts.
 *
 * A template is a URL with placeholders in braces, expanded once per artifact:
 *   {asset}    the release asset name (vmlinux-<sha>, initrd-<sha>.cpio, rootfs-<sha>.erofs)
 *   {kernel8}  first 8 hex digits of the kernel pin; {rootfs8} the same for the rootfs
 *   {kernel}   the full kernel pin; {rootfs} the full rootfs pin
 *   {kind}     kernel, initrd or rootfs
 *   {sha256}   the artifact's own pin
 *   {file}     its file name under ~/.berth/vm (vmlinux, initrd-<sha>.cpio, rootfs-<sha>.erofs)
 * There is no escape for a literal brace: a brace that does not open or close a known
 * placeholder is an error, so a typo cannot silently become part of the URL.
 */

/* Longest URL a template may expand to, NUL excluded. */
#define ARTIFACT_URL_MAX 4096

/*
 * artifact_url_expand() - expand @tmpl for artifact @kind of @pins.
 * @ret: receives a malloc()ed URL on success, untouched on failure.
 * @err, @errlen: on failure, a one-line reason naming the offending part of the template.
 * Returns 0, -EINVAL for a malformed template (unknown placeholder, unbalanced brace, control
 * character, no http://, https:// or file:// scheme), -E2BIG when the result would be longer
 * than ARTIFACT_URL_MAX, -ENOMEM.
 */
int artifact_url_expand(const char *tmpl, const PinSet *pins, ArtifactKind kind, char **ret,
			char *err, size_t errlen);

/*
 * artifact_url_check() - the syntax checks of artifact_url_expand() without any pins, so a
 * bad template is reported (with where it came from) before any work starts.
 * Returns 0 or -EINVAL with a reason in @err.
 */
int artifact_url_check(const char *tmpl, char *err, size_t errlen);
