/* SPDX-License-Identifier: Apache-2.0 */
/* What berth-vmm reads as a dead VM in QEMU's standard error and the console, and how it
 * cuts a stream into bounded lines. */
#include <stdio.h>
#include <string.h>

#include "line-split.h"
#include "tests.h"
#include "vm-diag.h"

TEST(kvm_internal_error_is_fatal_and_named)
{
	char reason[256];

	ASSERT_EQ(vm_diag_qemu_line("KVM internal error. Suberror: 1", reason, sizeof(reason)), 1);
	ASSERT_STREQ(reason, "KVM internal error (Suberror: 1)");
	ASSERT_EQ(vm_diag_qemu_line("error: kvm run failed Bad address", reason, sizeof(reason)),
		  1);
	ASSERT_TRUE(strstr(reason, "KVM could not run the guest") != NULL);
	ASSERT_EQ(vm_diag_qemu_line("Could not access KVM kernel module: Permission denied", reason,
				    sizeof(reason)),
		  1);
}

TEST(ordinary_qemu_lines_are_not_fatal)
{
	char reason[256] = "";

	ASSERT_EQ(vm_diag_qemu_line("extra data[0]: 0x0000000000000001", reason, sizeof(reason)),
		  0);
	ASSERT_EQ(vm_diag_qemu_line("qemu-system-x86_64: terminating on signal 15", reason,
				    sizeof(reason)),
		  0);
	ASSERT_EQ(vm_diag_qemu_line("", reason, sizeof(reason)), 0);
}

TEST(kernel_panic_lines_count_with_or_without_timestamp)
{
	ASSERT_TRUE(vm_diag_console_panic("Kernel panic - not syncing: VFS: Unable to mount root"));
	ASSERT_TRUE(vm_diag_console_panic("[    0.912345] Kernel panic - not syncing: Attempted "
					  "to kill init!"));
	ASSERT_TRUE(vm_diag_console_panic("[12345.000001] Kernel panic - not syncing: x"));
}

TEST(an_app_cannot_fake_a_panic)
{
	/* The console mirrors app logs as "[app] line". */
	ASSERT_FALSE(vm_diag_console_panic("[notes] Kernel panic - not syncing: gotcha"));
	ASSERT_FALSE(vm_diag_console_panic("[notes] [    0.1] Kernel panic - not syncing: x"));
	ASSERT_FALSE(vm_diag_console_panic("say Kernel panic - not syncing"));
	ASSERT_FALSE(vm_diag_console_panic("[ 1.0]Kernel panic - not syncing"));
	ASSERT_FALSE(vm_diag_console_panic("["));
}

static void collect(const char *line, size_t len, void *userdata)
{
	char *out = userdata;

	ASSERT_EQ(strlen(line), len);
	snprintf(out + strlen(out), 8192 - strlen(out), "<%zu:%.8s>", len, line);
}

TEST(line_split_across_reads_and_crlf)
{
	LineSplit s = {};
	char out[8192] = "";

	line_split_feed(&s, "ab", 2, collect, out);
	line_split_feed(&s, "c\r\nde\nf", 7, collect, out);
	ASSERT_STREQ(out, "<3:abc><2:de>");
	line_split_flush(&s, collect, out);
	ASSERT_STREQ(out, "<3:abc><2:de><1:f>");
	line_split_flush(&s, collect, out);
	ASSERT_STREQ(out, "<3:abc><2:de><1:f>");
}

TEST(line_split_bounds_a_line_without_newline)
{
	static char big[3 * LINE_SPLIT_MAX + 10];
	LineSplit s = {};
	char out[8192] = "";

	memset(big, 'x', sizeof(big));
	line_split_feed(&s, big, sizeof(big), collect, out);
	/* Three full pieces of LINE_SPLIT_MAX; the rest waits for more. */
	ASSERT_STREQ(out, "<4096:xxxxxxxx><4096:xxxxxxxx><4096:xxxxxxxx>");
	ASSERT_EQ(s.len, 10);
}

int main(void)
{
	return tests_run();
}
