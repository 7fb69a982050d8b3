/* SPDX-License-Identifier: Apache-2.0 */
/* agent-init's inputs besides the policy (SPEC 4.1): the app identity and the enforcement
 * setting, from src/agent-init/inputs.c. */
#include <stdio.h>
#include <string.h>

#include "inputs.h"
#include "macros.h"
#include "tests.h"

TEST(app_identity_from_environment)
{
	static const char *const no_identity[][2] = {
		{NULL, NULL},	   {"10000", NULL},	     {NULL, "10000"},
		{"", "10000"},	   {"root", "10000"},	     {"10000", "wheel"},
		{"0", "0"},	   {"10000", "0"},	     {"0", "10000"},
		{"-1", "10000"},   {"4294967295", "10000"},  {"1e4", "10000"},
		{"10000", ""},	   {" ", "10000"},	     {"+5", "10000"},
		{"5 5", "10000"},  {"99999999999", "10000"}, {"10000", "4294967295"},
		{"0x10", "10000"}, {"10000x", "10000"},	     {"00", "10000"},
	};
	AppIdentity id;

	for (size_t i = 0; i < ELEMENTSOF(no_identity); i++) {
		memset(&id, 0xff, sizeof(id));
		app_identity_parse(no_identity[i][0], no_identity[i][1], "9999", &id);
		if (id.set)
			TEST_FAIL("uid=%s gid=%s must mean staying root",
				  no_identity[i][0] ?: "(unset)", no_identity[i][1] ?: "(unset)");
		/* Nothing half-filled. */
		ASSERT_EQ(id.n_groups, 0);
		ASSERT_EQ(id.n_supplementary, 0);
	}
	app_identity_parse("10001", "10001", "9999,5", &id);
	ASSERT_TRUE(id.set);
	ASSERT_EQ(id.uid, 10001);
	ASSERT_EQ(id.gid, 10001);
	ASSERT_EQ(id.n_supplementary, 2);
	ASSERT_EQ(id.supplementary[0], 9999);
	ASSERT_EQ(id.supplementary[1], 5);
	ASSERT_EQ(id.n_groups, 3);
	ASSERT_EQ(id.groups[0], 10001);
	ASSERT_EQ(id.groups[1], 9999);
	ASSERT_EQ(id.groups[2], 5);
	app_identity_parse(" 10000 ", "10000", " 9999 ,,0,tty,5,9999,10000", &id);
	ASSERT_TRUE(id.set);
	ASSERT_EQ(id.uid, 10000);
	ASSERT_EQ(id.n_supplementary, 3);
	ASSERT_EQ(id.supplementary[0], 9999);
	ASSERT_EQ(id.supplementary[1], 5);
	ASSERT_EQ(id.supplementary[2], 10000);
	ASSERT_EQ(id.n_groups, 3); /* 10000 is the gid already */
	app_identity_parse("10000", "10000", NULL, &id);
	ASSERT_TRUE(id.set);
	ASSERT_EQ(id.n_supplementary, 0);
	ASSERT_EQ(id.n_groups, 1);
	ASSERT_EQ(id.groups[0], 10000);
	app_identity_parse("10000", "10000", "", &id);
	ASSERT_TRUE(id.set);
	ASSERT_EQ(id.n_supplementary, 0);
	/* Tabs are blanks too; the largest id that is not (uid_t)-1 is one. */
	app_identity_parse("\t4294967294\t", "4294967294", ",\t7\t,", &id);
	ASSERT_TRUE(id.set);
	ASSERT_EQ(id.uid, 4294967294u);
	ASSERT_EQ(id.gid, 4294967294u);
	ASSERT_EQ(id.n_supplementary, 1);
	ASSERT_EQ(id.supplementary[0], 7);
}

TEST(supplementary_groups_are_capped)
{
	char list[2048] = "", entry[64];
	AppIdentity id;

	for (int i = 1; i <= 100; i++) {
		snprintf(entry, sizeof(entry), "%s%d", i > 1 ? "," : "", i);
		strcat(list, entry);
	}
	app_identity_parse("1000", "1000", list, &id);
	ASSERT_TRUE(id.set);
	ASSERT_EQ(id.n_groups, APP_GROUPS_MAX);
	ASSERT_EQ(id.n_supplementary, APP_GROUPS_MAX - 1);
	ASSERT_EQ(id.groups[0], 1000);
	ASSERT_EQ(id.groups[1], 1);
	ASSERT_EQ(id.groups[APP_GROUPS_MAX - 1], APP_GROUPS_MAX - 1);
	ASSERT_EQ(id.supplementary[APP_GROUPS_MAX - 2], APP_GROUPS_MAX - 1);

	/* An entry too long to be a number is dropped, the rest kept. */
	app_identity_parse("1000", "1000", "5,000000000000000000000000000000000007,6", &id);
	ASSERT_EQ(id.n_supplementary, 2);
	ASSERT_EQ(id.supplementary[0], 5);
	ASSERT_EQ(id.supplementary[1], 6);
	/* Unparseable entries: the large, the negative, (gid_t)-1. */
	app_identity_parse("1000", "1000", "4294967295,-3,99999999999,8", &id);
	ASSERT_EQ(id.n_supplementary, 1);
	ASSERT_EQ(id.supplementary[0], 8);
}

TEST(enforcement_required_values)
{
	ASSERT_TRUE(enforcement_required("1"));
	ASSERT_TRUE(enforcement_required("true"));
	ASSERT_FALSE(enforcement_required(NULL));
	ASSERT_FALSE(enforcement_required("0"));
	ASSERT_FALSE(enforcement_required("yes"));
	ASSERT_FALSE(enforcement_required("TRUE"));
	ASSERT_FALSE(enforcement_required("True"));
	ASSERT_FALSE(enforcement_required(""));
	ASSERT_FALSE(enforcement_required(" 1"));
	ASSERT_FALSE(enforcement_required("1 "));
	ASSERT_FALSE(enforcement_required("false"));
	ASSERT_FALSE(enforcement_required("11"));
}

int main(void)
{
	return tests_run();
}
