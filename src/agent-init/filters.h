/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * agent-init's seccomp filters (SPEC 4.5.4, 4.5.5 and the VM additions), compiled to BPF by
 * libseccomp while nothing is restricted yet, and loaded with seccomp(2) as the very last
 * restriction. Non-logging.
 */

#include <linux/filter.h>
#include <stdbool.h>

typedef struct SeccompProgram {
	struct sock_filter *insns; /* NULL: no program */
	unsigned short len;
} SeccompProgram;

typedef struct Filters {
	/*
	 * Every app: no new namespaces (clone/unshare namespace flags and setns: EPERM;
	 * clone3: ENOSYS so that libc falls back to clone), no io_uring (ENOSYS), no
	 * AF_VSOCK socket, no ptrace or process_vm_*, bpf, keyrings, modules, mounts,
	 * kexec or perf_event_open (EPERM). When the network is restricted also SCTP
	 * and MPTCP sockets, which Landlock's TCP port rules may not see (EPERM).
	 * Foreign-architecture system calls kill the process.
	 */
	SeccompProgram base;
	/* Only for an app that declared no network: UDP and raw IPv4/IPv6 sockets and any
	 * AF_PACKET socket (EPERM). */
	SeccompProgram datagram;
} Filters;

void filters_done(Filters *f);

/*
 * filters_build() - compile the filters.
 * @restrict_protocols: add the SCTP/MPTCP rule (the network is not unrestricted).
 * @deny_datagrams: build the datagram filter too (no network declared at all).
 * @ret: the programs; release with filters_done().
 * Returns 0 or -errno. Never sets SECCOMP_FILTER_FLAG_SPEC_ALLOW.
 */
int filters_build(bool restrict_protocols, bool deny_datagrams, Filters *ret);

/*
 * seccomp_program_load() - install @p on the calling thread with seccomp(2), flags 0.
 * The caller has set no_new_privs or holds CAP_SYS_ADMIN. Returns 0 or -errno.
 */
int seccomp_program_load(const SeccompProgram *p);
