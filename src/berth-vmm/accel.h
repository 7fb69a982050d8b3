/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>

#include "artifacts.h"
#include "engine.h"
#include "host-sandbox.h"

/*
 * Which accelerator a VM runs under, chosen by booting, not by looking.
 *
 * A /dev/kvm that opens says nothing about whether KVM can run the guest, or runs it
 * faster than emulation: a nested, paravirtual KVM may open fine and then die on the
 * guest's first cmpxchg16b, or boot it thirty times slower than TCG. So "auto" boots the
 * pinned kernel and initramfs with the probe flag (the initramfs prints a line from
 * userspace and powers off) under TCG, then under KVM with TCG's time as its deadline,
 * and takes KVM only when it got there, and got there first. The verdict is cached in
 * ~/.berth/vm/accel.json for as long as its key holds: the host's boot id, the QEMU
 * program and version, the kernel and initramfs pins and whether /dev/kvm opens.
 */

typedef enum AccelMode {
	ACCEL_MODE_AUTO,
	ACCEL_MODE_KVM,
	ACCEL_MODE_TCG,
	_ACCEL_MODE_MAX,
	_ACCEL_MODE_INVALID = -22,
} AccelMode;

/* The line the initramfs prints under berth.probe=1 (vm/kernel/initramfs-init). */
#define ACCEL_PROBE_MARKER "berth-probe: userspace up"
/* How long the first probe (TCG) may take before the host counts as unable to boot. */
#define ACCEL_PROBE_DEADLINE_MS (60 * 1000)

typedef struct AccelTrial {
	bool usable; /* could be tried here (KVM: /dev/kvm opens read-write) */
	bool tried;
	bool booted;   /* the probe reached the guest's userspace */
	bool outpaced; /* cut off at the other accelerator's time: slower, not broken */
	long long ms;  /* QEMU's start to the probe line, or to the failure */
	char why[384]; /* when not booted: why (or why it was not tried) */
} AccelTrial;

typedef struct AccelVerdict {
	AccelTrial trial[_ACCEL_MAX];
	Accel best;	    /* _ACCEL_INVALID when nothing booted */
	char summary[1024]; /* one sentence: what was seen, and what auto uses */
	char probed_at[40];
	bool cached; /* read from accel.json rather than probed now */
} AccelVerdict;

/* What a probe boots, and with what. */
typedef struct AccelHost {
	const Artifacts *artifacts;
	const char *qemu; /* the QEMU program */
	const HostSandbox *host_sandbox;
	const char *cache_path; /* ~/.berth/vm/accel.json */
	long tsc_khz;		/* the TSC hint TCG needs (tsc.h); 0: measured when needed */
} AccelHost;

typedef struct AccelChoice {
	AccelMode mode;
	char source[320]; /* who asked: "--accel", "BERTH_ACCEL", "vm.accel in …", "the default" */
	Accel accel;
	char reason[1400];
	bool have_verdict;
	AccelVerdict verdict;
} AccelChoice;

AccelMode accel_mode_from_string(const char *s);

/*
 * accel_verdict() - the probe's verdict for this host: from the cache when its key still
 * holds and @reprobe is false, else by probing now (and caching the result).
 * Concurrent callers probe once: the cache is locked while a probe runs.
 * Returns 0, or -errno when the probe could not be run at all (@ret->summary says why).
 */
int accel_verdict(AccelHost *h, bool reprobe, AccelVerdict *ret);

/*
 * accel_choose() - the accelerator for a VM. @mode and @source come from the usual
 * precedence (flag > BERTH_ACCEL > vm.accel > auto). "tcg" needs no probe. "kvm" and
 * "auto" consult the verdict. An explicit "kvm" that cannot boot is an error, never a
 * silent fallback; so is an "auto" under which nothing boots.
 * Returns 0, or -errno with the reason in @err.
 */
int accel_choose(AccelHost *h, AccelMode mode, const char *source, AccelChoice *ret, char *err,
		 size_t errlen);

json_t *accel_choice_to_json(const AccelChoice *c);

/*
 * accel_settings() - resolve --accel and --qemu (@accel_flag, @qemu_flag: NULL when not
 * given) through BERTH_ACCEL / BERTH_QEMU, ~/.berth/config.json's vm.accel / vm.qemu and
 * the defaults ("auto", qemu-system-x86_64 in $PATH).
 * Returns 0 with the mode, who set it (@ret_source) and the QEMU program (malloc()ed), or
 * -EINVAL with the reason in @err (a bad value, a bad config file).
 */
int accel_settings(const char *accel_flag, const char *qemu_flag, AccelMode *ret_mode,
		   char *ret_source, size_t source_size, char **ret_qemu, char *err, size_t errlen);
