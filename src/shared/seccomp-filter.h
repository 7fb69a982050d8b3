/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * How every seccomp filter here is built: berth-vmm's own and QEMU's on the host
 * (src/berth-vmm/host-sandbox.c), and each app's in the guest (src/agent-init/filters.c).
 * Each program keeps its own lists; this is the mechanism they share: a libseccomp context
 * that kills a call made through another architecture's table, rules from a table of
 * system calls, argument rules that compare what the kernel reads, and a program compiled
 * while nothing is restricted yet and loaded later without allocating. Non-logging.
 *
 * Its own static library (libseccomp-filter), not part of libshared: agent-init is static
 * and links libseccomp statically, berth-vmm dynamically; each brings its own.
 */

#include <linux/filter.h>
#include <sched.h>
#include <seccomp.h>
#include <stddef.h>
#include <stdint.h>

typedef enum SeccompVerdict {
	SECCOMP_VERDICT_ALLOW,	/* whatever the arguments */
	SECCOMP_VERDICT_ARGS,	/* only for some arguments: the caller's own rules */
	SECCOMP_VERDICT_REFUSE, /* EPERM */
	SECCOMP_VERDICT_NOSYS,	/* ENOSYS, on purpose */
	_SECCOMP_VERDICT_MAX,
	_SECCOMP_VERDICT_INVALID = -22, /* -EINVAL */
} SeccompVerdict;

/* One entry of a program's table; where it came from is the comment beside it. */
typedef struct SeccompSyscall {
	const char *name; /* libseccomp's name for the x86-64 call */
	SeccompVerdict verdict;
} SeccompSyscall;

typedef struct SeccompProgram {
	struct sock_filter *insns; /* NULL: no program */
	unsigned short len;
} SeccompProgram;

/* The namespace flags refused on clone(2). CLONE_NEWTIME is not among them: it is 0x80,
 * inside clone()'s exit-signal byte, and only clone3() and unshare() take it. */
#define SECCOMP_CLONE_NAMESPACES                                                       \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | \
	 CLONE_NEWPID | CLONE_NEWNET)

/*
 * The low 32 bits of argument @arg equal @value. An int argument (a family, a type, a
 * protocol, clone's flags) is all the kernel reads of its register; libseccomp's
 * SCMP_A0_32(SCMP_CMP_EQ, ...) still compares all 64 bits, so a value with a high bit set
 * would be the same call to the kernel and another one to the filter.
 */
static inline struct scmp_arg_cmp seccomp_arg_eq(unsigned arg, uint32_t value)
{
	return (struct scmp_arg_cmp){arg, SCMP_CMP_MASKED_EQ, 0xffffffffU, value};
}

/* The bits @mask of argument @arg's low 32 bits equal @value. */
static inline struct scmp_arg_cmp seccomp_arg_masked_eq(unsigned arg, uint32_t mask, uint32_t value)
{
	return (struct scmp_arg_cmp){arg, SCMP_CMP_MASKED_EQ, mask, value};
}

/*
 * seccomp_filter_new() - a context whose default is @default_action, and where a call
 * through the i386 (int 0x80) or x32 table kills the process: every rule is written for
 * x86-64's numbers. NULL when out of memory.
 */
scmp_filter_ctx seccomp_filter_new(uint32_t default_action);
void seccomp_filter_freep(scmp_filter_ctx *ctx);

/*
 * seccomp_filter_add_table() - a rule for each entry of @table: ALLOW allows, REFUSE fails
 * with EPERM, NOSYS with ENOSYS; ARGS entries are left to the caller's argument rules. An
 * entry that says what the default does adds nothing (libseccomp refuses such a rule).
 * A name libseccomp cannot resolve is skipped when the default refuses anyway, and is
 * -ENOSYS when the default allows, which it would then do.
 * Returns 0 or -errno.
 */
int seccomp_filter_add_table(scmp_filter_ctx ctx, const SeccompSyscall *table, size_t n);

/*
 * seccomp_filter_add_range() - @action for system call @nr when argument @arg's low 32
 * bits are in [@lo, @hi] and the @n_more comparisons @more (at most 3) hold. A range is not
 * one comparison and a rule compares an argument once, so it is aligned blocks of masked
 * comparisons, one rule each.
 */
int seccomp_filter_add_range(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned arg,
			     uint32_t lo, uint32_t hi, unsigned n_more,
			     const struct scmp_arg_cmp *more);

/* seccomp_filter_add_unless() - @action for @nr unless argument @arg's low 32 bits are
 * @value (and whenever @more, at most 3, hold). */
int seccomp_filter_add_unless(scmp_filter_ctx ctx, uint32_t action, int nr, unsigned arg,
			      uint32_t value, unsigned n_more, const struct scmp_arg_cmp *more);

/* seccomp_filter_refuse_clone_namespaces() - clone(2) with any SECCOMP_CLONE_NAMESPACES
 * flag fails with EPERM. */
int seccomp_filter_refuse_clone_namespaces(scmp_filter_ctx ctx);

/* seccomp_filter_export() - compile @ctx into @ret (release with seccomp_program_done()).
 * Returns 0 or -errno; *@ret is untouched then. */
int seccomp_filter_export(scmp_filter_ctx ctx, SeccompProgram *ret);

void seccomp_program_done(SeccompProgram *p);

/*
 * seccomp_program_load() - install @p on the calling thread with seccomp(2) and @flags
 * (SECCOMP_FILTER_FLAG_TSYNC: on every thread). The caller has set no_new_privs or holds
 * CAP_SYS_ADMIN. Allocates nothing. Returns 0, -errno, or -EBUSY when TSYNC met a thread
 * it could not synchronise.
 */
int seccomp_program_load(const SeccompProgram *p, unsigned flags);
