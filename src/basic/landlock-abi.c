/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>

#include "landlock-abi.h"
#include "macros.h"

/* From the kernel's Documentation/userspace-api/landlock.rst and include/uapi. */
static const LandlockAbi abi_table[] = {
	{1, "5.13", .fs = LANDLOCK_ABI1_FS, .what = "file system rules"},
	{2, "5.19", .fs = LANDLOCK_ACCESS_FS_REFER,
	 .what = "rules for moving files between directories"},
	{3, "6.2", .fs = LANDLOCK_ACCESS_FS_TRUNCATE, .what = "truncate rules"},
	{4, "6.7", .net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP,
	 .what = "TCP rules"},
	{5, "6.10", .fs = LANDLOCK_ACCESS_FS_IOCTL_DEV, .what = "device ioctl rules"},
	{6, "6.12", .scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL,
	 .what = "abstract unix socket and signal scoping"},
	/* Audit logging flags for landlock_restrict_self(). */
	{7, "6.15"},
	/* LANDLOCK_RESTRICT_SELF_TSYNC: restrict every thread at once. */
	{8, "7.0"},
	{9, "7.1", .fs = LANDLOCK_ACCESS_FS_RESOLVE_UNIX, .what = "pathname unix socket rules"},
};

_Static_assert(ELEMENTSOF(abi_table) == LANDLOCK_ABI_LAST, "one entry per ABI");

const LandlockAbi *landlock_abi_table(size_t *ret_n)
{
	*ret_n = ELEMENTSOF(abi_table);
	return abi_table;
}

void landlock_abi_rights(int abi, struct landlock_ruleset_attr_v6 *ret)
{
	*ret = (struct landlock_ruleset_attr_v6){};
	for (size_t i = 0; i < ELEMENTSOF(abi_table) && abi_table[i].abi <= abi; i++) {
		ret->handled_access_fs |= abi_table[i].fs;
		ret->handled_access_net |= abi_table[i].net;
		ret->scoped |= abi_table[i].scoped;
	}
}

void landlock_abi_restrict(struct landlock_ruleset_attr_v6 *attr, int abi)
{
	struct landlock_ruleset_attr_v6 known;

	landlock_abi_rights(abi, &known);
	attr->handled_access_fs &= known.handled_access_fs;
	attr->handled_access_net &= known.handled_access_net;
	attr->scoped &= known.scoped;
}

void landlock_abi_missing(int abi, const struct landlock_ruleset_attr_v6 *want, char *buf,
			  size_t size)
{
	size_t n = 0;

	if (size == 0)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < ELEMENTSOF(abi_table) && n < size; i++) {
		const LandlockAbi *a = &abi_table[i];

		if (a->abi <= abi ||
		    !((a->fs & want->handled_access_fs) || (a->net & want->handled_access_net) ||
		      (a->scoped & want->scoped)))
			continue;
		n += (size_t)snprintf(buf + n, size - n, "%s%s (ABI %d, Linux %s)", n ? ", " : "",
				      a->what, a->abi, a->kernel);
	}
}
