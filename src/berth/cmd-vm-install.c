/* SPDX-License-Identifier: Apache-2.0 */
/* berth vm install: vm_install() behind its options. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "log.h"
#include "macros.h"
#include "pins.h"
#include "vm-install.h"

static int parse_argv(int argc, char **argv, VmInstallOptions *o)
{
	enum {
		ARG_NO_DOWNLOAD = 0x100,
		ARG_FORCE,
		ARG_VMM,
		ARG_NO_SNAPSHOT,
		ARG_LAYER,
		ARG_RUNTIME
	};
	static const struct option options[] = {
		{"help", no_argument, NULL, 'h'},
		{"from", required_argument, NULL, 'f'},
		{"url", required_argument, NULL, 'u'},
		{"no-download", no_argument, NULL, ARG_NO_DOWNLOAD},
		{"force", no_argument, NULL, ARG_FORCE},
		{"vmm", required_argument, NULL, ARG_VMM},
		{"no-snapshot", no_argument, NULL, ARG_NO_SNAPSHOT},
		{"layer", required_argument, NULL, ARG_LAYER},
		{"runtime", required_argument, NULL, ARG_RUNTIME},
		{},
	};
	int c;

	optind = 0;
	while ((c = cli_getopt(argc, argv, "", options)) != -1) {
		switch (c) {
		case CLI_OPT_HELP:
			cli_print_help();
			return 0;
		case 'f':
			o->from = optarg;
			break;
		case 'u':
			o->url = optarg;
			break;
		case ARG_NO_DOWNLOAD:
			o->no_download = true;
			break;
		case ARG_FORCE:
			o->force = true;
			break;
		case ARG_VMM:
			o->vmm = optarg;
			break;
		case ARG_NO_SNAPSHOT:
			o->no_snapshot = true;
			break;
		case ARG_RUNTIME:
			if (!streq(optarg, "vm") && !streq(optarg, "docker")) {
				cli_usage_error("--runtime takes vm or docker, not '%s'", optarg);
				return -EINVAL;
			}
			o->docker = streq(optarg, "docker");
			break;
		case ARG_LAYER: {
			ArtifactKind k = artifact_layer_from_name(optarg);

			if (k < 0) {
				cli_usage_error("unknown layer '%s': the one layer is 'browser'",
						optarg);
				return -EINVAL;
			}
			o->layers |= 1u << k;
			break;
		}
		default:
			return -EINVAL;
		}
	}
	if (optind < argc) {
		cli_usage_error("unexpected argument '%s'", argv[optind]);
		return -EINVAL;
	}
	return 1;
}

int cmd_vm_install(int argc, char **argv)
{
	VmInstallOptions o = {};
	int r = parse_argv(argc, argv, &o);

	if (r <= 0)
		return r < 0 ? 2 : 0;
	return vm_install(&o) < 0 ? 1 : 0;
}
