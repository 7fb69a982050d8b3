/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The seccomp mechanism berth-vmm and agent-init share (src/shared/seccomp-filter.c),
 * checked on the BPF it compiles to (test/seccomp-bpf.h runs it as the kernel would) and,
 * last, loaded into this process.
 */
#include <errno.h>
#include <linux/audit.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "macros.h"
#include "seccomp-bpf.h"
#include "seccomp-filter.h"
#include "tests.h"

/* What @p answers for x86-64's call @nr with @args. */
static uint32_t verdict(const SeccompProgram *p, int nr, const uint64_t args[6])
{
	struct seccomp_data d = {.nr = nr, .arch = AUDIT_ARCH_X86_64};

	memcpy(d.args, args, sizeof(d.args));
	return bpf_run(p, &d);
}

#define CALL(p, nr, ...) verdict((p), (nr), (const uint64_t[6]){__VA_ARGS__})

static void export(scmp_filter_ctx ctx, SeccompProgram *ret)
{
	ASSERT_OK(seccomp_filter_export(ctx, ret));
	ASSERT_NOT_NULL(ret->insns);
	ASSERT_TRUE(ret->len > 0 && ret->len <= BPF_MAXINSNS);
}

/* The premise: libseccomp's own 32-bit comparison still looks at the high word, so a
 * family with a high bit set slips past a rule the kernel would have matched. */
TEST(libseccomp_eq_compares_64_bits)
{
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx ctx = seccomp_filter_new(SCMP_ACT_ALLOW);
	_cleanup_(seccomp_program_done) SeccompProgram p = {};

	ASSERT_OK(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
				   SCMP_A0_32(SCMP_CMP_EQ, AF_INET)));
	export(ctx, &p);
	ASSERT_RET(CALL(&p, SYS_socket, AF_INET), RET_EPERM, "AF_INET");
	ASSERT_RET(CALL(&p, SYS_socket, HIGH_BITS | AF_INET), RET_ALLOW,
		   "AF_INET with a high bit: the bypass");
}

TEST(arg_eq_reads_the_low_32_bits)
{
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx ctx = seccomp_filter_new(SCMP_ACT_ALLOW);
	_cleanup_(seccomp_program_done) SeccompProgram p = {};

	ASSERT_OK(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
				   seccomp_arg_eq(0, AF_INET)));
	export(ctx, &p);
	ASSERT_RET(CALL(&p, SYS_socket, AF_INET), RET_EPERM, "AF_INET");
	ASSERT_RET(CALL(&p, SYS_socket, HIGH_BITS | AF_INET), RET_EPERM, "AF_INET, high bit");
	ASSERT_RET(CALL(&p, SYS_socket, 0xffffffff00000000ULL | AF_INET), RET_EPERM,
		   "AF_INET, every high bit");
	ASSERT_RET(CALL(&p, SYS_socket, AF_INET6), RET_ALLOW, "AF_INET6");
	ASSERT_RET(CALL(&p, SYS_socket, HIGH_BITS | AF_INET6), RET_ALLOW, "AF_INET6, high bit");
}

TEST(arg_masked_eq_reads_the_masked_low_bits)
{
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx ctx = seccomp_filter_new(SCMP_ACT_ALLOW);
	_cleanup_(seccomp_program_done) SeccompProgram p = {};

	ASSERT_OK(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
				   seccomp_arg_eq(0, AF_UNIX),
				   seccomp_arg_masked_eq(1, 0xf, SOCK_DGRAM)));
	export(ctx, &p);
	ASSERT_RET(CALL(&p, SYS_socket, AF_UNIX, SOCK_DGRAM), RET_EPERM, "unix dgram");
	ASSERT_RET(CALL(&p, SYS_socket, AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK),
		   RET_EPERM, "unix dgram with flags");
	ASSERT_RET(CALL(&p, SYS_socket, AF_UNIX, HIGH_BITS | SOCK_DGRAM), RET_EPERM,
		   "unix dgram, high bit");
	ASSERT_RET(CALL(&p, SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC), RET_ALLOW,
		   "unix stream");
	ASSERT_RET(CALL(&p, SYS_socket, AF_UNIX, SOCK_SEQPACKET), RET_ALLOW, "unix seqpacket");
	ASSERT_RET(CALL(&p, SYS_socket, AF_INET, SOCK_DGRAM), RET_ALLOW, "udp");
}

/* EPERM exactly where the low 32 bits of argument 1 are in [lo, hi], high bits or not. */
static void check_range(uint32_t lo, uint32_t hi)
{
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx ctx = seccomp_filter_new(SCMP_ACT_ALLOW);
	_cleanup_(seccomp_program_done) SeccompProgram p = {};
	const uint64_t probes[] = {0,	       1,	   2,	       3,	  lo,
				   hi,	       lo - 1ULL,  hi + 1ULL,  lo + 1ULL, hi - 1ULL,
				   0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff};
	char what[96];

	ASSERT_OK(seccomp_filter_add_range(ctx, SCMP_ACT_ERRNO(EPERM), SYS_getpriority, 1, lo, hi,
					   0, NULL));
	export(ctx, &p);
	for (size_t i = 0; i < ELEMENTSOF(probes); i++)
		for (uint64_t high = 0; high <= HIGH_BITS; high += HIGH_BITS) {
			uint32_t v = (uint32_t)probes[i];

			snprintf(what, sizeof(what), "[%#x, %#x]: %#llx", lo, hi,
				 (unsigned long long)(high | v));
			ASSERT_RET(CALL(&p, SYS_getpriority, 0, high | v),
				   v >= lo && v <= hi ? RET_EPERM : RET_ALLOW, what);
		}
	for (uint64_t v = 1; v < 0xffffffff; v = v * 3 + 1) {
		snprintf(what, sizeof(what), "[%#x, %#x]: %#llx", lo, hi, (unsigned long long)v);
		ASSERT_RET(CALL(&p, SYS_getpriority, 0, v),
			   v >= lo && v <= hi ? RET_EPERM : RET_ALLOW, what);
	}
}

TEST(range_is_exactly_lo_to_hi)
{
	check_range(0, 0);
	check_range(0, 0xffffffff);
	check_range(1, 0xffffffff);
	check_range(5, 1000);
	check_range(0x7fffffff, 0x80000001);
	check_range(0xfffffffe, 0xffffffff);
	check_range(46, 0xffffffff);
}

TEST(range_with_more_comparisons)
{
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx ctx = seccomp_filter_new(SCMP_ACT_ALLOW);
	_cleanup_(seccomp_program_done) SeccompProgram p = {};
	const struct scmp_arg_cmp netlink = seccomp_arg_eq(0, AF_NETLINK);

	ASSERT_ERROR(
		seccomp_filter_add_range(ctx, SCMP_ACT_ERRNO(EPERM), SYS_socket, 2, 2, 1, 0, NULL),
		EINVAL);
	ASSERT_OK(seccomp_filter_add_range(ctx, SCMP_ACT_ERRNO(EPERM), SYS_socket, 2, 1, 31, 1,
					   &netlink));
	export(ctx, &p);
	ASSERT_RET(CALL(&p, SYS_socket, AF_NETLINK, SOCK_RAW, 0), RET_ALLOW, "netlink route");
	ASSERT_RET(CALL(&p, SYS_socket, AF_NETLINK, SOCK_RAW, 9), RET_EPERM, "netlink audit");
	ASSERT_RET(CALL(&p, SYS_socket, HIGH_BITS | AF_NETLINK, SOCK_RAW, 9), RET_EPERM,
		   "netlink audit, high bit");
	ASSERT_RET(CALL(&p, SYS_socket, AF_INET, SOCK_RAW, 9), RET_ALLOW, "another family");
}

TEST(unless_refuses_every_other_low_word)
{
	static const uint32_t values[] = {0, 1, 16, 0xffffffff};

	for (size_t i = 0; i < ELEMENTSOF(values); i++) {
		_cleanup_(seccomp_filter_freep) scmp_filter_ctx ctx =
			seccomp_filter_new(SCMP_ACT_ALLOW);
		_cleanup_(seccomp_program_done) SeccompProgram p = {};
		uint32_t v = values[i];

		ASSERT_OK(seccomp_filter_add_unless(ctx, SCMP_ACT_ERRNO(EPERM), SYS_socket, 0, v, 0,
						    NULL));
		export(ctx, &p);
		ASSERT_RET(CALL(&p, SYS_socket, v), RET_ALLOW, "the value");
		ASSERT_RET(CALL(&p, SYS_socket, HIGH_BITS | v), RET_ALLOW, "the value, high bit");
		ASSERT_RET(CALL(&p, SYS_socket, (uint32_t)(v + 1)), RET_EPERM, "the next one");
		ASSERT_RET(CALL(&p, SYS_socket, (uint32_t)(v - 1)), RET_EPERM, "the one before");
		ASSERT_RET(CALL(&p, SYS_socket, HIGH_BITS | (uint32_t)(v + 1)), RET_EPERM,
			   "the next one, high bit");
		ASSERT_RET(CALL(&p, SYS_socket, 0x80000000U ^ v), RET_EPERM, "far away");
	}
}

TEST(table_verdicts)
{
	static const SeccompSyscall table[] = {
		{"getpid", SECCOMP_VERDICT_ALLOW},	 {"ptrace", SECCOMP_VERDICT_REFUSE},
		{"clone3", SECCOMP_VERDICT_NOSYS},	 {"socket", SECCOMP_VERDICT_ARGS},
		{"no_such_call", SECCOMP_VERDICT_ALLOW}, {"no_such_call", SECCOMP_VERDICT_REFUSE},
	};
	static const SeccompSyscall deny[] = {
		{"ptrace", SECCOMP_VERDICT_REFUSE},
		{"clone3", SECCOMP_VERDICT_NOSYS},
	};
	static const SeccompSyscall lost[] = {{"no_such_call", SECCOMP_VERDICT_REFUSE}};
	static const SeccompSyscall invalid[] = {{"getpid", _SECCOMP_VERDICT_MAX}};
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx allow_list =
		seccomp_filter_new(SCMP_ACT_ERRNO(ENOSYS));
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx deny_list =
		seccomp_filter_new(SCMP_ACT_ALLOW);
	_cleanup_(seccomp_program_done) SeccompProgram a = {}, d = {};

	/* An allow list: what it does not name, or cannot, is the default's refusal. */
	ASSERT_OK(seccomp_filter_add_table(allow_list, table, ELEMENTSOF(table)));
	export(allow_list, &a);
	ASSERT_RET(CALL(&a, SYS_getpid, 0), RET_ALLOW, "getpid");
	ASSERT_RET(CALL(&a, SYS_ptrace, 0), RET_EPERM, "ptrace");
	ASSERT_RET(CALL(&a, SYS_clone3, 0), RET_ENOSYS, "clone3");
	ASSERT_RET(CALL(&a, SYS_socket, AF_UNIX), RET_ENOSYS, "socket: the caller's rules");
	ASSERT_RET(CALL(&a, SYS_read, 0), RET_ENOSYS, "read: not named");
	/* A deny list: each entry is a rule, and one it cannot name is an error, not an
	 * allow. */
	ASSERT_OK(seccomp_filter_add_table(deny_list, deny, ELEMENTSOF(deny)));
	ASSERT_ERROR(seccomp_filter_add_table(deny_list, lost, ELEMENTSOF(lost)), ENOSYS);
	ASSERT_ERROR(seccomp_filter_add_table(deny_list, invalid, ELEMENTSOF(invalid)), EINVAL);
	export(deny_list, &d);
	ASSERT_RET(CALL(&d, SYS_ptrace, 0), RET_EPERM, "ptrace");
	ASSERT_RET(CALL(&d, SYS_clone3, 0), RET_ENOSYS, "clone3");
	ASSERT_RET(CALL(&d, SYS_read, 0), RET_ALLOW, "read");
}

TEST(other_abis_kill_the_process)
{
	static const uint32_t arches[] = {AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64, 0};
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx ctx = seccomp_filter_new(SCMP_ACT_ALLOW);
	_cleanup_(seccomp_program_done) SeccompProgram p = {};

	ASSERT_OK(seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ptrace), 0));
	export(ctx, &p);
	for (size_t i = 0; i < ELEMENTSOF(arches); i++) {
		struct seccomp_data d = {.nr = 20, .arch = arches[i]};

		ASSERT_RET(bpf_run(&p, &d), RET_KILL, "getpid through another table");
	}
	ASSERT_RET(CALL(&p, X32_BIT | SYS_getpid, 0), RET_KILL, "x32 getpid");
	ASSERT_RET(CALL(&p, X32_BIT | 512, 0), RET_KILL, "x32 compat 512");
	ASSERT_RET(CALL(&p, SYS_getpid, 0), RET_ALLOW, "native getpid");
	ASSERT_RET(CALL(&p, SYS_ptrace, 0), RET_EPERM, "native ptrace");
}

TEST(clone_namespaces_refused)
{
	static const uint64_t ns[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
				      CLONE_NEWIPC,  CLONE_NEWPID, CLONE_NEWNET};
	const uint64_t thread = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
				CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID |
				CLONE_CHILD_CLEARTID;
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx ctx = seccomp_filter_new(SCMP_ACT_ALLOW);
	_cleanup_(seccomp_program_done) SeccompProgram p = {};
	uint64_t all = 0;

	ASSERT_OK(seccomp_filter_refuse_clone_namespaces(ctx));
	export(ctx, &p);
	for (size_t i = 0; i < ELEMENTSOF(ns); i++) {
		all |= ns[i];
		ASSERT_RET(CALL(&p, SYS_clone, ns[i] | SIGCHLD), RET_EPERM, "a namespace flag");
		ASSERT_RET(CALL(&p, SYS_clone, ns[i] | thread), RET_EPERM, "with thread flags");
		ASSERT_RET(CALL(&p, SYS_clone, ns[i] | HIGH_BITS), RET_EPERM, "with a high bit");
	}
	ASSERT_EQ(all, SECCOMP_CLONE_NAMESPACES);
	ASSERT_RET(CALL(&p, SYS_clone, thread), RET_ALLOW, "pthread_create's clone");
	ASSERT_RET(CALL(&p, SYS_clone, CLONE_VM | CLONE_VFORK | SIGCHLD), RET_ALLOW,
		   "posix_spawn's clone");
	ASSERT_RET(CALL(&p, SYS_clone, HIGH_BITS | SIGCHLD), RET_ALLOW, "bits the kernel ignores");
}

/* The same rules in this process's kernel (each TEST runs in a child of its own). */
TEST(the_kernel_agrees)
{
	static const SeccompSyscall deny[] = {{"ptrace", SECCOMP_VERDICT_REFUSE}};
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx ctx = seccomp_filter_new(SCMP_ACT_ALLOW);
	_cleanup_(seccomp_program_done) SeccompProgram p = {};
	const SeccompProgram none = {};
	long r;

	ASSERT_OK(seccomp_filter_add_table(ctx, deny, ELEMENTSOF(deny)));
	ASSERT_OK(seccomp_filter_add_unless(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 0,
					    AF_UNIX, 0, NULL));
	export(ctx, &p);
	ASSERT_ERROR(seccomp_program_load(&none, 0), EINVAL);
	ASSERT_OK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	/* As berth-vmm loads its own: on every thread. */
	ASSERT_OK(seccomp_program_load(&p, SECCOMP_FILTER_FLAG_TSYNC));
	r = syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
	ASSERT_TRUE(r < 0 && errno == EPERM);
	r = syscall(SYS_socket, (long)(HIGH_BITS | AF_INET), SOCK_STREAM, 0);
	ASSERT_TRUE(r < 0 && errno == EPERM);
	/* The kernel reads an int: this is AF_UNIX to it, and to the filter. */
	r = syscall(SYS_socket, (long)(HIGH_BITS | AF_UNIX), SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_TRUE(r >= 0);
	close((int)r);
	r = syscall(SYS_ptrace, 0, 0, 0, 0);
	ASSERT_TRUE(r < 0 && errno == EPERM);
	ASSERT_TRUE(getpid() > 0);
}

int main(void)
{
	return tests_run();
}
