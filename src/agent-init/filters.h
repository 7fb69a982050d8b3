/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * agent-init's seccomp filters (SPEC 4.5.4, 4.5.5 and the VM additions), compiled to BPF by
 * libseccomp while nothing is restricted yet, and loaded with seccomp(2) as the very last
 * restriction. Non-logging. The table and where each entry came from: filters.c; the traces
 * behind it: syscalls-traced.txt, made by tools/trace-app-syscalls.py.
 */

#include <stdbool.h>
#include <stddef.h>

#include "seccomp-filter.h"

typedef struct Filters {
	/*
	 * Every app: the allow list. A system call in the table passes (some only with the
	 * arguments filters.c lists: clone without namespace flags, socket by family, type
	 * and protocol, personality PER_LINUX or the query); one refused on purpose fails
	 * with EPERM (namespaces, ptrace and process_vm_*, bpf, keyrings, modules, mounts,
	 * kexec, perf_event_open, userfaultfd, open_by_handle_at, ...); clone3 and io_uring
	 * with ENOSYS, and so does everything not in the table, newer calls included, so
	 * that libc and the runtimes fall back. Foreign-architecture system calls (i386,
	 * x32) kill the process.
	 */
	SeccompProgram base;
	/* Only for an app that declared no network: UDP and raw IPv4/IPv6 sockets and any
	 * AF_PACKET socket (EPERM). */
	SeccompProgram datagram;
} Filters;

/* The base filter's table, for tests and tools. A call it does not name gets ENOSYS. */
const SeccompSyscall *filters_syscall_table(size_t *ret_n);

void filters_done(Filters *f);

/*
 * filters_build() - compile the filters.
 * @restrict_protocols: allow only TCP and UDP on IPv4/IPv6 (the network is not unrestricted).
 * @deny_datagrams: build the datagram filter too (no network declared at all).
 * @ret: the programs; release with filters_done().
 * Returns 0 or -errno. Never sets SECCOMP_FILTER_FLAG_SPEC_ALLOW.
 */
int filters_build(bool restrict_protocols, bool deny_datagrams, Filters *ret);

/*
 * filters_prebuild() - compile every variant of the filters now, for filters_build() to
 * hand out copies of later: a runtime that waits for its app (in-place.c) does it before
 * it waits, and spares the app's start the compilation (about 40 ms under emulation).
 * The programs are agent-init's tables, the same whenever they are compiled.
 */
int filters_prebuild(void);
