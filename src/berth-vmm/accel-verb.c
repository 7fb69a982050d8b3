/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth-vmm accel: which accelerator a VM started now would get, and why: the probe's
 * verdict for this host (probing when it has none), as berth doctor shows it.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel.h"
#include "artifacts.h"
#include "host-sandbox.h"
#include "log.h"
#include "macros.h"
#include "paths.h"
#include "vmm-run.h"

static void usage(void)
{
	printf("usage: berth-vmm accel [--json] [--reprobe] [--accel MODE] [--qemu PROGRAM]\n"
	       "                       [--artifacts DIR]\n"
	       "  Print the accelerator a VM would get now, who asked for it and why, with the\n"
	       "  probe boots behind the choice. The verdict is cached in ~/.berth/vm/accel.json\n"
	       "  until the host reboots or QEMU or the kernel changes; --reprobe boots again.\n");
}

static void print_trial(Accel a, const AccelTrial *t)
{
	const char *name = accel_to_string(a);

	if (!t->usable)
		printf("  %s: not usable (%s)\n", name, t->why);
	else if (!t->tried)
		printf("  %s: not tried\n", name);
	else if (t->booted)
		printf("  %s: booted the probe in %lld ms\n", name, t->ms);
	else
		printf("  %s: %s after %lld ms: %s\n", name, t->outpaced ? "cut off" : "failed",
		       t->ms, t->why);
}

int vmm_accel_main(int argc, char **argv)
{
	static const struct option options[] = {{"json", no_argument, NULL, 'j'},
						{"reprobe", no_argument, NULL, 'p'},
						{"accel", required_argument, NULL, 'a'},
						{"qemu", required_argument, NULL, 'q'},
						{"artifacts", required_argument, NULL, 'd'},
						{"help", no_argument, NULL, 'h'},
						{}};
	_cleanup_free_ char *vm_dir = NULL, *cache = NULL, *qemu = NULL;
	const char *accel_flag = NULL, *qemu_flag = NULL, *dir_flag = NULL;
	char source[320], err[2048] = "";
	bool json = false, reprobe = false;
	HostSandbox hs = {};
	Artifacts art = {};
	AccelChoice choice = {};
	AccelMode mode;
	int c, r;

	optind = 1;
	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'p':
			reprobe = true;
			break;
		case 'a':
			accel_flag = optarg;
			break;
		case 'q':
			qemu_flag = optarg;
			break;
		case 'd':
			dir_flag = optarg;
			break;
		case 'h':
			usage();
			return 0;
		default:
			return 2;
		}
	}
	r = accel_settings(accel_flag, qemu_flag, &mode, source, sizeof(source), &qemu, err,
			   sizeof(err));
	if (r < 0)
		return log_error("%s", err), 2;
	vm_dir = dir_flag ? strdup(dir_flag) : berth_vm_dir();
	if (!vm_dir || asprintf(&cache, "%s/accel.json", vm_dir) < 0)
		return log_error_errno(-ENOMEM, "out of memory"), 1;
	r = host_sandbox_check(false, &hs);
	if (r < 0)
		return 1;
	/* The probe boots the pinned kernel and initramfs, checked as for any VM. */
	r = artifacts_open_verified(vm_dir, NULL, false, &art, err, sizeof(err));
	if (r < 0)
		return log_error("%s", err), 1;

	AccelHost host = {
		.artifacts = &art, .qemu = qemu, .host_sandbox = &hs, .cache_path = cache};

	if (reprobe) {
		AccelVerdict fresh;

		(void)accel_verdict(&host, true, &fresh);
	}
	r = accel_choose(&host, mode, source, &choice, err, sizeof(err));
	artifacts_done(&art);
	if (json) {
		json_t *doc = accel_choice_to_json(&choice);
		char *text;

		json_object_set_new(doc, "cachePath", json_string(cache));
		json_object_set_new(doc, "ok", json_boolean(r >= 0));
		if (r < 0) {
			json_object_set_new(doc, "chosen", json_null());
			json_object_set_new(doc, "error", json_string(err));
		}
		text = json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS);
		printf("%s\n", text ? text : "{}");
		free(text);
		json_decref(doc);
		return r < 0 ? 1 : 0;
	}
	if (r < 0)
		log_error("%s", err);
	else
		printf("accelerator: %s (%s)\n", accel_to_string(choice.accel), choice.reason);
	if (choice.have_verdict) {
		for (Accel a = 0; a < _ACCEL_MAX; a++)
			print_trial(a, &choice.verdict.trial[a]);
		printf("probed %s%s; the verdict is kept in %s until the host reboots or QEMU or the kernel changes\n",
		       choice.verdict.probed_at, choice.verdict.cached ? " (cached)" : "", cache);
	}
	return r < 0 ? 1 : 0;
}
