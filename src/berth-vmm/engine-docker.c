/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Docker engine: the guest's berth-init as PID 1 of a container on the host's kernel,
 * from Berth's base image (docker-image.h). What stays the same as in a VM: the channel
 * (a unix socket in a directory of the run dir bound into the container, container.h in
 * berth-init), the boot disk (a file there, 0600, removed by berth-init once read),
 * berth-init's confinement of each app, and the egress broker, whose only way out is the
 * channel: the container has no network. What Docker gives instead of QEMU's devices:
 * the app shares as read-only bind mounts, the state as named volumes, the memory and CPU
 * limits as the container's cgroup.
 *
 * The container outlives no berth-vmm: a watchdog process, started first, removes it when
 * berth-vmm closes its end of a pipe, whether it stops, exits or is killed; and berth-init
 * ends the container when the channel closes.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "argv-builder.h"
#include "docker-image.h"
#include "engine.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"

#define BOOT_FILE "boot.img"
#define PIDS_MAX 4096

/* A --mount value: "," separates its fields, so a path with one cannot be given. */
static int mount_path_ok(const char *p)
{
	if (p && !strpbrk(p, ",\n"))
		return 0;
	return log_error_errno(
		-EINVAL,
		"the path %s has a comma or a newline, which Docker's --mount cannot "
		"take; move it (or the run dir, BERTH_HOME) to a path without",
		p ? p : "(none)");
}

static void add_volume(ArgvBuilder *b, const VmContainer *c, const char *what, const char *dst,
		       const char *tmpfs_opts)
{
	argv_add(b, "--mount");
	if (c->volume_prefix)
		argv_add(b, "type=volume,src=%s-%s,dst=%s", c->volume_prefix, what, dst);
	else
		argv_add(b, "type=tmpfs,dst=%s,%s", dst, tmpfs_opts);
}

static int docker_build_argv(const VmConfig *cfg, char ***ret)
{
	const VmContainer *c = cfg->container;
	ArgvBuilder b = {};
	int r = mount_path_ok(c->host_dir);

	for (size_t i = 0; r >= 0 && i < c->n_shares; i++)
		r = mount_path_ok(c->shares[i].dir);
	if (r < 0)
		return r;
	argv_add(&b, "%s", c->docker);
	argv_add(&b, "run");
	argv_add(&b, "--rm");
	argv_add(&b, "--name=%s", c->name);
	argv_add(&b, "--hostname=berth");
	argv_add(&b, "--label=org.berth.boot-id=%s", c->boot_id);
	argv_add(&b, "--label=org.berth.run-dir=%s", c->run_dir);
	/* No network device but lo: every byte out goes through the channel and the dialer. */
	for (const char *const *a = docker_confinement_args; *a; a++)
		argv_add(&b, "%s", *a);
	argv_add(&b, "--cpus=%u", cfg->cpus);
	argv_add(&b, "--memory=%um", cfg->mem_mib);
	argv_add(&b, "--memory-swap=%um", cfg->mem_mib);
	argv_add(&b, "--pids-limit=%d", PIDS_MAX);
	argv_add(&b, "--mount");
	argv_add(&b, "type=bind,src=%s,dst=/run/berth-host", c->host_dir);
	if (c->n_shares > 1)
		argv_add(&b, "--tmpfs=/app:rw,nosuid,nodev,mode=0755,size=1m");
	for (size_t i = 0; i < c->n_shares; i++) {
		argv_add(&b, "--mount");
		argv_add(&b, "type=bind,src=%s,dst=%s,readonly", c->shares[i].dir,
			 c->shares[i].target);
	}
	add_volume(&b, c, "workspace", "/workspace", "tmpfs-mode=0755");
	add_volume(&b, c, "state", "/state", "tmpfs-mode=0755");
	add_volume(&b, c, "context", "/context", "tmpfs-mode=0755");
	argv_add(&b, "--env=BERTH_CONTAINER=1");
	argv_add(&b, "--env=BERTH_BOOT_ID=%s", c->boot_id);
	argv_add(&b, "--entrypoint=/usr/sbin/berth-init");
	argv_add(&b, "%s", c->image);
	return argv_finish(&b, ret);
}

/* The boot disk as a file in the directory the container sees, for berth-init alone. */
static int write_boot_file(const VmConfig *cfg)
{
	_cleanup_free_ char *path = NULL, *buf = NULL;
	_cleanup_close_ int out = -EBADF;
	const VmDisk *boot = NULL;
	struct stat st;
	ssize_t n;
	int r;

	for (size_t i = 0; i < cfg->n_disks; i++)
		if (streq(cfg->disks[i].serial, "boot"))
			boot = &cfg->disks[i];
	if (!boot)
		return 0;
	if (fstat(boot->fd, &st) < 0)
		return -errno;
	if (asprintf(&path, "%s/%s", cfg->container->host_dir, BOOT_FILE) < 0 ||
	    !(buf = malloc((size_t)st.st_size + 1)))
		return -ENOMEM;
	n = pread(boot->fd, buf, (size_t)st.st_size, 0);
	(void)unlink(path);
	out = n == st.st_size
		      ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)
		      : -EIO;
	r = out < 0 ? (out == -EIO ? -EIO : -errno) : loop_write(out, buf, (size_t)n);
	/* It holds the secrets: zeroed whatever happened, and no half-written file left. */
	explicit_bzero(buf, (size_t)st.st_size);
	if (r < 0)
		(void)unlink(path);
	return r < 0 ? r : 0;
}

void engine_docker_forget_boot_file(const char *host_dir)
{
	_cleanup_free_ char *path = NULL;

	if (host_dir && asprintf(&path, "%s/%s", host_dir, BOOT_FILE) >= 0)
		(void)unlink(path);
}

static void child_quiet_stdio(void)
{
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (null >= 0) {
		(void)dup2(null, STDOUT_FILENO);
		(void)dup2(null, STDERR_FILENO);
	}
}

/*
 * The watchdog: its own session, holding nothing of berth-vmm's but the read end of a
 * pipe. When the pipe ends, berth-vmm stopped the VM or is gone: it removes the container.
 */
static int start_watchdog(const char *docker, const char *name, int *ret_fd)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (pid == 0) {
		sigset_t none;
		char c;

		(void)setsid();
		if (dup2(p[0], STDIN_FILENO) < 0)
			_exit(127);
		child_quiet_stdio();
		(void)close_range(3, ~0U, 0);
		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		(void)signal(SIGINT, SIG_IGN);
		(void)signal(SIGTERM, SIG_IGN);
		(void)signal(SIGHUP, SIG_IGN);
		while (read(STDIN_FILENO, &c, 1) < 0 && errno == EINTR)
			;
		execl(docker, docker, "rm", "--force", name, (char *)NULL);
		_exit(127);
	}
	close(p[0]);
	*ret_fd = p[1];
	return 0;
}

static int docker_start(Engine *e, const VmConfig *cfg)
{
	const VmContainer *c = cfg->container;
	int err_pipe[2] = {-EBADF, -EBADF}, con_pipe[2] = {-EBADF, -EBADF};
	pid_t parent = getpid(), pid;
	int r;

	if (!c)
		return -EINVAL;
	r = docker_build_argv(cfg, &e->argv);
	if (r < 0)
		return r;
	r = write_boot_file(cfg);
	if (r < 0)
		return r;
	r = start_watchdog(c->docker, c->name, &e->stop_fd);
	if (r < 0) {
		engine_docker_forget_boot_file(c->host_dir);
		return r;
	}
	if (pipe2(err_pipe, O_CLOEXEC) < 0 || pipe2(con_pipe, O_CLOEXEC) < 0) {
		r = -errno;
		safe_close(err_pipe[0]);
		safe_close(err_pipe[1]);
		return r;
	}
	e->accel = cfg->accel;
	pid = fork();
	if (pid < 0) {
		r = -errno;
		for (int i = 0; i < 2; i++) {
			safe_close(err_pipe[i]);
			safe_close(con_pipe[i]);
		}
		return r;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		sigset_t none;

		/* berth-init's standard output is the console, as a VM's serial line is. */
		if (null < 0 || dup2(null, STDIN_FILENO) < 0 ||
		    dup2(con_pipe[1], STDOUT_FILENO) < 0 || dup2(err_pipe[1], STDERR_FILENO) < 0)
			_exit(127);
		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		/* The client goes with berth-vmm; the watchdog removes the container. */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
			_exit(127);
		execv(e->argv[0], e->argv);
		dprintf(STDERR_FILENO, "berth-vmm: cannot run %s: %m\n", e->argv[0]);
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

/* The watchdog removes the container (its client then exits with it). */
static int docker_stop(Engine *e)
{
	e->stop_fd = safe_close(e->stop_fd);
	return 0;
}

const EngineOps engine_docker_ops = {
	.start = docker_start,
	.stop = docker_stop,
	.wait = engine_wait_child,
};
