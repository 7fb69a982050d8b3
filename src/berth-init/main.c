/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-init: PID 1 of the guest. This first version mounts the basic filesystems,
 * reports the kernel and its Landlock ABI on the console and powers off.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "missing-landlock.h"

static void say(const char *fmt, ...) _printf_(1, 2);
static void say(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	dprintf(STDOUT_FILENO, "berth-init: %s\n", buf);
}

static _noreturn_ void power_off(void)
{
	sync();
	reboot(RB_POWER_OFF);
	for (;;)
		pause();
}

typedef struct Mount {
	const char *source, *target, *type;
	unsigned long flags;
	const char *data;
} Mount;

static const Mount base_mounts[] = {
	{"proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL},
	{"sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL},
	{"securityfs", "/sys/kernel/security", "securityfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	 NULL},
	{"tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64m"},
	{"tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=256m"},
};

static int mount_base(void)
{
	for (size_t i = 0; i < ELEMENTSOF(base_mounts); i++) {
		const Mount *m = &base_mounts[i];

		if (mount(m->source, m->target, m->type, m->flags, m->data) < 0 && errno != EBUSY) {
			say("cannot mount %s on %s: %s", m->type, m->target, strerror(errno));
			return -errno;
		}
	}
	return 0;
}

int main(void)
{
	_cleanup_free_ char *lsm = NULL;
	struct utsname u;

	if (getpid() != 1) {
		dprintf(STDERR_FILENO, "berth-init: must run as PID 1 in the guest\n");
		return 1;
	}
	if (mount_base() < 0)
		power_off();
	uname(&u);
	if (read_full_file("/sys/kernel/security/lsm", 4096, &lsm, NULL) < 0)
		lsm = NULL;
	say("kernel %s, landlock ABI %d, lsm %s", u.release, landlock_abi_version(),
	    lsm ? lsm : "(unknown)");
	say("powering off");
	power_off();
}
