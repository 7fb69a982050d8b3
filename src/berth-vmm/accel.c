/* SPDX-License-Identifier: Apache-2.0 */
/* Choosing the accelerator by a probe boot, and caching the verdict (accel.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accel.h"
#include "config.h"
#include "exec-util.h"
#include "fileio.h"
#include "line-split.h"
#include "log.h"
#include "macros.h"
#include "qemu-identity.h"
#include "time-util.h"
#include "tsc.h"
#include "vm-diag.h"

#define ACCEL_CACHE_SCHEMA 1
#define ACCEL_CACHE_MAX (64 * 1024)

static const char *const mode_names[_ACCEL_MODE_MAX] = {
	[ACCEL_MODE_AUTO] = "auto",
	[ACCEL_MODE_KVM] = "kvm",
	[ACCEL_MODE_TCG] = "tcg",
};

AccelMode accel_mode_from_string(const char *s)
{
	for (AccelMode m = 0; m < _ACCEL_MODE_MAX; m++)
		if (s && streq(s, mode_names[m]))
			return m;
	return _ACCEL_MODE_INVALID;
}

static const char *accel_mode_to_string(AccelMode m)
{
	return m >= 0 && m < _ACCEL_MODE_MAX ? mode_names[m] : NULL;
}

/* Whether this user can open /dev/kvm read-write; @why gets the error when not. */
static bool accel_kvm_usable(char *why, size_t size)
{
	int fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		snprintf(why, size, "/dev/kvm: %s", strerror(errno));
		return false;
	}
	close(fd);
	why[0] = '\0';
	return true;
}

/* --- the cache key ------------------------------------------------------------------------ */

static json_t *cache_key(const AccelHost *h, bool kvm_usable)
{
	_cleanup_free_ char *boot_id = NULL;
	QemuIdentity q;

	if (read_full_file("/proc/sys/kernel/random/boot_id", 128, &boot_id, NULL) < 0)
		boot_id = NULL;
	else
		boot_id[strcspn(boot_id, "\n")] = '\0';
	qemu_identify(h->qemu, &q);
	return json_pack("{s:s?, s:s, s:s, s:s, s:s, s:b}", "bootId", boot_id, "qemu", q.path,
			 "qemuVersion", q.version, "kernelSha256",
			 h->artifacts->a[ARTIFACT_KERNEL].sha256, "initrdSha256",
			 h->artifacts->a[ARTIFACT_INITRD].sha256, "kvmUsable", kvm_usable);
}

/* --- JSON ---------------------------------------------------------------------------------- */

static json_t *trial_to_json(const AccelTrial *t)
{
	json_t *o = json_pack("{s:b, s:b, s:b}", "usable", t->usable, "tried", t->tried, "booted",
			      t->booted);

	if (t->tried)
		json_object_set_new(o, "ms", json_integer(t->ms));
	if (t->outpaced)
		json_object_set_new(o, "outpaced", json_true());
	if (t->why[0])
		json_object_set_new(o, "why", json_string(t->why));
	return o;
}

static void trial_from_json(json_t *o, AccelTrial *t)
{
	*t = (AccelTrial){
		.usable = json_is_true(json_object_get(o, "usable")),
		.tried = json_is_true(json_object_get(o, "tried")),
		.booted = json_is_true(json_object_get(o, "booted")),
		.outpaced = json_is_true(json_object_get(o, "outpaced")),
		.ms = json_integer_value(json_object_get(o, "ms")),
	};
	snprintf(t->why, sizeof(t->why), "%s", json_string_value(json_object_get(o, "why")) ?: "");
}

static json_t *accel_verdict_to_json(const AccelVerdict *v)
{
	json_t *trials = json_object();

	for (Accel a = 0; a < _ACCEL_MAX; a++)
		json_object_set_new(trials, accel_to_string(a), trial_to_json(&v->trial[a]));
	return json_pack("{s:s?, s:s, s:s, s:b, s:o}", "best", accel_to_string(v->best), "summary",
			 v->summary, "probedAt", v->probed_at, "cached", v->cached, "trials",
			 trials);
}

json_t *accel_choice_to_json(const AccelChoice *c)
{
	json_t *o =
		json_pack("{s:s?, s:s, s:s?, s:s}", "mode", accel_mode_to_string(c->mode), "source",
			  c->source, "chosen", accel_to_string(c->accel), "reason", c->reason);

	if (c->have_verdict)
		json_object_set_new(o, "probe", accel_verdict_to_json(&c->verdict));
	return o;
}

static int verdict_from_json(json_t *doc, AccelVerdict *v)
{
	json_t *trials = json_object_get(doc, "trials");
	const char *best = json_string_value(json_object_get(doc, "best"));

	if (!json_is_object(trials) || !json_is_string(json_object_get(doc, "summary")))
		return -EBADMSG;
	*v = (AccelVerdict){.best = best ? accel_from_string(best) : _ACCEL_INVALID,
			    .cached = true};
	if (best && v->best < 0)
		return -EBADMSG;
	for (Accel a = 0; a < _ACCEL_MAX; a++)
		trial_from_json(json_object_get(trials, accel_to_string(a)), &v->trial[a]);
	snprintf(v->summary, sizeof(v->summary), "%s",
		 json_string_value(json_object_get(doc, "summary")));
	snprintf(v->probed_at, sizeof(v->probed_at), "%s",
		 json_string_value(json_object_get(doc, "probedAt")) ?: "");
	return 0;
}

/* --- one probe boot ------------------------------------------------------------------------ */

typedef struct ProbeRun {
	AccelTrial *t;
	long long t0;
	bool done;
	char last_stderr[256];
} ProbeRun;

static void on_probe_console(const char *line, size_t len, void *userdata)
{
	ProbeRun *p = userdata;

	if (p->done)
		return;
	if (strstr(line, ACCEL_PROBE_MARKER)) {
		p->t->booted = true;
		p->t->ms = now_ms() - p->t0;
		p->done = true;
	} else if (vm_diag_console_panic(line)) {
		snprintf(p->t->why, sizeof(p->t->why), "the guest kernel panicked: %.300s", line);
		p->done = true;
	}
}

static void on_probe_stderr(const char *line, size_t len, void *userdata)
{
	ProbeRun *p = userdata;
	char reason[256];

	if (len > 0)
		snprintf(p->last_stderr, sizeof(p->last_stderr), "%s", line);
	if (p->done || !vm_diag_qemu_line(line, reason, sizeof(reason)))
		return;
	snprintf(p->t->why, sizeof(p->t->why), "%s", reason);
	p->done = true;
}

/* Read what is there on @fd into @split; false at end of stream. */
static bool drain(int fd, LineSplit *split, line_split_cb_t cb, ProbeRun *p)
{
	char buf[4096];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n > 0) {
		line_split_feed(split, buf, (size_t)n, cb, p);
		return true;
	}
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return true;
	line_split_flush(split, cb, p);
	return false;
}

/*
 * Boot the pinned kernel and initramfs under @accel until the initramfs reports from
 * userspace, QEMU says the VM is dead, or @deadline_ms passes; then kill QEMU.
 */
static void probe_boot(AccelHost *h, Accel accel, long long deadline_ms, AccelTrial *t)
{
	VmConfig cfg = {
		.artifacts = h->artifacts,
		.cpus = 2,
		.mem_mib = 512,
		.accel = accel,
		.ram_fd = -EBADF,
		.qemu_binary = h->qemu,
		.extra_cmdline = "berth.probe=1",
		.host_sandbox = h->host_sandbox,
	};
	LineSplit con = {}, err = {};
	ProbeRun p = {.t = t};
	Engine e;
	int r, status;

	t->tried = true;
	if (accel == ACCEL_TCG) {
		if (h->tsc_khz <= 0)
			h->tsc_khz = tsc_measure_khz();
		if (h->tsc_khz <= 0) {
			snprintf(t->why, sizeof(t->why), "cannot measure the host TSC rate: %s",
				 strerror((int)-h->tsc_khz));
			return;
		}
		cfg.tsc_khz = h->tsc_khz;
	}
	engine_init(&e, &engine_qemu_ops);
	p.t0 = now_ms();
	r = e.ops->start(&e, &cfg);
	if (r < 0) {
		snprintf(t->why, sizeof(t->why), "cannot start QEMU (%s): %s", h->qemu,
			 strerror(-r));
		engine_done(&e);
		return;
	}
	while (!p.done) {
		struct pollfd fds[3] = {{.fd = e.console_fd, .events = POLLIN},
					{.fd = e.stderr_fd, .events = POLLIN},
					{.fd = e.pidfd, .events = POLLIN}};
		long long left = p.t0 + deadline_ms - now_ms();

		if (left <= 0) {
			t->ms = deadline_ms;
			snprintf(t->why, sizeof(t->why),
				 "the guest did not reach userspace within %lld ms", deadline_ms);
			break;
		}
		if (poll(fds, 3, (int)left) < 0 && errno != EINTR)
			break;
		if ((fds[0].revents & (POLLIN | POLLHUP)) &&
		    !drain(e.console_fd, &con, on_probe_console, &p))
			fds[0].fd = -1;
		if ((fds[1].revents & (POLLIN | POLLHUP)) &&
		    !drain(e.stderr_fd, &err, on_probe_stderr, &p))
			fds[1].fd = -1;
		if (!p.done && (fds[2].revents & POLLIN)) {
			/* Gone: take what it said last, then report how it ended. */
			while (drain(e.stderr_fd, &err, on_probe_stderr, &p) && !p.done)
				;
			while (drain(e.console_fd, &con, on_probe_console, &p) && !p.done)
				;
			if (!p.done)
				snprintf(t->why, sizeof(t->why),
					 "QEMU ended before the guest reached userspace%s%s",
					 p.last_stderr[0] ? ": " : "", p.last_stderr);
			break;
		}
	}
	if (!t->booted)
		t->ms = t->ms ?: now_ms() - p.t0;
	(void)e.ops->stop(&e);
	(void)e.ops->wait(&e, &status);
	engine_done(&e);
}

/* --- the verdict ------------------------------------------------------------------------- */

static void summarise(AccelVerdict *v)
{
	const AccelTrial *tcg = &v->trial[ACCEL_TCG], *kvm = &v->trial[ACCEL_KVM];

	if (kvm->booted && (!tcg->booted || kvm->ms < tcg->ms))
		v->best = ACCEL_KVM;
	else if (tcg->booted)
		v->best = ACCEL_TCG;
	else
		v->best = _ACCEL_INVALID;

	if (v->best == ACCEL_KVM)
		snprintf(v->summary, sizeof(v->summary),
			 "KVM booted the probe in %lld ms%s%lld%s; using KVM", kvm->ms,
			 tcg->booted ? ", emulation in " : "", tcg->booted ? tcg->ms : 0,
			 tcg->booted ? " ms" : "");
	else if (v->best == ACCEL_TCG && !kvm->usable)
		snprintf(
			v->summary, sizeof(v->summary),
			"no usable KVM (%s); using TCG emulation, which booted the probe in %lld ms",
			kvm->why, tcg->ms);
	else if (v->best == ACCEL_TCG && kvm->outpaced)
		snprintf(
			v->summary, sizeof(v->summary),
			"KVM present, but its boot took longer than emulation's %lld ms; using TCG "
			"emulation",
			tcg->ms);
	else if (v->best == ACCEL_TCG && kvm->booted)
		snprintf(v->summary, sizeof(v->summary),
			 "KVM present, but its boot took %lld ms against %lld ms under emulation; "
			 "using TCG emulation",
			 kvm->ms, tcg->ms);
	else if (v->best == ACCEL_TCG)
		snprintf(v->summary, sizeof(v->summary),
			 "KVM present, but its boot failed (%s); using TCG emulation, which booted "
			 "the probe in %lld ms",
			 kvm->why, tcg->ms);
	else
		snprintf(v->summary, sizeof(v->summary),
			 "no accelerator booted the pinned kernel: TCG: %s; KVM: %s", tcg->why,
			 kvm->usable   ? kvm->why
			 : kvm->why[0] ? kvm->why
				       : "not usable");
}

static void probe_all(AccelHost *h, AccelVerdict *v)
{
	AccelTrial *tcg = &v->trial[ACCEL_TCG], *kvm = &v->trial[ACCEL_KVM];

	*v = (AccelVerdict){.best = _ACCEL_INVALID};
	now_rfc3339(v->probed_at, sizeof(v->probed_at), false);
	/* TCG first: it always exists, warms the page cache for both, and its time is the
	 * bar KVM has to beat, so KVM never gets longer than that. */
	tcg->usable = true;
	log_info("probing the accelerators: a boot under TCG, then one under KVM (once per host "
		 "boot)");
	probe_boot(h, ACCEL_TCG, ACCEL_PROBE_DEADLINE_MS, tcg);
	kvm->usable = accel_kvm_usable(kvm->why, sizeof(kvm->why));
	if (kvm->usable) {
		long long deadline = tcg->booted ? tcg->ms : ACCEL_PROBE_DEADLINE_MS;

		probe_boot(h, ACCEL_KVM, deadline, kvm);
		if (!kvm->booted && tcg->booted && kvm->ms >= deadline &&
		    strstr(kvm->why, "did not reach userspace")) {
			kvm->outpaced = true;
			snprintf(kvm->why, sizeof(kvm->why),
				 "no userspace within %lld ms, the time emulation took", deadline);
		}
	}
	summarise(v);
}

static int cache_lock(const char *cache_path)
{
	_cleanup_free_ char *lock = NULL, *dir = strdup(cache_path);
	int fd;

	if (!dir || asprintf(&lock, "%s.lock", cache_path) < 0)
		return -ENOMEM;
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	(void)mkdir_p(dir, 0700);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

static int cache_read(const char *path, json_t *key, AccelVerdict *v)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_(json_decrefp) json_t *doc = NULL;
	int r = read_full_file(path, ACCEL_CACHE_MAX, &text, NULL);

	if (r < 0)
		return r;
	doc = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(doc) ||
	    json_integer_value(json_object_get(doc, "schema")) != ACCEL_CACHE_SCHEMA)
		return -EBADMSG;
	if (!json_equal(json_object_get(doc, "key"), key))
		return -ESTALE;
	return verdict_from_json(doc, v);
}

static void cache_write(const char *path, json_t *key, const AccelVerdict *v)
{
	_cleanup_(json_decrefp) json_t *doc = accel_verdict_to_json(v);
	_cleanup_free_ char *text = NULL;

	json_object_set_new(doc, "schema", json_integer(ACCEL_CACHE_SCHEMA));
	json_object_set(doc, "key", key);
	json_object_del(doc, "cached");
	text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
	if (!text || write_file_atomic(path, text, strlen(text), 0600) < 0)
		log_warning("cannot cache the accelerator verdict in %s; the next VM probes again",
			    path);
}

int accel_verdict(AccelHost *h, bool reprobe, AccelVerdict *ret)
{
	_cleanup_(json_decrefp) json_t *key = NULL;
	_cleanup_close_ int lock = -EBADF;
	char why[128];
	int r;

	key = cache_key(h, accel_kvm_usable(why, sizeof(why)));
	if (!key)
		return -ENOMEM;
	lock = cache_lock(h->cache_path);
	if (lock < 0)
		log_warning_errno(lock, "cannot lock %s.lock (%m); probing without it",
				  h->cache_path);
	if (!reprobe) {
		r = cache_read(h->cache_path, key, ret);
		if (r >= 0)
			return 0;
		if (r == -ESTALE)
			log_info("the accelerator verdict in %s is for another host boot, QEMU or "
				 "kernel; probing again",
				 h->cache_path);
	}
	probe_all(h, ret);
	cache_write(h->cache_path, key, ret);
	return 0;
}

int accel_choose(AccelHost *h, AccelMode mode, const char *source, AccelChoice *ret, char *err,
		 size_t errlen)
{
	const AccelTrial *kvm;
	char why[128];
	int r;

	*ret = (AccelChoice){.mode = mode, .accel = _ACCEL_INVALID};
	snprintf(ret->source, sizeof(ret->source), "%s", source);
	switch (mode) {
	case ACCEL_MODE_TCG:
		ret->accel = ACCEL_TCG;
		snprintf(ret->reason, sizeof(ret->reason), "TCG emulation, as %s asks", source);
		return 0;
	case ACCEL_MODE_KVM:
		if (!accel_kvm_usable(why, sizeof(why))) {
			snprintf(err, errlen,
				 "KVM was asked for (%s), but %s; let this user open /dev/kvm "
				 "read-write, or use --accel auto or tcg",
				 source, why);
			return -ENODEV;
		}
		break;
	case ACCEL_MODE_AUTO:
		break;
	case _ACCEL_MODE_MAX:
	case _ACCEL_MODE_INVALID:
		snprintf(err, errlen, "unknown accelerator mode");
		return -EINVAL;
	}
	r = accel_verdict(h, false, &ret->verdict);
	if (r < 0) {
		snprintf(err, errlen, "cannot probe the accelerators: %s", strerror(-r));
		return r;
	}
	ret->have_verdict = true;
	kvm = &ret->verdict.trial[ACCEL_KVM];
	if (mode == ACCEL_MODE_KVM) {
		/* Slower than emulation is the user's call; not booting at all is not. */
		if (!kvm->booted && !kvm->outpaced) {
			snprintf(
				err, errlen,
				"KVM was asked for (%s), but it cannot boot the pinned kernel on this "
				"host: %s (probed %s); " VM_DIAG_KVM_HINT,
				source, kvm->why, ret->verdict.probed_at);
			return -ENODEV;
		}
		ret->accel = ACCEL_KVM;
		if (ret->verdict.best == ACCEL_KVM)
			snprintf(ret->reason, sizeof(ret->reason), "KVM, as %s asks", source);
		else
			snprintf(ret->reason, sizeof(ret->reason),
				 "KVM, as %s asks, although its probe boot was slower than "
				 "emulation's %lld ms here",
				 source, ret->verdict.trial[ACCEL_TCG].ms);
		return 0;
	}
	if (ret->verdict.best < 0) {
		snprintf(err, errlen, "%s; see 'berth doctor --sandbox vm'", ret->verdict.summary);
		return -ENODEV;
	}
	ret->accel = ret->verdict.best;
	snprintf(ret->reason, sizeof(ret->reason), "auto: %s", ret->verdict.summary);
	return 0;
}

int accel_settings(const char *accel_flag, const char *qemu_flag, AccelMode *ret_mode,
		   char *ret_source, size_t source_size, char **ret_qemu, char *err, size_t errlen)
{
	_cleanup_free_ char *described = NULL;
	BerthConfig cfg = {};
	ConfigError cerr = {};
	ConfigSource source;
	const char *mode, *qemu;
	int r;

	r = config_load(NULL, &cfg, &cerr);
	if (r < 0) {
		config_error_format(&cerr, err, errlen);
		return -EINVAL;
	}
	mode = config_get(&cfg, CONFIG_ACCEL, accel_flag, &source);
	described = config_source_describe(&cfg, CONFIG_ACCEL, source);
	*ret_mode = accel_mode_from_string(mode);
	if (*ret_mode < 0) {
		snprintf(err, errlen, "%s is \"%s\": use auto, kvm or tcg",
			 described ? described : "the accelerator", mode);
		config_done(&cfg);
		return -EINVAL;
	}
	snprintf(ret_source, source_size, "%s",
		 source == CONFIG_SOURCE_DEFAULT ? "the default"
		 : described			 ? described
						 : "?");
	/* An absolute path from here on: execvp() would also try the current directory (an
	 * app's folder, for berth dev) when $PATH has a relative entry. */
	qemu = config_get(&cfg, CONFIG_QEMU, qemu_flag, NULL);
	*ret_qemu = qemu_resolve_program(qemu);
	if (!*ret_qemu)
		snprintf(err, errlen,
			 "cannot find the QEMU program \"%s\"%s: install QEMU (qemu-system-x86) or "
			 "point BERTH_QEMU or vm.qemu at it",
			 qemu, strchr(qemu, '/') ? "" : " in the absolute entries of PATH");
	config_done(&cfg);
	return *ret_qemu ? 0 : -EINVAL;
}
