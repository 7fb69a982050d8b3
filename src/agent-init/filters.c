/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The app's seccomp filters (docs/confinement.md, "seccomp").
 *
 * The base filter is an allow list: the system calls the runtimes were seen to make, traced
 * from real runs of the example apps and the test fixtures in the root image's userland
 * (tools/trace-app-syscalls.py; the evidence is src/agent-init/syscalls-traced.txt), and a
 * margin for what glibc, Node and Python do on paths those runs did not take, each entry
 * with where it came from. Everything else fails:
 *
 *   - ENOSYS by default. It is what a kernel without the call answers, and what glibc,
 *     libuv and CPython are written to fall back from (statx, faccessat2, clone3,
 *     close_range, pidfd_*, epoll_pwait2, a call newer than this table); EPERM for a call
 *     a runtime probes would break it instead (glibc does not fall back on EPERM).
 *   - EPERM for what is refused on purpose (the REFUSE entries and the argument rules):
 *     the answer reads as a refusal, as it did when these were the deny list.
 *   - A call through another table (i386's int 0x80, x32's numbers) kills the process.
 *
 * The argument rules compare only the low 32 bits of an int argument, which is all the
 * kernel reads: a family, type or protocol with bits set above them is the same socket to
 * the kernel, and must not be a different one to the filter. libseccomp cannot give one
 * call two answers by overlapping rules (a general rule swallows a more specific one with
 * another action), so each rule set below is disjoint.
 */
#include <errno.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "filters.h"
#include "macros.h"
#include "seccomp-filter.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#define IPPROTO_SCTP_NUMBER 132
#define SOCK_TYPE_MASK 0xf
#define PER_LINUX_NUMBER 0x0000
#define PERSONALITY_QUERY 0xffffffffU
/* Netlink protocols are below 32 (MAX_LINKS); a higher one is EPROTONOSUPPORT anyway. */
#define NETLINK_PROTOCOLS 32
/* The families this glibc knows; a higher one falls to the default (ENOSYS). */
#define FAMILIES_KNOWN AF_MAX

/* Only the low 32 bits of an int argument, which is all the kernel reads (seccomp-filter.h). */
#define ARG_IS(a, v) seccomp_arg_eq((a), (uint32_t)(v))
#define ARG_MASKED(a, m, v) seccomp_arg_masked_eq((a), (uint32_t)(m), (uint32_t)(v))

/* clang-format off */
#define ALLOW(n) {n, SECCOMP_VERDICT_ALLOW}
#define ARGS(n) {n, SECCOMP_VERDICT_ARGS}
#define REFUSE(n) {n, SECCOMP_VERDICT_REFUSE}
#define NOSYS(n) {n, SECCOMP_VERDICT_NOSYS}
/* clang-format on */

/*
 * The programs the traces name: node (Debian's Node 18 running runtime.mjs and the app),
 * python3 (Debian's Python 3.11 running berth_sdk.runtime, and the python3 children a Node
 * app starts), sleep (coreutils, children of the limits fixture), egress-broker and
 * agent-init-probe (static glibc), agent-init (what it does after its first filter).
 * "margin" marks an entry no traced run made, with the code path that needs it.
 */
static const SeccompSyscall syscall_table[] = {
	/* --- Starting a program: the kernel's exec, ld.so and glibc's start-up (every
	 *     program; egress-broker and the probe are static and skip ld.so). */
	ALLOW("execve"),	  /* agent-init's exec of the runtime; node's child_process */
	ALLOW("arch_prctl"),	  /* ARCH_SET_FS: the thread pointer, every program */
	ALLOW("set_tid_address"), /* glibc start-up, every program */
	ALLOW("set_robust_list"), /* glibc start-up and pthread_create */
	ALLOW("rseq"),		  /* glibc 2.35+ registers every thread */
	ALLOW("prlimit64"),	  /* RLIMIT_STACK (glibc), RLIMIT_NOFILE (node raises it) */
	ALLOW("getrlimit"),	  /* margin: Python's resource module, older glibc paths */
	ALLOW("access"),	  /* ld.so: /etc/ld.so.preload; node, python3, sleep */
	ALLOW("readlink"),	  /* /proc/self/exe: node, python3, the static programs */
	ALLOW("readlinkat"),	  /* margin: realpath() of newer glibc and coreutils */
	ALLOW("uname"),		  /* node (os), python3 (platform, sys) */
	ALLOW("getrandom"),	  /* glibc malloc, node (V8, OpenSSL), python3 (hash seed) */
	ALLOW("exit"),		  /* a thread ends: node's and python3's workers */
	ALLOW("exit_group"),	  /* every program */

	/* --- Memory. */
	ALLOW("brk"),		/* glibc malloc, every program */
	ALLOW("mmap"),		/* ld.so, malloc, V8's heap and code space */
	ALLOW("munmap"),	/* every program */
	ALLOW("mprotect"),	/* ld.so's RELRO; V8 flips its JIT pages RW <-> RX */
	ALLOW("mremap"),	/* python3: realloc of large blocks */
	ALLOW("madvise"),	/* node (V8's GC, MADV_DONTFORK), python3, glibc's free */
	ALLOW("msync"),		/* margin: Python's mmap.flush() */
	ALLOW("mlock"),		/* margin: OpenSSL's secure heap (node --secure-heap) */
	ALLOW("munlock"),	/* margin: the same */
	ALLOW("pkey_alloc"),	/* node: V8 asks for a protection key at start-up */
	ALLOW("pkey_free"),	/* margin: the key's release */
	ALLOW("pkey_mprotect"), /* node: V8's code space under a key (outbound, TLS) */
	ALLOW("memfd_create"),	/* margin: libffi's closures (python3 ctypes callbacks) */

	/* --- Files. Landlock decides which paths; these only say that files exist. */
	ALLOW("openat"),      /* every program */
	ALLOW("open"),	      /* margin: the legacy call, for code that makes it directly */
	ALLOW("close"),	      /* every program */
	ALLOW("close_range"), /* margin: glibc's closefrom(), python3's subprocess */
	ALLOW("read"),	      /* every program */
	ALLOW("write"),	      /* every program; agent-init's audit lines after the filter */
	ALLOW("readv"),	      /* margin: libuv's fs.readv(), python3's os.readv() */
	ALLOW("writev"),      /* node: the HTTP RPC transport (notes-http) */
	ALLOW("pread64"),     /* ld.so reads ELF headers; node and python3 */
	ALLOW("pwrite64"),    /* margin: node's fs.write() with a position */
	ALLOW("preadv"),      /* margin: libuv's positional fs.read() of several buffers */
	ALLOW("pwritev"),     /* margin: the same for writes */
	ALLOW("lseek"),	      /* node, python3, egress-broker */
	ALLOW("newfstatat"),  /* glibc's stat family, every program */
	ALLOW("fstat"),	      /* margin: the legacy calls, for code that makes them */
	ALLOW("stat"),	      /* margin: the same */
	ALLOW("lstat"),	      /* margin: the same */
	ALLOW("statx"),	      /* node: libuv's stat of every kind */
	ALLOW("statfs"),      /* margin: node's fs.statfs(), python3's os.statvfs() */
	ALLOW("fstatfs"),     /* margin: the same on a descriptor */
	ALLOW("getdents64"), /* node (readdir: filesystem's list_files), python3 (imports), probe */
	ALLOW("getcwd"),     /* node, python3 */
	ALLOW("chdir"),	     /* margin: process.chdir(), os.chdir() */
	ALLOW("fchdir"),     /* margin: python3's os.fwalk(), os.chdir(fd) */
	ALLOW("mkdir"),	     /* node (notes, filesystem: mkdir -p), probe */
	ALLOW("mkdirat"),    /* margin: python3's os.mkdir(dir_fd=) */
	ALLOW("rmdir"),	     /* margin: node's fs.rm(), python3's shutil.rmtree() */
	ALLOW("unlink"),     /* node (a stale RPC socket), python3, probe */
	ALLOW("unlinkat"),   /* margin: python3's shutil.rmtree() (with dir_fd) */
	ALLOW("rename"),     /* node (notes: write the new file, rename it over), probe */
	ALLOW("renameat"),   /* margin: python3's os.replace(dir_fd=) */
	ALLOW("renameat2"),  /* margin: the same, with flags */
	ALLOW("symlink"),    /* probe; node's fs.symlink() */
	ALLOW("symlinkat"),  /* margin: the same with a directory descriptor */
	ALLOW("link"),	     /* margin: node's fs.link(), python3's os.link() */
	ALLOW("linkat"),     /* margin: the same */
	ALLOW("chmod"),	     /* node and python3: the RPC socket's mode (0600, 0660) */
	ALLOW("fchmod"),     /* margin: node's FileHandle.chmod(), python3's os.chmod(fd) */
	ALLOW("fchmodat"),   /* margin: python3's os.chmod(dir_fd=) */
	ALLOW("chown"),	     /* margin: fs.chown(), shutil.chown(); without CAP_CHOWN only */
	ALLOW("fchown"),     /*   to the app's own groups */
	ALLOW("lchown"),
	ALLOW("fchownat"),
	ALLOW("umask"),		  /* margin: process.umask(), os.umask() */
	ALLOW("truncate"),	  /* probe; node's fs.truncate() on a path */
	ALLOW("ftruncate"),	  /* node (filesystem's truncate_file) */
	ALLOW("fallocate"),	  /* margin: posix_fallocate() */
	ALLOW("fsync"),		  /* node (notes, filesystem) */
	ALLOW("fdatasync"),	  /* margin: fs.fdatasync(), os.fdatasync() */
	ALLOW("flock"),		  /* margin: python3's fcntl.flock() */
	ALLOW("fcntl"),		  /* node, python3, the probe */
	ALLOW("ioctl"),		  /* node and python3: TCGETS (isatty), FIONBIO */
	ALLOW("faccessat"),	  /* margin: glibc's faccessat() */
	ALLOW("faccessat2"),	  /* margin: glibc 2.33+'s faccessat(AT_EACCESS), os.access() */
	ALLOW("utimensat"),	  /* margin: fs.utimes(), os.utime() */
	ALLOW("copy_file_range"), /* margin: libuv's fs.copyFile() */
	ALLOW("sendfile"),	  /* margin: libuv's fs.copyFile(), python3's shutil.copyfile() */
	ALLOW("fadvise64"),	  /* margin: coreutils' cp, python3's os.posix_fadvise() */
	ALLOW("getxattr"),	  /* margin: python3's shutil.copystat(), coreutils */
	ALLOW("lgetxattr"),
	ALLOW("fgetxattr"),
	ALLOW("listxattr"),
	ALLOW("llistxattr"),
	ALLOW("flistxattr"),
	ALLOW("setxattr"), /* margin: shutil.copystat() copies user.* attributes */
	ALLOW("lsetxattr"),
	ALLOW("fsetxattr"),
	ALLOW("removexattr"),
	ALLOW("lremovexattr"),
	ALLOW("fremovexattr"),
	ALLOW("mknod"),		    /* margin: python3's os.mkfifo() (a device needs CAP_MKNOD) */
	ALLOW("mknodat"),	    /* margin: the same */
	ALLOW("inotify_init1"),	    /* margin: node's fs.watch() */
	ALLOW("inotify_add_watch"), /* margin: the same */
	ALLOW("inotify_rm_watch"),  /* margin: the same */
	ALLOW("dup"),		    /* margin: python3's os.dup() */
	ALLOW("dup2"),		    /* node and python3: a child's stdio */
	ALLOW("dup3"),		    /* margin: glibc's dup2() on newer builds */
	ALLOW("pipe2"),		    /* node: libuv's loop and a child's stdio */
	ALLOW("pipe"),		    /* margin: the legacy call */

	/* --- Processes and threads. Landlock scopes signals to the app's own domain. */
	ARGS("clone"),	    /* threads (node, python3) and children (node); see below */
	NOSYS("clone3"),    /* its flags are behind a pointer: glibc falls back to clone */
	ALLOW("vfork"),	    /* margin: python3's subprocess (no flags: no namespaces) */
	ALLOW("wait4"),	    /* node (child_process), the probe */
	ALLOW("waitid"),    /* margin: python3's os.waitid(), glibc's posix_spawn paths */
	ALLOW("kill"),	    /* node: a child's kill() (limits' fork_bomb), the probe */
	ALLOW("tgkill"),    /* node re-raises a signal with no JS handler (limits) */
	ALLOW("tkill"),	    /* margin: the legacy raise() */
	ALLOW("getpid"),    /* node, python3, egress-broker */
	ALLOW("getppid"),   /* node */
	ALLOW("gettid"),    /* node, python3 */
	ALLOW("getuid"),    /* node, python3, the probe */
	ALLOW("geteuid"),   /* the same */
	ALLOW("getgid"),    /* the same */
	ALLOW("getegid"),   /* the same */
	ALLOW("getgroups"), /* the probe; python3's os.getgroups() */
	ALLOW("getresuid"), /* margin: os.getresuid() */
	ALLOW("getresgid"), /* margin: os.getresgid() */
	/* Identity changes: the kernel refuses any real one, as the app has no CAP_SETUID or
	 * CAP_SETGID (agent-init checked that setuid(0) fails). They stay the kernel's to
	 * answer, so that the answer is EPERM for the right reason (the probe's setuid0). */
	ALLOW("setuid"),
	ALLOW("setgid"),
	ALLOW("setreuid"),
	ALLOW("setregid"),
	ALLOW("setresuid"),
	ALLOW("setresgid"),
	ALLOW("setgroups"),
	ALLOW("setfsuid"),
	ALLOW("setfsgid"),
	ALLOW("setsid"),	    /* margin: spawn({detached: true}), start_new_session */
	ALLOW("setpgid"),	    /* margin: python3's subprocess(process_group=) */
	ALLOW("getpgid"),	    /* margin: os.getpgid() */
	ALLOW("getpgrp"),	    /* margin: os.getpgrp() */
	ALLOW("getsid"),	    /* margin: os.getsid() */
	ALLOW("capget"),	    /* node checks its capabilities at start-up */
	ALLOW("prctl"),		    /* margin: process.title (PR_SET_NAME), glibc */
	ARGS("personality"),	    /* only PER_LINUX and the query; see below */
	ALLOW("seccomp"),	    /* agent-init loads its second filter under the first; a
				     * filter only ever adds restrictions */
	ALLOW("sched_yield"),	    /* node (V8's platform threads) */
	ALLOW("sched_getaffinity"), /* margin: glibc's get_nprocs(), os.cpu_count(), libuv */
	ALLOW("getpriority"),	    /* margin: os.getPriority(), os.nice() */
	ALLOW("setpriority"),	    /* margin: os.setPriority() (only lower, no CAP_SYS_NICE) */
	ALLOW("getrusage"),	    /* margin: process.resourceUsage(), resource.getrusage() */
	ALLOW("times"),		    /* margin: os.times() */
	ALLOW("sysinfo"),	    /* node (os.totalmem, libuv), python3 */
	ALLOW("getcpu"),	    /* margin: sched_getcpu() when the vDSO has none */
	ALLOW("restart_syscall"),   /* the kernel restarts an interrupted sleep with it */

	/* --- Signals. */
	ALLOW("rt_sigaction"),	  /* node, python3, egress-broker */
	ALLOW("rt_sigprocmask"),  /* the same */
	ALLOW("rt_sigreturn"),	  /* every handled signal (SIGTERM, SIGCHLD) */
	ALLOW("rt_sigsuspend"),	  /* margin: sigsuspend() */
	ALLOW("rt_sigtimedwait"), /* margin: python3's signal.sigwait() */
	ALLOW("rt_sigpending"),	  /* margin: signal.sigpending() */
	ALLOW("sigaltstack"),	  /* margin: python3's faulthandler, V8's stack guard */
	ALLOW("signalfd4"),	  /* egress-broker reads SIGTERM from one */
	ALLOW("pause"),		  /* margin: signal.pause() */
	ALLOW("alarm"),		  /* margin: signal.alarm() */
	ALLOW("setitimer"),	  /* margin: signal.setitimer() */
	ALLOW("getitimer"),	  /* margin: signal.getitimer() */

	/* --- Time. Mostly the vDSO; the calls are for the clocks it does not serve. */
	ALLOW("clock_gettime"),	  /* node: CLOCK_THREAD_CPUTIME_ID (outbound) */
	ALLOW("clock_getres"),	  /* margin: time.clock_getres() */
	ALLOW("gettimeofday"),	  /* margin: without a vDSO */
	ALLOW("time"),		  /* margin: the same */
	ALLOW("clock_nanosleep"), /* sleep; python3's time.sleep() */
	ALLOW("nanosleep"),	  /* margin: older code paths */

	/* --- Waiting. */
	ALLOW("futex"),		/* threads: node, python3 (locks, the GIL), sleep */
	ALLOW("epoll_create1"), /* node (libuv), python3, egress-broker */
	ALLOW("epoll_ctl"),	/* node, egress-broker */
	ALLOW("epoll_wait"),	/* node, egress-broker */
	ALLOW("epoll_pwait"),	/* margin: libuv with a signal mask */
	ALLOW("eventfd2"),	/* node: libuv's async wake-ups */
	ALLOW("poll"),		/* margin: python3's socket timeouts, select.poll() */
	ALLOW("ppoll"),		/* margin: the same on newer glibc */
	ALLOW("select"),	/* margin: python3's select.select() */
	ALLOW("pselect6"),	/* margin: the same */

	/* --- Sockets. Landlock decides the TCP ports; socket() and socketpair() are below. */
	ARGS("socket"),
	ARGS("socketpair"),
	ALLOW("bind"),	      /* the RPC socket (node, python3), egress-broker's port */
	ALLOW("listen"),      /* the same */
	ALLOW("accept4"),     /* the same */
	ALLOW("accept"),      /* margin: the legacy call */
	ALLOW("connect"),     /* node (undici to the broker, the context bus), python3 */
	ALLOW("getsockname"), /* node, python3, egress-broker */
	ALLOW("getpeername"), /* margin: node's socket.remoteAddress */
	ALLOW("getsockopt"),  /* node: SO_ERROR after a connect */
	ALLOW("setsockopt"),  /* node (TCP_NODELAY, keep-alive), egress-broker, the probe */
	ALLOW("sendto"),      /* python3's send(), node, egress-broker */
	ALLOW("recvfrom"),    /* python3's recv() */
	ALLOW("sendmsg"),     /* margin: node's child IPC, netlink requests */
	ALLOW("recvmsg"),     /* node: getaddrinfo's netlink answer (filesystem, "localhost") */
	ALLOW("sendmmsg"),    /* margin: libuv's UDP (an app with a port) */
	ALLOW("recvmmsg"),    /* margin: the same */
	ALLOW("shutdown"),    /* node, egress-broker */

	/* --- Refused on purpose: EPERM. The old deny list, and what it missed. */
	/* Namespaces: no new ones (clone's flags are checked below), none to enter. */
	REFUSE("unshare"),
	REFUSE("setns"),
	/* Another process's memory, files or state. */
	REFUSE("ptrace"),
	REFUSE("process_vm_readv"),
	REFUSE("process_vm_writev"),
	REFUSE("process_madvise"),
	REFUSE("pidfd_getfd"),
	REFUSE("kcmp"),
	/* Kernel code, kernel-held secrets, kernel observation. */
	REFUSE("bpf"),
	REFUSE("perf_event_open"),
	REFUSE("keyctl"),
	REFUSE("add_key"),
	REFUSE("request_key"),
	REFUSE("init_module"),
	REFUSE("finit_module"),
	REFUSE("delete_module"),
	REFUSE("kexec_load"),
	REFUSE("kexec_file_load"),
	REFUSE("syslog"),
	/* Mounts, old and new API, and moving the root. */
	REFUSE("mount"),
	REFUSE("umount2"),
	REFUSE("pivot_root"),
	REFUSE("chroot"),
	REFUSE("move_mount"),
	REFUSE("open_tree"),
	REFUSE("fsopen"),
	REFUSE("fsmount"),
	REFUSE("fsconfig"),
	REFUSE("fspick"),
	REFUSE("mount_setattr"),
	/* Not in the deny list: a page-fault handler in user space lets a process hold the
	 * kernel at a fault of its choosing (the classic way to win a kernel race), and
	 * unprivileged processes may still ask for one in user mode. */
	REFUSE("userfaultfd"),
	/* The x86 LDT: segment games for 16-bit code, long a kernel attack surface. */
	REFUSE("modify_ldt"),
	/* Open a file by handle, without a path Landlock could check. */
	REFUSE("name_to_handle_at"),
	REFUSE("open_by_handle_at"),
	/* Secret memory the kernel hides from itself; fanotify watches other processes. */
	REFUSE("memfd_secret"),
	REFUSE("fanotify_init"),
	/* The machine: each needs a capability the app does not have; refused outright. */
	REFUSE("reboot"),
	REFUSE("swapon"),
	REFUSE("swapoff"),
	REFUSE("acct"),
	REFUSE("quotactl"),
	REFUSE("quotactl_fd"),
	REFUSE("settimeofday"),
	REFUSE("clock_settime"),
	REFUSE("clock_adjtime"),
	REFUSE("adjtimex"),
	REFUSE("sethostname"),
	REFUSE("setdomainname"),
	REFUSE("iopl"),
	REFUSE("ioperm"),
	REFUSE("vhangup"),
	/* Obsolete interfaces nothing current uses. */
	REFUSE("uselib"),
	REFUSE("ustat"),
	REFUSE("sysfs"),
	REFUSE("_sysctl"),
	REFUSE("lookup_dcookie"),
	REFUSE("nfsservctl"),

	/* --- ENOSYS on purpose: io_uring runs file and socket operations this filter never
	 *     sees; libuv and everything else fall back to ordinary calls. */
	NOSYS("io_uring_setup"),
	NOSYS("io_uring_enter"),
	NOSYS("io_uring_register"),
};

const SeccompSyscall *filters_syscall_table(size_t *ret_n)
{
	*ret_n = ELEMENTSOF(syscall_table);
	return syscall_table;
}

/* Namespace flags refused on clone (SPEC 4.5.4). Every other flag combination passes:
 * threads, fork, vfork-style posix_spawn. */
static int add_clone_rules(scmp_filter_ctx ctx)
{
	int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				 ARG_MASKED(0, SECCOMP_CLONE_NAMESPACES, 0));

	return r < 0 ? r : seccomp_filter_refuse_clone_namespaces(ctx);
}

/*
 * personality(): PER_LINUX (what every process here has) and the query 0xffffffff pass;
 * any other persona is refused. Turning on ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC or
 * MMAP_PAGE_ZERO would weaken what the kernel does for the app's next exec.
 */
static int add_personality_rules(scmp_filter_ctx ctx)
{
	int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
				 ARG_IS(0, PER_LINUX_NUMBER));

	if (r >= 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
				     ARG_IS(0, PERSONALITY_QUERY));
	if (r >= 0)
		r = seccomp_filter_add_range(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(personality), 0,
					     PER_LINUX_NUMBER + 1, PERSONALITY_QUERY - 1, 0, NULL);
	return r;
}

/*
 * socket(): by family, type and protocol.
 *   AF_UNIX: any (the RPC sockets, the context bus, node's child stdio).
 *   AF_INET, AF_INET6: TCP (type SOCK_STREAM, protocol 0 or IPPROTO_TCP) and UDP (SOCK_DGRAM,
 *     0 or IPPROTO_UDP); unless @restrict_protocols (network:connect:*), any. Refused with
 *     it: SOCK_SEQPACKET (SCTP) and SCTP or MPTCP on any type, whose ports Landlock's TCP
 *     rules do not see, and SOCK_RAW (no app holds CAP_NET_RAW). The datagram filter
 *     refuses UDP too for an app without a network capability.
 *   AF_NETLINK: NETLINK_ROUTE only, which glibc's getaddrinfo(AI_ADDRCONFIG) (node's
 *     dns.lookup() for every connect to a name: the filesystem trace's "localhost") and
 *     getifaddrs() (os.networkInterfaces()) read. An unprivileged process can only read
 *     there. Every other netlink protocol (audit, uevents, sock_diag, xfrm, netfilter,
 *     generic, crypto...) is refused.
 *   Every other family (AF_PACKET, AF_VSOCK, AF_KEY, AF_ALG, AF_BLUETOOTH, AF_TIPC, AF_RDS,
 *     AF_XDP, ...): refused.
 */
static int add_socket_rules(scmp_filter_ctx ctx, bool restrict_protocols)
{
	static const int inet[] = {AF_INET, AF_INET6};
	static const struct {
		int type, protocol;
	} inet_allowed[] = {
		{SOCK_STREAM, 0},
		{SOCK_STREAM, IPPROTO_TCP},
		{SOCK_DGRAM, 0},
		{SOCK_DGRAM, IPPROTO_UDP},
	};
	const uint32_t refused = SCMP_ACT_ERRNO(EPERM);
	struct scmp_arg_cmp netlink = ARG_IS(0, AF_NETLINK);
	int r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, ARG_IS(0, AF_UNIX));

	for (size_t i = 0; i < ELEMENTSOF(inet) && r >= 0; i++) {
		if (!restrict_protocols) {
			r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
					     ARG_IS(0, inet[i]));
			continue;
		}
		for (size_t j = 0; j < ELEMENTSOF(inet_allowed) && r >= 0; j++)
			r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3,
					     ARG_IS(0, inet[i]),
					     ARG_MASKED(1, SOCK_TYPE_MASK, inet_allowed[j].type),
					     ARG_IS(2, inet_allowed[j].protocol));
		/* Disjoint from the allowed pairs: another type, or another protocol. */
		if (r >= 0)
			r = seccomp_rule_add(ctx, refused, SCMP_SYS(socket), 2, ARG_IS(0, inet[i]),
					     ARG_MASKED(1, SOCK_TYPE_MASK, SOCK_SEQPACKET));
		if (r >= 0)
			r = seccomp_rule_add(ctx, refused, SCMP_SYS(socket), 2, ARG_IS(0, inet[i]),
					     ARG_MASKED(1, SOCK_TYPE_MASK, SOCK_RAW));
		if (r >= 0)
			r = seccomp_rule_add(ctx, refused, SCMP_SYS(socket), 2, ARG_IS(0, inet[i]),
					     ARG_IS(2, IPPROTO_SCTP_NUMBER));
		if (r >= 0)
			r = seccomp_rule_add(ctx, refused, SCMP_SYS(socket), 2, ARG_IS(0, inet[i]),
					     ARG_IS(2, IPPROTO_MPTCP));
	}
	if (r >= 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, netlink,
				     ARG_IS(2, NETLINK_ROUTE));
	if (r >= 0)
		r = seccomp_filter_add_range(ctx, refused, SCMP_SYS(socket), 2, NETLINK_ROUTE + 1,
					     NETLINK_PROTOCOLS - 1, 1, &netlink);
	for (int f = 0; f < FAMILIES_KNOWN && r >= 0; f++)
		if (f != AF_UNIX && f != AF_INET && f != AF_INET6 && f != AF_NETLINK)
			r = seccomp_rule_add(ctx, refused, SCMP_SYS(socket), 1, ARG_IS(0, f));
	/* socketpair() is AF_UNIX's (node's child stdio); the rest fall to the default. */
	if (r >= 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
				     ARG_IS(0, AF_UNIX));
	return r;
}

/* SPEC 4.5.5: no UDP, no raw IP, no packet sockets; TCP, AF_UNIX, AF_NETLINK untouched. A
 * deny list on top of the allow list (the kernel applies the stricter answer). */
static int add_datagram_rules(scmp_filter_ctx ctx)
{
	static const int families[] = {AF_INET, AF_INET6}, types[] = {SOCK_DGRAM, SOCK_RAW};
	int r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
				 ARG_IS(0, AF_PACKET));

	for (size_t i = 0; i < ELEMENTSOF(families) && r >= 0; i++)
		for (size_t j = 0; j < ELEMENTSOF(types) && r >= 0; j++)
			r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 2,
					     ARG_IS(0, families[i]),
					     ARG_MASKED(1, SOCK_TYPE_MASK, types[j]));
	return r;
}

void filters_done(Filters *f)
{
	seccomp_program_done(&f->base);
	seccomp_program_done(&f->datagram);
}

static int filters_compile(bool restrict_protocols, bool deny_datagrams, Filters *ret)
{
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx base =
		seccomp_filter_new(SCMP_ACT_ERRNO(ENOSYS));
	_cleanup_(seccomp_filter_freep) scmp_filter_ctx datagram = NULL;
	Filters f = {};
	int r;

	if (!base)
		return -ENOMEM;
	/* A binary tree of system call numbers: some 250 entries stay a few comparisons
	 * away, not a linear scan on every call. */
	r = seccomp_attr_set(base, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if (r >= 0)
		r = seccomp_filter_add_table(base, syscall_table, ELEMENTSOF(syscall_table));
	if (r >= 0)
		r = add_clone_rules(base);
	if (r >= 0)
		r = add_personality_rules(base);
	if (r >= 0)
		r = add_socket_rules(base, restrict_protocols);
	if (r >= 0)
		r = seccomp_filter_export(base, &f.base);
	if (r >= 0 && deny_datagrams) {
		datagram = seccomp_filter_new(SCMP_ACT_ALLOW);
		r = datagram ? add_datagram_rules(datagram) : -ENOMEM;
		if (r >= 0)
			r = seccomp_filter_export(datagram, &f.datagram);
	}
	if (r < 0) {
		filters_done(&f);
		return r;
	}
	*ret = f;
	return 0;
}

/* The programs filters_prebuild() made, by [restrict_protocols][deny_datagrams]; a variant
 * not made has no base program. */
static Filters prebuilt[2][2];

int filters_prebuild(void)
{
	/* An app with no network declared is restricted to TCP and UDP as well. */
	static const bool variants[][2] = {{false, false}, {true, false}, {true, true}};

	for (size_t i = 0; i < ELEMENTSOF(variants); i++) {
		bool p = variants[i][0], d = variants[i][1];
		int r = prebuilt[p][d].base.insns ? 0 : filters_compile(p, d, &prebuilt[p][d]);

		if (r < 0)
			return r;
	}
	return 0;
}

static int program_copy(const SeccompProgram *src, SeccompProgram *ret)
{
	*ret = (SeccompProgram){};
	if (!src->insns)
		return 0;
	ret->insns = malloc(src->len * sizeof(*src->insns));
	if (!ret->insns)
		return -ENOMEM;
	memcpy(ret->insns, src->insns, src->len * sizeof(*src->insns));
	ret->len = src->len;
	return 0;
}

int filters_build(bool restrict_protocols, bool deny_datagrams, Filters *ret)
{
	const Filters *made = &prebuilt[restrict_protocols][deny_datagrams];
	Filters f = {};

	if (!made->base.insns)
		return filters_compile(restrict_protocols, deny_datagrams, ret);
	if (program_copy(&made->base, &f.base) < 0 ||
	    program_copy(&made->datagram, &f.datagram) < 0) {
		filters_done(&f);
		return -ENOMEM;
	}
	*ret = f;
	return 0;
}
