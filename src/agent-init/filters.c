/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "filters.h"
#include "macros.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#define IPPROTO_SCTP_NUMBER 132
#define SOCK_TYPE_MASK 0xf

/* Namespace flags refused on clone (SPEC 4.5.4); unshare also refuses CLONE_NEWTIME. */
static const unsigned long clone_ns_flags[] = {
	CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
	CLONE_NEWIPC,  CLONE_NEWPID, CLONE_NEWNET,
};

/* Refused outright, whatever the arguments. */
static const struct {
	const char *name;
	int error;
} denied_syscalls[] = {
	{"setns", EPERM},
	/* clone3 hides its flags behind a pointer a filter cannot read: say it does not
	 * exist, and libc falls back to clone(), whose flags are checked. */
	{"clone3", ENOSYS},
	{"io_uring_setup", ENOSYS},
	{"io_uring_enter", ENOSYS},
	{"io_uring_register", ENOSYS},
	{"ptrace", EPERM},
	{"process_vm_readv", EPERM},
	{"process_vm_writev", EPERM},
	{"bpf", EPERM},
	{"keyctl", EPERM},
	{"add_key", EPERM},
	{"request_key", EPERM},
	{"init_module", EPERM},
	{"finit_module", EPERM},
	{"delete_module", EPERM},
	{"mount", EPERM},
	{"umount2", EPERM},
	{"pivot_root", EPERM},
	{"move_mount", EPERM},
	{"open_tree", EPERM},
	{"fsopen", EPERM},
	{"fsmount", EPERM},
	{"fsconfig", EPERM},
	{"fspick", EPERM},
	{"mount_setattr", EPERM},
	{"kexec_load", EPERM},
	{"kexec_file_load", EPERM},
	{"perf_event_open", EPERM},
};

static void ctx_releasep(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}

static scmp_filter_ctx ctx_new(void)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);

	/* A 32-bit or x32 system call would slip past rules written for the native table. */
	if (ctx && seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS) < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

static int add_namespace_rules(scmp_filter_ctx ctx)
{
	int r = 0;

	for (size_t i = 0; i < ELEMENTSOF(clone_ns_flags) && r >= 0; i++) {
		unsigned long f = clone_ns_flags[i];

		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0_32(SCMP_CMP_MASKED_EQ, f, f));
		if (r >= 0)
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
					     SCMP_A0_32(SCMP_CMP_MASKED_EQ, f, f));
	}
	if (r >= 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
				     SCMP_A0_32(SCMP_CMP_MASKED_EQ, CLONE_NEWTIME, CLONE_NEWTIME));
	return r;
}

static int add_denied_syscalls(scmp_filter_ctx ctx)
{
	for (size_t i = 0; i < ELEMENTSOF(denied_syscalls); i++) {
		int nr = seccomp_syscall_resolve_name(denied_syscalls[i].name), r;

		if (nr == __NR_SCMP_ERROR)
			return -ENOSYS;
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(denied_syscalls[i].error), nr, 0);
		if (r < 0)
			return r;
	}
	return 0;
}

static int add_socket_rules(scmp_filter_ctx ctx, bool restrict_protocols)
{
	static const int inet[] = {AF_INET, AF_INET6};
	int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
				 SCMP_A0(SCMP_CMP_EQ, AF_VSOCK));

	for (size_t i = 0; i < ELEMENTSOF(inet) && restrict_protocols && r >= 0; i++) {
		/* SOCK_SEQPACKET on AF_INET is SCTP; explicit SCTP and MPTCP on any type. */
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
				     SCMP_A0(SCMP_CMP_EQ, inet[i]),
				     SCMP_A1(SCMP_CMP_MASKED_EQ, SOCK_TYPE_MASK, SOCK_SEQPACKET));
		if (r >= 0)
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
					     SCMP_A0(SCMP_CMP_EQ, inet[i]),
					     SCMP_A2(SCMP_CMP_EQ, IPPROTO_SCTP_NUMBER));
		if (r >= 0)
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
					     SCMP_A0(SCMP_CMP_EQ, inet[i]),
					     SCMP_A2(SCMP_CMP_EQ, IPPROTO_MPTCP));
	}
	return r;
}

/* SPEC 4.5.5: no UDP, no raw IP, no packet sockets; TCP, AF_UNIX, AF_NETLINK untouched. */
static int add_datagram_rules(scmp_filter_ctx ctx)
{
	static const int families[] = {AF_INET, AF_INET6}, types[] = {SOCK_DGRAM, SOCK_RAW};
	int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
				 SCMP_A0(SCMP_CMP_EQ, AF_PACKET));

	for (size_t i = 0; i < ELEMENTSOF(families) && r >= 0; i++)
		for (size_t j = 0; j < ELEMENTSOF(types) && r >= 0; j++)
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
					     SCMP_A0(SCMP_CMP_EQ, families[i]),
					     SCMP_A1(SCMP_CMP_MASKED_EQ, SOCK_TYPE_MASK, types[j]));
	return r;
}

/* libseccomp writes BPF to an fd; a memfd brings it back into memory. */
static int export_program(scmp_filter_ctx ctx, SeccompProgram *ret)
{
	_cleanup_close_ int fd = memfd_create("agent-init-seccomp", MFD_CLOEXEC);
	_cleanup_free_ struct sock_filter *insns = NULL;
	off_t size;
	int r;

	if (fd < 0)
		return -errno;
	r = seccomp_export_bpf(ctx, fd);
	if (r < 0)
		return r;
	size = lseek(fd, 0, SEEK_END);
	if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
	    size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS)
		return -EINVAL;
	insns = malloc((size_t)size);
	if (!insns)
		return -ENOMEM;
	if (pread(fd, insns, (size_t)size, 0) != size)
		return -EIO;
	ret->len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
	ret->insns = TAKE_PTR(insns);
	return 0;
}

void filters_done(Filters *f)
{
	free(f->base.insns);
	free(f->datagram.insns);
	*f = (Filters){};
}

int filters_build(bool restrict_protocols, bool deny_datagrams, Filters *ret)
{
	_cleanup_(ctx_releasep) scmp_filter_ctx base = ctx_new(), datagram = NULL;
	Filters f = {};
	int r;

	if (!base)
		return -ENOMEM;
	r = add_namespace_rules(base);
	if (r >= 0)
		r = add_denied_syscalls(base);
	if (r >= 0)
		r = add_socket_rules(base, restrict_protocols);
	if (r >= 0)
		r = export_program(base, &f.base);
	if (r >= 0 && deny_datagrams) {
		datagram = ctx_new();
		r = datagram ? add_datagram_rules(datagram) : -ENOMEM;
		if (r >= 0)
			r = export_program(datagram, &f.datagram);
	}
	if (r < 0) {
		filters_done(&f);
		return r;
	}
	*ret = f;
	return 0;
}

int seccomp_program_load(const SeccompProgram *p)
{
	struct sock_fprog prog = {.len = p->len, .filter = p->insns};

	if (!p->insns)
		return -EINVAL;
	return RET_NERRNO((int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog));
}
