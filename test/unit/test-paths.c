/* SPDX-License-Identifier: Apache-2.0 */
#include <stdlib.h>

#include "paths.h"
#include "tests.h"

TEST(home_from_env)
{
	char *p;

	setenv("BERTH_HOME", "/tmp/bh", 1);
	p = berth_vm_dir();
	ASSERT_STREQ(p, "/tmp/bh/vm");
	free(p);
	p = berth_run_dir("berth-dev-notes");
	ASSERT_STREQ(p, "/tmp/bh/run/vm/berth-dev-notes");
	free(p);
	unsetenv("BERTH_HOME");
	setenv("HOME", "/home/u", 1);
	p = berth_config_path();
	ASSERT_STREQ(p, "/home/u/.berth/config.json");
	free(p);
}

TEST(vm_names)
{
	ASSERT_TRUE(vm_name_valid("berth-dev-notes"));
	ASSERT_TRUE(vm_name_valid("a.b_c-1"));
	ASSERT_FALSE(vm_name_valid(""));
	ASSERT_FALSE(vm_name_valid("../x"));
	ASSERT_FALSE(vm_name_valid("-x"));
	ASSERT_FALSE(vm_name_valid("Upper"));
	ASSERT_FALSE(vm_name_valid("a/b"));
	ASSERT_EQ(berth_run_dir("a/b"), NULL);
}

int main(void)
{
	return tests_run();
}
