/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * Does this kernel's Landlock actually refuse what a ruleset forbids? Reading the ABI
 * version only says the syscalls exist; the probe below tries a forbidden write.
 */

typedef enum LandlockSupport {
	LANDLOCK_UNSUPPORTED,		/* no syscalls, disabled at boot, or the probe failed */
	LANDLOCK_PRESENT_NOT_ENFORCING, /* a ruleset was accepted but the write went through */
	LANDLOCK_ENFORCING,		/* the forbidden write was refused */
	_LANDLOCK_SUPPORT_MAX,
	_LANDLOCK_SUPPORT_INVALID = -22,
} LandlockSupport;

typedef struct LandlockProbe {
	int abi; /* LANDLOCK_CREATE_RULESET_VERSION, 0 when there is none */
	LandlockSupport support;
	int error; /* errno behind LANDLOCK_UNSUPPORTED (ENOSYS, EOPNOTSUPP…), else 0 */
	const char *failed_step; /* which step gave @error: "create ruleset", "restrict self"… */
} LandlockProbe;

/*
 * landlock_probe() - find out whether Landlock enforces on this host.
 * Makes a directory under $TMPDIR (or /tmp) and forks a child that opens it, creates a
 * ruleset handling only LANDLOCK_ACCESS_FS_WRITE_FILE and LANDLOCK_ACCESS_FS_MAKE_REG with
 * no rules, restricts itself and tries to create a file in that directory. Refused means
 * enforcing; created means present but not enforcing; a refusal from the Landlock syscalls
 * themselves means unsupported. The calling process is never restricted.
 * @ret: filled on success.
 * Returns 0, or -errno when the probe could not be run at all (no temporary directory, fork
 * failed); then @ret says nothing about Landlock.
 */
int landlock_probe(LandlockProbe *ret);

/* "unsupported", "present_not_enforcing", "enforcing"; NULL for an invalid value. */
const char *landlock_support_to_string(LandlockSupport s);
