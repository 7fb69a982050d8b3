/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "disks.h"
#include "fileio.h"
#include "macros.h"
#include "resume.h"

int disk_find_by_serial(const char *serial, char *ret, size_t size)
{
	DIR *d;
	struct dirent *de;
	int r = -ENOENT;

	/* A restored VM's placeholders (the template's) are not its disks. */
	if (!resume_disk_real(serial))
		return -ENOENT;
	d = opendir("/sys/block");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		_cleanup_free_ char *path = NULL, *value = NULL;
		size_t len = 0;

		if (!strneq(de->d_name, "vd", 2))
			continue;
		if (asprintf(&path, "/sys/block/%s/serial", de->d_name) < 0)
			continue;
		if (read_full_file(path, 256, &value, &len) < 0)
			continue;
		while (len > 0 && (value[len - 1] == '\n' || value[len - 1] == ' '))
			value[--len] = '\0';
		if (streq(value, serial)) {
			snprintf(ret, size, "/dev/%s", de->d_name);
			r = 0;
			break;
		}
	}
	closedir(d);
	return r;
}

static int has_ext4_magic(const char *dev)
{
	_cleanup_close_ int fd = open(dev, O_RDONLY | O_CLOEXEC);
	uint8_t magic[2];

	if (fd < 0)
		return -errno;
	/* The superblock starts at 1024; s_magic (0xEF53, little endian) sits 56 bytes in. */
	if (pread(fd, magic, sizeof(magic), 1080) != sizeof(magic))
		return 0;
	return magic[0] == 0x53 && magic[1] == 0xEF;
}

static int run_mkfs(const char *dev)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execl("/sbin/mkfs.ext4", "mkfs.ext4", "-q", "-F", "-L", "berth-state", "-m", "0",
		      "-E", "root_owner=0:0,nodiscard", dev, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static const char *const persistent_dirs[] = {"/workspace", "/context"};

int state_disk_mount(const char *dev, int *ret_formatted)
{
	int r;

	*ret_formatted = 0;
	r = has_ext4_magic(dev);
	if (r < 0)
		return r;
	if (r == 0) {
		r = run_mkfs(dev);
		if (r < 0)
			return r;
		*ret_formatted = 1;
	}
	if (mount(dev, "/state", "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, NULL) < 0)
		return -errno;
	/* /workspace and /context persist with the disk. (/context has no semantic index in
	 * this VM yet: it is a plain directory.) */
	for (size_t i = 0; i < ELEMENTSOF(persistent_dirs); i++) {
		char src[64];

		snprintf(src, sizeof(src), "/state%s", persistent_dirs[i]);
		if (mkdir(src, 0755) < 0 && errno != EEXIST)
			return -errno;
		if (mount(src, persistent_dirs[i], NULL, MS_BIND, NULL) < 0)
			return -errno;
	}
	return 0;
}

int state_disk_count_boot(void)
{
	_cleanup_close_ int fd = -EBADF;
	char buf[32];
	long count = 0;
	ssize_t got;
	int n;

	if (mkdir("/state/berth", 0700) < 0 && errno != EEXIST)
		return 0;
	fd = open("/state/berth/boot-count", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return 0;
	got = pread(fd, buf, sizeof(buf) - 1, 0);
	if (got > 0) {
		buf[got] = '\0';
		count = strtol(buf, NULL, 10);
	}
	if (count < 0 || count >= 1000000000)
		count = 0;
	n = snprintf(buf, sizeof(buf), "%ld\n", count + 1);
	/* Written in place and not synced: the disk is synced when the VM stops, a crash
	 * loses at most this count (a torn one reads as 0), and an fsync here put a journal
	 * commit on every boot's path (15-30 ms under emulation). */
	if (pwrite(fd, buf, (size_t)n, 0) != n || ftruncate(fd, n) < 0)
		return 0;
	return (int)(count + 1);
}

int disk_flush_cache(const char *serial, char *err, size_t errlen)
{
	_cleanup_close_ int fd = -EBADF;
	char dev[64];

	if (disk_find_by_serial(serial, dev, sizeof(dev)) < 0)
		return 0;
	fd = open(dev, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || ioctl(fd, BLKFLSBUF, 0) < 0) {
		snprintf(err, errlen, "cannot drop the cached blocks of %s (%s): %s", dev, serial,
			 strerror(errno));
		return -errno;
	}
	return 0;
}
