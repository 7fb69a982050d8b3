/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-vmm: one process per VM. It verifies the guest artifacts against the pins it was
 * built with, starts the engine and supervises it.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifacts.h"
#include "engine.h"
#include "log.h"
#include "macros.h"
#include "parse-util.h"
#include "paths.h"
#include "pins.h"
#include "tsc.h"
#include "vmm.h"

static int verb_pins(int argc, char **argv)
{
	_cleanup_free_ char *json = NULL;
	PinSet set;

	pinset_compiled(&set);
	if (argc > 1 && streq(argv[1], "--json")) {
		json = pinset_to_json_text(&set);
		if (!json)
			return log_error_errno(-ENOMEM, "out of memory"), 1;
		printf("%s\n", json);
		return 0;
	}
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++)
		printf("%-7s sha256 %s  %llu B\n", artifact_kind_to_string(k), set.sha256[k],
		       (unsigned long long)set.size[k]);
	printf("linux   %s\n", set.linux_release);
	return 0;
}

typedef struct RunArgs {
	const char *artifacts;
	const char *rootfs;
	const char *console;
	unsigned cpus;
	unsigned mem_mib;
} RunArgs;

static int parse_run_args(int argc, char **argv, RunArgs *a)
{
	static const struct option options[] = {{"artifacts", required_argument, NULL, 'a'},
						{"rootfs", required_argument, NULL, 'r'},
						{"console", required_argument, NULL, 'c'},
						{"console-stderr", no_argument, NULL, 'E'},
						{"cpus", required_argument, NULL, 'p'},
						{"mem", required_argument, NULL, 'm'},
						{"help", no_argument, NULL, 'h'},
						{}};
	int c;

	*a = (RunArgs){.cpus = 2, .mem_mib = 512};
	optind = 1;
	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (c) {
		case 'a':
			a->artifacts = optarg;
			break;
		case 'r':
			a->rootfs = optarg;
			break;
		case 'c':
			a->console = optarg;
			break;
		case 'E':
			a->console = NULL;
			break;
		case 'p':
			if (parse_uint_range(optarg, 1, 16, &a->cpus) < 0)
				return log_error(
					"--cpus takes a whole number from 1 to 16, not '%s'",
					optarg);
			break;
		case 'm':
			if (parse_uint_range(optarg, 128, 16384, &a->mem_mib) < 0)
				return log_error("--mem takes MiB from 128 to 16384, not '%s'",
						 optarg);
			break;
		case 'h':
			printf("usage: berth-vmm run [--artifacts DIR] [--rootfs IMG] [--cpus N] [--mem MIB]\n"
			       "                     [--console FILE | --console-stderr]\n");
			exit(0);
		default:
			return -EINVAL;
		}
	}
	return 0;
}

static int verb_run(int argc, char **argv)
{
	_cleanup_free_ char *vm_dir = NULL;
	Engine engine = {.ops = &engine_qemu_ops, .pidfd = -EBADF};
	Artifacts art;
	VmConfig cfg = {};
	RunArgs a;
	char err[1024];
	int r, status;

	if (parse_run_args(argc, argv, &a) < 0)
		return 2;
	vm_dir = a.artifacts ? strdup(a.artifacts) : berth_vm_dir();
	if (!vm_dir)
		return log_error_errno(-ENOMEM, "out of memory"), 1;
	r = artifacts_open_verified(vm_dir, a.rootfs, &art, err, sizeof(err));
	if (r < 0)
		return log_error("%s", err), 1;

	cfg = (VmConfig){
		.artifacts = &art,
		.cpus = a.cpus,
		.mem_mib = a.mem_mib,
		.accel = accel_detect(),
		.console_path = a.console,
		.extra_cmdline = "init=/sbin/berth-init",
	};
	if (cfg.accel == ACCEL_TCG) {
		cfg.tsc_khz = tsc_measure_khz();
		if (cfg.tsc_khz < 0) {
			artifacts_done(&art);
			return log_error_errno(
				       (int)cfg.tsc_khz,
				       "cannot measure the host TSC rate, which a VM without KVM needs: %m"),
			       1;
		}
		log_warning(
			"no usable /dev/kvm: running the VM under emulation (TCG), which boots in seconds instead of milliseconds");
	}
	r = engine.ops->start(&engine, &cfg);
	if (r < 0) {
		artifacts_done(&art);
		return log_error_errno(r, "cannot start QEMU: %m"), 1;
	}
	r = engine.ops->wait(&engine, &status);
	artifacts_done(&art);
	engine_done(&engine);
	if (r < 0)
		return log_error_errno(r, "lost QEMU: %m"), 1;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return log_error("QEMU ended abnormally (status 0x%x); see the console output",
				 status),
		       1;
	return 0;
}

int main(int argc, char **argv)
{
	log_setup("berth-vmm", LOG_LEVEL_INFO);
	if (argc < 2) {
		fprintf(stderr, "usage: berth-vmm run|pins [options]\n");
		return 2;
	}
	if (streq(argv[1], "pins"))
		return verb_pins(argc - 1, argv + 1);
	if (streq(argv[1], "run"))
		return verb_run(argc - 1, argv + 1);
	log_error("unknown command '%s': use 'run' or 'pins'", argv[1]);
	return 2;
}
