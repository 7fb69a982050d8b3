/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "log.h"
#include "macros.h"

typedef struct Verb {
	const char *group; /* NULL for top-level verbs */
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} Verb;

static const Verb verbs[] = {
	{"vm", "install", cmd_vm_install, "install the pinned kernel, root image and berth-vmm"},
	{"vm", "status", cmd_vm_status, "list running VMs, their apps and limits"},
	{"vm", "logs", cmd_vm_logs, "print a VM's guest log"},
	{"vm", "stop", cmd_vm_stop, "stop a VM gracefully"},
	{"audit", "verify", cmd_audit_verify, "check the audit trail's hash chain"},
	{"audit", "list", cmd_audit_list, "print audit records, filtered"},
	{NULL, "doctor", cmd_doctor, "check that this host can run sandboxes"},
	{NULL, "validate", cmd_validate, "check an app's berth.yml"},
	{NULL, "rpc", cmd_rpc, "call an export of a running app"},
	{NULL, "init", cmd_init, "create an app folder from a template"},
	{NULL, "dev", cmd_dev, "run the app in a VM, reloading on changes"},
	{NULL, "mcp", cmd_mcp, "serve an app's exports as MCP tools over stdio"},
	{NULL, "attest", cmd_attest, "print or verify the attestation record of a VM boot"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: berth <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
		char name[64];

		snprintf(name, sizeof(name), "%s%s%s", verbs[i].group ? verbs[i].group : "",
			 verbs[i].group ? " " : "", verbs[i].name);
		fprintf(f, "  %-16s %s\n", name, verbs[i].summary);
	}
	fprintf(f, "\nRun 'berth <command> --help' for a command's options.\n");
}

int main(int argc, char **argv)
{
	const char *group = NULL;
	int shift = 1;

	log_setup("berth", LOG_LEVEL_INFO);
	if (argc < 2 || streq(argv[1], "--help") || streq(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (streq(argv[1], "--version")) {
		printf("berth %s\n", BERTH_VERSION);
		return 0;
	}
	if (streq(argv[1], "vm")) {
		group = "vm";
		shift = 2;
		if (argc < 3) {
			log_error("'berth vm' needs a command: install, status, logs or stop");
			return 2;
		}
	} else if (streq(argv[1], "audit")) {
		group = "audit";
		shift = 2;
		if (argc < 3) {
			log_error("'berth audit' needs a command: verify or list");
			return 2;
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
		if ((group == NULL) != (verbs[i].group == NULL))
			continue;
		if (group && !streq(group, verbs[i].group))
			continue;
		if (streq(argv[shift], verbs[i].name))
			return verbs[i].run(argc - shift, argv + shift);
	}
	log_error("unknown command '%s%s%s'; run 'berth --help' for the list", group ? group : "",
		  group ? " " : "", argv[shift]);
	return 2;
}
