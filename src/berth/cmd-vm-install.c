/* SPDX-License-Identifier: Apache-2.0 */
/* berth vm install: vm_install() behind its options. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include "commands.h"
#include "log.h"
#include "vm-install.h"

static void help(void)
{
	printf("usage: berth vm install [--from DIR] [--url TEMPLATE] [--no-download] [--force] [--vmm PATH]\n"
	       "                        [--no-snapshot]\n"
	       "\n"
	       "Install the pinned guest kernel, initrd and root image under ~/.berth/vm, each\n"
	       "checked against its sha256 pin before it is put in place.\n"
	       "\n"
	       "  --from DIR       copy from DIR: the build output (out/artifacts), release assets,\n"
	       "                   one subdirectory per sha256, or another ~/.berth/vm\n"
	       "                   (default: $BERTH_VMM_ARTIFACTS, then vm.artifactsDir)\n"
	       "  --url TEMPLATE   download what DIR lacks, e.g. 'https://mirror/{asset}'\n"
	       "                   (default: $BERTH_VM_ARTIFACTS_URL, then vm.artifactsUrl)\n"
	       "  --no-download    copy from DIR only\n"
	       "  --force          replace files that are installed and match\n"
	       "  --vmm PATH       install PATH as ~/.berth/vm/bin/berth-vmm and use its pins\n"
	       "  --no-snapshot    do not make the warm-start snapshot; VMs boot cold\n"
	       "\n"
	       "See docs/vm-install.md and docs/warm-start.md.\n");
}

static int parse_argv(int argc, char **argv, VmInstallOptions *o)
{
	enum { ARG_NO_DOWNLOAD = 0x100, ARG_FORCE, ARG_VMM, ARG_NO_SNAPSHOT };
	static const struct option options[] = {
		{"help", no_argument, NULL, 'h'},
		{"from", required_argument, NULL, 'f'},
		{"url", required_argument, NULL, 'u'},
		{"no-download", no_argument, NULL, ARG_NO_DOWNLOAD},
		{"force", no_argument, NULL, ARG_FORCE},
		{"vmm", required_argument, NULL, ARG_VMM},
		{"no-snapshot", no_argument, NULL, ARG_NO_SNAPSHOT},
		{},
	};
	int c;

	optind = 0;
	while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
		switch (c) {
		case 'h':
			help();
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
		default:
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("unexpected argument '%s'; see 'berth vm install --help'", argv[optind]);
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
