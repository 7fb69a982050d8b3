/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * berth-vmm's confinement on the host, and QEMU's (docs/vm.md, "Host confinement"). Each
 * gets a Landlock domain of its own and a seccomp filter that refuses ptrace, mounts,
 * namespaces, module loading, bpf, keyrings, io_uring, kexec and perf events; berth-vmm's
 * filter also refuses exec, QEMU's connect(2) and every socket but a unix stream or
 * seqpacket one. QEMU's domain is made before its exec and so holds from its first
 * instruction; berth-vmm confines itself once QEMU runs and its sockets exist. The filters'
 * mechanism is shared with agent-init (seccomp-filter.h), and so is the Landlock ABI table
 * (landlock-abi.h).
 *
 * The order is the one of STYLE.md 3.8: everything that can fail (opening the paths,
 * building the ruleset, compiling the filter) happens in host_sandbox_prepare_*(), and
 * host_confinement_enter() is the short irreversible part that never returns a failure.
 */

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct VmConfig;

#define HOST_SANDBOX_REASON_MAX 160
/* The exit status of a process that failed half-way through confining itself. */
#define HOST_SANDBOX_EXIT_FAILED 125

/* What berth-vmm found and did, as vm.json's "hostSandbox" reports it. A value type. */
typedef struct HostSandbox {
	bool enabled;			      /* false with --no-host-sandbox */
	bool applied;			      /* berth-vmm's own domain and filter are in force */
	int abi;			      /* the host's Landlock ABI, 0 when it has none */
	char reason[HOST_SANDBOX_REASON_MAX]; /* why it is not applied; "" once it is */
} HostSandbox;

/* A prepared domain and filter, not yet in force. */
typedef struct HostConfinement HostConfinement;

/* What berth-vmm's egress dialer may reach (docs/egress.md). */
typedef struct HostEgress {
	bool any_port;	       /* a ":*" pattern: TCP connect to every port */
	const uint16_t *ports; /* otherwise TCP connect to exactly these */
	size_t n_ports;
} HostEgress;

/*
 * host_sandbox_check() - find the host's Landlock ABI and decide whether berth-vmm can run.
 * @disabled: --no-host-sandbox was given.
 * @ret: filled in every case.
 * Logs and returns -EOPNOTSUPP when the kernel has no Landlock and @disabled is false: the
 * message says how to get Landlock, or how to turn the sandbox off for debugging.
 * SECURITY: berth-vmm never runs unconfined unless it was told to.
 */
int host_sandbox_check(bool disabled, HostSandbox *ret);

/*
 * host_sandbox_prepare_qemu() - build QEMU's domain and filter, in the parent.
 * Read and execute: the QEMU binary and its dynamic loader. Read: the loader's library
 * directory (shared libraries, QEMU's modules), /etc/ld.so.cache, QEMU's data directory
 * (firmware), /dev/urandom; /dev/null read-write. Per file: the kernel, initrd and root
 * image, each disk (written only when it is read-write); no file to write its console to
 * (that is a pipe). Where each channel socket and the QMP socket go (the run dir) QEMU may
 * create a socket and nothing else. /dev/kvm (with its ioctls) when the VM uses KVM.
 * Network: socket() and socketpair() for AF_UNIX SOCK_STREAM and SOCK_SEQPACKET only
 * (EPERM otherwise), and no connect() at all (EPERM), since every socket QEMU has is a
 * server it made: it reaches no named unix socket on the host. No TCP (Landlock) and no
 * other family; abstract unix sockets and signals scoped to QEMU itself.
 * @hs: NULL or not enabled: *@ret is NULL and there is nothing to enter.
 * @cfg: the VM: qemu_binary (NULL: qemu-system-x86_64 in $PATH), the artifacts, disks,
 *       ports, qmp_path and accel.
 * Logs what failed and returns -errno; *@ret is untouched then.
 */
int host_sandbox_prepare_qemu(const HostSandbox *hs, const struct VmConfig *cfg,
			      HostConfinement **ret);

/*
 * host_sandbox_prepare_self() - build berth-vmm's own domain and filter.
 * Read and write in @run_dir (files and sockets, and remove them); remove the run dir
 * itself (its parent: remove empty directories only); create and write files in each of
 * @write_dirs (NULL-terminated, may be NULL), which are made (0700) when missing.
 * Network: with @egress NULL, no TCP at all and socket() only for AF_UNIX. With @egress,
 * TCP connect to its ports only (every port for any_port; never bind), socket() for
 * AF_UNIX, AF_INET and AF_INET6 (stream and datagram: TCP, and UDP for DNS) and
 * AF_NETLINK (NETLINK_ROUTE, which getaddrinfo() asks about local addresses), and read
 * access to what name resolution reads: /etc/hosts, /etc/resolv.conf, /etc/nsswitch.conf,
 * /etc/host.conf, /etc/gai.conf (NSS modules must be loaded before, see
 * egress_resolver_warm_up()). Abstract unix sockets scoped. Signals are not scoped:
 * berth-vmm must still be able to kill QEMU, whose domain is not nested in its own.
 * Logs what failed and returns -errno, including when berth-vmm has more than one thread
 * (Landlock would confine only the calling one).
 */
int host_sandbox_prepare_self(const HostSandbox *hs, const char *run_dir,
			      const char *const *write_dirs, const HostEgress *egress,
			      HostConfinement **ret);

/*
 * host_confinement_enter() - put @c in force in the calling process: no_new_privs, the
 * Landlock domain, then the seccomp filter. Does nothing for NULL.
 * SECURITY: on any failure it logs and calls _exit(HOST_SANDBOX_EXIT_FAILED): a process
 * is never left running half-confined.
 */
void host_confinement_enter(HostConfinement *c);

HostConfinement *host_confinement_free(HostConfinement *c);
static inline void host_confinement_freep(HostConfinement **c)
{
	host_confinement_free(*c);
}

/*
 * host_sandbox_apply_self() - prepare and enter berth-vmm's own confinement, record it in
 * @hs and log it. A no-op (logged) when @hs is not enabled.
 * Test hook: with BERTH_VMM_TEST_EXEC_PROBE=PATH in the environment it then tries to
 * execve(PATH) in a forked child and logs "exec probe: refused (<errno name>)" or
 * "exec probe: ALLOWED". It only ever tries what the filter must refuse.
 * Returns -errno (logged) when preparing failed, before anything was restricted.
 */
int host_sandbox_apply_self(HostSandbox *hs, const char *run_dir, const char *const *write_dirs,
			    const HostEgress *egress);

/* {"kind": "landlock+seccomp"|null, "applied": bool, "abi": N, "reason"?: "..."} */
json_t *host_sandbox_to_json(const HostSandbox *hs);
