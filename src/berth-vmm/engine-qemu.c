/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "argv-builder.h"
#include "engine.h"
#include "macros.h"

/* Options every boot gets: quiet, no hardware we do not use, fast paths found in the lab
 * (see docs/vm-boot.md). panic=-1 with -no-reboot turns a guest panic into a QEMU exit. */
static const char cmdline_base[] =
	"console=ttyS0 quiet reboot=k panic=-1 no_timer_check nowatchdog audit=0 "
	"cryptomgr.notests i8042.noaux i8042.nokbd i8042.nopnp random.trust_cpu=on pci=off "
	"initcall_blacklist=jent_mod_init";

void engine_init(Engine *e, const EngineOps *ops)
{
	*e = (Engine){.ops = ops,
		      .pidfd = -EBADF,
		      .stderr_fd = -EBADF,
		      .console_fd = -EBADF,
		      .stop_fd = -EBADF};
}

Accel accel_from_string(const char *s)
{
	for (Accel a = 0; a < _ACCEL_MAX; a++)
		if (s && streq(s, accel_to_string(a)))
			return a;
	return _ACCEL_INVALID;
}

const char *accel_to_string(Accel a)
{
	switch (a) {
	case ACCEL_KVM:
		return "kvm";
	case ACCEL_TCG:
		return "tcg";
	case _ACCEL_MAX:
	case _ACCEL_INVALID:
		break;
	}
	return NULL;
}

char *vm_kernel_cmdline(const VmConfig *cfg)
{
	char *s = NULL, tsc[64] = "";

	/* Under TCG the guest TSC runs at the host's rate; without the hint microvm hangs
	 * at random while calibrating it against the PIT. */
	if (cfg->accel == ACCEL_TCG && cfg->tsc_khz > 0)
		snprintf(tsc, sizeof(tsc), " tsc=reliable tsc_early_khz=%ld", cfg->tsc_khz);
	if (asprintf(&s, "%s%s%s%s", cmdline_base, tsc, cfg->extra_cmdline ? " " : "",
		     cfg->extra_cmdline ? cfg->extra_cmdline : "") < 0)
		return NULL;
	return s;
}

/* A value in a QEMU option list: "," separates options there, and ",," is a literal
 * comma (a run dir under a path with a comma in it must not add options). malloc()ed. */
static char *qemu_opt_value(const char *s)
{
	char *out = malloc(2 * strlen(s) + 1), *o = out;

	for (; out && *s; s++) {
		*o++ = *s;
		if (*s == ',')
			*o++ = ',';
	}
	if (out)
		*o = '\0';
	return out;
}

static int qemu_build_argv(const VmConfig *cfg, char ***ret)
{
	const Artifacts *art = cfg->artifacts;
	ArgvBuilder b = {};
	argv_add(&b, "%s", cfg->qemu_binary ? cfg->qemu_binary : "qemu-system-x86_64");
	argv_add(&b, "-accel");
	/*
	 * TCG runs a cold boot's vCPUs (and the template's) on one host thread. With a thread
	 * per vCPU, a guest CPU could keep a stale translation of kernel text another was
	 * patching (a static key's int3), and the guest died in an early initcall ("Fatal
	 * exception in interrupt" just past the breakpoint) now and then on a loaded host. A
	 * restored VM's template switched on the static keys an app was found to reach, so
	 * that its apps do not patch the text (berth-init's kernel-keys.h): it gets a thread
	 * per vCPU, and its code is translated afresh on every host CPU at once.
	 */
	argv_add(&b, "%s",
		 cfg->accel != ACCEL_TCG ? accel_to_string(cfg->accel)
		 : cfg->incoming	 ? "tcg,thread=multi"
					 : "tcg,thread=single");
	if (cfg->accel == ACCEL_KVM) {
		argv_add(&b, "-cpu");
		argv_add(&b, "host");
	}
	/* The PIT and ACPI stay on: without them TCG guests hang, and poweroff needs ACPI. */
	argv_add(&b, "-M");
	argv_add(&b, "microvm,x-option-roms=off,isa-serial=on%s",
		 cfg->ram_fd >= 0 ? ",memory-backend=ram" : "");
	if (cfg->ram_fd >= 0) {
		argv_add(&b, "-object");
		argv_add(&b,
			 "memory-backend-file,id=ram,size=%uM,mem-path=/proc/self/fd/%d,share=on",
			 cfg->mem_mib, cfg->ram_fd);
	}
	argv_add(&b, "-m");
	argv_add(&b, "%uM", cfg->mem_mib);
	argv_add(&b, "-smp");
	argv_add(&b, "%u", cfg->cpus);
	argv_add(&b, "-nodefaults");
	argv_add(&b, "-no-user-config");
	argv_add(&b, "-display");
	argv_add(&b, "none");
	argv_add(&b, "-no-reboot");
	argv_add(&b, "-sandbox");
	argv_add(&b, "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
	argv_add(&b, "-global");
	argv_add(&b, "virtio-mmio.force-legacy=false");
	/* The verified descriptors, not the paths: what was hashed is what boots. A restore
	 * boots nothing: the kernel runs from the snapshot's memory, and QEMU does not read
	 * (or parse) the files, which are measured beside its start like the disks. */
	if (!cfg->incoming) {
		_cleanup_free_ char *cmdline =
			cfg->cmdline ? strdup(cfg->cmdline) : vm_kernel_cmdline(cfg);

		if (!cmdline)
			return -ENOMEM;
		argv_add(&b, "-kernel");
		argv_add(&b, "/proc/self/fd/%d", art->a[ARTIFACT_KERNEL].fd);
		argv_add(&b, "-initrd");
		argv_add(&b, "/proc/self/fd/%d", art->a[ARTIFACT_INITRD].fd);
		argv_add(&b, "-append");
		argv_add(&b, "%s", cmdline);
	}
	argv_add(&b, "-chardev");
	argv_add(&b, "stdio,id=console,signal=off");
	argv_add(&b, "-serial");
	argv_add(&b, "chardev:console");
	argv_add(&b, "-drive");
	argv_add(&b, "id=rootfs,file=/proc/self/fd/%d,format=raw,if=none,readonly=on",
		 art->a[ARTIFACT_ROOTFS].fd);
	argv_add(&b, "-device");
	argv_add(&b, "virtio-blk-device,drive=rootfs,serial=rootfs");
	for (size_t i = 0; i < cfg->n_disks; i++) {
		const VmDisk *d = &cfg->disks[i];

		argv_add(&b, "-drive");
		argv_add(&b, "id=disk%zu,file=/proc/self/fd/%d,format=raw,if=none%s", i, d->fd,
			 d->readonly ? ",readonly=on" : ",discard=unmap");
		argv_add(&b, "-device");
		argv_add(&b, "virtio-blk-device,drive=disk%zu,serial=%s", i, d->serial);
	}
	if (cfg->n_ports > 0) {
		argv_add(&b, "-device");
		argv_add(&b, "virtio-serial-device,max_ports=%zu", cfg->n_ports + 1);
	}
	for (size_t i = 0; i < cfg->n_ports; i++) {
		_cleanup_free_ char *path = qemu_opt_value(cfg->ports[i].socket_path);

		if (!path)
			b.error = -ENOMEM;
		argv_add(&b, "-chardev");
		argv_add(&b, "socket,id=port%zu,path=%s,server=on,wait=off", i, path ?: "");
		argv_add(&b, "-device");
		argv_add(&b, "virtserialport,chardev=port%zu,name=%s", i, cfg->ports[i].name);
	}
	if (cfg->qmp_path) {
		_cleanup_free_ char *path = qemu_opt_value(cfg->qmp_path);

		if (!path)
			b.error = -ENOMEM;
		argv_add(&b, "-qmp");
		argv_add(&b, "unix:%s,server=on,wait=off", path ?: "");
	}
	/* Restored, the VM stays paused (-S, whatever state the stream claims): the supervisor
	 * resumes it once the whole snapshot is read and its hash checked. The stream waits
	 * (defer) until its memory is in and the capabilities of its making are set. */
	if (cfg->incoming) {
		argv_add(&b, "-S");
		argv_add(&b, "-incoming");
		argv_add(&b, "defer");
	}
	return argv_finish(&b, ret);
}

static void keep_fd(int fd)
{
	int flags = fcntl(fd, F_GETFD);

	if (flags >= 0)
		fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC);
}

static void close_pair(int p[2])
{
	safe_close(p[0]);
	safe_close(p[1]);
	p[0] = p[1] = -EBADF;
}

static int qemu_start(Engine *e, const VmConfig *cfg)
{
	_cleanup_(host_confinement_freep) HostConfinement *confinement = NULL;
	int err_pipe[2] = {-EBADF, -EBADF}, con_pipe[2] = {-EBADF, -EBADF};
	pid_t parent = getpid(), pid;
	int r;

	r = qemu_build_argv(cfg, &e->argv);
	if (r < 0)
		return r;
	/* Everything that can fail about QEMU's confinement fails here, in the parent. */
	r = host_sandbox_prepare_qemu(cfg->host_sandbox, cfg, &confinement);
	if (r < 0)
		return r;
	/* QEMU says why a VM died on standard error (a KVM internal error leaves it alive
	 * but paused): the supervisor reads it rather than letting it go by. */
	if (pipe2(err_pipe, O_CLOEXEC) < 0 || pipe2(con_pipe, O_CLOEXEC) < 0) {
		r = -errno;
		close_pair(err_pipe);
		return r;
	}
	e->accel = cfg->accel;
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close_pair(err_pipe);
		close_pair(con_pipe);
		return r;
	}
	if (pid == 0) {
		if (dup2(err_pipe[1], STDERR_FILENO) < 0)
			_exit(127);
		if (con_pipe[1] >= 0) {
			int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

			if (null < 0 || dup2(null, STDIN_FILENO) < 0 ||
			    dup2(con_pipe[1], STDOUT_FILENO) < 0)
				_exit(127);
		}
		/* The artifact and disk descriptors are the only ones QEMU inherits. */
		for (int k = 0; k < ARTIFACT_BASE_MAX; k++)
			keep_fd(cfg->artifacts->a[k].fd);
		for (size_t i = 0; i < cfg->n_disks; i++)
			keep_fd(cfg->disks[i].fd);
		if (cfg->ram_fd >= 0)
			keep_fd(cfg->ram_fd);
		/* berth-vmm blocks the signals its event loop reads from a signalfd; QEMU must
		 * get SIGTERM and SIGINT as any process does. */
		sigset_t none;

		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		/* QEMU should not outlive its supervisor, whatever kills it. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(127);
		/* Inherited across the exec: QEMU is confined from its first instruction. */
		host_confinement_enter(confinement);
		execvp(e->argv[0], e->argv);
		dprintf(STDERR_FILENO,
			"berth-vmm: cannot run %s: %m. Install QEMU (qemu-system-x86).\n",
			e->argv[0]);
		_exit(127);
	}
	safe_close(err_pipe[1]);
	safe_close(con_pipe[1]);
	e->stderr_fd = err_pipe[0];
	e->console_fd = con_pipe[0];
	e->pid = pid;
	e->pidfd = pidfd_open(pid, 0);
	return 0;
}

static int qemu_stop(Engine *e)
{
	if (e->pid <= 0)
		return 0;
	if (e->pidfd >= 0)
		return RET_NERRNO(pidfd_send_signal(e->pidfd, SIGKILL, NULL, 0));
	return RET_NERRNO(kill(e->pid, SIGKILL));
}

int engine_wait_child(Engine *e, int *ret_status)
{
	int status;

	if (e->pid <= 0)
		return -ECHILD;
	for (;;) {
		if (waitpid(e->pid, &status, 0) >= 0)
			break;
		if (errno != EINTR)
			return -errno;
	}
	e->pid = 0;
	*ret_status = status;
	return 0;
}

const EngineOps engine_qemu_ops = {
	.start = qemu_start,
	.stop = qemu_stop,
	.wait = engine_wait_child,
};

void engine_done(Engine *e)
{
	argv_free(e->argv);
	e->argv = NULL;
	safe_close(e->pidfd);
	safe_close(e->stderr_fd);
	safe_close(e->console_fd);
	safe_close(e->stop_fd);
	e->pidfd = e->stderr_fd = e->console_fd = e->stop_fd = -EBADF;
}
