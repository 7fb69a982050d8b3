/* SPDX-License-Identifier: Apache-2.0 */
/* The baseline's /init: power off at once, so a boot measures the kernel and QEMU alone. */
#include <sys/reboot.h>
#include <unistd.h>

int main(void)
{
	reboot(RB_POWER_OFF);
	return 0;
}
