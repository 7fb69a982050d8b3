/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>

#include "manifest.h"

/*
 * vm_support_check() - refuse, before anything boots, an app whose berth.yml needs what
 * the VM runtime, or the pinned root image, cannot give (yet): github: needs an image that
 * ships the GitHub API broker (pin_rootfs_daemons()). Returns 0, or -EOPNOTSUPP with a
 * malloc()ed reason in *@reason that names the capability and what to do instead.
 * vm_support_check_image() does the same for an image shipping @daemons (comma-separated).
 */
int vm_support_check(const Manifest *m, char **reason);
int vm_support_check_image(const Manifest *m, const char *daemons, char **reason);
/* The same for a container (--runtime docker), which also has no browser layer. */
int docker_support_check(const Manifest *m, char **reason);

/* The host the GitHub broker reaches, which the dialer's allowlist gets for a github: app. */
#define VM_GITHUB_EGRESS "api.github.com:443"

/* Patterns one sandbox may hand berth-vmm, as its egress dialer caps them. */
#define VM_EGRESS_PATTERNS_MAX 256

/*
 * vm_egress_plan() - what the egress dialer of a sandbox running @apps (@n of them) may
 * reach: the `berth-vmm run --egress-allow` patterns, taken from the apps' berth.yml and
 * never from the guest. Every network:host: and browser:navigate: scope, its host part
 * lowercased, without duplicates, in order of first mention (SPEC 6.1, 6.3); and
 * VM_GITHUB_EGRESS when an app declares github: (SPEC 6.2: the GitHub broker dials it).
 * @ret_allow: a NULL-terminated malloc()ed array of malloc()ed patterns (free with
 *        vm_egress_allow_free()); an empty array when no app declares egress.
 * @ret_warning: set to a malloc()ed warning, or NULL: an egress app that does not declare
 *        network:connect:8090 (a github: app, network:connect:8092) cannot reach its broker
 *        (Landlock), so its requests fail.
 * @reason: on -EOPNOTSUPP, a malloc()ed reason: more than one app declares egress (SPEC
 *        6.1's message), or github: (the same words), or a scope the dialer cannot take (a host
 * that is not letters, digits, '.', '-' and '*', an IPv6 address outside brackets, a port outside
 *        1-65535), or more than VM_EGRESS_PATTERNS_MAX patterns.
 * Returns the number of patterns, -EOPNOTSUPP, or -ENOMEM.
 */
int vm_egress_plan(const Manifest *const *apps, size_t n, char ***ret_allow, char **ret_warning,
		   char **reason);
void vm_egress_allow_free(char **allow);
