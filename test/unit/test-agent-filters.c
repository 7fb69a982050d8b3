/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent-init's seccomp filters (src/agent-init/filters.c), checked on the BPF they compile
 * to: a small interpreter runs each program the way the kernel does, for every system call
 * number, for the i386 and x32 tables, and for the arguments the rules look at. The last
 * test loads the filters into this process and asks the kernel.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "filters.h"
#include "macros.h"
#include "seccomp-bpf.h"
#include "tests.h"

#define AF_VSOCK_NUMBER 40
#define AF_ALG_NUMBER 38
#define IPPROTO_SCTP_NUMBER 132
#define IPPROTO_MPTCP_NUMBER 262

/* The kernel's rule for several filters: every one runs, the most restrictive answer wins,
 * and of two errnos the newest filter's. */
static uint32_t stricter(uint32_t newer, uint32_t older)
{
	int32_t n = (int32_t)(newer & SECCOMP_RET_ACTION_FULL),
		o = (int32_t)(older & SECCOMP_RET_ACTION_FULL);

	return o < n ? older : newer;
}

static uint32_t verdict_of(const Filters *f, uint32_t arch, int nr, const uint64_t args[6])
{
	struct seccomp_data d = {.nr = nr, .arch = arch};
	uint32_t r;

	if (args)
		memcpy(d.args, args, sizeof(d.args));
	r = bpf_run(&f->base, &d);
	return f->datagram.insns ? stricter(bpf_run(&f->datagram, &d), r) : r;
}

#define CALL(f, nr, ...) verdict_of((f), AUDIT_ARCH_X86_64, (nr), (const uint64_t[6]){__VA_ARGS__})

static void build(bool restrict_protocols, bool deny_datagrams, Filters *f)
{
	ASSERT_OK(filters_build(restrict_protocols, deny_datagrams, f));
	ASSERT_NOT_NULL(f->base.insns);
	ASSERT_TRUE(f->base.len > 0 && f->base.len <= BPF_MAXINSNS);
	ASSERT_TRUE(!!f->datagram.insns == deny_datagrams);
}

static int nr_of(const char *name)
{
	int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, name);

	if (nr < 0)
		TEST_FAIL("libseccomp has no x86-64 system call \"%s\"", name);
	return nr;
}

static const SeccompSyscall *table_entry(const char *name)
{
	size_t n;
	const SeccompSyscall *t = filters_syscall_table(&n);

	for (size_t i = 0; name && i < n; i++)
		if (streq(t[i].name, name))
			return &t[i];
	return NULL;
}

TEST(table_names_resolve_and_are_unique)
{
	size_t n, allowed = 0;
	const SeccompSyscall *t = filters_syscall_table(&n);

	ASSERT_TRUE(n > 100);
	for (size_t i = 0; i < n; i++) {
		(void)nr_of(t[i].name);
		ASSERT_TRUE(t[i].verdict >= 0 && t[i].verdict < _SECCOMP_VERDICT_MAX);
		allowed += t[i].verdict == SECCOMP_VERDICT_ALLOW ||
			   t[i].verdict == SECCOMP_VERDICT_ARGS;
		for (size_t j = 0; j < i; j++)
			if (streq(t[i].name, t[j].name))
				TEST_FAIL("\"%s\" is in the table twice", t[i].name);
	}
	printf("# table: %zu entries, %zu allowed\n", n, allowed);
}

/* Every number of the native table: what the table says, ENOSYS for the rest (and for
 * numbers past the last call libseccomp knows). */
TEST(every_syscall_number_gets_the_table_verdict)
{
	static const uint32_t want_of[_SECCOMP_VERDICT_MAX] = {
		[SECCOMP_VERDICT_ALLOW] = RET_ALLOW,
		[SECCOMP_VERDICT_REFUSE] = RET_EPERM,
		[SECCOMP_VERDICT_NOSYS] = RET_ENOSYS,
	};

	for (int restrict_protocols = 0; restrict_protocols <= 1; restrict_protocols++) {
		_cleanup_(filters_done) Filters f = {};
		size_t allowed = 0, refused = 0;

		build(restrict_protocols, true, &f);
		printf("# restrict_protocols=%d: base %u instructions, datagram %u\n",
		       restrict_protocols, f.base.len, f.datagram.len);
		for (int nr = 0; nr < 1024; nr++) {
			_cleanup_free_ char *name =
				seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
			const SeccompSyscall *e = table_entry(name);
			uint32_t got = CALL(&f, nr, 0), want = e ? want_of[e->verdict] : RET_ENOSYS;
			char what[96];

			if (e && e->verdict == SECCOMP_VERDICT_ARGS)
				continue;
			snprintf(what, sizeof(what), "%s (%d)", name ?: "unnamed", nr);
			ASSERT_RET(got, want, what);
			allowed += got == RET_ALLOW;
			refused += got != RET_ALLOW;
		}
		ASSERT_TRUE(allowed > 150 && refused > 700);
	}
}

TEST(the_calls_the_runtimes_were_traced_making_pass)
{
	/* A few from syscalls-traced.txt, by program. */
	static const char *const traced[] = {
		"read",	      "write",		 "openat",     "close",	    "mmap",
		"mprotect",   "futex",		 "epoll_wait", "epoll_ctl", "eventfd2",
		"statx",      "pkey_alloc",	 "capget",     "accept4",   "connect",
		"bind",	      "listen",		 "recvfrom",   "sendto",    "recvmsg",
		"rseq",	      "set_robust_list", "execve",     "wait4",	    "kill",
		"tgkill",     "clock_nanosleep", "signalfd4",  "seccomp",   "getrandom",
		"exit_group", "rt_sigreturn",	 "getdents64", "rename",    "fsync",
	};
	_cleanup_(filters_done) Filters f = {};

	build(true, true, &f);
	for (size_t i = 0; i < ELEMENTSOF(traced); i++)
		ASSERT_RET(CALL(&f, nr_of(traced[i]), 0), RET_ALLOW, traced[i]);
}

TEST(what_the_deny_list_missed_is_refused)
{
	_cleanup_(filters_done) Filters f = {};

	build(true, false, &f);
	ASSERT_RET(CALL(&f, nr_of("userfaultfd"), O_CLOEXEC), RET_EPERM, "userfaultfd");
	ASSERT_RET(CALL(&f, nr_of("open_by_handle_at"), 0), RET_EPERM, "open_by_handle_at");
	ASSERT_RET(CALL(&f, nr_of("modify_ldt"), 0), RET_EPERM, "modify_ldt");
	ASSERT_RET(CALL(&f, nr_of("kcmp"), 0), RET_EPERM, "kcmp");
	ASSERT_RET(CALL(&f, nr_of("pidfd_getfd"), 0), RET_EPERM, "pidfd_getfd");
	ASSERT_RET(CALL(&f, nr_of("unshare"), CLONE_FILES), RET_EPERM, "unshare(CLONE_FILES)");
	/* Never in the deny list, not needed: the default. */
	ASSERT_RET(CALL(&f, nr_of("mbind"), 0), RET_ENOSYS, "mbind");
	ASSERT_RET(CALL(&f, nr_of("timer_create"), 0), RET_ENOSYS, "timer_create");
	ASSERT_RET(CALL(&f, nr_of("shmget"), 0), RET_ENOSYS, "shmget");
	/* Newer than any table here (mseal is 462), and past the end. */
	ASSERT_RET(CALL(&f, 462, 0), RET_ENOSYS, "462");
	ASSERT_RET(CALL(&f, 1000, 0), RET_ENOSYS, "1000");
	/* The old deny list, kept. */
	ASSERT_RET(CALL(&f, nr_of("clone3"), 0), RET_ENOSYS, "clone3");
	ASSERT_RET(CALL(&f, nr_of("io_uring_setup"), 0), RET_ENOSYS, "io_uring_setup");
	ASSERT_RET(CALL(&f, nr_of("setns"), 0), RET_EPERM, "setns");
	ASSERT_RET(CALL(&f, nr_of("ptrace"), 0), RET_EPERM, "ptrace");
	ASSERT_RET(CALL(&f, nr_of("bpf"), 0), RET_EPERM, "bpf");
	ASSERT_RET(CALL(&f, nr_of("mount"), 0), RET_EPERM, "mount");
	ASSERT_RET(CALL(&f, nr_of("perf_event_open"), 0), RET_EPERM, "perf_event_open");
}

TEST(other_abis_kill_the_process)
{
	_cleanup_(filters_done) Filters f = {};
	static const uint32_t arches[] = {AUDIT_ARCH_I386, AUDIT_ARCH_AARCH64, 0};

	build(true, true, &f);
	for (size_t i = 0; i < ELEMENTSOF(arches); i++) {
		/* getpid, exit and write in i386's table: allowed natively, killed here. */
		ASSERT_RET(verdict_of(&f, arches[i], 20, NULL), RET_KILL, "getpid, foreign arch");
		ASSERT_RET(verdict_of(&f, arches[i], 1, NULL), RET_KILL, "exit, foreign arch");
	}
	/* x32: the native arch token, numbers with bit 30 set. */
	ASSERT_RET(CALL(&f, X32_BIT | nr_of("getpid"), 0), RET_KILL, "x32 getpid");
	ASSERT_RET(CALL(&f, X32_BIT | nr_of("write"), 0), RET_KILL, "x32 write");
	ASSERT_RET(CALL(&f, X32_BIT | 512, 0), RET_KILL, "x32 compat 512");
	ASSERT_RET(CALL(&f, nr_of("getpid"), 0), RET_ALLOW, "native getpid");
}

TEST(clone_without_namespace_flags_only)
{
	static const uint64_t ns[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
				      CLONE_NEWIPC,  CLONE_NEWPID, CLONE_NEWNET};
	const uint64_t thread = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
				CLONE_SYSVSEM | CLONE_SETTLS | CLONE_PARENT_SETTID |
				CLONE_CHILD_CLEARTID;
	_cleanup_(filters_done) Filters f = {};
	int clone = nr_of("clone");

	build(true, true, &f);
	ASSERT_RET(CALL(&f, clone, thread), RET_ALLOW, "pthread_create's clone");
	ASSERT_RET(CALL(&f, clone, CLONE_CHILD_CLEARTID | CLONE_CHILD_SETTID | SIGCHLD), RET_ALLOW,
		   "fork's clone");
	ASSERT_RET(CALL(&f, clone, CLONE_VM | CLONE_VFORK | SIGCHLD), RET_ALLOW,
		   "posix_spawn's clone");
	ASSERT_RET(CALL(&f, clone, HIGH_BITS | SIGCHLD), RET_ALLOW, "bits the kernel ignores");
	for (size_t i = 0; i < ELEMENTSOF(ns); i++) {
		ASSERT_RET(CALL(&f, clone, ns[i] | SIGCHLD), RET_EPERM, "a namespace flag");
		ASSERT_RET(CALL(&f, clone, ns[i] | thread), RET_EPERM, "with thread flags");
		ASSERT_RET(CALL(&f, clone, ns[i] | HIGH_BITS), RET_EPERM, "with high bits");
	}
	ASSERT_RET(CALL(&f, nr_of("vfork"), 0), RET_ALLOW, "vfork");
}

TEST(socket_families)
{
	for (int restrict_protocols = 0; restrict_protocols <= 1; restrict_protocols++) {
		_cleanup_(filters_done) Filters f = {};
		int socket = nr_of("socket"), pair = nr_of("socketpair");

		build(restrict_protocols, false, &f);
		ASSERT_RET(CALL(&f, socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), RET_ALLOW,
			   "unix");
		ASSERT_RET(CALL(&f, socket, AF_UNIX, SOCK_DGRAM, 0), RET_ALLOW, "unix dgram");
		ASSERT_RET(CALL(&f, socket, AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), RET_ALLOW,
			   "tcp");
		ASSERT_RET(CALL(&f, socket, AF_INET6, SOCK_STREAM, IPPROTO_TCP), RET_ALLOW, "tcp6");
		ASSERT_RET(CALL(&f, socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), RET_ALLOW,
			   "udp");
		ASSERT_RET(CALL(&f, socket, AF_INET6, SOCK_DGRAM, IPPROTO_UDP), RET_ALLOW, "udp6");
		ASSERT_RET(CALL(&f, socket, AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE),
			   RET_ALLOW, "netlink route");
		for (int family = 0; family < 64; family++) {
			char what[64];

			if (family == AF_UNIX || family == AF_INET || family == AF_INET6 ||
			    family == AF_NETLINK)
				continue;
			snprintf(what, sizeof(what), "family %d", family);
			ASSERT_RET(CALL(&f, socket, family, SOCK_STREAM, 0),
				   family < AF_MAX ? RET_EPERM : RET_ENOSYS, what);
			ASSERT_TRUE(CALL(&f, pair, family, SOCK_STREAM, 0) != RET_ALLOW);
		}
		ASSERT_RET(CALL(&f, socket, AF_PACKET, SOCK_RAW, 0x300), RET_EPERM, "packet");
		ASSERT_RET(CALL(&f, socket, AF_VSOCK_NUMBER, SOCK_STREAM, 0), RET_EPERM, "vsock");
		ASSERT_RET(CALL(&f, socket, AF_ALG_NUMBER, SOCK_SEQPACKET, 0), RET_EPERM, "alg");
		ASSERT_RET(CALL(&f, socket, AF_KEY, SOCK_RAW, 2), RET_EPERM, "key");
		ASSERT_RET(CALL(&f, socket, AF_BLUETOOTH, SOCK_RAW, 0), RET_EPERM, "bluetooth");
		/* The kernel reads an int: high bits change nothing (the deny list let
		 * AF_VSOCK | 1 << 32 through). */
		ASSERT_RET(CALL(&f, socket, HIGH_BITS | AF_VSOCK_NUMBER, SOCK_STREAM, 0), RET_EPERM,
			   "vsock with high bits");
		ASSERT_RET(CALL(&f, socket, HIGH_BITS | AF_PACKET, SOCK_RAW, 0), RET_EPERM,
			   "packet with high bits");
		ASSERT_RET(CALL(&f, socket, HIGH_BITS | AF_UNIX, SOCK_STREAM, 0), RET_ALLOW,
			   "unix with high bits");
		for (int proto = 1; proto < 64; proto++)
			ASSERT_RET(CALL(&f, socket, AF_NETLINK, SOCK_RAW, proto),
				   proto < 32 ? RET_EPERM : RET_ENOSYS, "another netlink protocol");
		ASSERT_RET(CALL(&f, socket, AF_NETLINK, SOCK_DGRAM, NETLINK_AUDIT), RET_EPERM,
			   "audit");
		ASSERT_RET(CALL(&f, socket, AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT),
			   RET_EPERM, "uevent");
		ASSERT_RET(CALL(&f, socket, AF_NETLINK, SOCK_RAW, NETLINK_SOCK_DIAG), RET_EPERM,
			   "sock_diag");
		ASSERT_RET(CALL(&f, socket, AF_NETLINK, SOCK_RAW, HIGH_BITS | NETLINK_AUDIT),
			   RET_EPERM, "audit with high bits");
		ASSERT_RET(CALL(&f, pair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), RET_ALLOW,
			   "socketpair unix");
		ASSERT_TRUE(CALL(&f, pair, AF_INET, SOCK_STREAM, 0) != RET_ALLOW);
	}
}

TEST(socket_protocols_unless_the_network_is_unrestricted)
{
	_cleanup_(filters_done) Filters open = {}, restricted = {};
	int socket = nr_of("socket");
	static const int inet[] = {AF_INET, AF_INET6};

	build(false, false, &open);
	build(true, false, &restricted);
	for (size_t i = 0; i < ELEMENTSOF(inet); i++) {
		int fam = inet[i];

		ASSERT_RET(CALL(&restricted, socket, fam, SOCK_STREAM, IPPROTO_SCTP_NUMBER),
			   RET_EPERM, "sctp");
		ASSERT_RET(CALL(&restricted, socket, fam, SOCK_SEQPACKET, 0), RET_EPERM,
			   "seqpacket");
		ASSERT_RET(CALL(&restricted, socket, fam, SOCK_SEQPACKET | SOCK_CLOEXEC,
				IPPROTO_SCTP_NUMBER),
			   RET_EPERM, "sctp seqpacket");
		ASSERT_RET(CALL(&restricted, socket, fam, SOCK_STREAM, IPPROTO_MPTCP_NUMBER),
			   RET_EPERM, "mptcp");
		ASSERT_RET(CALL(&restricted, socket, fam, SOCK_RAW, IPPROTO_ICMP), RET_EPERM,
			   "raw");
		ASSERT_RET(CALL(&restricted, socket, fam, SOCK_STREAM,
				HIGH_BITS | IPPROTO_SCTP_NUMBER),
			   RET_EPERM, "sctp with high bits");
		ASSERT_RET(CALL(&restricted, socket, fam, SOCK_STREAM, IPPROTO_UDP), RET_ENOSYS,
			   "a pair no kernel makes");
		ASSERT_TRUE(CALL(&restricted, socket, HIGH_BITS | fam, SOCK_STREAM, 0) ==
			    RET_ALLOW);
		/* network:connect:* keeps every protocol. */
		ASSERT_RET(CALL(&open, socket, fam, SOCK_STREAM, IPPROTO_SCTP_NUMBER), RET_ALLOW,
			   "open sctp");
		ASSERT_RET(CALL(&open, socket, fam, SOCK_SEQPACKET, 0), RET_ALLOW,
			   "open seqpacket");
		ASSERT_RET(CALL(&open, socket, fam, SOCK_STREAM, IPPROTO_MPTCP_NUMBER), RET_ALLOW,
			   "open mptcp");
	}
}

TEST(datagram_filter)
{
	_cleanup_(filters_done) Filters f = {};
	int socket = nr_of("socket");

	build(true, true, &f);
	ASSERT_RET(CALL(&f, socket, AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), RET_EPERM, "udp");
	ASSERT_RET(CALL(&f, socket, AF_INET6, SOCK_DGRAM, IPPROTO_UDP), RET_EPERM, "udp6");
	/* The deny list let AF_INET | 1 << 32 make a UDP socket. */
	ASSERT_RET(CALL(&f, socket, HIGH_BITS | AF_INET, SOCK_DGRAM, 0), RET_EPERM,
		   "udp with high bits");
	ASSERT_RET(CALL(&f, socket, AF_INET, SOCK_RAW, IPPROTO_ICMP), RET_EPERM, "raw");
	ASSERT_RET(CALL(&f, socket, AF_PACKET, SOCK_DGRAM, 0), RET_EPERM, "packet");
	ASSERT_RET(CALL(&f, socket, AF_INET, SOCK_STREAM, 0), RET_ALLOW, "tcp stays");
	ASSERT_RET(CALL(&f, socket, AF_UNIX, SOCK_DGRAM, 0), RET_ALLOW, "unix datagrams stay");
	ASSERT_RET(CALL(&f, socket, AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE), RET_ALLOW,
		   "netlink stays");
	ASSERT_RET(CALL(&f, nr_of("read"), 0), RET_ALLOW, "read");
}

TEST(personality_linux_and_the_query_only)
{
	static const uint64_t refused[] = {
		0x0040000 /* ADDR_NO_RANDOMIZE */,
		0x0400000 /* READ_IMPLIES_EXEC */,
		0x0100000 /* MMAP_PAGE_ZERO */,
		0x0200000 /* ADDR_COMPAT_LAYOUT */,
		0x0008 /* PER_LINUX32 */,
		0x0020000 /* UNAME26 */,
		1,
		0x80000000,
		0x7fffffff,
		0xfffffffe,
		0x0040000 | HIGH_BITS,
	};
	_cleanup_(filters_done) Filters f = {};
	int personality = nr_of("personality");

	build(true, true, &f);
	ASSERT_RET(CALL(&f, personality, 0xffffffff), RET_ALLOW, "query");
	ASSERT_RET(CALL(&f, personality, 0), RET_ALLOW, "PER_LINUX");
	ASSERT_RET(CALL(&f, personality, HIGH_BITS), RET_ALLOW, "PER_LINUX, high bits");
	for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
		char what[48];

		snprintf(what, sizeof(what), "personality(%#llx)", (unsigned long long)refused[i]);
		ASSERT_RET(CALL(&f, personality, refused[i]), RET_EPERM, what);
	}
	for (uint64_t v = 1; v < 0xffffffff; v = v * 3 + 1)
		ASSERT_RET(CALL(&f, personality, v), RET_EPERM, "a persona");
}

/* A runtime that waits for its app compiles the filters ahead (filters_prebuild()): what
 * it hands out afterwards is, byte for byte, what a compilation at the app's start makes,
 * and each app gets a copy of its own. */
TEST(prebuilt_filters_are_the_compiled_ones)
{
	static const bool variants[][2] = {{false, false}, {true, false}, {true, true}};
	Filters compiled[ELEMENTSOF(variants)] = {};

	for (size_t i = 0; i < ELEMENTSOF(variants); i++)
		build(variants[i][0], variants[i][1], &compiled[i]);
	ASSERT_OK(filters_prebuild());
	ASSERT_OK(filters_prebuild()); /* a second call keeps what the first made */
	for (size_t i = 0; i < ELEMENTSOF(variants); i++) {
		for (int copy = 0; copy < 2; copy++) {
			_cleanup_(filters_done) Filters f = {};

			build(variants[i][0], variants[i][1], &f);
			ASSERT_TRUE(f.base.insns != compiled[i].base.insns);
			ASSERT_TRUE(f.base.len == compiled[i].base.len);
			ASSERT_TRUE(memcmp(f.base.insns, compiled[i].base.insns,
					   f.base.len * sizeof(*f.base.insns)) == 0);
			ASSERT_TRUE(f.datagram.len == compiled[i].datagram.len);
			if (f.datagram.insns)
				ASSERT_TRUE(memcmp(f.datagram.insns, compiled[i].datagram.insns,
						   f.datagram.len * sizeof(*f.datagram.insns)) ==
					    0);
		}
		filters_done(&compiled[i]);
	}
}

/* The same programs in this process's kernel. Each TEST runs in its own child. */
TEST(the_kernel_agrees)
{
	_cleanup_(filters_done) Filters f = {};
	long r;

	build(true, true, &f);
	ASSERT_OK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
	ASSERT_OK(seccomp_program_load(&f.base, 0));
	/* The datagram filter is loaded under the base one, as agent-init does. */
	ASSERT_OK(seccomp_program_load(&f.datagram, 0));
	r = syscall(SYS_userfaultfd, O_CLOEXEC);
	ASSERT_TRUE(r < 0 && errno == EPERM);
	r = syscall(SYS_socket, AF_ALG_NUMBER, SOCK_SEQPACKET, 0);
	ASSERT_TRUE(r < 0 && errno == EPERM);
	r = syscall(SYS_socket, (long)(HIGH_BITS | AF_INET), SOCK_DGRAM, 0);
	ASSERT_TRUE(r < 0 && errno == EPERM);
	r = syscall(SYS_personality, 0x0040000);
	ASSERT_TRUE(r < 0 && errno == EPERM);
	ASSERT_TRUE(syscall(SYS_personality, 0xffffffff) >= 0);
	r = syscall(SYS_mbind, 0, 0, 0, 0, 0, 0);
	ASSERT_TRUE(r < 0 && errno == ENOSYS);
	r = syscall(600);
	ASSERT_TRUE(r < 0 && errno == ENOSYS);
	ASSERT_TRUE(getpid() > 0);
	r = syscall(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ASSERT_TRUE(r >= 0);
	close((int)r);
}

int main(void)
{
	return tests_run();
}
