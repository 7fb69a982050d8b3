/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "vm-diag.h"

/* QEMU 7.2's messages for a VM that cannot go on (accel/kvm/kvm-all.c, target/i386/kvm). */
static const struct {
	const char *needle;
	const char *reason;
} qemu_fatal[] = {
	{"KVM internal error", NULL}, /* the line itself says which suberror */
	{"kvm run failed", "KVM could not run the guest"},
	{"KVM: entry failed", "KVM could not enter the guest (hardware error)"},
	{"Could not access KVM kernel module", "QEMU could not open KVM"},
	{"failed to initialize kvm", "QEMU could not initialise KVM"},
	{"failed to initialize KVM", "QEMU could not initialise KVM"},
};

int vm_diag_qemu_line(const char *line, char *reason, size_t size)
{
	for (size_t i = 0; i < sizeof(qemu_fatal) / sizeof(qemu_fatal[0]); i++) {
		const char *at = strstr(line, qemu_fatal[i].needle);

		if (!at)
			continue;
		if (qemu_fatal[i].reason) {
			snprintf(reason, size, "%s: %.200s", qemu_fatal[i].reason, line);
		} else {
			const char *sub = strstr(at, "Suberror:");
			int code = -1;

			if (sub)
				(void)sscanf(sub, "Suberror: %d", &code);
			if (code >= 0)
				snprintf(reason, size, "KVM internal error (Suberror: %d)", code);
			else
				snprintf(reason, size, "KVM internal error");
		}
		return 1;
	}
	return 0;
}

/*
 * Only the kernel's own line counts: "Kernel panic - not syncing: …", bare or after the
 * printk timestamp "[    1.234567] ". The console also mirrors the apps' logs as
 * "[app] line", and an app must not be able to fake its VM's death.
 */
bool vm_diag_console_panic(const char *line)
{
	static const char panic[] = "Kernel panic - not syncing";
	const char *p = line;

	if (*p == '[') {
		p++;
		while (*p == ' ')
			p++;
		if (!isdigit((unsigned char)*p))
			return false;
		while (isdigit((unsigned char)*p) || *p == '.')
			p++;
		if (*p++ != ']' || *p++ != ' ')
			return false;
	}
	return strncmp(p, panic, sizeof(panic) - 1) == 0;
}
