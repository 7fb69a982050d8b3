/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-vmm run: check the arguments and the pins, take the run directory, prepare the
 * disks, then detach and serve the VM (serve.c).
 */
#include <errno.h>
#include <ctype.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "boot-disk.h"
#include "digest.h"
#include "exec-util.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "manifest.h"
#include "parse-util.h"
#include "paths.h"
#include "random-util.h"
#include "rundir.h"
#include "time-util.h"
#include "tsc.h"
#include "serve.h"
#include "vmm-run.h"

/* Host sockets berth-vmm creates in the run dir; the longest decides the length check. */
static const char *const run_dir_sockets[] = {"control.sock", "logs.sock", "qemu-mux.sock",
					      "rpc-63.sock"};

static void usage(void)
{
	printf("usage: berth-vmm run --name NAME [--app DIR]... [options]\n"
	       "  --name NAME          the VM's name (its run dir is ~/.berth/run/vm/NAME)\n"
	       "  --run-dir DIR        use DIR as the run dir instead\n"
	       "  --app DIR            an app share (a directory with berth.yml); up to 4\n"
	       "  --state DISK         the state disk image (created sparse if missing)\n"
	       "  --state-size MIB     its size when created (default 1024)\n"
	       "  --secrets FILE       a BERTHSEC1 or BERTHSEC2 secrets image, attached read-only\n"
	       "  --cpus N --mem MIB   2 and 512 by default\n"
	       "  --accel MODE         auto (the default: probe once per host boot, take KVM only\n"
	       "                       where it boots, and faster than TCG), kvm or tcg; also\n"
	       "                       BERTH_ACCEL and vm.accel in ~/.berth/config.json\n"
	       "  --qemu PROGRAM       the QEMU to run (qemu-system-x86_64; BERTH_QEMU, vm.qemu)\n"
	       "  --engine ENGINE      qemu (the default: a VM on Berth's pinned kernel) or docker\n"
	       "                       (a container on this host's kernel, from the pinned rootfs\n"
	       "                       as a local image; see docs/runtimes.md)\n"
	       "  --cold               boot the kernel even when a snapshot of this host's template\n"
	       "                       could be restored (see berth-vmm snapshot)\n"
	       "  --reloads            the apps will be reloaded in place (berth dev): keep a warm\n"
	       "                       runtime ready in the guest for their next start\n"
	       "  --boot-stall-timeout SEC  fail a boot that shows no sign of life for SEC\n"
	       "                       seconds (default 30; 0: never)\n"
	       "  --artifacts DIR      where the pinned kernel and rootfs are installed (~/.berth/vm)\n"
	       "  --rootfs IMG         boot this root image instead (recorded as not pinned)\n"
	       "  --layer NAME         attach the pinned layer NAME (browser) read-only, for\n"
	       "                       berth-init to lay over the root image; boots cold\n"
	       "  --console FILE       the kernel console (default console.log in the run dir)\n"
	       "  --console-stderr     the kernel console on standard error\n"
	       "  --foreground         do not detach\n"
	       "  --channel-external   do not serve the channel: leave qemu-mux.sock in the run dir\n"
	       "                       to another client (for testing protocol peers)\n"
	       "  --channel-connect PATH  connect the channel to the unix socket PATH instead of\n"
	       "                       QEMU's (testing: the program listening there plays the guest)\n"
	       "  --egress-allow PATTERN  a host the guest may reach: host, host:port or host:*\n"
	       "                       ('*' globs; no port: 80 and 443); repeatable, or a comma-\n"
	       "                       separated list; none: no egress\n"
	       "  --egress-max-conns N egress connections at once (default 64)\n"
	       "  --publish PORT       serve the guest's 127.0.0.1:PORT as publish-PORT.sock in the\n"
	       "                       run dir; only 7681, the terminal's web view, whose app must\n"
	       "                       be in the VM; repeatable (up to 8)\n"
	       "  --no-host-sandbox    run berth-vmm and QEMU without Landlock and seccomp\n"
	       "                       (debugging only; see docs/vm.md)\n");
}

/* One --publish: a port of the table (publish.h), once. Which app serves it is checked once
 * the apps' policies are compiled (check_publish()). */
static int add_publish(VmmArgs *a, const char *value)
{
	const PublishPort *rows;
	char list[256] = "";
	size_t n;
	uint16_t port;

	if (parse_port(value, strlen(value), &port) < 0)
		return log_error("--publish takes a TCP port number (1-65535), not '%s'", value);
	if (!publish_port_lookup(port)) {
		rows = publish_ports(&n);
		for (size_t i = 0; i < n; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%u (%s)",
				 i ? ", " : "", rows[i].port, rows[i].what);
		return log_error(
			"--publish %u: this port is never published to the host; only %s may be",
			port, list);
	}
	for (size_t i = 0; i < a->n_publish; i++)
		if (a->publish[i] == port)
			return log_error("--publish %u is given twice", port);
	if (a->n_publish >= PUBLISH_PORTS_MAX)
		return log_error("too many --publish: at most %d", PUBLISH_PORTS_MAX);
	a->publish[a->n_publish++] = port;
	return 0;
}

/* One --egress-allow: a pattern, or several separated by commas (no pattern has one). */
static int add_egress_patterns(EgressAllowlist *allow, const char *value)
{
	_cleanup_free_ char *copy = strdup(value);
	char err[512], *save = NULL;
	int r;

	if (!copy)
		return log_error_errno(-ENOMEM, "out of memory");
	if (!*copy || copy[0] == ',' || copy[strlen(copy) - 1] == ',' || strstr(copy, ",,"))
		return log_error(
			"--egress-allow '%s': empty pattern; give host, host:port or host:*",
			value);
	for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		r = egress_allowlist_add(allow, p, err, sizeof(err));
		if (r == -ENOMEM)
			return log_error_errno(r, "out of memory");
		if (r < 0)
			return log_error("%s", err);
	}
	return 0;
}

static int parse_args(int argc, char **argv, VmmArgs *a)
{
	enum {
		O_NAME = 256,
		O_RUN_DIR,
		O_APP,
		O_STATE,
		O_STATE_SIZE,
		O_SECRETS,
		O_LAYER,
		O_CPUS,
		O_MEM,
		O_ARTIFACTS,
		O_ROOTFS,
		O_CONSOLE,
		O_CONSOLE_STDERR,
		O_FOREGROUND,
		O_CHANNEL_EXTERNAL,
		O_NO_HOST_SANDBOX,
		O_CHANNEL_CONNECT,
		O_EGRESS_ALLOW,
		O_EGRESS_MAX_CONNS,
		O_ACCEL,
		O_QEMU,
		O_BOOT_STALL,
		O_PUBLISH,
		O_COLD,
		O_RELOADS,
		O_ENGINE,
		O_HELP
	};
	static const struct option options[] = {
		{"name", required_argument, NULL, O_NAME},
		{"run-dir", required_argument, NULL, O_RUN_DIR},
		{"app", required_argument, NULL, O_APP},
		{"state", required_argument, NULL, O_STATE},
		{"state-size", required_argument, NULL, O_STATE_SIZE},
		{"secrets", required_argument, NULL, O_SECRETS},
		{"layer", required_argument, NULL, O_LAYER},
		{"cpus", required_argument, NULL, O_CPUS},
		{"mem", required_argument, NULL, O_MEM},
		{"artifacts", required_argument, NULL, O_ARTIFACTS},
		{"rootfs", required_argument, NULL, O_ROOTFS},
		{"console", required_argument, NULL, O_CONSOLE},
		{"console-stderr", no_argument, NULL, O_CONSOLE_STDERR},
		{"foreground", no_argument, NULL, O_FOREGROUND},
		{"channel-external", no_argument, NULL, O_CHANNEL_EXTERNAL},
		{"no-host-sandbox", no_argument, NULL, O_NO_HOST_SANDBOX},
		{"channel-connect", required_argument, NULL, O_CHANNEL_CONNECT},
		{"egress-allow", required_argument, NULL, O_EGRESS_ALLOW},
		{"egress-max-conns", required_argument, NULL, O_EGRESS_MAX_CONNS},
		{"accel", required_argument, NULL, O_ACCEL},
		{"qemu", required_argument, NULL, O_QEMU},
		{"boot-stall-timeout", required_argument, NULL, O_BOOT_STALL},
		{"publish", required_argument, NULL, O_PUBLISH},
		{"cold", no_argument, NULL, O_COLD},
		{"reloads", no_argument, NULL, O_RELOADS},
		{"engine", required_argument, NULL, O_ENGINE},
		{"help", no_argument, NULL, O_HELP},
		{}};
	int c, r;

	*a = (VmmArgs){.cpus = 2,
		       .mem_mib = 512,
		       .state_size_mib = 1024,
		       .boot_stall_s = VMM_BOOT_STALL_S_DEFAULT,
		       .egress.max_conns = EGRESS_MAX_CONNS_DEFAULT};
	optind = 1;
	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (c) {
		case O_NAME:
			a->name = optarg;
			break;
		case O_RUN_DIR:
			a->run_dir = optarg;
			break;
		case O_APP:
			if (a->n_apps >= VMM_APPS_MAX)
				return log_error(
					"too many --app: QEMU's microvm has %d virtio devices, so a VM holds at most %d app shares",
					VM_TRANSPORTS_MAX, VM_SHARES_MAX);
			a->apps[a->n_apps++] = optarg;
			break;
		case O_STATE:
			a->state = optarg;
			break;
		case O_STATE_SIZE:
			if (parse_uint_range(optarg, 16, 1024 * 1024, &a->state_size_mib) < 0)
				return log_error(
					"--state-size takes MiB from 16 to 1048576, not '%s'",
					optarg);
			break;
		case O_SECRETS:
			a->secrets = optarg;
			break;
		case O_CPUS:
			if (parse_uint_range(optarg, 1, 16, &a->cpus) < 0)
				return log_error(
					"--cpus takes a whole number from 1 to 16, not '%s'",
					optarg);
			break;
		case O_MEM:
			if (parse_uint_range(optarg, 128, 16384, &a->mem_mib) < 0)
				return log_error("--mem takes MiB from 128 to 16384, not '%s'",
						 optarg);
			break;
		case O_ARTIFACTS:
			a->artifacts = optarg;
			break;
		case O_ROOTFS:
			a->rootfs = optarg;
			break;
		case O_CONSOLE:
			a->console = optarg;
			break;
		case O_CONSOLE_STDERR:
			a->console_stderr = true;
			break;
		case O_CHANNEL_EXTERNAL:
			a->channel_external = true;
			break;
		case O_NO_HOST_SANDBOX:
			a->no_host_sandbox = true;
			break;
		case O_CHANNEL_CONNECT:
			a->channel_connect = optarg;
			break;
		case O_EGRESS_ALLOW:
			/* The allowlist comes from here only, never from the guest. */
			r = add_egress_patterns(&a->egress.allow, optarg);
			if (r < 0)
				return r;
			break;
		case O_EGRESS_MAX_CONNS:
			if (parse_uint_range(optarg, 1, EGRESS_MAX_CONNS_MAX,
					     &a->egress.max_conns) < 0)
				return log_error(
					"--egress-max-conns takes a whole number from 1 to %d, not '%s'",
					EGRESS_MAX_CONNS_MAX, optarg);
			break;
		case O_FOREGROUND:
			a->foreground = true;
			break;
		case O_ACCEL:
			if (accel_mode_from_string(optarg) < 0)
				return log_error("--accel takes auto, kvm or tcg, not '%s'",
						 optarg);
			a->accel = optarg;
			break;
		case O_QEMU:
			a->qemu = optarg;
			break;
		case O_COLD:
			a->cold = true;
			break;
		case O_RELOADS:
			a->reloads = true;
			break;
		case O_ENGINE:
			if (!streq(optarg, "qemu") && !streq(optarg, "docker"))
				return log_error("--engine takes qemu or docker, not '%s'", optarg);
			a->docker = streq(optarg, "docker");
			break;
		case O_LAYER: {
			ArtifactKind k = artifact_layer_from_name(optarg);

			if (k < 0)
				return log_error("--layer takes 'browser', the one layer, not '%s'",
						 optarg);
			a->layers |= 1u << k;
			break;
		}
		case O_BOOT_STALL:
			if (parse_uint_range(optarg, 0, 3600, &a->boot_stall_s) < 0)
				return log_error(
					"--boot-stall-timeout takes seconds from 0 to 3600, not '%s'",
					optarg);
			break;
		case O_PUBLISH:
			r = add_publish(a, optarg);
			if (r < 0)
				return r;
			break;
		case O_HELP:
			usage();
			exit(0);
		default:
			return -EINVAL;
		}
	}
	if (optind < argc)
		return log_error("unexpected argument '%s'; see 'berth-vmm run --help'",
				 argv[optind]);
	if (!a->name)
		return log_error("berth-vmm run needs --name NAME; see 'berth-vmm run --help'");
	/* A layer takes one of the virtio devices the app shares would have. */
	if (a->n_apps + (size_t)__builtin_popcount(a->layers) > VM_SHARES_MAX)
		return log_error(
			"%zu app shares and the browser layer do not fit: QEMU's microvm has %d virtio devices, so a VM with a layer holds at most %d app shares",
			a->n_apps, VM_TRANSPORTS_MAX, VM_SHARES_MAX - 1);
	if (a->docker && (a->layers || a->rootfs || a->channel_external || a->channel_connect))
		return log_error(
			"--engine docker runs the pinned rootfs with no layer; --layer, --rootfs, "
			"--channel-external and --channel-connect need --engine qemu");
	if (a->channel_connect && a->channel_external)
		return log_error("--channel-connect and --channel-external exclude each other");
	if (a->channel_connect && strlen(a->channel_connect) > SOCKET_PATH_MAX)
		return log_error("--channel-connect %s: a unix socket path is at most %d bytes",
				 a->channel_connect, SOCKET_PATH_MAX);
	if (!vm_name_valid(a->name))
		return log_error(
			"invalid VM name '%s': use 1-64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit",
			a->name);
	return 0;
}

/* berth.yml, parsed once here: the app's name in the VM is its manifest's name, and its
 * policy is compiled from it (compile_policies()). */
static int load_manifest(VmmApp *app, const char *arg)
{
	_cleanup_free_ char *path = NULL;
	ManifestError merr = {};
	Manifest *m = NULL;
	int r;

	if (asprintf(&path, "%s/berth.yml", app->dir) < 0)
		return log_error_errno(-ENOMEM, "out of memory");
	if (access(path, R_OK) < 0)
		return log_error(
			"--app %s: no berth.yml in it; an app directory declares itself with a berth.yml",
			arg);
	r = manifest_load_at(AT_FDCWD, path, &m, &merr);
	if (r < 0) {
		log_error("--app %s: %s", arg, merr.text ? merr.text : strerror(-r));
		manifest_error_done(&merr);
		return r;
	}
	app->manifest = manifest_to_json(m);
	app->name = strdup(manifest_name(m));
	manifest_free(m);
	if (!app->manifest || !app->name)
		return log_error_errno(-ENOMEM, "out of memory");
	return 0;
}

static int check_apps(Vmm *v)
{
	for (size_t i = 0; i < v->args.n_apps; i++) {
		VmmApp *app = &v->apps[i];
		struct stat st;
		int r;

		app->image_fd = -EBADF;
		app->dir = realpath(v->args.apps[i], NULL);
		if (!app->dir || stat(app->dir, &st) < 0 || !S_ISDIR(st.st_mode))
			return log_error("--app %s: not a directory", v->args.apps[i]);
		v->n_apps++;
		r = load_manifest(app, v->args.apps[i]);
		if (r < 0)
			return r;
		/* The console tells berth-init's own lines and events by these prefixes. */
		if (streq(app->name, "berth-init") || streq(app->name, "event"))
			return log_error(
				"--app %s: the name '%s' is berth-init's own in the VM's log; rename the app in its berth.yml",
				v->args.apps[i], app->name);
		for (size_t j = 0; j < i; j++)
			if (streq(v->apps[j].name, app->name))
				return log_error(
					"--app %s and --app %s are both named '%s' in their berth.yml; each app of a VM needs its own name",
					v->apps[j].dir, app->dir, app->name);
	}
	return 0;
}

static int check_socket_path(const char *run_dir, const char *file)
{
	size_t len = strlen(run_dir) + 1 + strlen(file);

	if (len > SOCKET_PATH_MAX)
		return log_error(
			"the run dir %s is too long for unix sockets (%s/%s is %zu bytes, at most %d): set BERTH_HOME to a shorter path or pass a shorter --run-dir",
			run_dir, run_dir, file, len, SOCKET_PATH_MAX);
	return 0;
}

static int check_socket_paths(const VmmArgs *a, const char *run_dir)
{
	char file[32];
	int r = 0;

	for (size_t i = 0; r >= 0 && i < ELEMENTSOF(run_dir_sockets); i++)
		r = check_socket_path(run_dir, run_dir_sockets[i]);
	for (size_t i = 0; r >= 0 && i < a->n_publish; i++) {
		snprintf(file, sizeof(file), "publish-%u.sock", a->publish[i]);
		r = check_socket_path(run_dir, file);
	}
	return r;
}

static int open_state_disk(Vmm *v)
{
	uint64_t want = (uint64_t)v->args.state_size_mib * 1024 * 1024;
	struct stat st;
	int fd;

	fd = open(v->args.state, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 && errno == ENOENT) {
		_cleanup_free_ char *dir = strdup(v->args.state);
		char *slash = dir ? strrchr(dir, '/') : NULL;

		if (slash && slash != dir) {
			*slash = '\0';
			(void)mkdir_p(dir, 0700);
		}
		fd = open(v->args.state, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0) {
			v->state_created = true;
			/* Sparse: the guest formats it on first boot and only used blocks cost
			 * space. */
			if (ftruncate(fd, (off_t)want) < 0) {
				int r = -errno;

				close(fd);
				return log_error_errno(r, "cannot size the state disk %s: %m",
						       v->args.state);
			}
		}
	}
	if (fd < 0)
		return log_error_errno(errno, "cannot open the state disk %s: %m", v->args.state);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return log_error("the state disk %s is not a regular file", v->args.state);
	}
	/* Two VMs on one state disk would corrupt it; say so before QEMU's own lock does. */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return log_error(
			"the state disk %s is in use by another VM; stop that one first (berth vm status)",
			v->args.state);
	}
	v->state_fd = fd;
	v->state_size = (uint64_t)st.st_size;
	/* Measured for attestation, beside QEMU's start and before the guest runs
	 * (vmm_measure_start()): what the VM started from. */
	v->state_pending = true;
	return 0;
}

static int open_secrets(Vmm *v)
{
	struct stat st;

	v->secrets_fd = open(v->args.secrets, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (v->secrets_fd < 0)
		return log_error_errno(errno, "cannot open the secrets image %s: %m",
				       v->args.secrets);
	if (fstat(v->secrets_fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > 1024 * 1024)
		return log_error("the secrets image %s is not a regular file of at most 1 MiB",
				 v->args.secrets);
	/* Values must not be readable by anyone else on the host. */
	if (st.st_mode & 077)
		return log_error(
			"the secrets image %s is readable by others (mode %o): it must be 0600",
			v->args.secrets, st.st_mode & 0777);
	return 0;
}

static void on_policy_warning(const char *line, void *userdata)
{
	VmmApp *app = userdata;

	log_warning("app \"%s\": %s", app->name, line);
	if (json_array_size(app->warnings) < POLICY_WARNINGS_MAX)
		json_array_append_new(app->warnings, json_string(line));
}

/*
 * Each app's capability policy, compiled here from the berth.yml loaded once: berth-init
 * gets the policy on the boot disk and only checks and writes it, so PID 1 never parses
 * YAML. The guest hashes what agent-init reads; its hash is recorded here too (vm.json).
 */
int vmm_compile_policy(VmmApp *app, size_t n_apps)
{
	_cleanup_free_ char *cwd = NULL, *text = NULL;
	json_t *empty = NULL;
	size_t len;
	int r;

	/* One app lives at /app; several at /app/<name>. */
	if (asprintf(&cwd, n_apps == 1 ? "/app" : "/app/%s", app->name) < 0 ||
	    !(app->warnings = json_array()))
		return -ENOMEM;
	PolicyInput in = {
		.app_name = app->name,
		.capabilities = json_object_get(app->manifest, "capabilities"),
		.resources = json_object_get(app->manifest, "resources"),
		.cwd = cwd,
	};

	if (!in.capabilities)
		in.capabilities = empty = json_array();
	r = capability_policy_compile(&in, on_policy_warning, app, &app->policy);
	json_decref(empty);
	if (r >= 0)
		r = capability_policy_encode(app->policy, &text, &len);
	if (r >= 0)
		r = sha256_buffer_hex(text, len, app->policy_sha256);
	return r;
}

static int compile_policies(Vmm *v)
{
	for (size_t i = 0; i < v->n_apps; i++) {
		int r = vmm_compile_policy(&v->apps[i], v->n_apps);

		if (r < 0)
			return log_error_errno(r,
					       "--app %s: cannot compile its capability policy: %m",
					       v->apps[i].dir);
	}
	return 0;
}

/*
 * Each published port's app, and the at-most-one rule (SPEC 8.3): a port of the table is
 * served by the one app that declares its capability, so two apps declaring it would leave
 * the guest no way to tell whose listener the host reaches. That refuses the VM whether or
 * not the port is published. A --publish whose app is not in the VM is refused too.
 */
static int check_publish(Vmm *v)
{
	const PublishPort *rows;
	size_t n_rows = 0;

	rows = publish_ports(&n_rows);
	for (size_t k = 0; k < n_rows; k++) {
		char names[VMM_APPS_MAX * 34] = "";
		unsigned n = 0;
		int serving = -1;

		for (size_t i = 0; i < v->n_apps; i++) {
			if (!publish_policy_declares(v->apps[i].policy, rows[k].ns))
				continue;
			serving = (int)i;
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 n++ ? ", " : "", v->apps[i].name);
		}
		if (n > 1)
			return log_error(
				"at most one app may declare a %s:* capability when running multiple apps together — found %u: %s",
				rows[k].ns, n, names);
		for (size_t i = 0; i < v->args.n_publish; i++) {
			if (v->args.publish[i] != rows[k].port)
				continue;
			if (serving < 0)
				return log_error(
					"--publish %u: no app of this VM declares a %s: capability, whose app serves %s on that port",
					rows[k].port, rows[k].ns, rows[k].what);
			v->publish_app[i] = serving;
		}
	}
	return 0;
}

/* At most one app of a VM governs the others' calls (SPEC 9.2). */
static int check_governor(const Vmm *v)
{
	char names[VMM_APPS_MAX * 72] = "";
	unsigned n = 0;

	for (size_t i = 0; i < v->n_apps; i++)
		if (json_is_true(json_object_get(v->apps[i].manifest, "governs")))
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 n++ ? ", " : "", v->apps[i].name);
	if (n > 1)
		return log_error(
			"at most one app may declare governs: true when running multiple apps together — found %u: %s",
			n, names);
	return 0;
}

/* The boot disk (boot-disk.h): the plan and the secrets, in a file that has no name. */
static int build_boot_disk(Vmm *v)
{
	_cleanup_(json_decrefp) json_t *apps = json_array(), *publish = json_array(), *plan = NULL;
	char err[256] = "";
	int fd, r;

	for (size_t i = 0; apps && i < v->n_apps; i++) {
		char share[16];

		snprintf(share, sizeof(share), "app%zu", i);
		json_t *entry =
			json_pack("{s:s, s:s, s:o, s:O}", "name", v->apps[i].name, "share", share,
				  "policy", capability_policy_to_json(v->apps[i].policy),
				  "warnings", v->apps[i].warnings);

		/* The guest gives the governor a way in from every other app (grants.h). */
		if (entry && json_is_true(json_object_get(v->apps[i].manifest, "governs")))
			json_object_set_new(entry, "governs", json_true());
		json_array_append_new(apps, entry);
	}
	/* The ports only: the guest finds their app from the same table (publish.h). */
	for (size_t i = 0; publish && i < v->args.n_publish; i++)
		json_array_append_new(publish, json_integer(v->args.publish[i]));
	plan = apps && publish ? json_pack("{s:O, s:O, s:b}", "apps", apps, "publish", publish,
					   "reloads", v->args.reloads)
			       : NULL;
	if (!plan || json_array_size(apps) != v->n_apps ||
	    json_array_size(publish) != v->args.n_publish)
		return log_error_errno(-ENOMEM, "out of memory");
	fd = open(v->run_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		/* A filesystem without O_TMPFILE: a name for as long as it takes to unlink it. */
		_cleanup_free_ char *path = NULL;

		if (asprintf(&path, "%s/boot.XXXXXX", v->run_dir) < 0)
			return log_error_errno(-ENOMEM, "out of memory");
		fd = mkostemp(path, O_CLOEXEC);
		if (fd >= 0)
			(void)unlink(path);
	}
	if (fd < 0)
		return log_error_errno(errno, "cannot create the boot disk in %s: %m", v->run_dir);
	r = boot_disk_write(fd, plan, v->secrets_fd, err, sizeof(err));
	if (r < 0) {
		close(fd);
		return log_error_errno(r, "cannot write the boot disk: %s", err[0] ? err : "%m");
	}
	v->boot_fd = fd;
	return 0;
}

static int pack_shares(Vmm *v)
{
	char err[512];
	int r;

	for (size_t i = 0; i < v->n_apps; i++) {
		VmmApp *app = &v->apps[i];

		r = share_digest(app->dir, &app->digest, err, sizeof(err));
		if (r < 0)
			return log_error("--app %s: %s", app->dir, err);
		/* A container gets the directory itself, bound read-only (engine-docker.c). */
		if (v->args.docker) {
			app->image = strdup(app->dir);
			if (!app->image)
				return -ENOMEM;
			continue;
		}
		if (asprintf(&app->image, "%s/app-%zu.erofs", v->run_dir, i) < 0)
			return -ENOMEM;
		r = share_pack(app->dir, app->image, err, sizeof(err));
		if (r < 0)
			return log_error("--app %s: %s", app->dir, err);
		/*
		 * Every share disk has a template's size (sparse, zeros past the image; erofs
		 * says where its data ends): a restored VM's kernel saw the placeholder's size
		 * and reads ahead within it, and a reload in place (reload.h) writes a new
		 * image into the same disk, whose size QEMU fixed when it opened it.
		 */
		if (truncate(app->image, (off_t)SNAPSHOT_APP_BYTES) < 0)
			return log_error_errno(errno, "cannot extend %s: %m", app->image);
		app->image_fd = open(app->image, O_RDONLY | O_CLOEXEC);
		if (app->image_fd < 0)
			return log_error_errno(errno, "cannot open %s: %m", app->image);
	}
	return 0;
}

#define CMDLINE_MAX 2048

/* The kernel command line adds only init= and the boot id: the apps and their policies are
 * on the boot disk. Every process in the guest can read /proc/cmdline, so nothing secret
 * ever goes here. */
static int build_cmdline_extra(Vmm *v)
{
	if (asprintf(&v->cmdline_extra, "init=/sbin/berth-init BERTH_BOOT_ID=%s", v->boot_id) < 0)
		return -ENOMEM;
	return 0;
}

/* KVM or TCG, by the settings and, for auto and kvm, the probe's verdict (accel.h). */
static int choose_accel(Vmm *v, long *ret_tsc_khz)
{
	_cleanup_free_ char *vm_dir = berth_vm_dir(), *cache = NULL;
	char source[320], err[2048];
	AccelMode mode;
	int r;

	r = accel_settings(v->args.accel, v->args.qemu, &mode, source, sizeof(source), &v->qemu,
			   err, sizeof(err));
	if (r < 0)
		return log_error("%s", err);
	if (!vm_dir || asprintf(&cache, "%s/accel.json", vm_dir) < 0)
		return log_error_errno(-ENOMEM, "out of memory");
	AccelHost host = {
		.artifacts = &v->artifacts,
		.qemu = v->qemu,
		.host_sandbox = &v->host_sandbox,
		.cache_path = cache,
	};

	r = accel_choose(&host, mode, source, &v->accel, err, sizeof(err));
	if (r < 0)
		return log_error("%s", err);
	*ret_tsc_khz = host.tsc_khz;
	log_info("accelerator: %s (%s)", accel_to_string(v->accel.accel), v->accel.reason);
	return 0;
}

/* Why this VM cannot start from a snapshot at all, or NULL. */
static const char *restore_excluded(const Vmm *v)
{
	if (v->args.docker)
		return "the Docker engine starts a container";
	if (v->args.cold)
		return "--cold";
	if (v->args.rootfs)
		return "--rootfs boots an image no snapshot was made from";
	if (v->args.layers)
		return "a layer is attached, which no snapshot has";
	if (v->args.channel_external || v->args.channel_connect)
		return "the channel goes to a test program";
	if (v->state_size > SNAPSHOT_STATE_BYTES)
		return "the state disk is larger than a template's";
	{
		struct stat st;

		if (fstat(v->boot_fd, &st) < 0 || (uint64_t)st.st_size > SNAPSHOT_BOOT_BYTES)
			return "the boot disk is larger than a template's";
	}
	for (size_t i = 0; i < v->n_apps; i++) {
		struct stat st;

		if (fstat(v->apps[i].image_fd, &st) < 0 ||
		    (uint64_t)st.st_size > SNAPSHOT_APP_BYTES)
			return "an app share is larger than a template's";
	}
	return NULL;
}

/*
 * Start from this host's snapshot when there is a valid one: the template's devices, with
 * this VM's disks where it has them and empty placeholders (in the run dir) elsewhere,
 * and QEMU reading the snapshot through a pipe, hashed as it goes (serve.c lets the VM run
 * only once all of it matched). Otherwise say in v->boot_reason why the VM boots cold.
 */
static int try_restore(Vmm *v)
{
	VmConfig *c = &v->vm;
	SnapshotKey key;
	int fds[2 + SNAPSHOT_APPS], r;
	char why[512];

	const char *excluded = restore_excluded(v);

	if (excluded) {
		snprintf(v->boot_reason, sizeof(v->boot_reason), "%s", excluded);
		return 0;
	}
	r = snapshot_key_init(&key, &v->artifacts, v->qemu, c->accel, c->cpus, c->mem_mib);
	if (r < 0)
		return r;
	r = snapshot_find(&key, &v->snapshot, why, sizeof(why));
	if (r >= 0)
		r = snapshot_open_ram(&v->snapshot, &v->ram_fd, why, sizeof(why));
	if (r >= 0) {
		_cleanup_free_ char *dir = hash_record_dir();

		v->ram_image_fd = r;
		/* Copied without its digest when it is the file that matched last time. */
		(void)hash_stamp_take(v->ram_image_fd, &v->ram_stamp);
		v->ram_by_record = hash_record_holds(dir, &v->ram_stamp, SNAPSHOT_RAM_RECORD_KIND,
						     v->snapshot.ram_sha256);
	}
	if (r < 0) {
		snprintf(v->boot_reason, sizeof(v->boot_reason), "%s", why);
		if (r != -ENOENT)
			log_warning("booting cold: %s", why);
		return r == -ENOMEM ? r : 0;
	}
	/*
	 * The template's kernel saw the read-only disks at the placeholders' sizes, and reads
	 * ahead within them: the boot disk is extended (sparse, zeros) to its size, so that
	 * no read runs past its end, as every share image already is (pack_shares()). Their
	 * formats say where the data ends. The state disk gets its real size told instead
	 * (block_resize).
	 */
	if (ftruncate(v->boot_fd, (off_t)SNAPSHOT_BOOT_BYTES) < 0)
		return log_error_errno(errno, "cannot extend the boot disk: %m");
	fds[0] = v->state_fd;
	fds[1] = v->boot_fd;
	for (size_t i = 0; i < SNAPSHOT_APPS; i++)
		fds[2 + i] = i < v->n_apps ? v->apps[i].image_fd : -EBADF;
	for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
		char name[32];

		if (fds[i] >= 0)
			continue;
		snprintf(name, sizeof(name), "placeholder-%zu", i);
		fds[i] = v->placeholder_fds[i] = snapshot_placeholder(v->run_dir, name, 0, i != 0);
		if (fds[i] < 0)
			return fds[i];
	}
	snapshot_layout(c, fds);
	if (asprintf(&v->qmp_path, "%s/qmp.sock", v->run_dir) < 0)
		return -ENOMEM;
	c->qmp_path = v->qmp_path;
	c->incoming = true;
	c->ram_fd = v->ram_fd;
	c->cmdline = v->snapshot.cmdline;
	c->tsc_khz = 0; /* the template's kernel measured the clock it runs on */
	v->snapshot_key = key;
	v->restore = true;
	log_info("restoring snapshot %.12s (made %s) instead of booting", v->snapshot.sha256,
		 v->snapshot.created_at);
	return 0;
}

/* The disks of a cold boot: the state disk if any, the boot disk, the app shares. */
static void cold_disks(Vmm *v)
{
	VmConfig *c = &v->vm;

	c->n_disks = 0;
	if (v->state_fd >= 0)
		c->disks[c->n_disks++] = (VmDisk){"state", v->state_fd, false};
	c->disks[c->n_disks++] = (VmDisk){"boot", v->boot_fd, true};
	for (size_t i = 0; i < v->n_apps && c->n_disks < VM_DISKS_MAX; i++) {
		static char serials[VMM_APPS_MAX][16];

		snprintf(serials[i], sizeof(serials[i]), "app%zu", i);
		c->disks[c->n_disks++] = (VmDisk){serials[i], v->apps[i].image_fd, true};
	}
	/* berth-init finds a layer by its serial ("layer-browser") and lays it over the root. */
	for (int k = ARTIFACT_BASE_MAX; k < _ARTIFACT_KIND_MAX; k++)
		if (v->layers[k].fd >= 0 && c->n_disks < VM_DISKS_MAX)
			c->disks[c->n_disks++] =
				(VmDisk){artifact_kind_to_string(k), v->layers[k].fd, true};
}

int vmm_config_cold(Vmm *v, const char *reason)
{
	VmConfig *c = &v->vm;

	v->restore = false;
	measure_cancel(&v->ram_load);
	v->ram_image_fd = safe_close(v->ram_image_fd);
	v->ram_fd = safe_close(v->ram_fd);
	if (reason != v->boot_reason) /* snprintf() must not copy onto itself */
		snprintf(v->boot_reason, sizeof(v->boot_reason), "%s", reason);
	c->incoming = false;
	c->ram_fd = -EBADF;
	c->qmp_path = NULL;
	c->cmdline = NULL;
	if (c->accel == ACCEL_TCG && c->tsc_khz <= 0) {
		c->tsc_khz = tsc_measure_khz();
		if (c->tsc_khz < 0)
			return log_error_errno(
				(int)c->tsc_khz,
				"cannot measure the host TSC rate, which a VM without KVM needs: %m");
	}
	cold_disks(v);
	return 0;
}

/* berth-<state disk's base name>-<8 hex of its path>: the container's volumes are that with
 * -workspace, -state and -context (engine-docker.c). Docker's volumes are the host's, not
 * one ~/.berth's: the path keeps two homes' apps of one name apart. */
static int docker_volume_prefix(Vmm *v)
{
	const char *base = strrchr(v->args.state, '/');
	char sha[SHA256_HEX_LEN + 1];
	size_t n;

	base = base ? base + 1 : v->args.state;
	n = strlen(base);
	if (n > 4 && streq(base + n - 4, ".img"))
		n -= 4;
	if (n == 0 || n > 64)
		return log_error("--state %s: no name for its Docker volumes", v->args.state);
	if (sha256_buffer_hex(v->args.state, strlen(v->args.state), sha) < 0 ||
	    asprintf(&v->volume_prefix, "berth-%.*s-%.8s", (int)n, base, sha) < 0)
		return -ENOMEM;
	for (char *p = v->volume_prefix; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.')
			*p = '-';
	return 0;
}

/* A container instead of a VM: the base image made or found, the run dir's directory for
 * the container, the shares, and the boot disk's place among the disks. */
static int docker_config(Vmm *v)
{
	_cleanup_free_ char *vm_dir = berth_vm_dir(), *cache = NULL;
	VmContainer *c = &v->container;
	char err[1024];
	int r;

	v->docker = docker_program(err, sizeof(err));
	if (!v->docker)
		return log_error("%s", err);
	if (!vm_dir || asprintf(&cache, "%s/cache", vm_dir) < 0)
		return -ENOMEM;
	r = docker_image_ensure(v->docker, v->artifacts.a[ARTIFACT_ROOTFS].fd,
				v->artifacts.a[ARTIFACT_ROOTFS].sha256, cache, &v->docker_image,
				err, sizeof(err));
	if (r < 0)
		return log_error("the Docker engine: %s", err);
	if (v->docker_image.made)
		log_info("made the Docker base image %s (%s) from rootfs %.12s in %ld ms",
			 v->docker_image.tag, v->docker_image.id,
			 v->artifacts.a[ARTIFACT_ROOTFS].sha256, v->docker_image.make_ms);
	else
		log_info("Docker base image %s (%s), layer %s", v->docker_image.tag,
			 v->docker_image.id, v->docker_image.layer);
	if (asprintf(&v->host_dir, "%s/guest", v->run_dir) < 0 ||
	    asprintf(&v->container_name, "%s%s-%.8s", strneq(v->name, "berth-", 6) ? "" : "berth-",
		     v->name, v->boot_id) < 0)
		return -ENOMEM;
	if (mkdir(v->host_dir, 0700) < 0 && errno != EEXIST)
		return log_error_errno(errno, "cannot create %s: %m", v->host_dir);
	if (v->args.state && (r = docker_volume_prefix(v)) < 0)
		return r;
	*c = (VmContainer){
		.docker = v->docker,
		.image = v->docker_image.id,
		.name = v->container_name,
		.host_dir = v->host_dir,
		.boot_id = v->boot_id,
		.volume_prefix = v->volume_prefix,
		.run_dir = v->run_dir,
		.n_shares = v->n_apps,
	};
	for (size_t i = 0; i < v->n_apps; i++) {
		static char targets[VMM_APPS_MAX][48];

		snprintf(targets[i], sizeof(targets[i]), v->n_apps == 1 ? "/app" : "/app/%s",
			 v->apps[i].name);
		c->shares[i] = (VmShareDir){v->apps[i].dir, targets[i]};
	}
	v->vm = (VmConfig){
		.artifacts = &v->artifacts,
		.cpus = v->args.cpus,
		.mem_mib = v->args.mem_mib,
		.ram_fd = -EBADF,
		.container = c,
	};
	snprintf(v->accel.reason, sizeof(v->accel.reason),
		 "a container runs on the host's CPU and kernel: no accelerator");
	snprintf(v->boot_reason, sizeof(v->boot_reason), "%s", restore_excluded(v));
	cold_disks(v);
	return 0;
}

static int build_vm_config(Vmm *v)
{
	long tsc_khz = 0;
	int r = build_cmdline_extra(v);

	if (r < 0)
		return r;
	if (v->args.docker)
		return docker_config(v);
	r = choose_accel(v, &tsc_khz);
	if (r < 0)
		return r;
	VmConfig *c = &v->vm;

	*c = (VmConfig){
		.artifacts = &v->artifacts,
		.cpus = v->args.cpus,
		.mem_mib = v->args.mem_mib,
		.accel = v->accel.accel,
		.ram_fd = -EBADF,
		.qemu_binary = v->qemu,
		.extra_cmdline = v->cmdline_extra,
		.host_sandbox = &v->host_sandbox,
	};
	r = try_restore(v);
	if (r < 0 || v->restore)
		return r;
	/* The probe measured the TSC already, unless its verdict came from the cache. */
	c->tsc_khz = tsc_khz;
	return vmm_config_cold(v, v->boot_reason);
}

/* Nothing opened yet: every descriptor cleanup() closes. */
static void vmm_fds_init(Vmm *v)
{
	v->measure = (Measure){.fd = -EBADF};
	v->lock_fd = v->state_fd = v->secrets_fd = v->boot_fd = v->log_fd = -EBADF;
	v->ram_image_fd = v->ram_fd = -EBADF;
	for (size_t i = 0; i < ELEMENTSOF(v->placeholder_fds); i++)
		v->placeholder_fds[i] = -EBADF;
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++)
		v->layers[k] = (Artifact){.fd = -EBADF};
}

static int prepare(Vmm *v)
{
	_cleanup_free_ char *vm_dir = NULL;
	char err[1024];
	bool was_stale;
	pid_t owner;
	int r;

	vmm_fds_init(v);
	v->name = strdup(v->args.name);
	v->run_dir = v->args.run_dir ? strdup(v->args.run_dir) : berth_run_dir(v->args.name);
	if (!v->name || !v->run_dir)
		return log_error_errno(-ENOMEM, "out of memory");
	r = check_socket_paths(&v->args, v->run_dir);
	if (r < 0)
		return r;
	r = check_apps(v);
	if (r < 0)
		return r;
	/* Before the run dir is taken: without Landlock nothing is started at all. */
	r = host_sandbox_check(v->args.no_host_sandbox, &v->host_sandbox);
	if (r < 0)
		return r;

	/* The pins come first: nothing else happens for artifacts this binary does not trust. */
	vm_dir = v->args.artifacts ? strdup(v->args.artifacts) : berth_vm_dir();
	if (!vm_dir)
		return -ENOMEM;
	/* Checked beside QEMU's start (vmm_measure_finish()): before a cold boot's QEMU
	 * starts, since it parses the kernel and the initramfs and runs the guest at once; a
	 * restore's QEMU reads neither, and the root image and the layers only for the guest,
	 * which runs once they matched. A container's image is made from the root image,
	 * which is checked now. */
	r = artifacts_open_verified(vm_dir, v->args.rootfs, !v->args.docker, &v->artifacts, err,
				    sizeof(err));
	if (r < 0)
		return log_error("%s", err);
	for (int k = ARTIFACT_BASE_MAX; k < _ARTIFACT_KIND_MAX; k++) {
		if (!(v->args.layers & (1u << k)))
			continue;
		r = artifact_open_layer(vm_dir, k, !v->args.docker, &v->layers[k], err,
					sizeof(err));
		if (r < 0)
			return log_error("%s", err);
	}

	r = rundir_acquire(v->run_dir, &owner, &was_stale);
	if (r == -EBUSY)
		return log_error(
			"VM \"%s\" is already running (berth-vmm pid %d, run dir %s); stop it with 'berth vm stop %s'",
			v->name, (int)owner, v->run_dir, v->name);
	if (r < 0)
		return log_error_errno(r, "cannot create the run dir %s: %m", v->run_dir);
	v->lock_fd = r;
	if (was_stale)
		log_info("cleaned up a stale run dir for \"%s\" (its berth-vmm was gone)", v->name);

	if (asprintf(&v->log_path, "%s/vmm.log", v->run_dir) < 0 ||
	    asprintf(&v->console_path, "%s/console.log", v->run_dir) < 0)
		return -ENOMEM;
	if (v->args.console) {
		free(v->console_path);
		v->console_path = strdup(v->args.console);
	}
	v->log_fd = open(v->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (v->log_fd < 0)
		return log_error_errno(errno, "cannot create %s: %m", v->log_path);
	log_set_extra_fd(v->log_fd);
	/* Much of what vmm.log gets, the guest provokes (its events, its dials, channel
	 * resets): the file stays bounded, with room kept for warnings and errors. */
	log_set_byte_cap(VMM_LOG_BYTES_MAX, VMM_LOG_RESERVE_BYTES);
	/* After the log file exists: the test-only setting is warned about in vmm.log too. */
	r = egress_config_test_cidr_from_env(&v->args.egress);
	if (r < 0)
		return r;

	/* A container keeps its state in Docker volumes instead (docker_config()). */
	if (v->args.state && !v->args.docker && (r = open_state_disk(v)) < 0)
		return r;
	if (v->args.secrets && (r = open_secrets(v)) < 0)
		return r;
	r = compile_policies(v);
	if (r >= 0)
		r = check_publish(v);
	if (r >= 0)
		r = check_governor(v);
	if (r >= 0)
		r = build_boot_disk(v);
	if (r >= 0)
		r = pack_shares(v);
	if (r < 0)
		return r;
	random_uuid(v->boot_id);
	now_rfc3339(v->started_at, sizeof(v->started_at), true);
	return build_vm_config(v);
}

int vmm_measure_start(Vmm *v)
{
	int fds[MEASURE_JOBS_MAX];
	bool chunked[MEASURE_JOBS_MAX];
	size_t n = 0;

	for (int k = 0; k < _ARTIFACT_KIND_MAX && n < MEASURE_JOBS_MAX; k++) {
		Artifact *a = k < ARTIFACT_BASE_MAX ? &v->artifacts.a[k] : &v->layers[k];

		if (a->fd < 0 || !a->pending)
			continue;
		v->measure_kind[n] = k;
		chunked[n] = false;
		fds[n++] = a->fd;
	}
	if (v->state_fd >= 0 && v->state_pending && n < MEASURE_JOBS_MAX) {
		v->measure_kind[n] = -1;
		chunked[n] = true;
		fds[n++] = v->state_fd;
	}
	if (n == 0)
		return 0;
	return measure_start(&v->measure, fds, chunked, n);
}

static int measure_check(Vmm *v, char *err, size_t errlen)
{
	int r;

	if (v->measure.n == 0)
		return 0;
	r = measure_finish(&v->measure, now_ms() + MEASURE_TIMEOUT_MS);
	if (r < 0) {
		snprintf(err, errlen, "the disks could not be measured (%s)", strerror(-r));
		return r;
	}
	for (size_t i = 0; i < v->measure.n; i++) {
		const MeasureResult *res = &v->measure.results[i];
		int k = v->measure_kind[i];
		Artifact *a = k < 0		      ? NULL
			      : k < ARTIFACT_BASE_MAX ? &v->artifacts.a[k]
						      : &v->layers[k];

		if (res->error < 0) {
			snprintf(err, errlen, "cannot read %s: %s", a ? a->path : v->args.state,
				 strerror(-res->error));
			return res->error;
		}
		if (!a) {
			snprintf(v->state_sha256, sizeof(v->state_sha256), "%s", res->sha256);
			v->state_hashed_bytes = res->bytes;
			v->state_hash_ms = (long)res->ms;
			v->state_pending = false;
			continue;
		}
		r = artifact_measured(a, (ArtifactKind)k, res->sha256, res->bytes, (long)res->ms,
				      err, errlen);
		if (r < 0)
			return r;
		if (k >= ARTIFACT_BASE_MAX)
			log_info("%s %.12s verified in %ld ms", a->path, a->sha256, a->hash_ms);
	}
	return 0;
}

int vmm_measure_finish(Vmm *v, char *err, size_t errlen)
{
	if (!v->measured) {
		int64_t t0 = now_ms();

		v->measure_err[0] = '\0';
		v->measure_r = measure_check(v, v->measure_err, sizeof(v->measure_err));
		v->measured = true;
		if (v->measure.n > 0)
			log_info("%zu image%s measured (waited %lld ms for %s)", v->measure.n,
				 v->measure.n == 1 ? "" : "s", (long long)(now_ms() - t0),
				 v->restore ? "them after the snapshot's load" : "them");
	}
	snprintf(err, errlen, "%s", v->measure_err);
	return v->measure_r;
}

static void cleanup(Vmm *v)
{
	measure_cancel(&v->measure);
	measure_cancel(&v->ram_load);
	safe_close(v->ram_image_fd);
	safe_close(v->ram_fd);
	artifacts_done(&v->artifacts);
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++)
		artifact_done(&v->layers[k]);
	for (size_t i = 0; i < v->n_apps; i++) {
		safe_close(v->apps[i].image_fd);
		free(v->apps[i].dir);
		free(v->apps[i].name);
		json_decref(v->apps[i].manifest);
		json_decref(v->apps[i].warnings);
		capability_policy_free(v->apps[i].policy);
		free(v->apps[i].image);
	}
	safe_close(v->state_fd);
	safe_close(v->secrets_fd);
	safe_close(v->boot_fd);
	safe_close(v->log_fd);
	for (size_t i = 0; i < ELEMENTSOF(v->placeholder_fds); i++)
		safe_close(v->placeholder_fds[i]);
	free(v->qmp_path);
	safe_close(v->lock_fd);
	free(v->name);
	free(v->run_dir);
	free(v->console_path);
	free(v->log_path);
	free(v->cmdline_extra);
	free(v->qemu);
	free(v->failure);
	free(v->docker);
	free(v->container_name);
	free(v->host_dir);
	free(v->volume_prefix);
	egress_config_done(&v->args.egress);
}

int vmm_plan_image(Vmm *v, const char *work_dir)
{
	char err[512];
	int r;

	vmm_fds_init(v);
	v->run_dir = strdup(work_dir);
	if (!v->run_dir)
		return -ENOMEM;
	r = check_apps(v);
	if (r >= 0)
		r = compile_policies(v);
	if (r >= 0)
		r = check_publish(v);
	if (r >= 0)
		r = check_governor(v);
	if (r >= 0)
		r = build_boot_disk(v);
	for (size_t i = 0; r >= 0 && i < v->n_apps; i++) {
		r = share_digest(v->apps[i].dir, &v->apps[i].digest, err, sizeof(err));
		if (r < 0)
			log_error("--app %s: %s", v->apps[i].dir, err);
	}
	return r;
}

void vmm_done(Vmm *v)
{
	cleanup(v);
}

/*
 * Detach: the parent waits until the child has started QEMU (or failed), relays what it
 * reports on a pipe, and exits with its verdict; the child lives on in its own session.
 */
static int detach(int *ret_ready_fd)
{
	char buf[4096];
	ssize_t n;
	pid_t pid;
	int fd, ok = 0;

	pid = fork_pipe(&fd);
	if (pid < 0)
		return pid;
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		setsid();
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		*ret_ready_fd = fd;
		return 0;
	}
	/* The child writes JSON lines, then "ok" or "error: ..." as its last line. */
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		(void)loop_write(STDERR_FILENO, buf, (size_t)n);
		if (memmem(buf, (size_t)n, "\nok\n", 4) || (n >= 3 && !memcmp(buf, "ok\n", 3)))
			ok = 1;
	}
	_exit(ok ? 0 : 1);
}

int vmm_run_main(int argc, char **argv)
{
	Vmm v = {};
	int r, ready_fd = -EBADF;

	engine_init(&v.engine, &engine_qemu_ops);
	if (parse_args(argc, argv, &v.args) < 0) {
		egress_config_done(&v.args.egress);
		return 2;
	}
	if (v.args.docker)
		engine_init(&v.engine, &engine_docker_ops);
	r = prepare(&v);
	if (r < 0) {
		/* A run dir we created and never served is not left behind as stale. */
		if (v.lock_fd >= 0)
			rundir_remove(v.run_dir);
		cleanup(&v);
		return 1;
	}
	if (!v.args.foreground) {
		r = detach(&ready_fd);
		if (r < 0) {
			rundir_remove(v.run_dir);
			cleanup(&v);
			return log_error_errno(r, "cannot detach: %m"), 1;
		}
		(void)rundir_write_pid(v.lock_fd, getpid());
		/* From here on standard error is the log file. */
		dup2(v.log_fd, STDERR_FILENO);
		log_set_extra_fd(-1);
	}
	r = vmm_serve(&v, ready_fd);
	cleanup(&v);
	return r;
}
