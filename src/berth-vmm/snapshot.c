/* SPDX-License-Identifier: Apache-2.0 */
/* The snapshot store: keys, metadata, verified reads, placeholders (snapshot.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accel.h"
#include "digest.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "qemu-identity.h"
#include "time-util.h"
#include "snapshot.h"

#define COPY_CHUNK (1024 * 1024)

static void host_cpu(char *buf, size_t size)
{
	_cleanup_free_ char *text = NULL;
	const char *model = NULL;
	unsigned n = 0;

	snprintf(buf, size, "unknown");
	if (read_full_file("/proc/cpuinfo", 4 * 1024 * 1024, &text, NULL) < 0)
		return;
	for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n"))
		if (strneq(l, "model name", 10)) {
			const char *colon = strchr(l, ':');

			n++;
			if (!model && colon)
				model = colon + 1 + strspn(colon + 1, " \t");
		}
	if (model)
		snprintf(buf, size, "%s x%u", model, n);
}

int snapshot_key_init(SnapshotKey *k, const Artifacts *art, const char *qemu, Accel accel,
		      unsigned cpus, unsigned mem_mib)
{
	QemuIdentity q;

	*k = (SnapshotKey){.accel = accel, .cpus = cpus, .mem_mib = mem_mib};
	snprintf(k->kernel, sizeof(k->kernel), "%s", art->a[ARTIFACT_KERNEL].sha256);
	snprintf(k->initrd, sizeof(k->initrd), "%s", art->a[ARTIFACT_INITRD].sha256);
	snprintf(k->rootfs, sizeof(k->rootfs), "%s", art->a[ARTIFACT_ROOTFS].sha256);
	/* Another berth-vmm may save or expect other guest state: its own snapshots only. */
	if (sha256_file_hex("/proc/self/exe", k->berth_vmm, NULL) < 0)
		return log_error_errno(-EIO, "cannot hash this berth-vmm (/proc/self/exe)");
	qemu_identify(qemu, &q);
	snprintf(k->qemu, sizeof(k->qemu), "%s", q.path);
	snprintf(k->qemu_version, sizeof(k->qemu_version), "%s", q.version);
	host_cpu(k->host_cpu, sizeof(k->host_cpu));
	return 0;
}

json_t *snapshot_key_to_json(const SnapshotKey *k)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i}", "kernelSha256",
			 k->kernel, "initrdSha256", k->initrd, "rootfsSha256", k->rootfs,
			 "berthVmmSha256", k->berth_vmm, "qemu", k->qemu, "qemuVersion",
			 k->qemu_version, "hostCpu", k->host_cpu, "accel",
			 accel_to_string(k->accel) ?: "?", "cpus", (int)k->cpus, "memMiB",
			 (int)k->mem_mib);
}

char *snapshot_dir_for(const SnapshotKey *k)
{
	_cleanup_(json_decrefp) json_t *key = snapshot_key_to_json(k);
	_cleanup_free_ char *text = key ? json_dumps(key, JSON_COMPACT | JSON_SORT_KEYS) : NULL,
			    *vm_dir = berth_vm_dir();
	char digest[65], *dir = NULL;

	if (!text || !vm_dir || sha256_buffer_hex(text, strlen(text), digest) < 0)
		return NULL;
	/* A short name is enough to tell keys apart; snapshot.json holds the whole key. */
	if (asprintf(&dir, "%s/snapshots/%.16s", vm_dir, digest) < 0)
		return NULL;
	return dir;
}

void snapshot_remove(const char *dir)
{
	_cleanup_free_ char *snap = NULL, *meta = NULL;

	_cleanup_free_ char *ram = NULL;

	if (asprintf(&snap, "%s/vm.snap", dir) >= 0)
		(void)unlink(snap);
	if (asprintf(&ram, "%s/ram", dir) >= 0)
		(void)unlink(ram);
	if (asprintf(&meta, "%s/snapshot.json", dir) >= 0)
		(void)unlink(meta);
}

/* The key fields no later install can match again: the artifacts, berth-vmm and QEMU. */
static bool same_pins(const json_t *a, const json_t *b)
{
	static const char *const fields[] = {"kernelSha256",   "initrdSha256", "rootfsSha256",
					     "berthVmmSha256", "qemu",	       "qemuVersion"};

	for (size_t i = 0; i < ELEMENTSOF(fields); i++)
		if (!json_equal(json_object_get(a, fields[i]), json_object_get(b, fields[i])))
			return false;
	return true;
}

/* Remove @dir's snapshot if its record names other pins than @want and no maker holds it.
 * Returns the bytes freed, or 0. */
static uint64_t prune_one(const char *dir, const json_t *want)
{
	_cleanup_free_ char *meta_path = NULL, *text = NULL, *lock_path = NULL, *snap = NULL,
			    *ram = NULL;
	_cleanup_(json_decrefp) json_t *meta = NULL;
	_cleanup_close_ int lock = -EBADF;
	struct stat st;
	uint64_t bytes = 0;

	if (asprintf(&meta_path, "%s/snapshot.json", dir) < 0 ||
	    asprintf(&lock_path, "%s/.lock", dir) < 0 || asprintf(&snap, "%s/vm.snap", dir) < 0 ||
	    read_full_file(meta_path, SNAPSHOT_META_MAX, &text, NULL) < 0)
		return 0;
	meta = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(json_object_get(meta, "key")) ||
	    same_pins(json_object_get(meta, "key"), want))
		return 0;
	/* A maker at work there (another berth-vmm's install) keeps it. */
	lock = open(lock_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) < 0)
		return 0;
	if (lstat(snap, &st) == 0 && S_ISREG(st.st_mode))
		bytes = (uint64_t)st.st_size;
	if (asprintf(&ram, "%s/ram", dir) >= 0 && lstat(ram, &st) == 0 && S_ISREG(st.st_mode))
		bytes += (uint64_t)st.st_blocks * 512; /* sparse: what it holds on disk */
	/* The lock file stays: a maker may be waiting on it already. */
	snapshot_remove(dir);
	return bytes;
}

int snapshot_prune_stale(const SnapshotKey *k, uint64_t *ret_bytes)
{
	_cleanup_(json_decrefp) json_t *want = snapshot_key_to_json(k);
	_cleanup_free_ char *vm_dir = berth_vm_dir(), *root = NULL;
	struct dirent *de;
	DIR *d;
	int n = 0;

	*ret_bytes = 0;
	if (!want || !vm_dir || asprintf(&root, "%s/snapshots", vm_dir) < 0)
		return -ENOMEM;
	d = opendir(root);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		_cleanup_free_ char *dir = NULL;
		struct stat st;
		uint64_t bytes;

		if (de->d_name[0] == '.' || asprintf(&dir, "%s/%s", root, de->d_name) < 0)
			continue;
		if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		bytes = prune_one(dir, want);
		if (bytes > 0) {
			*ret_bytes += bytes;
			n++;
		}
	}
	closedir(d);
	return n;
}

int snapshot_find(const SnapshotKey *k, Snapshot *ret, char *why, size_t whylen)
{
	_cleanup_free_ char *dir = snapshot_dir_for(k), *meta_path = NULL, *text = NULL;
	_cleanup_(json_decrefp) json_t *meta = NULL, *want = snapshot_key_to_json(k);
	const char *sha, *created, *cmdline, *ram_sha;
	struct stat st;
	json_int_t size, ram_size;

	*ret = (Snapshot){};
	if (!dir || !want || asprintf(&meta_path, "%s/snapshot.json", dir) < 0)
		return -ENOMEM;
	if (read_full_file(meta_path, SNAPSHOT_META_MAX, &text, NULL) < 0) {
		snprintf(why, whylen, "no snapshot made for this host yet");
		return -ENOENT;
	}
	meta = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	sha = json_string_value(json_object_get(meta, "sha256"));
	created = json_string_value(json_object_get(meta, "createdAt"));
	cmdline = json_string_value(json_object_get(meta, "kernelCmdline"));
	size = json_integer_value(json_object_get(meta, "size"));
	ram_sha = json_string_value(json_object_get(json_object_get(meta, "ram"), "sha256"));
	ram_size = json_integer_value(json_object_get(json_object_get(meta, "ram"), "size"));
	snprintf(ret->dir, sizeof(ret->dir), "%s", dir);
	snprintf(ret->path, sizeof(ret->path), "%s/vm.snap", dir);
	snprintf(ret->ram_path, sizeof(ret->ram_path), "%s/ram", dir);
	if (json_integer_value(json_object_get(meta, "schema")) != SNAPSHOT_SCHEMA || !sha ||
	    !sha256_hex_valid(sha) || !created || !cmdline || size <= 0 || !ram_sha ||
	    !sha256_hex_valid(ram_sha) || ram_size != (json_int_t)k->mem_mib << 20 ||
	    (uint64_t)size > SNAPSHOT_FILE_MAX || strlen(cmdline) >= sizeof(ret->cmdline)) {
		snprintf(why, whylen, "the snapshot's record %s is not one this berth-vmm wrote",
			 meta_path);
		snapshot_remove(dir);
		return -ESTALE;
	}
	if (!json_equal(json_object_get(meta, "key"), want)) {
		snprintf(why, whylen,
			 "the snapshot in %s was made for other artifacts, another "
			 "berth-vmm or QEMU, or another VM size; it was removed, and `berth vm "
			 "install` makes a new one",
			 dir);
		snapshot_remove(dir);
		return -ESTALE;
	}
	if (lstat(ret->path, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != (uint64_t)size) {
		snprintf(why, whylen, "the snapshot file %s is missing or not the size recorded",
			 ret->path);
		snapshot_remove(dir);
		return -ESTALE;
	}
	if (lstat(ret->ram_path, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size != (uint64_t)ram_size) {
		snprintf(why, whylen,
			 "the snapshot's memory %s is missing or not the size recorded",
			 ret->ram_path);
		snapshot_remove(dir);
		return -ESTALE;
	}
	snprintf(ret->ram_sha256, sizeof(ret->ram_sha256), "%s", ram_sha);
	ret->ram_size = (uint64_t)ram_size;
	snprintf(ret->sha256, sizeof(ret->sha256), "%s", sha);
	snprintf(ret->created_at, sizeof(ret->created_at), "%s", created);
	snprintf(ret->cmdline, sizeof(ret->cmdline), "%s", cmdline);
	ret->size = (uint64_t)size;
	ret->make_ms = (long)json_integer_value(json_object_get(meta, "makeMs"));
	return 0;
}

json_t *snapshot_capabilities(void)
{
	return json_pack("{s:[{s:s, s:b}]}", "capabilities", "capability", "x-ignore-shared",
			 "state", 1);
}

int snapshot_open_ram(const Snapshot *s, int *ret_memfd, char *why, size_t whylen)
{
	_cleanup_close_ int fd = open(s->ram_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW), mem = -EBADF;

	if (fd < 0) {
		snprintf(why, whylen, "cannot open %s: %s", s->ram_path, strerror(errno));
		return -errno;
	}
	mem = memfd_create("berth-vm-ram", MFD_CLOEXEC);
	if (mem < 0 || ftruncate(mem, (off_t)s->ram_size) < 0) {
		snprintf(why, whylen, "cannot make the VM's memory (%llu MiB): %s",
			 (unsigned long long)(s->ram_size >> 20), strerror(errno));
		return -errno;
	}
	*ret_memfd = TAKE_FD(mem);
	return TAKE_FD(fd);
}

int snapshot_open_stream(const Snapshot *s, int ret_pipe[2], char *why, size_t whylen)
{
	_cleanup_close_ int fd = open(s->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int p[2];

	if (fd < 0) {
		snprintf(why, whylen, "cannot open %s: %s", s->path, strerror(errno));
		return -errno;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "cannot make a pipe for the snapshot: %s", strerror(errno));
		return -errno;
	}
	/* Fewer wake-ups for both sides; the default size works too. */
	(void)fcntl(p[1], F_SETPIPE_SZ, COPY_CHUNK);
	/* Only our end: the write end's file description is not QEMU's read end's. */
	if (fcntl(p[1], F_SETFL, O_NONBLOCK) < 0) {
		snprintf(why, whylen, "cannot set up the snapshot pipe: %s", strerror(errno));
		safe_close(p[0]);
		safe_close(p[1]);
		return -errno;
	}
	ret_pipe[0] = p[0];
	ret_pipe[1] = p[1];
	return TAKE_FD(fd);
}

/* Write all of @buf to the non-blocking @out by @deadline_ms. Returns 0 or -errno. */
static int write_by(int out, const uint8_t *buf, size_t len, int64_t deadline_ms)
{
	while (len > 0) {
		ssize_t n = write(out, buf, len);
		struct pollfd pfd = {.fd = out, .events = POLLOUT};
		int64_t left;

		if (n >= 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		left = deadline_ms - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)MIN(left, (int64_t)INT32_MAX)) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}

int snapshot_stream(const Snapshot *s, int fd, int out, int64_t deadline_ms, char *why,
		    size_t whylen)
{
	_cleanup_(sha256_freep) Sha256 *h = sha256_new();
	_cleanup_free_ uint8_t *buf = malloc(COPY_CHUNK);
	int out_error = 0;
	uint64_t total = 0;
	char got[65];

	if (!h || !buf) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf, COPY_CHUNK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			snprintf(why, whylen, "cannot read %s: %s", s->path, strerror(errno));
			return -errno;
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
		if (total > s->size)
			break;
		if (sha256_update(h, buf, (size_t)n) < 0) {
			snprintf(why, whylen, "cannot hash the snapshot: out of memory");
			return -ENOMEM;
		}
		/* QEMU gone or stuck: hash the rest anyway, to say which of the two was bad. */
		if (out_error == 0)
			out_error = write_by(out, buf, (size_t)n, deadline_ms);
	}
	if (total != s->size || sha256_final_hex(h, got) < 0 || !streq(got, s->sha256)) {
		snprintf(why, whylen,
			 "the snapshot %s failed its check (sha256 %s, %llu bytes; recorded %s, "
			 "%llu bytes)",
			 s->path, total == s->size ? got : "-", (unsigned long long)total,
			 s->sha256, (unsigned long long)s->size);
		return -EBADMSG;
	}
	if (out_error < 0) {
		snprintf(why, whylen, "QEMU stopped reading the snapshot after %llu bytes: %s",
			 (unsigned long long)total, strerror(-out_error));
		return out_error;
	}
	return 0;
}

int snapshot_placeholder(const char *dir, const char *name, uint64_t size, bool readonly)
{
	_cleanup_free_ char *path = NULL;
	int fd;

	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return -ENOMEM;
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return log_error_errno(errno, "cannot create the placeholder disk %s: %m", path);
	if (ftruncate(fd, (off_t)size) < 0) {
		int r = log_error_errno(errno, "cannot size the placeholder disk %s: %m", path);

		close(fd);
		return r;
	}
	if (readonly) {
		/* QEMU opens it through /proc/self/fd: a read-only descriptor for a read-only
		 * device. */
		int ro = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

		close(fd);
		fd = ro < 0 ? -errno : ro;
	}
	return fd;
}

void snapshot_layout(VmConfig *cfg, const int fds[2 + SNAPSHOT_APPS])
{
	static const char *const serials[2 + SNAPSHOT_APPS] = {"state", "boot", "app0",
							       "app1",	"app2", "app3"};

	cfg->n_disks = 0;
	for (size_t i = 0; i < ELEMENTSOF(serials); i++)
		cfg->disks[cfg->n_disks++] = (VmDisk){serials[i], fds[i], i != 0};
}
