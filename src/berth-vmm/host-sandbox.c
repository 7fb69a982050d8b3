/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host confinement of berth-vmm and QEMU: Landlock for files, TCP and IPC scopes, seccomp
 * for the system calls a VM supervisor and its emulator never need.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/landlock.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine.h"
#include "fileio.h"
#include "host-sandbox.h"
#include "landlock-abi.h"
#include "log.h"
#include "macros.h"
#include "missing-landlock.h"
#include "seccomp-filter.h"

#define FS_READ LANDLOCK_ACCESS_FS_READ_FILE
#define FS_WRITE LANDLOCK_ACCESS_FS_WRITE_FILE
#define FS_EXEC LANDLOCK_ACCESS_FS_EXECUTE
/* Every file right up to ABI 5, cut down to the running kernel's (landlock_abi_restrict()). */
#define FS_ALL                                                                       \
	(LANDLOCK_ABI1_FS | LANDLOCK_ACCESS_FS_REFER | LANDLOCK_ACCESS_FS_TRUNCATE | \
	 LANDLOCK_ACCESS_FS_IOCTL_DEV)
/* The only rights a rule on a file, rather than a directory, may carry. */
#define FS_FILE_RIGHTS \
	(FS_EXEC | FS_WRITE | FS_READ | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define NET_ALL (LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP)
#define SCOPE_ALL (LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL)

/* berth-vmm in its run dir: vm.json (written atomically: create, truncate, rename), the
 * sockets it listens on, the packed shares, and removing all of it after a clean stop. */
#define RUN_DIR_RIGHTS                                                                    \
	(FS_READ | FS_WRITE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_TRUNCATE | \
	 LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |                     \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR)
/* A directory berth-vmm writes one file into atomically (the boot evidence). */
#define WRITE_DIR_RIGHTS                                                        \
	(FS_WRITE | LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_MAKE_REG | \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE)

struct HostConfinement {
	const char *who; /* "QEMU" or "berth-vmm", for messages */
	int ruleset_fd;
	uint64_t handled_fs;
	uint64_t handled_net;
	SeccompProgram filter;
	unsigned int seccomp_flags;
};

typedef struct PathRule {
	const char *path;
	uint64_t access;
	bool optional; /* absent on some hosts: then there is nothing to allow */
} PathRule;

/*
 * What QEMU reads on the host besides its program, its libraries, its firmware and the VM's
 * own files. The set comes from `strace -f` of real boots (TCG, QEMU 7.2). What QEMU and
 * its libraries also look at but do without (/proc/self/status, /proc/filesystems,
 * /proc/mounts, /proc/stat, the NUMA layout in /sys/devices/system, /sys/bus/nd, the
 * working directory, /etc/localtime) stays out: each is refused and QEMU carries on.
 */
static const PathRule qemu_host_paths[] = {
	/* Where the dynamic loader finds each library. */
	{"/etc/ld.so.cache", FS_READ, true},
	/* Seeds for QEMU's random numbers. */
	{"/dev/urandom", FS_READ, false},
	/* QEMU opens it read-write as a stand-in descriptor. */
	{"/dev/null", FS_READ | FS_WRITE, false},
};

/*
 * What glibc's getaddrinfo() reads for the egress dialer, besides the NSS modules it has
 * loaded before the domain (egress_resolver_warm_up()). A file replaced after berth-vmm
 * started (a new inode) is not covered: resolution fails then, and the dial says so.
 */
static const PathRule resolver_paths[] = {
	{"/etc/nsswitch.conf", FS_READ, true}, {"/etc/hosts", FS_READ, true},
	{"/etc/resolv.conf", FS_READ, true},   {"/etc/host.conf", FS_READ, true},
	{"/etc/gai.conf", FS_READ, true},
};

/* clang-format off */
#define REFUSE(n) {n, SECCOMP_VERDICT_REFUSE}
#define NOSYS(n) {n, SECCOMP_VERDICT_NOSYS}
/* clang-format on */

/* Both filters; clone(2) with a namespace flag is refused too (seccomp-filter.h). */
static const SeccompSyscall denied_syscalls[] = {
	/* Debugging or reading another process. */
	REFUSE("ptrace"),
	REFUSE("process_vm_readv"),
	REFUSE("process_vm_writev"),
	/* Mounts, old and new API. */
	REFUSE("mount"),
	REFUSE("umount2"),
	REFUSE("pivot_root"),
	REFUSE("move_mount"),
	REFUSE("open_tree"),
	REFUSE("fsopen"),
	REFUSE("fsconfig"),
	REFUSE("fsmount"),
	REFUSE("fspick"),
	REFUSE("mount_setattr"),
	/* Namespaces. */
	REFUSE("unshare"),
	REFUSE("setns"),
	/* clone3 hides its flags behind a pointer a filter cannot read: it "does not exist",
	 * and libc falls back to clone(), whose flags are checked. */
	NOSYS("clone3"),
	/* Kernel code and kernel-held secrets. */
	REFUSE("init_module"),
	REFUSE("finit_module"),
	REFUSE("delete_module"),
	REFUSE("kexec_load"),
	REFUSE("kexec_file_load"),
	REFUSE("bpf"),
	REFUSE("perf_event_open"),
	REFUSE("keyctl"),
	REFUSE("add_key"),
	REFUSE("request_key"),
	/* io_uring runs file and socket operations that the filter never sees. */
	REFUSE("io_uring_setup"),
	REFUSE("io_uring_enter"),
	REFUSE("io_uring_register"),
};

/* Only berth-vmm's filter has these: QEMU's is loaded before its own exec (and QEMU's
 * -sandbox refuses exec once it runs). */
static const SeccompSyscall denied_exec[] = {
	REFUSE("execve"),
	REFUSE("execveat"),
};

/*
 * Only QEMU's. Every socket a VM's QEMU has is a server it makes itself: the channel
 * chardevs are "socket,server=on" unix sockets in the run dir, which berth-vmm connects to
 * (engine-qemu.c); the console is a file or a pipe, the disks are descriptors, and there is
 * no monitor, no network device and no vhost-user. A client socket could reach any named
 * unix socket on the host (an ssh agent, D-Bus, a container runtime), which Landlock before
 * ABI 9 (LANDLOCK_ACCESS_FS_RESOLVE_UNIX, Linux 7.1) cannot tell apart; QEMU never needs
 * one, so connect(2) is refused whatever the address.
 */
static const SeccompSyscall denied_qemu[] = {
	REFUSE("connect"),
};

HostConfinement *host_confinement_free(HostConfinement *c)
{
	if (!c)
		return NULL;
	safe_close(c->ruleset_fd);
	seccomp_program_done(&c->filter);
	free(c);
	return NULL;
}

static int confinement_new(const char *who, int abi, uint64_t scoped, uint64_t handled_net,
			   HostConfinement **ret)
{
	struct landlock_ruleset_attr_v6 attr = {
		.handled_access_fs = FS_ALL,
		.handled_access_net = handled_net,
		.scoped = scoped,
	};
	HostConfinement *c;

	landlock_abi_restrict(&attr, abi);
	c = calloc(1, sizeof(*c));
	if (!c)
		return log_error_errno(-ENOMEM, "out of memory");
	c->who = who;
	c->handled_fs = attr.handled_access_fs;
	c->handled_net = attr.handled_access_net;
	/* Handling TCP bind and connect with no port rule allows no TCP at all. */
	c->ruleset_fd = missing_landlock_create_ruleset(&attr, sizeof(attr), 0);
	if (c->ruleset_fd < 0) {
		int r = -errno;

		free(c);
		return log_error_errno(r, "cannot create the Landlock ruleset for %s: %m", who);
	}
	*ret = c;
	return 0;
}

/* Allow @access beneath the directory @fd refers to, or on the file. */
static int allow_fd(HostConfinement *c, int fd, uint64_t access, const char *what)
{
	struct landlock_path_beneath_attr pb = {.parent_fd = fd};
	struct stat st;

	if (fstat(fd, &st) < 0)
		return log_error_errno(errno, "cannot confine %s: %s: %m", c->who, what);
	if (!S_ISDIR(st.st_mode))
		access &= FS_FILE_RIGHTS;
	pb.allowed_access = access & c->handled_fs;
	if (pb.allowed_access == 0)
		return 0;
	if (missing_landlock_add_rule(c->ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		return log_error_errno(errno, "cannot confine %s: a rule for %s: %m", c->who, what);
	return 0;
}

/* The rule is on what @path resolves to: a symlink's target, as the kernel checks it. */
static int allow_path(HostConfinement *c, const char *path, uint64_t access, bool optional)
{
	_cleanup_close_ int fd = open(path, O_PATH | O_CLOEXEC);

	if (fd < 0 && optional && errno == ENOENT)
		return 0;
	if (fd < 0)
		return log_error_errno(errno, "cannot confine %s: %s: %m", c->who, path);
	return allow_fd(c, fd, access, path);
}

/* TCP connect to @port; nothing to do when this kernel's Landlock has no TCP rules. */
static int allow_connect_port(HostConfinement *c, uint16_t port)
{
	struct landlock_net_port_attr np = {.allowed_access = LANDLOCK_ACCESS_NET_CONNECT_TCP,
					    .port = port};

	if (!(c->handled_net & LANDLOCK_ACCESS_NET_CONNECT_TCP))
		return 0;
	if (missing_landlock_add_rule(c->ruleset_fd, LANDLOCK_RULE_NET_PORT, &np, 0) < 0)
		return log_error_errno(errno, "cannot confine %s: a rule for TCP port %u: %m",
				       c->who, (unsigned)port);
	return 0;
}

static int allow_table(HostConfinement *c, const PathRule *rules, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int r = allow_path(c, rules[i].path, rules[i].access, rules[i].optional);

		if (r < 0)
			return r;
	}
	return 0;
}

/* Like execvp(): a name without a slash is looked up in $PATH. */
static char *find_program(const char *name)
{
	const char *path = getenv("PATH");
	char candidate[PATH_MAX];
	struct stat st;

	if (strchr(name, '/'))
		return realpath(name, NULL);
	if (!path || !*path)
		path = "/bin:/usr/bin";
	while (*path) {
		size_t len = strcspn(path, ":");

		/* Absolute entries only: a relative one is the current directory's. */
		if (len > 0 && path[0] == '/' &&
		    snprintf(candidate, sizeof(candidate), "%.*s/%s", (int)len, path, name) <
			    (int)sizeof(candidate) &&
		    stat(candidate, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(candidate, X_OK) == 0)
			return realpath(candidate, NULL);
		path += len;
		if (*path == ':')
			path++;
	}
	errno = ENOENT;
	return NULL;
}

/* The PT_INTERP of a 64-bit ELF program; 0 and "" for a static one. */
static int elf_interpreter(const char *program, char *buf, size_t size)
{
	_cleanup_close_ int fd = open(program, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	Elf64_Ehdr eh;
	Elf64_Phdr ph;

	buf[0] = '\0';
	if (fd < 0)
		return -errno;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 256)
		return -ENOEXEC;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		if (pread(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) !=
		    (ssize_t)sizeof(ph))
			return -ENOEXEC;
		if (ph.p_type != PT_INTERP)
			continue;
		if (ph.p_filesz < 2 || ph.p_filesz > size)
			return -ENAMETOOLONG;
		if (pread(fd, buf, ph.p_filesz, (off_t)ph.p_offset) != (ssize_t)ph.p_filesz ||
		    buf[ph.p_filesz - 1] != '\0' || buf[0] != '/')
			return -ENOEXEC;
		return 0;
	}
	return 0;
}

/*
 * The QEMU program: execute it and its dynamic loader (the kernel opens both for execve;
 * Landlock checks nothing else for execution), read the loader's directory, where the
 * system's shared libraries and QEMU's modules are (mmap of a library is a read), and
 * QEMU's data directory <prefix>/share/qemu, where the microvm firmware is.
 */
static int allow_qemu_program(HostConfinement *c, const char *name)
{
	_cleanup_free_ char *program = find_program(name), *interp_real = NULL, *data = NULL;
	char interp[PATH_MAX];
	int r;

	if (!program)
		return log_error_errno(errno, "cannot find %s: %m. Install QEMU (qemu-system-x86).",
				       name);
	r = allow_path(c, program, FS_EXEC | FS_READ, false);
	if (r < 0)
		return r;
	r = elf_interpreter(program, interp, sizeof(interp));
	if (r < 0)
		return log_error_errno(
			r, "cannot confine QEMU: %s: not a program this host runs: %m", program);
	if (interp[0]) {
		interp_real = realpath(interp, NULL);
		if (!interp_real)
			return log_error_errno(errno, "cannot confine QEMU: %s: %m", interp);
		r = allow_path(c, interp_real, FS_EXEC | FS_READ, false);
		if (r >= 0)
			r = allow_path(c, dirname(interp_real), FS_READ, false);
		if (r < 0)
			return r;
	}
	/* program is /prefix/bin/qemu-system-x86_64: the data is in /prefix/share/qemu. */
	if (asprintf(&data, "%s/../share/qemu", dirname(program)) < 0)
		return log_error_errno(-ENOMEM, "out of memory");
	return allow_path(c, data, FS_READ, true);
}

/* The VM's own files, each through the descriptor QEMU reopens via /proc/self/fd. */
static int allow_vm_files(HostConfinement *c, const VmConfig *cfg)
{
	int r = 0;

	for (int k = 0; k < ARTIFACT_BASE_MAX && r >= 0; k++)
		r = allow_fd(c, cfg->artifacts->a[k].fd, FS_READ, cfg->artifacts->a[k].path);
	/* A read-write disk may be truncated too: a restore tells the template's kernel the
	 * state disk's size with block_resize, which truncates it to the size it has. */
	for (size_t i = 0; i < cfg->n_disks && r >= 0; i++)
		r = allow_fd(c, cfg->disks[i].fd,
			     FS_READ | (cfg->disks[i].readonly
						? 0
						: FS_WRITE | LANDLOCK_ACCESS_FS_TRUNCATE),
			     cfg->disks[i].serial);
	/* QEMU creates each channel socket (and may not remove anything there). */
	for (size_t i = 0; i < cfg->n_ports && r >= 0; i++) {
		_cleanup_free_ char *dir = strdup(cfg->ports[i].socket_path);

		r = dir ? allow_path(c, dirname(dir), LANDLOCK_ACCESS_FS_MAKE_SOCK, false)
			: log_error_errno(-ENOMEM, "out of memory");
	}
	/* And its QMP socket, in the run dir too. */
	if (r >= 0 && cfg->qmp_path) {
		_cleanup_free_ char *dir = strdup(cfg->qmp_path);

		r = dir ? allow_path(c, dirname(dir), LANDLOCK_ACCESS_FS_MAKE_SOCK, false)
			: log_error_errno(-ENOMEM, "out of memory");
	}
	if (r >= 0 && cfg->accel == ACCEL_KVM)
		r = allow_path(c, "/dev/kvm", FS_READ | FS_WRITE | LANDLOCK_ACCESS_FS_IOCTL_DEV,
			       false);
	return r;
}

/*
 * berth-vmm's socket(2) by address family: AF_UNIX always; with the egress dialer also AF_INET and
 * AF_INET6 (stream and datagram only: TCP, and UDP for DNS) and AF_NETLINK (NETLINK_ROUTE
 * only, which getaddrinfo() uses to learn the local addresses). Landlock has no rule for
 * UDP or raw sockets, so without a dialer this is what keeps berth-vmm off the network.
 * Each rule reads an argument's low 32 bits only, as the kernel does (seccomp-filter.h).
 * connect(2) stays open: berth-vmm connects to QEMU's channel socket in the run dir (or
 * to --channel-connect's, in tests), and the dialer to TCP ports Landlock checks.
 */
static int filter_add_vmm_sockets(scmp_filter_ctx ctx, bool egress)
{
	const uint32_t refused = SCMP_ACT_ERRNO(EAFNOSUPPORT);
	int r = 0;

	for (int f = 0; f < AF_MAX && r >= 0; f++) {
		const struct scmp_arg_cmp family = seccomp_arg_eq(0, (uint32_t)f);
		bool inet = f == AF_INET || f == AF_INET6;

		if (f == AF_UNIX)
			continue;
		if (egress && inet) {
			/* SOCK_STREAM (1) and SOCK_DGRAM (2); the flags above bit 3 are free. */
			for (unsigned t = 0; t < 16 && r >= 0; t++)
				if (t != SOCK_STREAM && t != SOCK_DGRAM)
					r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
							     SCMP_SYS(socket), 2, family,
							     seccomp_arg_masked_eq(1, 0xf, t));
		} else if (egress && f == AF_NETLINK)
			r = seccomp_filter_add_unless(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket),
						      2, NETLINK_ROUTE, 1, &family);
		else
			r = seccomp_rule_add(ctx, refused, SCMP_SYS(socket), 1, family);
	}
	if (r >= 0)
		r = seccomp_filter_add_range(ctx, refused, SCMP_SYS(socket), 0, AF_MAX, UINT32_MAX,
					     0, NULL);
	return r;
}

/*
 * socket(2) and socketpair(2) for QEMU: AF_UNIX of type SOCK_STREAM or SOCK_SEQPACKET only,
 * EPERM for the rest. QEMU's chardev sockets are unix stream sockets; nothing else in its
 * run makes a socket (not the accelerator probe's boots either, which have no channel).
 * Landlock refuses QEMU every TCP port, but it has no rule for UDP, raw or packet sockets,
 * or any other family. A unix datagram socket (SOCK_DGRAM, or SOCK_RAW, which the kernel
 * makes one) is refused too: with connect(2) refused, a datagram sent to an address is the
 * one way left to a named socket outside the run dir (/dev/log, journald's socket). A
 * stream or seqpacket socket never sends to an address.
 */
static int filter_add_qemu_sockets(scmp_filter_ctx ctx)
{
	static const int calls[] = {SCMP_SYS(socket), SCMP_SYS(socketpair)};
	const struct scmp_arg_cmp unix_family = seccomp_arg_eq(0, AF_UNIX);
	const uint32_t refused = SCMP_ACT_ERRNO(EPERM);
	int r = 0;

	for (size_t i = 0; i < ELEMENTSOF(calls) && r >= 0; i++) {
		r = seccomp_filter_add_unless(ctx, refused, calls[i], 0, AF_UNIX, 0, NULL);
		/* The type is the low 4 bits; SOCK_CLOEXEC and SOCK_NONBLOCK are above. */
		for (unsigned t = 0; t < 16 && r >= 0; t++)
			if (t != SOCK_STREAM && t != SOCK_SEQPACKET)
				r = seccomp_rule_add(ctx, refused, calls[i], 2, unix_family,
						     seccomp_arg_masked_eq(1, 0xf, t));
	}
	return r;
}

/* @qemu: QEMU's filter, else berth-vmm's own, @egress telling whether its egress dialer
 * runs. */
static int filter_build(HostConfinement *c, bool qemu, bool egress)
{
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx ctx = seccomp_filter_new(SCMP_ACT_ALLOW);
	int r;

	if (!ctx)
		return log_error_errno(-ENOMEM, "out of memory");
	r = seccomp_filter_refuse_clone_namespaces(ctx);
	if (r >= 0)
		r = seccomp_filter_add_table(ctx, denied_syscalls, ELEMENTSOF(denied_syscalls));
	if (r >= 0 && qemu)
		r = seccomp_filter_add_table(ctx, denied_qemu, ELEMENTSOF(denied_qemu));
	if (r >= 0 && qemu)
		r = filter_add_qemu_sockets(ctx);
	if (r >= 0 && !qemu)
		r = seccomp_filter_add_table(ctx, denied_exec, ELEMENTSOF(denied_exec));
	if (r >= 0 && !qemu)
		r = filter_add_vmm_sockets(ctx, egress);
	if (r >= 0)
		r = seccomp_filter_export(ctx, &c->filter);
	if (r < 0)
		return log_error_errno(r, "cannot build the seccomp filter for %s: %m", c->who);
	return 0;
}

int host_sandbox_check(bool disabled, HostSandbox *ret)
{
	int abi = missing_landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	int error = abi < 0 ? errno : 0;

	*ret = (HostSandbox){.enabled = !disabled, .abi = abi < 0 ? 0 : abi};
	if (disabled) {
		snprintf(ret->reason, sizeof(ret->reason), "turned off with --no-host-sandbox");
		return 0;
	}
	if (abi < 1)
		return log_error_errno(
			-EOPNOTSUPP,
			"this host kernel has no Landlock (%s), and berth-vmm does not run unconfined: boot a kernel of 5.13 or later with CONFIG_SECURITY_LANDLOCK=y and landlock in its lsm= list (see 'berth doctor'); for debugging only, pass --no-host-sandbox",
			error == EOPNOTSUPP ? "built in but not enabled at boot"
			: error == ENOSYS   ? "built without it"
					    : strerrorname_np(error ?: EINVAL));
	snprintf(ret->reason, sizeof(ret->reason), "not applied yet: applied once QEMU runs");
	return 0;
}

int host_sandbox_prepare_qemu(const HostSandbox *hs, const VmConfig *cfg, HostConfinement **ret)
{
	_cleanup_(host_confinement_freep) HostConfinement *c = NULL;
	int r;

	if (!hs || !hs->enabled) {
		*ret = NULL;
		return 0;
	}
	r = confinement_new("QEMU", hs->abi, SCOPE_ALL, NET_ALL, &c);
	if (r >= 0)
		r = allow_qemu_program(c,
				       cfg->qemu_binary ? cfg->qemu_binary : "qemu-system-x86_64");
	if (r >= 0)
		r = allow_table(c, qemu_host_paths, ELEMENTSOF(qemu_host_paths));
	if (r >= 0)
		r = allow_vm_files(c, cfg);
	if (r >= 0)
		r = filter_build(c, true, false);
	if (r < 0)
		return r;
	*ret = TAKE_PTR(c);
	return 0;
}

/* Landlock confines the calling thread only: berth-vmm must have no other. */
static int threads_count(void)
{
	_cleanup_free_ char *status = NULL;
	const char *p;
	int r = read_full_file("/proc/self/status", 64 * 1024, &status, NULL);

	if (r < 0)
		return r;
	p = strstr(status, "\nThreads:");
	return p ? atoi(p + strlen("\nThreads:")) : -EPROTO;
}

int host_sandbox_prepare_self(const HostSandbox *hs, const char *run_dir,
			      const char *const *write_dirs, const HostEgress *egress,
			      HostConfinement **ret)
{
	_cleanup_(host_confinement_freep) HostConfinement *c = NULL;
	_cleanup_free_ char *parent = NULL;
	int r, n;

	if (!hs || !hs->enabled) {
		*ret = NULL;
		return 0;
	}
	n = threads_count();
	parent = strdup(run_dir);
	if (!parent)
		return log_error_errno(-ENOMEM, "out of memory");
	if (n != 1)
		return log_error_errno(n < 0 ? n : -EBUSY,
				       "cannot confine berth-vmm: it must have one thread, not %d",
				       n);
	/* Signals stay unscoped: QEMU's domain is not nested in this one, and berth-vmm
	 * still kills QEMU (the stop timeout, and the parent-death signal as it exits). */
	/* Handling TCP connect with a rule per port allows exactly those; not handling it
	 * (a ":*" pattern) allows every port. Bind stays handled, with no rule: never. */
	r = confinement_new("berth-vmm", hs->abi, LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET,
			    egress && egress->any_port ? LANDLOCK_ACCESS_NET_BIND_TCP : NET_ALL,
			    &c);
	if (r >= 0)
		r = allow_path(c, run_dir, RUN_DIR_RIGHTS, false);
	/* After a clean stop berth-vmm removes its run dir; Landlock checks that on the
	 * parent, which otherwise gets nothing: only empty directories can go. */
	if (r >= 0)
		r = allow_path(c, dirname(parent), LANDLOCK_ACCESS_FS_REMOVE_DIR, false);
	for (size_t i = 0; write_dirs && write_dirs[i] && r >= 0; i++) {
		r = mkdir_p(write_dirs[i], 0700);
		if (r < 0)
			return log_error_errno(r, "cannot create %s: %m", write_dirs[i]);
		r = allow_path(c, write_dirs[i], WRITE_DIR_RIGHTS, false);
	}
	if (egress) {
		for (size_t i = 0; !egress->any_port && i < egress->n_ports && r >= 0; i++)
			r = allow_connect_port(c, egress->ports[i]);
		if (r >= 0)
			r = allow_table(c, resolver_paths, ELEMENTSOF(resolver_paths));
	}
	if (r >= 0)
		r = filter_build(c, false, egress != NULL);
	if (r < 0)
		return r;
	c->seccomp_flags = SECCOMP_FILTER_FLAG_TSYNC;
	*ret = TAKE_PTR(c);
	return 0;
}

static _noreturn_ void enter_failed(const HostConfinement *c, const char *step)
{
	log_error_errno(errno,
			"cannot confine %s: %s failed: %m; stopping rather than run half-confined",
			c->who, step);
	_exit(HOST_SANDBOX_EXIT_FAILED);
}

void host_confinement_enter(HostConfinement *c)
{
	int r;

	if (!c)
		return;
	/* Landlock and an unprivileged seccomp filter both need no_new_privs; it also keeps
	 * a setuid program from gaining what the domain took away. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		enter_failed(c, "setting no_new_privs");
	if (missing_landlock_restrict_self(c->ruleset_fd, 0) < 0)
		enter_failed(c, "entering the Landlock domain");
	/* Last, so that nothing above can be refused by it. */
	r = seccomp_program_load(&c->filter, c->seccomp_flags);
	if (r < 0) {
		errno = -r;
		enter_failed(c, "loading the seccomp filter");
	}
	c->ruleset_fd = safe_close(c->ruleset_fd);
}

/* The test hook: what happens to an exec now. A child tries it; a close-on-exec pipe
 * carries back its errno, or nothing if the exec went through. */
static void exec_probe(const char *path)
{
	int pipefd[2], err = 0, status;
	ssize_t n;
	pid_t pid;

	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		log_error_errno(errno, "exec probe: cannot run: %m");
		return;
	}
	pid = fork();
	if (pid == 0) {
		char *const argv[] = {(char *)path, NULL};
		char *const envp[] = {NULL};

		execve(path, argv, envp);
		err = errno;
		(void)!write(pipefd[1], &err, sizeof(err));
		_exit(127);
	}
	safe_close(pipefd[1]);
	if (pid < 0) {
		safe_close(pipefd[0]);
		log_error_errno(errno, "exec probe: cannot fork: %m");
		return;
	}
	n = loop_read(pipefd[0], &err, sizeof(err));
	safe_close(pipefd[0]);
	(void)waitpid(pid, &status, 0);
	if (n == (ssize_t)sizeof(err) && err > 0)
		log_info("exec probe: refused (%s)", strerrorname_np(err) ?: "?");
	else
		log_error("exec probe: ALLOWED (%s ran)", path);
}

int host_sandbox_apply_self(HostSandbox *hs, const char *run_dir, const char *const *write_dirs,
			    const HostEgress *egress)
{
	_cleanup_(host_confinement_freep) HostConfinement *c = NULL;
	/* Everything either domain handles, to say what this kernel lacks of it. */
	const struct landlock_ruleset_attr_v6 used = {FS_ALL, NET_ALL, SCOPE_ALL};
	const char *probe = getenv("BERTH_VMM_TEST_EXEC_PROBE");
	char missing[320];
	int r;

	if (!hs->enabled) {
		log_warning(
			"host sandbox: off (--no-host-sandbox); berth-vmm and QEMU run unconfined");
		return 0;
	}
	r = host_sandbox_prepare_self(hs, run_dir, write_dirs, egress, &c);
	if (r < 0)
		return r;
	host_confinement_enter(c);
	hs->applied = true;
	hs->reason[0] = '\0';
	landlock_abi_missing(hs->abi, &used, missing, sizeof(missing));
	log_info("host sandbox: landlock+seccomp applied to berth-vmm and QEMU (Landlock ABI %d)",
		 hs->abi);
	if (missing[0])
		log_warning("host sandbox: this kernel's Landlock has no %s; confinement is weaker",
			    missing);
	if (!egress)
		log_info("host sandbox: no network for berth-vmm (no --egress-allow)");
	else if (egress->any_port)
		log_info("host sandbox: the egress dialer may connect to any TCP port");
	else {
		char ports[512] = "";
		size_t n = 0;

		for (size_t i = 0; i < egress->n_ports && n < sizeof(ports); i++)
			n += (size_t)snprintf(ports + n, sizeof(ports) - n, "%s%u", i ? "," : "",
					      (unsigned)egress->ports[i]);
		log_info("host sandbox: the egress dialer may connect to TCP ports %s", ports);
	}
	if (probe && *probe)
		exec_probe(probe);
	return 0;
}

json_t *host_sandbox_to_json(const HostSandbox *hs)
{
	json_t *o = json_pack("{s:o, s:b, s:i}", "kind",
			      hs->enabled ? json_string("landlock+seccomp") : json_null(),
			      "applied", hs->applied, "abi", hs->abi);

	if (o && hs->reason[0])
		json_object_set_new(o, "reason", json_string(hs->reason));
	return o;
}
