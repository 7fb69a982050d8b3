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

#include "log.h"
#include "macros.h"
#include "pins.h"
#include "snapshot.h"
#include "vmm.h"
#include "vmm-run.h"

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
		if (set.sha256[k][0])
			printf("%-13s sha256 %s  %llu B\n", artifact_kind_to_string(k),
			       set.sha256[k], (unsigned long long)set.size[k]);
	printf("linux         %s\n", set.linux_release);
	return 0;
}

int main(int argc, char **argv)
{
	log_setup("berth-vmm", LOG_LEVEL_INFO);
	if (argc < 2) {
		fprintf(stderr, "usage: berth-vmm run|image|snapshot|accel|pins [options]\n");
		return 2;
	}
	if (streq(argv[1], "pins"))
		return verb_pins(argc - 1, argv + 1);
	if (streq(argv[1], "run"))
		return vmm_run_main(argc - 1, argv + 1);
	if (streq(argv[1], "image"))
		return vmm_image_main(argc - 1, argv + 1);
	if (streq(argv[1], "accel"))
		return vmm_accel_main(argc - 1, argv + 1);
	if (streq(argv[1], "snapshot"))
		return vmm_snapshot_main(argc - 1, argv + 1);
	log_error("unknown command '%s': use 'run', 'image', 'snapshot', 'accel' or 'pins'",
		  argv[1]);
	return 2;
}
