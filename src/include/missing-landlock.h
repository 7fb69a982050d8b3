/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Landlock ABI 1-6 constants. Debian 12's linux-libc-dev (6.1) stops at ABI 2, and the
 * guest kernel (6.12) speaks ABI 6, so what is newer is defined here.
 */

#include <linux/types.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#define __NR_landlock_add_rule 445
#define __NR_landlock_restrict_self 446
#endif

#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

/* Landlock 5.13 (ABI 1) */
static inline int missing_landlock_create_ruleset(const void *attr, size_t size, __u32 flags)
{
	return (int)syscall(__NR_landlock_create_ruleset, attr, size, flags);
}
static inline int missing_landlock_add_rule(int fd, int type, const void *attr, __u32 flags)
{
	return (int)syscall(__NR_landlock_add_rule, fd, type, attr, flags);
}
static inline int missing_landlock_restrict_self(int fd, __u32 flags)
{
	return (int)syscall(__NR_landlock_restrict_self, fd, flags);
}

/* The ABI the running kernel speaks, 0 when it has no Landlock (or it is disabled). */
static inline int landlock_abi_version(void)
{
	int v = missing_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);

	return v < 0 ? 0 : v;
}
