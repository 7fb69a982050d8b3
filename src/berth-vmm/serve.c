/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The supervising half of berth-vmm: start QEMU, hold the one client connection to its
 * multiplexed channel, map the run dir's sockets onto guest ports, follow the guest's
 * boot events, serve its log to every reader of logs.sock, and notice when QEMU goes away.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "egress-dialer.h"
#include "evloop.h"
#include "fileio.h"
#include "guest-event.h"
#include "line-conn.h"
#include "line-split.h"
#include "linebuf.h"
#include "log-fanout.h"
#include "log.h"
#include "macros.h"
#include "mux-io.h"
#include "paths.h"
#include "qmp.h"
#include "random-util.h"
#include "reload.h"
#include "rundir.h"
#include "serve.h"
#include "time-util.h"
#include "vm-client.h"
#include "vm-diag.h"
#include "vm-json.h"
#include "vmm-run.h"

#define PENDING_MAX 64
#define CONNECT_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define STOP_TIMEOUT_USEC (20 * USEC_PER_SEC)
#define SETTLE_USEC (200 * USEC_PER_MSEC)
#define WATCH_USEC (100 * USEC_PER_MSEC) /* how often a boot is checked for a stall */
#define QEMU_TAIL_BYTES (8 * 1024)	 /* QEMU's last words, for the failure report */
/* Of the guest console, console.log keeps this much: a guest (root in it, or its kernel)
 * writes it at will, and it is a file on the host. The rest is drained and counted. */
#define CONSOLE_LOG_BYTES_MAX (32 * 1024 * 1024)
#define RESTORE_TIMEOUT_MS (60 * 1000) /* QEMU reading a snapshot, and told to run */

typedef struct Listener {
	struct Serve *serve;
	uint32_t port;
	char path[108];
	int fd;
} Listener;

typedef struct Pending {
	int fd;
	uint32_t port;
} Pending;

typedef struct Serve {
	Vmm *vmm;
	EvLoop *loop;
	MuxIo *io;
	EgressDialer *egress;
	LineConn *events;
	LogFanout *logs;
	Reload *reload;
	Listener listeners[2 + VMM_APPS_MAX + PUBLISH_PORTS_MAX];
	size_t n_listeners;
	Pending pending[PENDING_MAX];
	size_t n_pending;
	char mux_path[108];
	const char *connect_path; /* mux_path, or --channel-connect */
	uint64_t connect_deadline;
	EvSource *connect_timer, *stop_timer, *watch_timer;
	bool booted, powered_off, stop_requested, qemu_gone, failed;
	bool answered;		   /* the guest's side of the channel came up at least once */
	bool resume_sent, resumed; /* a restored VM: the resume request, and its answer */
	/* Watching the boot: QEMU's standard error, the console file, and when anything last
	 * moved; a boot that goes quiet for longer than --boot-stall-timeout is dead. */
	LineSplit qemu_split, console_split;
	LineBuffer *qemu_tail;
	int console_fd;	 /* QEMU's console pipe (the guest's ttyS0) */
	int console_out; /* console.log, or standard error with --console-stderr */
	uint64_t console_written, console_dropped;
	uint64_t last_progress;
	char panic[512];
	char qemu_last[512]; /* QEMU's last line on standard error */
	int guest_exit_code;
	int qemu_code, qemu_status;
	GuestEvents guest; /* the guest's boot events, kept as evidence */
	int exit_code;
	char state[32];
} Serve;

static void set_state(Serve *s, const char *state)
{
	snprintf(s->state, sizeof(s->state), "%s", state);
	(void)vmm_write_state(s->vmm, state);
}

/*
 * The VM cannot go on: say why once, with QEMU's last words, record it in vm.json for the
 * command waiting on the boot, and stop QEMU (a KVM internal error leaves it paused, not
 * gone). The loop ends when QEMU's exit is seen.
 */
static void print_qemu_tail_line(const char *line, size_t len, void *userdata)
{
	log_error("  qemu: %s", line);
}

static void fail_vm(Serve *s, const char *reason)
{
	Vmm *v = s->vmm;

	if (s->failed)
		return;
	s->failed = true;
	free(v->failure);
	v->failure = strdup(reason);
	log_error("%s the VM failed: %s", s->booted ? "after its boot," : "during its boot,",
		  reason);
	if (linebuf_lines(s->qemu_tail) > 0) {
		log_error("QEMU's last lines on standard error:");
		linebuf_foreach(s->qemu_tail, print_qemu_tail_line, NULL);
	}
	if (v->console_path)
		log_error("the guest console is in %s", v->console_path);
	set_state(s, s->booted ? "crashed" : "boot_failed");
	if (v->engine.pid > 0)
		(void)v->engine.ops->stop(&v->engine);
}

static void progress(Serve *s)
{
	s->last_progress = ev_time_now();
}

static void on_qemu_line(const char *line, size_t len, void *userdata)
{
	Serve *s = userdata;
	char reason[512], full[1024];

	log_info("qemu: %s", line);
	(void)linebuf_append(s->qemu_tail, line, len);
	if (len > 0)
		snprintf(s->qemu_last, sizeof(s->qemu_last), "%s", line);
	progress(s);
	if (!vm_diag_qemu_line(line, reason, sizeof(reason)))
		return;
	if (s->vmm->vm.accel == ACCEL_KVM || strstr(reason, "KVM"))
		snprintf(full, sizeof(full), "QEMU reported: %s. " VM_DIAG_KVM_HINT, reason);
	else
		snprintf(full, sizeof(full), "QEMU reported: %s", reason);
	fail_vm(s, full);
}

static int on_qemu_stderr(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Serve *s = userdata;
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0) {
		line_split_feed(&s->qemu_split, buf, (size_t)n, on_qemu_line, s);
		return 0;
	}
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	line_split_flush(&s->qemu_split, on_qemu_line, s);
	ev_source_set_enabled(src, EV_OFF);
	return 0;
}

static void on_console_line(const char *line, size_t len, void *userdata)
{
	Serve *s = userdata;

	if (s->panic[0] || !vm_diag_console_panic(line))
		return;
	snprintf(s->panic, sizeof(s->panic), "the guest kernel panicked: %.400s", line);
	fail_vm(s, s->panic);
}

/* Keep @len bytes of console in console.log, up to CONSOLE_LOG_BYTES_MAX; say once where
 * it stops. */
static void keep_console(Serve *s, const char *buf, size_t len)
{
	size_t room = CONSOLE_LOG_BYTES_MAX - MIN(s->console_written, CONSOLE_LOG_BYTES_MAX);
	size_t n = MIN(len, room);

	if (n > 0 && loop_write(s->console_out, buf, n) >= 0)
		s->console_written += n;
	if (n == len)
		return;
	if (s->console_dropped == 0) {
		dprintf(s->console_out,
			"\n[berth-vmm] the console reached %u MiB; what the guest writes there from "
			"now on is dropped\n",
			CONSOLE_LOG_BYTES_MAX / (1024 * 1024));
		log_warning("the guest console reached %u MiB; the rest is not kept in %s",
			    CONSOLE_LOG_BYTES_MAX / (1024 * 1024),
			    s->vmm->console_path ?: "standard error");
	}
	s->console_dropped += len - n;
}

/* Read what the guest wrote to its console since last time (the pipe is non-blocking).
 * Returns false once the pipe is done with (QEMU is gone). */
static bool read_console(Serve *s)
{
	char buf[16384];
	ssize_t n;

	if (s->console_fd < 0)
		return false;
	for (;;) {
		n = read(s->console_fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN;
		if (n == 0)
			return false;
		keep_console(s, buf, (size_t)n);
		line_split_feed(&s->console_split, buf, (size_t)n, on_console_line, s);
		progress(s);
	}
}

static int on_console(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	if (!read_console(userdata))
		ev_source_set_enabled(src, EV_OFF);
	return 0;
}

static int on_watch(EvSource *src, uint64_t usec, void *userdata)
{
	Serve *s = userdata;
	uint64_t stall = (uint64_t)s->vmm->args.boot_stall_s * USEC_PER_SEC;
	char reason[512];

	if (s->booted || s->failed || s->qemu_gone)
		return 0;
	if (stall > 0 && ev_time_now() - s->last_progress > stall) {
		snprintf(reason, sizeof(reason),
			 "no progress on the console or the control port for %u s%s",
			 s->vmm->args.boot_stall_s,
			 s->vmm->vm.accel == ACCEL_KVM ? " under KVM. " VM_DIAG_KVM_HINT : "");
		fail_vm(s, reason);
		return 0;
	}
	ev_source_set_time_relative(src, WATCH_USEC);
	ev_source_set_enabled(src, EV_ONESHOT);
	return 0;
}

static int unix_listen(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	(void)unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0600) < 0 ||
	    listen(fd, 64) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

static void flush_pending(Serve *s)
{
	for (size_t i = 0; i < s->n_pending; i++) {
		int r = mux_io_open_bridge(s->io, s->pending[i].port, s->pending[i].fd);

		if (r < 0)
			log_debug_errno(r, "could not bridge a waiting client to port %u: %m",
					s->pending[i].port);
	}
	s->n_pending = 0;
}

static int on_accept(EvSource *src, int fd, uint32_t revents, void *userdata)
{
	Listener *l = userdata;
	Serve *s = l->serve;
	int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (c < 0)
		return 0;
	if (mux_io_get_state(s->io) == MUX_IO_READY) {
		(void)mux_io_open_bridge(s->io, l->port, c);
		return 0;
	}
	/* The guest is not up yet: hold the client until the channel is. */
	if (s->n_pending >= PENDING_MAX || s->qemu_gone) {
		close(c);
		return 0;
	}
	s->pending[s->n_pending++] = (Pending){c, l->port};
	return 0;
}

static int add_listener(Serve *s, const char *file, uint32_t port)
{
	Listener *l = &s->listeners[s->n_listeners];
	int r;

	snprintf(l->path, sizeof(l->path), "%s/%s", s->vmm->run_dir, file);
	l->serve = s;
	l->port = port;
	l->fd = unix_listen(l->path);
	if (l->fd < 0)
		return log_error_errno(l->fd, "cannot listen on %s: %m", l->path);
	r = ev_add_io(s->loop, NULL, l->fd, EPOLLIN, on_accept, l);
	if (r < 0)
		return r;
	s->n_listeners++;
	return 0;
}

/* The guest's log port serves one reader: berth-vmm is it, and serves logs.sock itself. */
static int listen_logs(Serve *s)
{
	char path[108];
	int fd;

	snprintf(path, sizeof(path), "%s/logs.sock", s->vmm->run_dir);
	fd = unix_listen(path);
	if (fd < 0)
		return log_error_errno(fd, "cannot listen on %s: %m", path);
	return log_fanout_new(s->loop, s->io, fd, &s->logs);
}

static bool take_resume_reply(Serve *s, const char *line, size_t len);

static void on_event_line(LineConn *c, char *line, size_t len, void *userdata)
{
	Serve *s = userdata;
	GuestEvent ev;

	if (take_resume_reply(s, line, len) || reload_take_guest_reply(s->reload, line, len))
		return;
	if (guest_event_read(&s->guest, line, len, &ev) == GUEST_EVENT_REFUSED)
		return;
	if (ev.log_len > 0)
		log_info("guest: %.*s", (int)ev.log_len, line);
	if (ev.log_full)
		log_warning(
			"the guest sent more than %u bytes of events: later ones are not logged here",
			GUEST_LOG_BYTES_MAX);
	progress(s);
	/* Every boot event is evidence for berth attest; the guest replays them all on each
	 * new session, so the list restarts then (see on_mux_state()). */
	if (ev.first_dropped)
		log_warning(
			"the guest sent more than %d events or %u bytes of evidence: later ones are not kept as boot evidence",
			GUEST_EVIDENCE_EVENTS_MAX, GUEST_EVIDENCE_BYTES_MAX);
	switch (ev.kind) {
	case GUEST_EVENT_BOOT_COMPLETE:
		if (!s->booted) {
			s->booted = true;
			set_state(s, "running");
		}
		break;
	case GUEST_EVENT_BOOT_FAILED:
		set_state(s, "boot_failed");
		break;
	case GUEST_EVENT_POWER_OFF:
		s->powered_off = true;
		s->guest_exit_code = ev.exit_code;
		break;
	case GUEST_EVENT_REFUSED:
	case GUEST_EVENT_OTHER:
	case _GUEST_EVENT_KIND_MAX:
		break;
	}
}

static void on_event_close(LineConn *c, int error, void *userdata)
{
	Serve *s = userdata;

	if (s->events == c)
		s->events = NULL;
}

/*
 * A restored VM waits in the template's state until it is told what makes it its own
 * (berth-init's resume.h): this boot's id, the time, fresh entropy for its kernel's RNG,
 * and which of its disks are real. Sent first thing on the control port.
 */
static void send_resume(Serve *s)
{
	Vmm *v = s->vmm;
	_cleanup_(json_decrefp) json_t *req = NULL;
	_cleanup_free_ char *text = NULL;
	uint8_t entropy[64];
	char hex[2 * sizeof(entropy) + 1];
	struct timespec ts;

	if (!v->restore || s->resume_sent || !s->events)
		return;
	random_bytes(entropy, sizeof(entropy));
	for (size_t i = 0; i < sizeof(entropy); i++)
		snprintf(hex + 2 * i, 3, "%02x", entropy[i]);
	explicit_bzero(entropy, sizeof(entropy));
	clock_gettime(CLOCK_REALTIME, &ts);
	req = json_pack("{s:s, s:s, s:I, s:s, s:{s:b, s:b, s:I}}", "op", "resume", "bootId",
			v->boot_id, "realtimeNs",
			(json_int_t)ts.tv_sec * 1000000000 + (json_int_t)ts.tv_nsec, "entropy", hex,
			"disks", "state", v->state_fd >= 0, "boot", 1, "apps",
			(json_int_t)v->n_apps);
	if (v->state_fd >= 0)
		json_object_set_new(json_object_get(req, "disks"), "stateBytes",
				    json_integer((json_int_t)v->state_size));
	explicit_bzero(hex, sizeof(hex));
	text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	if (text && line_conn_write(s->events, text, strlen(text)) >= 0) {
		s->resume_sent = true;
		log_info("resuming the restored VM as boot %s", v->boot_id);
	} else
		fail_vm(s, "cannot send the restored VM its resume request");
	if (text)
		explicit_bzero(text, strlen(text));
}

/* The guest's answer to the resume request: nothing else runs in a VM that refused it. */
static bool take_resume_reply(Serve *s, const char *line, size_t len)
{
	_cleanup_(json_decrefp) json_t *o = NULL;
	char reason[512];

	if (!s->resume_sent || s->resumed || !memmem(line, len, "\"op\":\"resume\"", 13))
		return false;
	o = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o) ||
	    !streq(json_string_value(json_object_get(o, "op")) ?: "", "resume"))
		return false;
	if (json_is_true(json_object_get(o, "ok"))) {
		s->resumed = true;
		return true;
	}
	snprintf(reason, sizeof(reason), "the restored VM refused to resume: %.400s",
		 json_string_value(json_object_get(o, "error")) ?: "no reason given");
	fail_vm(s, reason);
	return true;
}

/* QEMU's standard error so far, when it ended before it was read (a failed restore). */
static void qemu_last_words(Vmm *v, char *buf, size_t size)
{
	ssize_t n = v->engine.stderr_fd >= 0 ? read(v->engine.stderr_fd, buf, size - 1) : -1;

	buf[n > 0 ? n : 0] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
}

/* The snapshot's memory, copied into the VM's while QEMU started: all of it, and the
 * bytes copied are the ones recorded. */
static int ram_loaded(Vmm *v, char *err, size_t errlen)
{
	int64_t t0 = now_ms();
	int r = measure_finish(&v->ram_load, t0 + RESTORE_TIMEOUT_MS);
	const MeasureResult *res = &v->ram_load.results[0];
	bool changed = false;

	if (r >= 0)
		r = res->error;
	/* Not hashed: nothing may have written to it while it was copied either. */
	if (r >= 0 && v->ram_by_record)
		changed = !hash_stamp_unchanged(v->ram_image_fd, &v->ram_stamp);
	else if (r >= 0 && streq(res->sha256, v->snapshot.ram_sha256)) {
		_cleanup_free_ char *dir = hash_record_dir();

		(void)hash_record_save(dir, v->ram_image_fd, &v->ram_stamp,
				       SNAPSHOT_RAM_RECORD_KIND, res->sha256);
	}
	v->ram_image_fd = safe_close(v->ram_image_fd);
	if (r < 0) {
		snprintf(err, errlen, "cannot load the snapshot's memory %.512s (%s)",
			 v->snapshot.ram_path, strerror(-r));
		return r;
	}
	if (changed) {
		snprintf(err, errlen, "the snapshot's memory %.512s changed while it was copied",
			 v->snapshot.ram_path);
		return -EBADMSG;
	}
	if (!v->ram_by_record && !streq(res->sha256, v->snapshot.ram_sha256)) {
		snprintf(err, errlen,
			 "the snapshot's memory %.512s failed its check (chunked sha256 %.12s; "
			 "recorded %.12s)",
			 v->snapshot.ram_path, res->sha256, v->snapshot.ram_sha256);
		return -EBADMSG;
	}
	log_info("the snapshot's memory: %llu MiB copied in %lld ms (waited %lld ms for it%s)",
		 (unsigned long long)(res->bytes >> 20), (long long)res->ms,
		 (long long)(now_ms() - t0),
		 v->ram_by_record ? "; not hashed, unchanged since it matched" : "");
	return 0;
}

/*
 * A restore: the snapshot's memory is copied into the VM's while QEMU starts and is told
 * to expect the devices' state; then QEMU reads that as we write it into its pipe, hashing
 * it, and waits, paused (-S). Let it run once it has all of it and all of it matched.
 */
static int resume_qemu(Vmm *v, char *err, size_t errlen)
{
	_cleanup_(qmp_freep) Qmp *q = NULL;
	_cleanup_(json_decrefp) json_t *caps = snapshot_capabilities(),
				       *incoming = json_pack("{s:s}", "uri", "fd:snapshot");
	_cleanup_close_ int file = -EBADF, pipe_r = -EBADF, pipe_w = -EBADF;
	int64_t deadline = now_ms() + RESTORE_TIMEOUT_MS;
	int p[2], r;

	if (!caps || !incoming)
		return -ENOMEM;
	/* QEMU is told to expect the stream while the memory is still being copied: it waits
	 * for the stream's first byte, which comes only once the memory is in place. */
	r = qmp_connect(v->qmp_path, RESTORE_TIMEOUT_MS, &q);
	if (r < 0) {
		snprintf(err, errlen, "cannot reach QEMU's QMP socket (%s)", strerror(-r));
		return r;
	}
	file = snapshot_open_stream(&v->snapshot, p, err, errlen);
	if (file < 0)
		return file;
	pipe_r = p[0];
	pipe_w = p[1];
	r = qmp_execute(q, "migrate-set-capabilities", caps, RESTORE_TIMEOUT_MS, NULL, err, errlen);
	/* The stream's read end goes to QEMU as a named descriptor; ours is closed so that the
	 * pipe breaks when QEMU stops reading. */
	if (r >= 0)
		r = qmp_send_fd(q, pipe_r, "snapshot", RESTORE_TIMEOUT_MS, err, errlen);
	pipe_r = safe_close(pipe_r);
	if (r >= 0)
		r = qmp_execute(q, "migrate-incoming", incoming, RESTORE_TIMEOUT_MS, NULL, err,
				errlen);
	if (r < 0)
		return r;
	/* QEMU reads the guest's memory as it loads the devices (virtio's rings): the memory,
	 * all of it and as recorded, comes before the stream. */
	r = ram_loaded(v, err, errlen);
	if (r < 0)
		return r;
	r = snapshot_stream(&v->snapshot, file, pipe_w, deadline, err, errlen);
	/* End of file for QEMU: it has all of the devices' state. */
	pipe_w = safe_close(pipe_w);
	if (r < 0)
		return r;
	/* The disks, measured while QEMU loaded the snapshot: the guest runs only on those
	 * that matched. */
	r = vmm_measure_finish(v, err, errlen);
	if (r < 0)
		return r;
	for (;;) {
		_cleanup_(json_decrefp) json_t *st = NULL;
		const char *status;

		r = qmp_execute(q, "query-status", NULL, RESTORE_TIMEOUT_MS, &st, err, errlen);
		if (r < 0)
			return r;
		status = json_string_value(json_object_get(st, "status")) ?: "";
		if (streq(status, "paused") || streq(status, "postmigrate") ||
		    streq(status, "prelaunch"))
			break;
		if (streq(status, "running"))
			return 0;
		if (!streq(status, "inmigrate") || now_ms() > deadline) {
			snprintf(err, errlen, "QEMU's restore ended as \"%s\"", status);
			return -EIO;
		}
		usleep(5 * 1000);
	}
	/* The template's kernel saw the state disk at the placeholder's size: tell it the real
	 * one (a config change it re-reads, and berth-init waits for). */
	if (v->state_fd >= 0) {
		_cleanup_(json_decrefp) json_t *args = json_pack("{s:s, s:I}", "device", "disk0",
								 "size", (json_int_t)v->state_size);

		r = args ? qmp_execute(q, "block_resize", args, RESTORE_TIMEOUT_MS, NULL, err,
				       errlen)
			 : -ENOMEM;
		if (r < 0)
			return r;
	}
	return qmp_execute(q, "cont", NULL, RESTORE_TIMEOUT_MS, NULL, err, errlen);
}

/* A start refused for a reason the user must act on: said in the log, and to whoever waits
 * for the VM (vmm_serve()), since the run dir and its log go with the VM. */
static int refuse_start(Vmm *v, const char *why)
{
	free(v->failure);
	v->failure = strdup(why);
	return log_error("%s", why);
}

/* Start QEMU; a restore that fails falls back to a cold boot, and the snapshot is removed
 * to be made again. */
static int start_engine(Vmm *v)
{
	char err[1024], why[2048], last[512];
	int status, r;

	r = vmm_measure_start(v);
	if (r < 0)
		return log_error_errno(r, "cannot start measuring the disks: %m");
	/* A restore's memory is copied beside QEMU's start, by a child of its own. */
	if (v->restore) {
		r = measure_start_copy(&v->ram_load, v->ram_image_fd, SNAPSHOT_RAM_CHUNK, v->ram_fd,
				       !v->ram_by_record);
		if (r < 0)
			return log_error_errno(r, "cannot start loading the snapshot's memory: %m");
	}
	/* A cold boot runs the guest as QEMU starts: its disks are checked first. */
	if (!v->restore && vmm_measure_finish(v, err, sizeof(err)) < 0)
		return refuse_start(v, err);
	r = v->engine.ops->start(&v->engine, &v->vm);
	if (r < 0)
		return log_error_errno(r, "cannot start %s: %m",
				       v->args.docker ? "the container" : "QEMU");
	if (!v->restore)
		return 0;
	r = resume_qemu(v, err, sizeof(err));
	if (r >= 0)
		return 0;
	(void)v->engine.ops->stop(&v->engine);
	(void)v->engine.ops->wait(&v->engine, &status);
	/* A disk that is not what its pin says is refused, restored or not: nothing of the
	 * guest ran, and a cold boot would run the same disk. */
	if (v->measured && vmm_measure_finish(v, err, sizeof(err)) < 0) {
		engine_done(&v->engine);
		return refuse_start(v, err);
	}
	qemu_last_words(v, last, sizeof(last));
	engine_done(&v->engine);
	engine_init(&v->engine, &engine_qemu_ops);
	snprintf(why, sizeof(why),
		 "the snapshot %.12s could not be restored (%s%s%s); it was removed, and "
		 "`berth vm install` makes a new one",
		 v->snapshot.sha256, err, last[0] ? "; QEMU: " : "", last);
	log_warning("booting cold: %s", why);
	snapshot_remove(v->snapshot.dir);
	/* The sockets the first QEMU made: the next one may create, not remove. */
	for (size_t i = 0; i < v->vm.n_ports; i++)
		(void)unlink(v->vm.ports[i].socket_path);
	if (v->qmp_path)
		(void)unlink(v->qmp_path);
	r = vmm_config_cold(v, why);
	if (r < 0)
		return r;
	if (vmm_measure_finish(v, err, sizeof(err)) < 0)
		return refuse_start(v, err);
	r = v->engine.ops->start(&v->engine, &v->vm);
	return r < 0 ? log_error_errno(r, "cannot start QEMU: %m") : 0;
}

static int open_event_stream(Serve *s)
{
	int sp[2], r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return -errno;
	r = line_conn_new(s->loop, sp[0], GUEST_EVENT_LINE_MAX, 64 * 1024, on_event_line,
			  on_event_close, s, &s->events);
	if (r < 0) {
		close(sp[1]);
		return r;
	}
	return mux_io_open_bridge(s->io, MUX_PORT_CONTROL, sp[1]);
}

static void send_shutdown(Serve *s)
{
	static const char req[] = "{\"op\":\"shutdown\"}";

	if (s->events)
		(void)line_conn_write(s->events, req, sizeof(req) - 1);
}

static void on_mux_state(MuxIo *io, MuxIoState state, int error, void *userdata)
{
	Serve *s = userdata;

	progress(s);
	switch (state) {
	case MUX_IO_READY:
		s->answered = true;
		log_info("guest channel up (epoch %u)", mux_get_epoch(mux_io_get_mux(io)));
		line_conn_free(s->events);
		s->events = NULL;
		guest_events_restart(&s->guest);
		if (open_event_stream(s) < 0)
			log_warning("cannot follow the guest's boot events");
		send_resume(s);
		log_fanout_session_ready(s->logs);
		if (s->stop_requested)
			send_shutdown(s);
		flush_pending(s);
		break;
	case MUX_IO_RESET:
	case MUX_IO_DISCONNECTED:
		if (!s->qemu_gone)
			log_warning("guest channel reset: %s", strerror(error < 0 ? -error : EIO));
		/* A resume request the reset may have lost goes again with the next session;
		 * berth-init answers a repeat for the same boot as done. */
		if (!s->resumed)
			s->resume_sent = false;
		break;
	case MUX_IO_IDLE:
	case MUX_IO_HANDSHAKE:
	case MUX_IO_HOST_ABSENT:
		break;
	}
}

static int try_connect_mux(EvSource *src, uint64_t usec, void *userdata)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	Serve *s = userdata;
	int fd;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->connect_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		(void)mux_io_set_transport(s->io, fd);
		return 0;
	}
	safe_close(fd);
	/* QEMU's exit is reported by on_qemu_gone_settled(), with its own reason. */
	if (s->qemu_gone)
		return 0;
	if (ev_time_now() > s->connect_deadline) {
		char reason[256];

		snprintf(reason, sizeof(reason), "QEMU never opened its channel socket %s",
			 s->connect_path);
		fail_vm(s, reason);
		return 0;
	}
	ev_source_set_time_relative(src, 20 * USEC_PER_MSEC);
	ev_source_set_enabled(src, EV_ONESHOT);
	return 0;
}

/* Decide how the VM ended once the last bytes QEMU forwarded (power_off among them) were
 * read: they may still sit in the transport socket when its pidfd fires. */
static int on_qemu_gone_settled(EvSource *src, uint64_t usec, void *userdata)
{
	Serve *s = userdata;
	bool clean = s->qemu_code == CLD_EXITED && s->qemu_status == 0;

	char reason[1024];

	/* A VM that did not power off cleanly: its console may say why (a panic). */
	if (!(s->powered_off && clean)) {
		read_console(s);
		line_split_flush(&s->console_split, on_console_line, s);
	}
	/* With an external channel client, the guest's events are not ours to see. */
	if ((s->vmm->args.channel_external || s->vmm->args.channel_connect) && clean)
		s->powered_off = true;
	if (s->failed) {
		s->exit_code = 1;
	} else if (s->stop_requested && !s->powered_off && !s->answered) {
		log_info("stopped before the guest answered on its channel");
		set_state(s, "stopped");
	} else if (s->powered_off && clean) {
		log_info("the guest powered off (exit code %d)", s->guest_exit_code);
		s->exit_code = s->guest_exit_code == 0 ? 0 : 1;
		set_state(s, s->exit_code == 0 ? "stopped" : "exited");
	} else {
		if (s->powered_off)
			snprintf(reason, sizeof(reason),
				 "QEMU ended with status %d after the guest powered off",
				 s->qemu_status);
		else if (s->qemu_code == CLD_EXITED)
			snprintf(reason, sizeof(reason),
				 "QEMU exited with status %d before the guest powered off%s%.400s",
				 s->qemu_status, s->qemu_last[0] ? ": " : "", s->qemu_last);
		else
			snprintf(reason, sizeof(reason),
				 "QEMU was killed by signal %d before the guest powered off",
				 s->qemu_status);
		fail_vm(s, reason);
		s->exit_code = 1;
	}
	ev_exit(s->loop, s->exit_code);
	return 0;
}

static int on_qemu_exit(EvSource *src, const siginfo_t *si, void *userdata)
{
	Serve *s = userdata;

	s->qemu_gone = true;
	log_fanout_finish(s->logs);
	s->qemu_code = si->si_code;
	s->qemu_status = si->si_status;
	s->vmm->engine.pid = 0;
	return ev_add_time_relative(s->loop, NULL, SETTLE_USEC, on_qemu_gone_settled, s);
}

static int on_stop_timeout(EvSource *src, uint64_t usec, void *userdata)
{
	Serve *s = userdata;

	log_warning("the guest did not power off in time; killing QEMU");
	s->vmm->engine.ops->stop(&s->vmm->engine);
	return 0;
}

static int on_signal(EvSource *src, const struct signalfd_siginfo *si, void *userdata)
{
	Serve *s = userdata;

	if (s->stop_requested)
		return 0;
	s->stop_requested = true;
	/* A guest that never answered on its channel cannot be asked: nothing of it ran
	 * that could lose a write, so it is killed now rather than after the timeout. */
	if (!s->answered && !s->vmm->args.channel_external) {
		log_info("signal %u: the guest never answered on its channel; stopping QEMU now",
			 si->ssi_signo);
		if (s->vmm->engine.pid > 0)
			(void)s->vmm->engine.ops->stop(&s->vmm->engine);
		return 0;
	}
	log_info("signal %u: asking the guest to shut down", si->ssi_signo);
	send_shutdown(s);
	(void)ev_add_time_relative(s->loop, &s->stop_timer, STOP_TIMEOUT_USEC, on_stop_timeout, s);
	return 0;
}

/* Returns false when the launcher is gone: nobody was told where this VM is. */
static bool report_ready(Serve *s, int ready_fd)
{
	_cleanup_free_ char *path = NULL, *text = NULL;
	bool taken;

	if (ready_fd < 0)
		return true;
	/* The launcher relays these lines: where to find the VM, then the verdict. */
	if (asprintf(&path, "%s/vm.json", s->vmm->run_dir) >= 0 &&
	    read_full_file(path, 1024 * 1024, &text, NULL) >= 0) {
		json_t *doc = json_loads(text, 0, NULL), *sandbox;
		char *line;

		line = json_dumps(json_pack("{s:s, s:O}", "event", "endpoints", "endpoints",
					    json_object_get(doc, "endpoints")),
				  JSON_COMPACT | JSON_SORT_KEYS);
		if (line)
			dprintf(ready_fd, "%s\n", line);
		free(line);
		sandbox = json_pack("{s:s, s:O}", "event", "host_sandbox", "hostSandbox",
				    json_object_get(doc, "hostSandbox"));
		line = sandbox ? json_dumps(sandbox, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(sandbox);
		if (line)
			dprintf(ready_fd, "%s\n", line);
		free(line);
		line = json_dumps(json_pack("{s:s, s:O, s:O}", "event", "vm_config", "vmConfig",
					    json_object_get(doc, "vmConfig"), "measurements",
					    json_object_get(doc, "measurements")),
				  JSON_COMPACT | JSON_SORT_KEYS);
		if (line)
			dprintf(ready_fd, "%s\n", line);
		free(line);
		json_decref(doc);
	}
	/* SIGPIPE is blocked: a launcher that died (killed while it waited, say) shows
	 * as EPIPE here. */
	taken = dprintf(ready_fd, "ok\n") == 3;
	close(ready_fd);
	return taken;
}

/*
 * QEMU runs and every socket exists: from here on berth-vmm keeps to its run dir and the
 * directory write_evidence() writes into (made now, since it cannot be made later).
 */
static int confine_self(Serve *s)
{
	_cleanup_free_ char *home = berth_home(), *evidence = NULL;
	const EgressAllowlist *allow = &s->vmm->args.egress.allow;
	uint16_t ports[2 * EGRESS_PATTERNS_MAX];
	const char *write_dirs[2] = {};
	HostEgress egress = {.ports = ports};
	int n;

	if (!home || asprintf(&evidence, "%s/runs/%s", home, s->vmm->boot_id) < 0)
		return log_error_errno(-ENOMEM, "out of memory");
	write_dirs[0] = evidence;
	if (allow->n == 0)
		return host_sandbox_apply_self(&s->vmm->host_sandbox, s->vmm->run_dir, write_dirs,
					       NULL);
	/* The dialer's TCP ports are exactly those its patterns can reach. */
	n = egress_allowlist_ports(allow, ports, ELEMENTSOF(ports), &egress.any_port);
	if (n < 0)
		return log_error_errno(n, "cannot list the egress ports: %m");
	egress.n_ports = (size_t)n;
	/* glibc loads its NSS modules on first use; the domain would forbid that later. */
	egress_resolver_warm_up();
	return host_sandbox_apply_self(&s->vmm->host_sandbox, s->vmm->run_dir, write_dirs, &egress);
}

/* A reload in place's step for the guest (reload.h): only once it has booted (and, when
 * restored, resumed). */
static int reload_send_guest(const char *line, size_t len, void *userdata)
{
	Serve *s = userdata;

	if (!s->events || !s->booted || s->failed || s->qemu_gone ||
	    (s->vmm->restore && !s->resumed))
		return -EAGAIN;
	return line_conn_write(s->events, line, len);
}

static void reload_changed(void *userdata)
{
	Serve *s = userdata;

	(void)vmm_write_state(s->vmm, s->state);
}

static int start(Serve *s)
{
	Vmm *v = s->vmm;
	MuxIoConfig cfg = {.mux.role = MUX_ROLE_HOST, .on_state = on_mux_state, .userdata = s};
	int r;

	r = ev_loop_new(&s->loop);
	if (r < 0)
		return r;
	r = mux_io_new(s->loop, &cfg, &s->io);
	if (r < 0)
		return r;
	/* Port 1026 always answers: without --egress-allow, every dial is denied, and the
	 * guest is told so. */
	r = egress_dialer_new(s->loop, s->io, &v->args.egress, &s->egress);
	if (r < 0)
		return log_error_errno(r, "cannot start the egress dialer: %m");
	r = v->args.channel_external ? 0 : add_listener(s, "control.sock", MUX_PORT_CONTROL);
	if (r >= 0 && !v->args.channel_external)
		r = listen_logs(s);
	if (r >= 0 && !v->args.channel_external) {
		ReloadHost host = {.loop = s->loop,
				   .vmm = v,
				   .send_guest = reload_send_guest,
				   .changed = reload_changed,
				   .userdata = s};

		r = reload_listen(&host, &s->reload);
		if (r < 0)
			log_error_errno(r, "cannot listen on %s/vmm.sock: %m", v->run_dir);
	}
	for (size_t i = 0; r >= 0 && !v->args.channel_external && i < v->n_apps; i++) {
		char file[32];

		snprintf(file, sizeof(file), "rpc-%zu.sock", i);
		r = add_listener(s, file, MUX_PORT_RPC_BASE + (uint32_t)i);
	}
	/* A published port is one more stream of the channel, like an app's RPC: the guest
	 * relays it to its own 127.0.0.1 (berth-init's publish.c). */
	for (size_t i = 0; r >= 0 && !v->args.channel_external && i < v->args.n_publish; i++) {
		char file[32];

		snprintf(file, sizeof(file), "publish-%u.sock", v->args.publish[i]);
		r = add_listener(s, file, MUX_PORT_PUBLISH_BASE + (uint32_t)i);
	}
	if (r < 0)
		return r;
	(void)ev_add_signal(s->loop, NULL, SIGTERM, on_signal, s);
	(void)ev_add_signal(s->loop, NULL, SIGINT, on_signal, s);

	/* QEMU listens on its socket for the port; in a container, berth-init listens in the
	 * directory bound there (engine-docker.c). */
	snprintf(s->mux_path, sizeof(s->mux_path),
		 v->args.docker ? "%s/guest/mux.sock" : "%s/qemu-mux.sock", v->run_dir);
	v->vm.ports[0] = (VmPort){"berth.mux", s->mux_path};
	s->connect_path = s->mux_path;
	if (v->args.channel_connect) {
		/* Testing: the program listening there plays the guest; QEMU's own socket
		 * stays unconnected. */
		log_warning(
			"the channel goes to %s, not to the VM (--channel-connect, testing only)",
			v->args.channel_connect);
		s->connect_path = v->args.channel_connect;
	}
	v->vm.n_ports = 1;
	set_state(s, "starting");
	r = start_engine(v);
	if (r < 0)
		return r;
	if (v->args.docker)
		log_info("container %s started (docker client pid %d, image %s)", v->container_name,
			 (int)v->engine.pid, v->docker_image.id);
	else
		log_info("QEMU started (pid %d, %s: %s)", (int)v->engine.pid,
			 accel_to_string(v->vm.accel), v->accel.reason);
	s->qemu_tail = linebuf_new(QEMU_TAIL_BYTES);
	if (!s->qemu_tail)
		return log_error_errno(-ENOMEM, "out of memory");
	r = ev_add_io(s->loop, NULL, v->engine.stderr_fd, EPOLLIN, on_qemu_stderr, s);
	if (r < 0)
		return log_error_errno(r, "cannot read QEMU's standard error: %m");
	v->engine.stderr_fd = -EBADF; /* the loop owns it now */
	/* The console comes on a pipe, and berth-vmm keeps what fits in console.log. */
	s->console_out =
		v->args.console_stderr
			? fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3)
			: open(v->console_path,
			       O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOCTTY,
			       0600);
	if (s->console_out < 0)
		return log_error_errno(errno, "cannot open %s: %m",
				       v->args.console_stderr ? "standard error" : v->console_path);
	s->console_fd = TAKE_FD(v->engine.console_fd);
	if (s->console_fd >= 0) {
		r = RET_NERRNO(fcntl(s->console_fd, F_SETFL, O_NONBLOCK));
		if (r >= 0)
			r = ev_add_io(s->loop, NULL, s->console_fd, EPOLLIN, on_console, s);
		if (r < 0)
			return log_error_errno(r, "cannot read the guest console: %m");
	}
	progress(s);
	r = ev_add_time_relative(s->loop, &s->watch_timer, WATCH_USEC, on_watch, s);
	if (r < 0)
		return r;
	r = confine_self(s);
	if (r < 0)
		return r;
	set_state(s, "booting");
	r = ev_add_child_pidfd(s->loop, NULL, TAKE_FD(v->engine.pidfd), on_qemu_exit, s);
	if (r < 0)
		return r;
	if (v->args.channel_external)
		return 0;
	s->connect_deadline = ev_time_now() + CONNECT_TIMEOUT_USEC;
	return ev_add_time_relative(s->loop, &s->connect_timer, 20 * USEC_PER_MSEC, try_connect_mux,
				    s);
}

/*
 * What berth attest needs once the VM is gone: vm.json (measurements, configuration, host
 * sandbox, share digests) and the guest's events (kernel, LSMs, policies, agent-init
 * reports, power-off), in ~/.berth/runs/<boot id>/evidence.json (0600).
 */
static void write_evidence(Serve *s)
{
	_cleanup_free_ char *dir = NULL, *path = NULL, *text = NULL, *home = berth_home();
	_cleanup_(json_decrefp) json_t *doc = NULL;
	json_t *vm = vm_json_load(s->vmm->run_dir);

	if (!home || asprintf(&dir, "%s/runs/%s", home, s->vmm->boot_id) < 0 ||
	    asprintf(&path, "%s/evidence.json", dir) < 0 || mkdir_p(dir, 0700) < 0) {
		json_decref(vm);
		log_warning("cannot record the boot evidence of %s", s->vmm->boot_id);
		return;
	}
	doc = json_pack("{s:i, s:s, s:s, s:o, s:O, s:s, s:I}", "schema", 1, "kind",
			"berth.boot-evidence", "bootId", s->vmm->boot_id, "vm",
			vm ? vm : json_null(), "events", s->guest.evidence, "final", s->state,
			"droppedEvents", (json_int_t)s->guest.dropped);
	text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
	if (!text || write_file_atomic(path, text, strlen(text), 0600) < 0)
		log_warning("cannot write %s", path);
	else
		log_info("boot evidence in %s", path);
}

int vmm_serve(Vmm *v, int ready_fd)
{
	Serve s = {.vmm = v,
		   .guest.evidence = json_array(),
		   .console_fd = -EBADF,
		   .console_out = -EBADF};
	sigset_t pipe_set;
	int r;

	/* Writes to a reader that went away fail with EPIPE instead of killing us (and QEMU
	 * with us, by its parent-death signal); QEMU gets an empty mask at exec. */
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	(void)sigprocmask(SIG_BLOCK, &pipe_set, NULL);
	r = start(&s);
	if (r < 0) {
		if (ready_fd >= 0) {
			if (v->failure)
				dprintf(ready_fd, "error: %s\n", v->failure);
			else
				dprintf(ready_fd, "error: see %s\n", v->log_path);
			close(ready_fd);
		}
		if (v->engine.pid > 0)
			v->engine.ops->stop(&v->engine);
		if (v->args.docker)
			engine_docker_forget_boot_file(v->host_dir);
		rundir_remove(v->run_dir);
		return 1;
	}
	if (!report_ready(&s, ready_fd)) {
		/* Whoever started this VM gave up on it before it was handed over. */
		s.stop_requested = true;
		log_warning("the command that started this VM went away; stopping it");
		if (v->engine.pid > 0)
			(void)v->engine.ops->stop(&v->engine);
	}
	r = ev_loop(s.loop);
	if (v->args.docker)
		engine_docker_forget_boot_file(v->host_dir);
	write_evidence(&s);
	guest_events_done(&s.guest);
	for (size_t i = 0; i < s.n_pending; i++)
		close(s.pending[i].fd);
	reload_free(s.reload);
	line_conn_free(s.events);
	linebuf_free(s.qemu_tail);
	safe_close(s.console_fd);
	safe_close(s.console_out);
	log_fanout_free(s.logs);
	egress_dialer_free(s.egress);
	mux_io_free(s.io);
	ev_loop_free(s.loop);
	engine_done(&v->engine);
	/* A VM that stopped cleanly leaves nothing behind; anything else leaves its run dir,
	 * with vm.json and vmm.log saying what happened, for the next command to report. */
	if (s.exit_code == 0 && streq(s.state, "stopped"))
		rundir_remove(v->run_dir);
	return r < 0 ? 1 : s.exit_code;
}
