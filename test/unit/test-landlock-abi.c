/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Landlock ABI table (src/basic/landlock-abi.c), on its own and against this host's
 * kernel: each ABI's rights must be accepted by a kernel that speaks it and refused
 * (EINVAL) by one that does not.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "landlock-abi.h"
#include "macros.h"
#include "tests.h"

static bool attr_empty(const struct landlock_ruleset_attr_v6 *a)
{
	return !a->handled_access_fs && !a->handled_access_net && !a->scoped;
}

/* landlock_create_ruleset() of exactly @attr: 0 when accepted, -errno when refused. */
static int try_ruleset(const struct landlock_ruleset_attr_v6 *attr)
{
	int fd = missing_landlock_create_ruleset(attr, sizeof(*attr), 0);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

TEST(one_entry_per_abi_each_right_once)
{
	struct landlock_ruleset_attr_v6 seen = {};
	size_t n;
	const LandlockAbi *t = landlock_abi_table(&n);

	ASSERT_EQ(n, LANDLOCK_ABI_LAST);
	for (size_t i = 0; i < n; i++) {
		ASSERT_EQ(t[i].abi, (int)i + 1);
		ASSERT_NOT_NULL(t[i].kernel);
		/* A message names what an ABI adds, and only an ABI that adds something. */
		ASSERT_EQ(!!t[i].what, !!(t[i].fs | t[i].net | t[i].scoped));
		ASSERT_EQ(t[i].fs & seen.handled_access_fs, 0);
		ASSERT_EQ(t[i].net & seen.handled_access_net, 0);
		ASSERT_EQ(t[i].scoped & seen.scoped, 0);
		seen.handled_access_fs |= t[i].fs;
		seen.handled_access_net |= t[i].net;
		seen.scoped |= t[i].scoped;
	}
	ASSERT_EQ(t[0].fs, LANDLOCK_ABI1_FS);
	ASSERT_EQ(t[4].fs, LANDLOCK_ACCESS_FS_IOCTL_DEV);
	ASSERT_EQ(t[5].scoped, LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL);
}

TEST(restrict_keeps_the_abis_share)
{
	const struct landlock_ruleset_attr_v6 all = {~0ULL, ~0ULL, ~0ULL};
	struct landlock_ruleset_attr_v6 a, last;

	a = all;
	landlock_abi_restrict(&a, 0);
	ASSERT_TRUE(attr_empty(&a));
	a = all;
	landlock_abi_restrict(&a, -1);
	ASSERT_TRUE(attr_empty(&a));
	a = all;
	landlock_abi_restrict(&a, 1);
	ASSERT_EQ(a.handled_access_fs, LANDLOCK_ABI1_FS);
	ASSERT_EQ(a.handled_access_net, 0);
	a = all;
	landlock_abi_restrict(&a, 3);
	ASSERT_EQ(a.handled_access_fs,
		  LANDLOCK_ABI1_FS | LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE);
	ASSERT_EQ(a.handled_access_net, 0);
	ASSERT_EQ(a.scoped, 0);
	a = all;
	landlock_abi_restrict(&a, 5);
	ASSERT_TRUE(a.handled_access_fs & LANDLOCK_ACCESS_FS_IOCTL_DEV);
	ASSERT_EQ(a.handled_access_net,
		  LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP);
	ASSERT_EQ(a.scoped, 0);
	a = all;
	landlock_abi_restrict(&a, 8);
	ASSERT_EQ(a.handled_access_fs & LANDLOCK_ACCESS_FS_RESOLVE_UNIX, 0);
	ASSERT_EQ(a.scoped, LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL);
	/* A kernel newer than the table gets what the table knows, and never more. */
	a = all;
	landlock_abi_restrict(&a, 100);
	landlock_abi_rights(LANDLOCK_ABI_LAST, &last);
	ASSERT_EQ(a.handled_access_fs, last.handled_access_fs);
	ASSERT_EQ(a.handled_access_net, last.handled_access_net);
	ASSERT_EQ(a.scoped, last.scoped);
	ASSERT_TRUE(a.handled_access_fs & LANDLOCK_ACCESS_FS_RESOLVE_UNIX);
	/* What was not asked for is never added. */
	a = (struct landlock_ruleset_attr_v6){LANDLOCK_ACCESS_FS_WRITE_FILE, 0, 0};
	landlock_abi_restrict(&a, LANDLOCK_ABI_LAST);
	ASSERT_EQ(a.handled_access_fs, LANDLOCK_ACCESS_FS_WRITE_FILE);
	ASSERT_EQ(a.handled_access_net, 0);
	ASSERT_EQ(a.scoped, 0);
}

TEST(missing_names_what_is_wanted_and_newer)
{
	struct landlock_ruleset_attr_v6 want;
	char buf[320], tiny[12];

	landlock_abi_rights(6, &want);
	landlock_abi_missing(6, &want, buf, sizeof(buf));
	ASSERT_STREQ(buf, "");
	landlock_abi_missing(7, &want, buf, sizeof(buf));
	ASSERT_STREQ(buf, "");
	landlock_abi_missing(5, &want, buf, sizeof(buf));
	ASSERT_STREQ(buf, "abstract unix socket and signal scoping (ABI 6, Linux 6.12)");
	landlock_abi_missing(3, &want, buf, sizeof(buf));
	ASSERT_STREQ(buf, "TCP rules (ABI 4, Linux 6.7), device ioctl rules (ABI 5, Linux 6.10), "
			  "abstract unix socket and signal scoping (ABI 6, Linux 6.12)");
	/* Only what is wanted: no TCP asked for, none missing. */
	want.handled_access_net = 0;
	want.scoped = 0;
	landlock_abi_missing(3, &want, buf, sizeof(buf));
	ASSERT_STREQ(buf, "device ioctl rules (ABI 5, Linux 6.10)");
	landlock_abi_rights(LANDLOCK_ABI_LAST, &want);
	landlock_abi_missing(8, &want, buf, sizeof(buf));
	ASSERT_STREQ(buf, "pathname unix socket rules (ABI 9, Linux 7.1)");
	/* Cut short, and terminated. */
	landlock_abi_missing(1, &want, tiny, sizeof(tiny));
	ASSERT_EQ(strlen(tiny), sizeof(tiny) - 1);
}

/* The table against the running kernel: what its ABI has is accepted, what comes later is
 * refused. Run on a kernel with Landlock (the host has ABI 7, the guest 6). */
TEST(the_kernel_agrees)
{
	int abi = landlock_abi_version();
	struct landlock_ruleset_attr_v6 mine;
	size_t n;
	const LandlockAbi *t = landlock_abi_table(&n);

	printf("# this kernel's Landlock ABI: %d\n", abi);
	if (abi <= 0) {
		printf("# no Landlock here: nothing to compare\n");
		return;
	}
	landlock_abi_rights(abi, &mine);
	ASSERT_OK(try_ruleset(&mine));
	for (size_t i = 0; i < n; i++) {
		const struct landlock_ruleset_attr_v6 only = {t[i].fs, t[i].net, t[i].scoped};
		char what[64];

		if (attr_empty(&only))
			continue;
		snprintf(what, sizeof(what), "ABI %d's rights", t[i].abi);
		if (t[i].abi <= abi) {
			if (try_ruleset(&only) < 0)
				TEST_FAIL("%s: refused by a kernel of ABI %d", what, abi);
		} else if (try_ruleset(&only) != -EINVAL)
			TEST_FAIL("%s: not refused by a kernel of ABI %d", what, abi);
	}
	/* The file right after the table's last: no kernel the table describes knows it. */
	if (abi <= LANDLOCK_ABI_LAST) {
		landlock_abi_rights(LANDLOCK_ABI_LAST, &mine);
		mine = (struct landlock_ruleset_attr_v6){
			.handled_access_fs = 1ULL << (64 - __builtin_clzll(mine.handled_access_fs)),
		};
		ASSERT_ERROR(try_ruleset(&mine), EINVAL);
	}
}

int main(void)
{
	return tests_run();
}
