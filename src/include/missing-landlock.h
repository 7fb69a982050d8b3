/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Landlock ABI 1-9 constants. Debian 12's linux-libc-dev (6.1) stops at ABI 2, the guest
 * kernel (6.12) speaks ABI 6 and hosts run newer ones, so what is newer is defined here.
 * Which ABI brings what: landlock-abi.h.
 */

#include <linux/landlock.h>
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

/* ABI 2 (5.19): moving and linking files between directories. */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif

/* ABI 3 (6.2): truncate(2), ftruncate(2) and open(O_TRUNC). */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif

/* ABI 4 (6.7): TCP bind(2) and connect(2) by port, rules of type LANDLOCK_RULE_NET_PORT. */
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#define LANDLOCK_RULE_NET_PORT 2
struct landlock_net_port_attr {
	__u64 allowed_access;
	__u64 port;
};
#endif

/* ABI 5 (6.10): ioctl(2) on character and block devices. */
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

/* ABI 6 (6.12): IPC scoping, no abstract unix socket or signal across the domain's edge. */
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif

/* ABI 7 (6.15) and 8 (7.0) bring flags for landlock_restrict_self() (audit logging, all
 * threads at once), nothing a ruleset handles. */

/* ABI 9 (7.1): connect(2) and sendmsg(2) to a pathname unix socket, by the socket's path. */
#ifndef LANDLOCK_ACCESS_FS_RESOLVE_UNIX
#define LANDLOCK_ACCESS_FS_RESOLVE_UNIX (1ULL << 16)
#endif

/*
 * The ruleset attribute as of ABI 6. The kernel accepts a larger struct than it knows as long
 * as the fields it does not know are zero, so this one struct serves every ABI. Named apart
 * from <linux/landlock.h>'s, which stops at handled_access_fs on Debian 12.
 */
struct landlock_ruleset_attr_v6 {
	__u64 handled_access_fs;
	__u64 handled_access_net; /* ABI 4 */
	__u64 scoped;		  /* ABI 6 */
};

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
