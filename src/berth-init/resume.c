/* SPDX-License-Identifier: Apache-2.0 */
/* A template boot, and a restored VM made its own (resume.h). */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/random.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "disks.h"
#include "fileio.h"
#include "journal.h"
#include "macros.h"
#include "container.h"
#include "resume.h"

#define APPS_REAL_MAX 16

static struct {
	bool done;
	bool state, boot;
	unsigned apps;	      /* app0 .. app<apps-1> are real */
	uint64_t state_bytes; /* the state disk's real size */
	char boot_id[37];     /* the boot it was resumed as */
} resumed;

bool resume_is_template(void)
{
	static int cached = -1;
	_cleanup_free_ char *cmdline = NULL;

	if (cached < 0) {
		cached = 0;
		/* A container sees the host's command line, never a template's. */
		if (!container_mode() && read_full_file("/proc/cmdline", 4096, &cmdline, NULL) >= 0)
			for (char *w = strtok(cmdline, " \n"); w; w = strtok(NULL, " \n"))
				if (streq(w, VM_TEMPLATE_FLAG))
					cached = 1;
	}
	return cached;
}

/* A "Name:   N kB" line of /proc/meminfo, in bytes; 0 when it cannot be read. */
static uint64_t meminfo_bytes(const char *name)
{
	_cleanup_free_ char *text = NULL;
	const char *p;

	if (read_full_file("/proc/meminfo", 16384, &text, NULL) < 0 || !(p = strstr(text, name)))
		return 0;
	return strtoull(p + strlen(name), NULL, 10) * 1024;
}

void resume_template_shed_memory(void)
{
	/* What the kernel needs to allocate meanwhile without reclaiming anything. */
	const uint64_t keep = 32ULL << 20;
	_cleanup_close_ int fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
	uint64_t before = meminfo_bytes("\nMemFree:"), free_bytes;
	void *p;

	/* The page cache only: the dentries and inodes are the paths a restored VM walks. */
	if (fd < 0 || write(fd, "1", 1) != 1) {
		journal_logf("cannot drop the template's page cache: %m");
		return;
	}
	/* Freed pages keep what they held; pages the kernel hands out are zeroed. Taking all
	 * but a reserve of them, touching them and giving them back leaves them zero. In huge
	 * pages where the kernel has them: one fault for 2 MiB, not for 4 KiB, under TCG. */
	free_bytes = meminfo_bytes("\nMemFree:");
	if (free_bytes > keep) {
		p = mmap(NULL, free_bytes - keep, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p != MAP_FAILED) {
			(void)madvise(p, free_bytes - keep, MADV_HUGEPAGE);
			(void)madvise(p, free_bytes - keep, MADV_POPULATE_WRITE);
			(void)munmap(p, free_bytes - keep);
		}
	}
	journal_event("template_memory_shed",
		      json_pack("{s:I, s:I}", "droppedMiB",
				(json_int_t)((free_bytes - MIN(before, free_bytes)) >> 20),
				"zeroedMiB",
				(json_int_t)((free_bytes > keep ? free_bytes - keep : 0) >> 20)));
}

bool resume_done(void)
{
	return resumed.done;
}

bool resume_disk_real(const char *serial)
{
	unsigned i;

	if (!resumed.done)
		return true;
	if (streq(serial, "state"))
		return resumed.state;
	if (streq(serial, "boot"))
		return resumed.boot;
	if (sscanf(serial, "app%u", &i) == 1)
		return i < resumed.apps;
	return false;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Credit @len bytes to the kernel's RNG and make it reseed from them now: every clone of
 * the template starts with the same pool, so nothing may read randomness before this. */
static int reseed(const char *hex, char *err, size_t errlen)
{
	/* struct rand_pool_info ends in a flexible array: room for it after the header. */
	uint32_t space[(sizeof(struct rand_pool_info) + RESUME_ENTROPY_MAX) / 4 + 1] = {};
	struct rand_pool_info *info = (struct rand_pool_info *)space;
	uint8_t *buf = (uint8_t *)info->buf;
	size_t n = strlen(hex) / 2;
	_cleanup_close_ int fd = -EBADF;
	int r = 0;

	if (strlen(hex) % 2 || n < RESUME_ENTROPY_MIN || n > RESUME_ENTROPY_MAX) {
		snprintf(err, errlen, "the resume request's entropy must be %d to %d bytes in hex",
			 RESUME_ENTROPY_MIN, RESUME_ENTROPY_MAX);
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			snprintf(err, errlen, "the resume request's entropy is not lowercase hex");
			explicit_bzero(space, sizeof(space));
			return -EINVAL;
		}
		buf[i] = (uint8_t)(hi << 4 | lo);
	}
	info->entropy_count = (int)(n * 8);
	info->buf_size = (int)n;
	fd = open("/dev/random", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, RNDADDENTROPY, info) < 0 || ioctl(fd, RNDRESEEDCRNG) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot reseed the kernel's random number generator: %s",
			 strerror(errno));
	}
	explicit_bzero(space, sizeof(space));
	return r;
}

/* A boot id as the host makes them: a UUID, nothing else. */
static bool boot_id_valid(const char *s)
{
	return s && strlen(s) == 36 && strspn(s, "0123456789abcdef-") == 36;
}

/* The state disk at the size the host gave it: the template's kernel saw the placeholder's,
 * and the host's resize reaches the guest as a config change a moment later. */
static int wait_state_size(uint64_t want, char *err, size_t errlen)
{
	_cleanup_close_ int fd = -EBADF;
	char dev[64];
	uint64_t have = 0;

	if (disk_find_by_serial("state", dev, sizeof(dev)) < 0)
		return 0;
	/* One descriptor: the size it reports follows the resize. */
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int r = -errno;

		snprintf(err, errlen, "cannot open the state disk %s: %s", dev, strerror(-r));
		return r;
	}
	/* Usually there within a few ms of the resume: look often, for 3 s at the most. */
	for (int i = 0; i < 3000; i++) {
		if (ioctl(fd, BLKGETSIZE64, &have) == 0 && have == want)
			return 0;
		usleep(1000);
	}
	snprintf(err, errlen, "the state disk %s is %llu bytes, not the %llu the host gave it", dev,
		 (unsigned long long)have, (unsigned long long)want);
	return -EIO;
}

int resume_apply(const json_t *req, char *err, size_t errlen)
{
	const char *boot_id = json_string_value(json_object_get(req, "bootId"));
	const char *entropy = json_string_value(json_object_get(req, "entropy"));
	json_t *ns = json_object_get(req, "realtimeNs"), *disks = json_object_get(req, "disks");
	json_t *apps = json_object_get(disks, "apps");
	struct timespec ts;
	int r;

	/* The host sends it again when a session reset may have lost the answer. */
	if (resumed.done && boot_id && streq(boot_id, resumed.boot_id))
		return 1;
	if (resumed.done || !resume_is_template()) {
		snprintf(err, errlen, "this VM was not waiting to be resumed");
		return -EALREADY;
	}
	if (!boot_id_valid(boot_id) || !entropy || !json_is_integer(ns) ||
	    json_integer_value(ns) <= 0 || !json_is_object(disks) || !json_is_integer(apps) ||
	    json_integer_value(apps) < 0 || json_integer_value(apps) > APPS_REAL_MAX) {
		snprintf(err, errlen,
			 "a resume request needs bootId (a UUID), realtimeNs, entropy "
			 "and disks {state, boot, apps}");
		return -EINVAL;
	}
	r = reseed(entropy, err, errlen);
	if (r < 0)
		return r;
	ts = (struct timespec){.tv_sec = json_integer_value(ns) / 1000000000,
			       .tv_nsec = json_integer_value(ns) % 1000000000};
	if (clock_settime(CLOCK_REALTIME, &ts) < 0) {
		snprintf(err, errlen, "cannot set the clock: %s", strerror(errno));
		return -errno;
	}
	if (setenv("BERTH_BOOT_ID", boot_id, 1) < 0)
		return -errno;
	snprintf(resumed.boot_id, sizeof(resumed.boot_id), "%s", boot_id);
	resumed.state = json_is_true(json_object_get(disks, "state"));
	resumed.boot = json_is_true(json_object_get(disks, "boot"));
	resumed.apps = (unsigned)json_integer_value(apps);
	resumed.done = true;
	resumed.state_bytes = (uint64_t)json_integer_value(json_object_get(disks, "stateBytes"));
	return 0;
}

int resume_disks_ready(char *err, size_t errlen)
{
	char serial[16];
	int r;

	r = resumed.state ? wait_state_size(resumed.state_bytes, err, errlen) : 0;
	if (r >= 0 && resumed.state)
		r = disk_flush_cache("state", err, errlen);
	if (r >= 0 && resumed.boot)
		r = disk_flush_cache("boot", err, errlen);
	for (unsigned i = 0; r >= 0 && i < resumed.apps; i++) {
		snprintf(serial, sizeof(serial), "app%u", i);
		r = disk_flush_cache(serial, err, errlen);
	}
	return r;
}
