/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "digest.h"
#include "fileio.h"
#include "macros.h"
#include "manifest.h"
#include "paths.h"
#include "rundir.h"
#include "task.h"
#include "vm-support.h"
#include "vmm.h"

#define CONFIG_MAX (1024 * 1024)
#define MEM_DEFAULT_MIB 512
#define MEM_MIN_MIB 256
#define MEM_MAX_MIB 16384
#define CPUS_DEFAULT 2
#define CPUS_MAX 16

static int fail(char *err, size_t errlen, int r, const char *fmt, ...) _printf_(4, 5);
static int fail(char *err, size_t errlen, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return r;
}

/* What the kubelet and containerd mount into every pod (its hosts file, service-account
 * token, config maps): the VM never sees them, so they are let through. */
static bool pod_infra_mount(const char *dst, const char *src)
{
	static const char *const sources[] = {"/var/lib/kubelet/", "/var/lib/containerd/",
					      "/run/containerd/", NULL};

	for (size_t i = 0; src && sources[i]; i++)
		if (strneq(src, sources[i], strlen(sources[i])))
			return true;
	static const char *const known[] = {"/etc/hosts",	"/etc/hostname",
					    "/etc/resolv.conf", "/dev/termination-log",
					    "/dev/shm",		NULL};

	for (size_t i = 0; known[i]; i++)
		if (streq(dst, known[i]))
			return true;
	return false;
}

static bool has_bind_option(const json_t *opts)
{
	const json_t *o;
	size_t i;

	json_array_foreach(opts, i, o) {
		const char *s = json_string_value(o);

		if (s && (streq(s, "bind") || streq(s, "rbind")))
			return true;
	}
	return false;
}

/* The spec's asks that Berth cannot give, and the sizes it can. */
static int check_spec(Task *t, char *err, size_t errlen)
{
	_cleanup_free_ char *path = NULL;
	_cleanup_(json_decrefp) json_t *spec = NULL;
	const json_t *linux_, *v, *caps;
	json_error_t jerr;
	bool netns = false;
	size_t i;

	if (asprintf(&path, "%s/config.json", t->bundle) < 0)
		return -ENOMEM;
	spec = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!spec)
		return fail(err, errlen, -EINVAL, "cannot read %s: %s", path, jerr.text);
	linux_ = json_object_get(spec, "linux");
	json_array_foreach(json_object_get(linux_, "namespaces"), i, v) {
		const char *type = json_string_value(json_object_get(v, "type"));

		/* Its own, or the pod's (CRI gives a path): either way not the host's. The
		 * VM has no network device in it anyway. */
		if (type && streq(type, "network"))
			netns = true;
	}
	if (!netns)
		return fail(err, errlen, -EPERM,
			    "the spec asks for host networking (no network namespace): a Berth "
			    "sandbox has no network but its egress dialer, which berth.yml "
			    "allows; remove hostNetwork (or ctr run --net-host)");
	t->pod_sandbox =
		streq_ptr(json_string_value(json_object_get(json_object_get(spec, "annotations"),
							    "io.kubernetes.cri.container-type")),
			  "sandbox");
	caps = json_object_get(json_object_get(json_object_get(spec, "process"), "capabilities"),
			       "bounding");
	json_array_foreach(caps, i, v) {
		const char *c = json_string_value(v);

		if (c && streq(c, "CAP_SYS_ADMIN"))
			return fail(err, errlen, -EPERM,
				    "the spec asks for a privileged container (CAP_SYS_ADMIN): a "
				    "Berth app gets only what its berth.yml declares; remove "
				    "privileged");
	}
	json_array_foreach(json_object_get(spec, "mounts"), i, v) {
		const char *dst = json_string_value(json_object_get(v, "destination"));
		const char *src = json_string_value(json_object_get(v, "source"));
		const char *type = json_string_value(json_object_get(v, "type"));

		if (!dst ||
		    !(streq_ptr(type, "bind") || has_bind_option(json_object_get(v, "options"))))
			continue;
		if (!pod_infra_mount(dst, src))
			return fail(err, errlen, -EPERM,
				    "the spec mounts %s from the host at %s: a Berth sandbox sees "
				    "only its app and its own volume; remove the mount",
				    src ? src : "?", dst);
	}
	/* CPU and memory: the spec's limits, as a VM's size. */
	{
		const json_t *res = json_object_get(linux_, "resources");
		json_int_t mem = json_integer_value(
			json_object_get(json_object_get(res, "memory"), "limit"));
		json_int_t quota =
			json_integer_value(json_object_get(json_object_get(res, "cpu"), "quota"));
		json_int_t period =
			json_integer_value(json_object_get(json_object_get(res, "cpu"), "period"));

		t->mem_mib = MEM_DEFAULT_MIB;
		if (mem > 0)
			t->mem_mib = (unsigned)MAX(MEM_MIN_MIB, MIN(MEM_MAX_MIB, mem >> 20));
		t->cpus = CPUS_DEFAULT;
		if (quota > 0 && period > 0)
			t->cpus = (unsigned)MAX(1, MIN(CPUS_MAX, (quota + period - 1) / period));
	}
	return 0;
}

static int mount_rootfs(Task *t, const TaskMount *mounts, size_t n, char *err, size_t errlen)
{
	if (snprintf(t->rootfs, sizeof(t->rootfs), "%s/rootfs", t->bundle) >=
	    (int)sizeof(t->rootfs))
		return -ENAMETOOLONG;
	(void)mkdir(t->rootfs, 0711);
	if (n == 0)
		return 0; /* the bundle came with its rootfs */
	if (n > 1)
		return fail(err, errlen, -EINVAL, "%zu rootfs mounts: the shim takes one", n);
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&data, &len);

	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < mounts[0].n_options; i++)
		fprintf(f, "%s%s", i ? "," : "", mounts[0].options[i]);
	fclose(f);
	/* The image is read, never run: nosuid, nodev, noexec. */
	if (mount(mounts[0].source, t->rootfs, mounts[0].type, MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  data) < 0)
		return fail(err, errlen, -errno, "cannot mount the image (%s) on %s: %s",
			    mounts[0].type, t->rootfs, strerror(errno));
	t->mounted = true;
	return 0;
}

static bool has_manifest(const char *dir)
{
	_cleanup_free_ char *p = NULL;
	struct stat st;

	return asprintf(&p, "%s/berth.yml", dir) >= 0 && lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* /app with a berth.yml, or each /app/<name>/ with one. */
static int find_apps(Task *t, char *err, size_t errlen)
{
	char app[700];
	struct stat st;
	DIR *d;
	struct dirent *de;

	snprintf(app, sizeof(app), "%s/app", t->rootfs);
	/* The image's paths are read on the host: a link would lead out of the image. */
	if (lstat(app, &st) < 0 || !S_ISDIR(st.st_mode))
		return fail(err, errlen, -ENOENT,
			    "the image has no Berth app: /app is missing or not a directory (build "
			    "it with berth deploy)");
	if (has_manifest(app)) {
		snprintf(t->apps[t->n_apps++], sizeof(t->apps[0]), "%s", app);
		return 0;
	}
	d = opendir(app);
	while (d && (de = readdir(d))) {
		char sub[sizeof(app) + 260];

		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", app, de->d_name);
		if (lstat(sub, &st) < 0 || !S_ISDIR(st.st_mode) || !has_manifest(sub))
			continue;
		if (t->n_apps >= TASK_APPS_MAX) {
			closedir(d);
			return fail(err, errlen, -E2BIG, "the image holds more than %d apps",
				    TASK_APPS_MAX);
		}
		if (strlen(sub) >= sizeof(t->apps[0]))
			continue;
		memcpy(t->apps[t->n_apps++], sub, strlen(sub) + 1);
	}
	if (d)
		closedir(d);
	if (t->n_apps == 0)
		return fail(err, errlen, -ENOENT,
			    "the image has no Berth app: no /app/berth.yml (build it with berth "
			    "deploy)");
	return 0;
}

/* The dialer's allowlist: from the apps' berth.yml, never from the spec. */
static int plan_egress(Task *t, char *err, size_t errlen)
{
	Manifest *m[TASK_APPS_MAX] = {};
	_cleanup_free_ char *warning = NULL, *reason = NULL;
	int r = 0;

	for (size_t i = 0; i < t->n_apps && r >= 0; i++) {
		_cleanup_free_ char *path = NULL;
		ManifestError merr = {};

		if (asprintf(&path, "%s/berth.yml", t->apps[i]) < 0)
			r = -ENOMEM;
		else if ((r = manifest_load_at(AT_FDCWD, path, &m[i], &merr)) < 0)
			fail(err, errlen, r, "%s: %s", path, merr.text ? merr.text : strerror(-r));
		manifest_error_done(&merr);
	}
	if (r >= 0) {
		r = vm_egress_plan((const Manifest *const *)m, t->n_apps, &t->egress, &warning,
				   &reason);
		if (r < 0 && reason)
			fail(err, errlen, r, "%s", reason);
	}
	for (size_t i = 0; i < t->n_apps; i++)
		manifest_free(m[i]);
	return r < 0 ? r : 0;
}

int task_create(Task *t, const char *id, const char *ns, const char *bundle,
		const TaskMount *mounts, size_t n_mounts, const char *stdout_path,
		const char *stderr_path, char *err, size_t errlen)
{
	int r;

	if (t->state != TASK_NONE)
		return fail(err, errlen, -EEXIST, "this shim has a task already");
	snprintf(t->id, sizeof(t->id), "%s", id);
	snprintf(t->ns, sizeof(t->ns), "%s", ns);
	snprintf(t->bundle, sizeof(t->bundle), "%s", bundle);
	snprintf(t->stdout_path, sizeof(t->stdout_path), "%s", stdout_path ?: "");
	snprintf(t->stderr_path, sizeof(t->stderr_path), "%s", stderr_path ?: "");
	snprintf(t->run_dir, sizeof(t->run_dir), "%s/" TASK_RUN_DIR, bundle);
	/* The VM's name, and its state disk's, from a digest of namespace and id: any id
	 * fits (a Kubernetes one is 64 hex digits), and no two tasks share either. */
	r = task_vm_name(ns, id, t->vm_name, sizeof(t->vm_name));
	if (r >= 0)
		r = task_state_disk(ns, id, t->state_disk, sizeof(t->state_disk));
	if (r < 0)
		return r;
	r = check_spec(t, err, errlen);
	if (r < 0)
		return r;
	if (t->pod_sandbox) { /* the pause image: nothing of it is run */
		t->pidfd = -EBADF;
		t->state = TASK_CREATED;
		return 0;
	}
	r = mount_rootfs(t, mounts, n_mounts, err, errlen);
	if (r >= 0)
		r = find_apps(t, err, errlen);
	if (r >= 0)
		r = plan_egress(t, err, errlen);
	if (r < 0) {
		task_cleanup(t);
		return r;
	}
	t->pidfd = -EBADF;
	t->state = TASK_CREATED;
	return 0;
}

/* The parent's side once @pid runs: the read ends of its output pipes, a pidfd. */
static int task_running(Task *t, pid_t pid, int out[2], int errp[2])
{
	close(out[1]);
	close(errp[1]);
	t->out_fd = out[0];
	t->err_fd = errp[0];
	t->pid = pid;
	t->pidfd = pidfd_open(pid, 0);
	t->state = TASK_RUNNING;
	return 0;
}

/* The pod's placeholder: waits for its signal, as the pause container does. */
static int start_pod_sandbox(Task *t)
{
	int out[2], errp[2];
	pid_t pid;

	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		sigset_t none;

		/* Nothing of the shim's: not its sockets, not containerd's connections. */
		(void)close_range(3, ~0U, 0);
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() == 1)
			_exit(1);
		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		(void)signal(SIGTERM, SIG_DFL);
		(void)signal(SIGINT, SIG_DFL);
		(void)setsid();
		for (;;)
			pause();
	}
	return task_running(t, pid, out, errp);
}

int task_start(Task *t, char *err, size_t errlen)
{
	_cleanup_free_ char *vmm = NULL, *egress = NULL;
	char cpus[16], mem[16];
	const char *argv[40];
	int out[2] = {-EBADF, -EBADF}, errp[2] = {-EBADF, -EBADF};
	size_t n = 0;
	pid_t pid;

	if (t->state != TASK_CREATED)
		return fail(err, errlen, -EBUSY, "the task was started already");
	if (t->pod_sandbox)
		return start_pod_sandbox(t);
	if (vmm_locate(NULL, &vmm) < 0)
		return fail(err, errlen, -ENOENT,
			    "no berth-vmm: install it (berth vm install) or set BERTH_VMM");
	for (size_t i = 0; t->egress && t->egress[i]; i++) {
		char *next = NULL;

		if (asprintf(&next, "%s%s%s", egress ?: "", egress ? "," : "", t->egress[i]) < 0)
			return -ENOMEM;
		free(egress);
		egress = next;
	}
	snprintf(cpus, sizeof(cpus), "%u", t->cpus);
	snprintf(mem, sizeof(mem), "%u", t->mem_mib);
	argv[n++] = vmm;
	argv[n++] = "run";
	argv[n++] = "--name";
	argv[n++] = t->vm_name;
	argv[n++] = "--run-dir";
	argv[n++] = t->run_dir;
	for (size_t i = 0; i < t->n_apps; i++) {
		argv[n++] = "--app";
		argv[n++] = t->apps[i];
	}
	argv[n++] = "--state";
	argv[n++] = t->state_disk;
	argv[n++] = "--cpus";
	argv[n++] = cpus;
	argv[n++] = "--mem";
	argv[n++] = mem;
	if (egress) {
		argv[n++] = "--egress-allow";
		argv[n++] = egress;
	}
	/* The app's log is the guest console, on berth-vmm's standard output. */
	argv[n++] = "--console";
	argv[n++] = "/dev/stdout";
	argv[n++] = "--foreground";
	argv[n] = NULL;
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		if (null < 0 || dup2(null, STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0 ||
		    dup2(errp[1], STDERR_FILENO) < 0)
			_exit(127);
		sigset_t none;

		/* The shim's event loop blocks what it reads from a signalfd. */
		sigemptyset(&none);
		(void)sigprocmask(SIG_SETMASK, &none, NULL);
		(void)signal(SIGINT, SIG_DFL);
		(void)signal(SIGPIPE, SIG_DFL);
		(void)setsid();
		execv(argv[0], (char *const *)argv);
		dprintf(STDERR_FILENO, "containerd-shim-berth-v2: cannot run %s: %m\n", argv[0]);
		_exit(127);
	}
	return task_running(t, pid, out, errp);
}

int task_kill(Task *t, int sig)
{
	if (t->state != TASK_RUNNING)
		return -ESRCH;
	if (t->pidfd >= 0)
		return pidfd_send_signal(t->pidfd, sig, NULL, 0) < 0 ? -errno : 0;
	return kill(t->pid, sig) < 0 ? -errno : 0;
}

void task_exited(Task *t, int status)
{
	t->exit_status = WIFEXITED(status)     ? (uint32_t)WEXITSTATUS(status)
			 : WIFSIGNALED(status) ? 128u + (uint32_t)WTERMSIG(status)
					       : 255u;
	clock_gettime(CLOCK_REALTIME, &t->exited_at);
	t->state = TASK_STOPPED;
	t->pidfd = safe_close(t->pidfd);
}

void task_cleanup(Task *t)
{
	if (t->run_dir[0])
		(void)rundir_remove(t->run_dir);
	if (t->mounted && umount2(t->rootfs, MNT_DETACH) == 0)
		t->mounted = false;
	if (t->state_disk[0])
		(void)unlink(t->state_disk);
	vm_egress_allow_free(t->egress);
	t->egress = NULL;
}

int task_vm_name(const char *ns, const char *id, char *ret, size_t size)
{
	_cleanup_free_ char *key = NULL;
	char hex[SHA256_HEX_LEN + 1];

	if (asprintf(&key, "%s/%s", ns, id) < 0 || sha256_buffer_hex(key, strlen(key), hex) < 0)
		return -ENOMEM;
	return (size_t)snprintf(ret, size, "ctr-%.16s", hex) >= size ? -ENAMETOOLONG : 0;
}

int task_state_disk(const char *ns, const char *id, char *ret, size_t size)
{
	_cleanup_free_ char *home = berth_home();
	char name[32];

	if (task_vm_name(ns, id, name, sizeof(name)) < 0 || !home ||
	    (size_t)snprintf(ret, size, "%s/containerd/%s.img", home, name) >= size)
		return -ENAMETOOLONG;
	return 0;
}

void task_cleanup_bundle(const char *bundle, const char *ns, const char *id)
{
	char run_dir[600], rootfs[600], state[700];
	pid_t pid = 0;

	snprintf(run_dir, sizeof(run_dir), "%s/" TASK_RUN_DIR, bundle);
	snprintf(rootfs, sizeof(rootfs), "%s/rootfs", bundle);
	/* A berth-vmm still serving the run dir: its pidfd names that process, not a reuse. */
	if (rundir_inspect(run_dir, &pid) == RUNDIR_RUNNING) {
		int fd = rundir_open_pidfd(run_dir);

		if (fd >= 0) {
			(void)pidfd_send_signal(fd, SIGKILL, NULL, 0);
			for (int i = 0; i < 50 && rundir_inspect(run_dir, &pid) == RUNDIR_RUNNING;
			     i++)
				usleep(100 * 1000);
			close(fd);
		}
	}
	(void)rundir_remove(run_dir);
	(void)umount2(rootfs, MNT_DETACH);
	if (task_state_disk(ns, id, state, sizeof(state)) >= 0)
		(void)unlink(state);
}
