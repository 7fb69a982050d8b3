/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-vmm snapshot: boot a template (the root image, berth-init's mounts and channel,
 * the warm runtimes; no app, no state disk, no secret), wait for it to say it is ready,
 * and save it with QEMU's migration to ~/.berth/vm/snapshots/<key>/ (snapshot.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accel.h"
#include "digest.h"
#include "fileio.h"
#include "line-split.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "parse-util.h"
#include "qmp.h"
#include "snapshot.h"
#include "time-util.h"
#include "tsc.h"

#define READY_TIMEOUT_MS_DEFAULT (300 * 1000)
#define QMP_TIMEOUT_MS (10 * 1000)
#define SAVE_TIMEOUT_MS (120 * 1000)

typedef struct Maker {
	bool ready;
	char qemu_last[512];
	char console_last[512];
} Maker;

static void on_console_line(const char *line, size_t len, void *userdata)
{
	Maker *m = userdata;

	if (strstr(line, VM_TEMPLATE_READY))
		m->ready = true;
	else if (len > 0)
		snprintf(m->console_last, sizeof(m->console_last), "%s", line);
}

static void on_stderr_line(const char *line, size_t len, void *userdata)
{
	Maker *m = userdata;

	if (len > 0)
		snprintf(m->qemu_last, sizeof(m->qemu_last), "%s", line);
	log_info("qemu: %s", line);
}

/* Read what is there on @fd into @split; false at EOF or error. */
static bool drain(int fd, LineSplit *split, line_split_cb_t cb, void *userdata)
{
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0) {
		line_split_feed(split, buf, (size_t)n, cb, userdata);
		return true;
	}
	return n < 0 && (errno == EAGAIN || errno == EINTR);
}

/* Wait for the template's ready line on the console, or its end. */
static int wait_ready(Engine *e, Maker *m, int timeout_ms)
{
	LineSplit con = {}, err = {};
	int64_t deadline = now_ms() + timeout_ms;

	while (!m->ready) {
		struct pollfd fds[3] = {{.fd = e->console_fd, .events = POLLIN},
					{.fd = e->stderr_fd, .events = POLLIN},
					{.fd = e->pidfd, .events = POLLIN}};
		int64_t left = deadline - now_ms();

		if (left <= 0)
			return log_error_errno(
				-ETIME,
				"the template did not get ready within %d s (its console "
				"said last: %s)",
				timeout_ms / 1000, m->console_last);
		if (poll(fds, 3, (int)left) < 0 && errno != EINTR)
			return -errno;
		if ((fds[0].revents & (POLLIN | POLLHUP)) &&
		    !drain(e->console_fd, &con, on_console_line, m))
			fds[0].fd = -1;
		if ((fds[1].revents & (POLLIN | POLLHUP)) &&
		    !drain(e->stderr_fd, &err, on_stderr_line, m))
			fds[1].fd = -1;
		if (!m->ready && (fds[2].revents & POLLIN))
			return log_error_errno(-ECHILD,
					       "QEMU ended before the template was ready%s%s (its "
					       "console said last: %s)",
					       m->qemu_last[0] ? ": " : "", m->qemu_last,
					       m->console_last);
	}
	return 0;
}

/* Stop the template and stream QEMU's migration into @out (a tmpfile), hashing it. */
static int save(const char *qmp_path, int out, char sha[65], uint64_t *ret_size, char *err,
		size_t errlen)
{
	_cleanup_(qmp_freep) Qmp *q = NULL;
	_cleanup_(sha256_freep) Sha256 *h = sha256_new();
	_cleanup_(json_decrefp) json_t *args = json_pack("{s:s}", "uri", "fd:snapshot"),
				       *caps = snapshot_capabilities(), *status = NULL;
	_cleanup_close_ int rd = -EBADF, wr = -EBADF;
	int64_t deadline = now_ms() + SAVE_TIMEOUT_MS;
	char buf[65536];
	int p[2], r;

	*ret_size = 0;
	if (!h || !args || !caps)
		return -ENOMEM;
	r = qmp_connect(qmp_path, QMP_TIMEOUT_MS, &q);
	if (r < 0) {
		snprintf(err, errlen, "cannot reach QEMU's QMP socket %s: %s", qmp_path,
			 strerror(-r));
		return r;
	}
	r = qmp_execute(q, "stop", NULL, QMP_TIMEOUT_MS, NULL, err, errlen);
	if (r < 0)
		return r;
	/* The memory is a memfd of ours (share=on): the stream leaves it out, and publish()
	 * keeps it as a file of its own. */
	r = qmp_execute(q, "migrate-set-capabilities", caps, QMP_TIMEOUT_MS, NULL, err, errlen);
	if (r < 0)
		return r;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	rd = p[0];
	wr = p[1];
	r = qmp_send_fd(q, wr, "snapshot", QMP_TIMEOUT_MS, err, errlen);
	wr = safe_close(wr); /* QEMU holds it now: end of file once it closes it */
	if (r >= 0)
		r = qmp_execute(q, "migrate", args, QMP_TIMEOUT_MS, NULL, err, errlen);
	if (r < 0)
		return r;
	for (;;) {
		ssize_t n;
		struct pollfd pfd = {.fd = rd, .events = POLLIN};
		int64_t left = deadline - now_ms();

		if (left <= 0) {
			snprintf(err, errlen, "QEMU did not finish saving within %d s",
				 SAVE_TIMEOUT_MS / 1000);
			return -ETIME;
		}
		if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
			return -errno;
		n = read(rd, buf, sizeof(buf));
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		*ret_size += (uint64_t)n;
		if (*ret_size > SNAPSHOT_FILE_MAX) {
			snprintf(err, errlen, "the snapshot grew past %llu bytes",
				 (unsigned long long)SNAPSHOT_FILE_MAX);
			return -EFBIG;
		}
		r = sha256_update(h, buf, (size_t)n);
		if (r >= 0)
			r = loop_write(out, buf, (size_t)n);
		if (r < 0) {
			snprintf(err, errlen, "cannot write the snapshot: %s", strerror(-r));
			return r;
		}
	}
	r = qmp_execute(q, "query-migrate", NULL, QMP_TIMEOUT_MS, &status, err, errlen);
	if (r < 0)
		return r;
	if (!streq(json_string_value(json_object_get(status, "status")) ?: "", "completed")) {
		snprintf(err, errlen, "QEMU's migration ended as %s: %s",
			 json_string_value(json_object_get(status, "status")) ?: "?",
			 json_string_value(json_object_get(status, "error-desc")) ?: "no reason");
		return -EIO;
	}
	(void)qmp_execute(q, "quit", NULL, QMP_TIMEOUT_MS, NULL, err, errlen);
	return sha256_final_hex(h, sha);
}

/* Put the saved stream in place as vm.snap, then its record: a reader finds either the old
 * pair, or the new file and then the new record (the record names the file's hash). */
/* Put the O_TMPFILE @tmp in place as @dir/@name, synced. */
static int put_file(const char *dir, int tmp, const char *name)
{
	_cleanup_free_ char *link_from = NULL, *next = NULL, *final = NULL;

	if (fsync(tmp) < 0)
		return log_error_errno(errno, "cannot sync the snapshot's %s: %m", name);
	if (asprintf(&link_from, "/proc/self/fd/%d", tmp) < 0 ||
	    asprintf(&next, "%s/%s.new", dir, name) < 0 || asprintf(&final, "%s/%s", dir, name) < 0)
		return -ENOMEM;
	(void)unlink(next);
	if (linkat(AT_FDCWD, link_from, AT_FDCWD, next, AT_SYMLINK_FOLLOW) < 0 ||
	    rename(next, final) < 0)
		return log_error_errno(errno, "cannot put the snapshot's %s in %s: %m", name, dir);
	return 0;
}

static int publish(const char *dir, int tmp, const char *sha, uint64_t size, int ram_tmp,
		   const char *ram_sha, uint64_t ram_size, const SnapshotKey *k,
		   const char *cmdline, long make_ms, long ready_ms)
{
	_cleanup_free_ char *meta_path = NULL, *text = NULL;
	_cleanup_(json_decrefp) json_t *meta = NULL;
	char created[40];
	int r;

	if (asprintf(&meta_path, "%s/snapshot.json", dir) < 0)
		return -ENOMEM;
	r = put_file(dir, ram_tmp, "ram");
	if (r >= 0)
		r = put_file(dir, tmp, "vm.snap");
	if (r < 0)
		return r;
	now_rfc3339(created, sizeof(created), false);
	meta = json_pack("{s:i, s:s, s:o, s:s, s:I, s:{s:s, s:I}, s:s, s:s, s:I, s:I}", "schema",
			 SNAPSHOT_SCHEMA, "kind", "berth.vm-snapshot", "key",
			 snapshot_key_to_json(k), "sha256", sha, "size", (json_int_t)size, "ram",
			 "sha256", ram_sha, "size", (json_int_t)ram_size, "createdAt", created,
			 "kernelCmdline", cmdline, "makeMs", (json_int_t)make_ms, "templateReadyMs",
			 (json_int_t)ready_ms);
	text = meta ? json_dumps(meta, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	if (!text || write_file_atomic(meta_path, text, strlen(text), 0600) < 0)
		return log_error_errno(-EIO, "cannot write %s", meta_path);
	return 0;
}

static void remove_work_dir(const char *work)
{
	(void)rm_rf(work);
}

static int make(const SnapshotKey *k, VmConfig *cfg, const char *dir, int ready_timeout_ms)
{
	static const char *const names[2 + SNAPSHOT_APPS] = {"state", "boot", "app0",
							     "app1",  "app2", "app3"};
	static const uint64_t sizes[2 + SNAPSHOT_APPS] = {SNAPSHOT_STATE_BYTES, SNAPSHOT_BOOT_BYTES,
							  SNAPSHOT_APP_BYTES,	SNAPSHOT_APP_BYTES,
							  SNAPSHOT_APP_BYTES,	SNAPSHOT_APP_BYTES};
	_cleanup_free_ char *work = NULL, *mux = NULL, *qmp = NULL, *cmdline = NULL;
	_cleanup_close_ int tmp = -EBADF, ram = -EBADF, ram_tmp = -EBADF;
	uint64_t ram_size = (uint64_t)cfg->mem_mib << 20, ram_bytes = 0;
	char ram_sha[65];
	int fds[2 + SNAPSHOT_APPS] = {-EBADF, -EBADF, -EBADF, -EBADF, -EBADF, -EBADF};
	int64_t t0 = now_ms(), ready_ms;
	char sha[65], err[1024];
	uint64_t size = 0;
	Maker m = {};
	Engine e;
	int r, status;

	if (asprintf(&work, "%s/.make-%d", dir, (int)getpid()) < 0 ||
	    asprintf(&mux, "%s/qemu-mux.sock", work) < 0 || asprintf(&qmp, "%s/qmp.sock", work) < 0)
		return -ENOMEM;
	remove_work_dir(work);
	if (mkdir(work, 0700) < 0)
		return log_error_errno(errno, "cannot create %s: %m", work);
	for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
		fds[i] = snapshot_placeholder(work, names[i], sizes[i], i != 0);
		if (fds[i] < 0) {
			r = fds[i];
			goto out;
		}
	}
	snapshot_layout(cfg, fds);
	cfg->ports[0] = (VmPort){"berth.mux", mux};
	cfg->n_ports = 1;
	cfg->qmp_path = qmp;
	cmdline = vm_kernel_cmdline(cfg);
	tmp = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	ram_tmp = tmp >= 0 ? open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600) : -EBADF;
	if (!cmdline || ram_tmp < 0 || ftruncate(ram_tmp, (off_t)ram_size) < 0) {
		r = log_error_errno(ram_tmp < 0 ? errno : ENOMEM,
				    "cannot make the snapshot file: %m");
		goto out;
	}
	/* The template's memory, which the saved stream leaves out (see save()). */
	ram = memfd_create("berth-template-ram", MFD_CLOEXEC);
	if (ram < 0 || ftruncate(ram, (off_t)ram_size) < 0) {
		r = log_error_errno(errno, "cannot make the template's memory: %m");
		goto out;
	}
	cfg->ram_fd = ram;
	engine_init(&e, &engine_qemu_ops);
	r = e.ops->start(&e, cfg);
	if (r < 0) {
		log_error_errno(r, "cannot start QEMU: %m");
		engine_done(&e);
		goto out;
	}
	(void)fcntl(e.console_fd, F_SETFL, O_NONBLOCK);
	(void)fcntl(e.stderr_fd, F_SETFL, O_NONBLOCK);
	r = wait_ready(&e, &m, ready_timeout_ms);
	ready_ms = (long)(now_ms() - t0);
	if (r >= 0) {
		r = save(qmp, tmp, sha, &size, err, sizeof(err));
		if (r < 0)
			log_error("saving the template failed: %s", err);
	}
	(void)e.ops->stop(&e);
	(void)e.ops->wait(&e, &status);
	engine_done(&e);
	/* Sparse: the pages the template never touched, and those of zeros, take no room. */
	if (r >= 0) {
		r = sha256_chunked_copy_fd_hex(ram, SNAPSHOT_RAM_CHUNK, ram_tmp, ram_sha,
					       &ram_bytes);
		if (r < 0)
			log_error_errno(r, "cannot write the template's memory: %m");
	}
	if (r >= 0)
		r = publish(dir, tmp, sha, size, ram_tmp, ram_sha, ram_size, k, cmdline,
			    (long)(now_ms() - t0), ready_ms);
	if (r >= 0) {
		struct stat st;
		/* What the memory takes on disk, holes left out; what was copied if unknown. */
		uint64_t ram_on_disk =
			fstat(ram_tmp, &st) == 0 ? (uint64_t)st.st_blocks * 512 : ram_bytes;

		printf("snapshot %.12s made in %lld ms (template ready in %lld ms, %llu MiB of "
		       "memory, %llu KiB of devices): %s\n",
		       sha, (long long)(now_ms() - t0), (long long)ready_ms,
		       (unsigned long long)(ram_on_disk >> 20), (unsigned long long)(size >> 10),
		       dir);
	}
out:
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		safe_close(fds[i]);
	remove_work_dir(work);
	return r;
}

/* An upgrade's old snapshots would otherwise stay on disk for good, a few hundred MiB each
 * install. */
static void prune_stale(const SnapshotKey *k)
{
	uint64_t bytes;
	int n = snapshot_prune_stale(k, &bytes);

	if (n < 0)
		log_warning("cannot look for old snapshots to remove: %s", strerror(-n));
	else if (n > 0)
		printf("removed %d snapshot%s of other artifacts or another berth-vmm (%llu MiB)\n",
		       n, n == 1 ? "" : "s", (unsigned long long)(bytes >> 20));
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: berth-vmm snapshot [--force] [--cpus N] [--mem MIB] [--accel auto|kvm|tcg]\n"
		"                          [--qemu PATH] [--artifacts DIR] [--timeout S]\n"
		"Boot a template VM and save it, so that VMs of this size start from it instead\n"
		"of booting (docs/warm-start.md).\n");
}

int vmm_snapshot_main(int argc, char **argv)
{
	enum { O_FORCE = 0x100, O_CPUS, O_MEM, O_ACCEL, O_QEMU, O_ARTIFACTS, O_TIMEOUT };
	static const struct option options[] = {
		{"force", no_argument, NULL, O_FORCE},
		{"cpus", required_argument, NULL, O_CPUS},
		{"mem", required_argument, NULL, O_MEM},
		{"accel", required_argument, NULL, O_ACCEL},
		{"qemu", required_argument, NULL, O_QEMU},
		{"artifacts", required_argument, NULL, O_ARTIFACTS},
		{"timeout", required_argument, NULL, O_TIMEOUT},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	_cleanup_free_ char *vm_dir = NULL, *qemu = NULL, *cache = NULL, *dir = NULL,
			    *lock_path = NULL;
	_cleanup_close_ int lock = -EBADF;
	const char *accel_flag = NULL, *qemu_flag = NULL, *artifacts_dir = NULL;
	unsigned cpus = 2, mem = 512, timeout_s = READY_TIMEOUT_MS_DEFAULT / 1000;
	bool force = false;
	char source[320], err[2048], why[512];
	Artifacts art = {};
	AccelChoice choice;
	HostSandbox hs;
	SnapshotKey key;
	Snapshot have;
	AccelMode mode;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case O_FORCE:
			force = true;
			break;
		case O_CPUS:
			if (parse_uint_range(optarg, 1, 64, &cpus) < 0)
				return log_error("--cpus takes 1 to 64, not '%s'", optarg), 2;
			break;
		case O_MEM:
			if (parse_uint_range(optarg, 128, 65536, &mem) < 0)
				return log_error("--mem takes MiB from 128 to 65536, not '%s'",
						 optarg),
				       2;
			break;
		case O_ACCEL:
			accel_flag = optarg;
			break;
		case O_QEMU:
			qemu_flag = optarg;
			break;
		case O_ARTIFACTS:
			artifacts_dir = optarg;
			break;
		case O_TIMEOUT:
			if (parse_uint_range(optarg, 10, 3600, &timeout_s) < 0)
				return log_error(
					       "--timeout takes seconds from 10 to 3600, not '%s'",
					       optarg),
				       2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		return log_error("unexpected argument '%s'; see 'berth-vmm snapshot --help'",
				 argv[optind]),
		       2;
	if (host_sandbox_check(false, &hs) < 0)
		return 1;
	vm_dir = artifacts_dir ? strdup(artifacts_dir) : berth_vm_dir();
	if (!vm_dir)
		return log_error_errno(-ENOMEM, "out of memory"), 1;
	r = artifacts_open_verified(vm_dir, NULL, false, &art, err, sizeof(err));
	if (r < 0)
		return log_error("%s", err), 1;
	r = accel_settings(accel_flag, qemu_flag, &mode, source, sizeof(source), &qemu, err,
			   sizeof(err));
	if (r < 0) {
		artifacts_done(&art);
		return log_error("%s", err), 1;
	}
	free(vm_dir);
	vm_dir = berth_vm_dir();
	if (!vm_dir || asprintf(&cache, "%s/accel.json", vm_dir) < 0)
		return log_error_errno(-ENOMEM, "out of memory"), 1;
	AccelHost host = {
		.artifacts = &art, .qemu = qemu, .host_sandbox = &hs, .cache_path = cache};

	r = accel_choose(&host, mode, source, &choice, err, sizeof(err));
	if (r < 0) {
		artifacts_done(&art);
		return log_error("%s", err), 1;
	}
	VmConfig cfg = {
		.artifacts = &art,
		.cpus = cpus,
		.mem_mib = mem,
		.accel = choice.accel,
		.ram_fd = -EBADF,
		.qemu_binary = qemu,
		.extra_cmdline = SNAPSHOT_TEMPLATE_CMDLINE,
		.host_sandbox = &hs,
	};
	if (cfg.accel == ACCEL_TCG) {
		cfg.tsc_khz = host.tsc_khz > 0 ? host.tsc_khz : tsc_measure_khz();
		if (cfg.tsc_khz < 0) {
			artifacts_done(&art);
			return log_error_errno((int)cfg.tsc_khz,
					       "cannot measure the host TSC rate: %m"),
			       1;
		}
	}
	r = snapshot_key_init(&key, &art, qemu, cfg.accel, cpus, mem);
	dir = r >= 0 ? snapshot_dir_for(&key) : NULL;
	if (!dir || mkdir_p(dir, 0700) < 0 || asprintf(&lock_path, "%s/.lock", dir) < 0) {
		artifacts_done(&art);
		return log_error_errno(-EIO, "cannot create the snapshot directory"), 1;
	}
	/* One maker per key: a second waits, then finds the snapshot made. */
	lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		artifacts_done(&art);
		return log_error_errno(errno, "cannot lock %s: %m", lock_path), 1;
	}
	if (!force && snapshot_find(&key, &have, why, sizeof(why)) >= 0) {
		printf("snapshot %.12s already made for this host (%s): %s\n", have.sha256,
		       have.created_at, dir);
		r = 0;
	} else {
		log_info("making a snapshot (%s, %u vCPUs, %u MiB) in %s",
			 accel_to_string(cfg.accel), cpus, mem, dir);
		r = make(&key, &cfg, dir, (int)timeout_s * 1000);
	}
	artifacts_done(&art);
	/* Not for other artifacts or another QEMU than the installed ones, whose own snapshots
	 * the install still restores. */
	if (r >= 0 && !artifacts_dir && !qemu_flag)
		prune_stale(&key);
	return r < 0 ? 1 : 0;
}
