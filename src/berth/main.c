/* SPDX-License-Identifier: Apache-2.0 */
/*
 * berth: the CLI. One table names every command with its summary, usage line and help;
 * `berth --help`, `berth VERB --help` and every usage error are printed from it (cli.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "commands.h"
#include "log.h"
#include "macros.h"

typedef struct Verb {
	const char *group; /* NULL for top-level verbs */
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
	const char *usage; /* after "usage: berth GROUP NAME "; more lines after '\n' */
	const char *help;  /* what it does, then its options */
} Verb;

static const Verb verbs[] = {
	{"vm", "install", cmd_vm_install, "install the pinned kernel, root image and berth-vmm",
	 "[--from DIR] [--url TEMPLATE] [--no-download] [--force] [--vmm PATH] [--no-snapshot]\n"
	 "[--layer browser] [--runtime docker]",
	 "Install the pinned guest kernel, initrd and root image under ~/.berth/vm, each\n"
	 "checked against its sha256 pin before it is put in place.\n\n"
	 "  --from DIR       copy from DIR: the build output (out/artifacts), release assets,\n"
	 "                   one subdirectory per sha256, or another ~/.berth/vm\n"
	 "                   (default: $BERTH_VMM_ARTIFACTS, then vm.artifactsDir)\n"
	 "  --url TEMPLATE   download what DIR lacks, e.g. 'https://mirror/{asset}'\n"
	 "                   (default: $BERTH_VM_ARTIFACTS_URL, then vm.artifactsUrl)\n"
	 "  --no-download    copy from DIR only\n"
	 "  --force          replace files that are installed and match\n"
	 "  --vmm PATH       install PATH as ~/.berth/vm/bin/berth-vmm and use its pins\n"
	 "  --no-snapshot    do not make the warm-start snapshot; VMs boot cold\n"
	 "  --layer browser  install the optional browser layer too (the first app that\n"
	 "                   needs it installs it otherwise)\n"
	 "  --runtime docker make the Docker runtime's base image from the rootfs (needs\n"
	 "                   root once; docs/runtimes.md) instead of the snapshots\n\n"
	 "See docs/vm-install.md, docs/warm-start.md and docs/browser.md.\n"},
	{"vm", "status", cmd_vm_status, "list running VMs, their apps and limits",
	 "[NAME] [--json]",
	 "List the running VMs (or only NAME), their apps, uids and cgroup limits, after\n"
	 "cleaning up the run dirs of VMs that are gone.\n\n"
	 "  --json   print {vms, staleCleaned} as JSON\n"},
	{"vm", "logs", cmd_vm_logs, "print a VM's guest log", "NAME [--follow] [--json]",
	 "Print the guest log of VM NAME: the running VM's, or the last failed boot's.\n\n"
	 "  -f, --follow   keep printing new lines until the VM stops or Ctrl-C\n"
	 "  --json         print each line as the JSON record it is\n"},
	{"vm", "stop", cmd_vm_stop, "stop a VM gracefully", "NAME",
	 "Ask VM NAME to power off, and kill it if it has not within\n"
	 "$BERTH_VM_STOP_TIMEOUT_MS (default 20000) milliseconds.\n"},
	{"audit", "verify", cmd_audit_verify, "check the audit trail's hash chain", "[--file PATH]",
	 "Check the audit trail's hash chain across all its segments, oldest first.\n"
	 "Exits 0 when every record chains to the one before it.\n\n"
	 "  --file PATH   the trail to check (default: $BERTH_AUDIT_PATH, else\n"
	 "                ~/.berth/audit/audit.jsonl); rotated segments PATH.1..5 too\n"},
	{"audit", "list", cmd_audit_list, "print audit records, filtered",
	 "[--file PATH] [--decision D] [--actor ID] [--action PREFIX] [--limit N] [--json]",
	 "Print the audit trail's records, oldest first, after checking their chain.\n\n"
	 "  --file PATH        the trail (default: $BERTH_AUDIT_PATH, else\n"
	 "                     ~/.berth/audit/audit.jsonl)\n"
	 "  --decision D       only records with decision D: allowed, denied or unavailable\n"
	 "  --actor ID         only records whose actor.id is ID\n"
	 "  --action PREFIX    only records whose action starts with PREFIX (tool., sandbox.)\n"
	 "  -n, --limit N      the last N matching records (default 50; 0 for all)\n"
	 "  --json             one record a line, as stored, instead of the table\n"},
	{NULL, "doctor", cmd_doctor, "check that this host can run sandboxes",
	 "[--sandbox vm|docker] [--json]",
	 "Check that this host can run Berth's VM sandbox, and say how to fix what it cannot.\n\n"
	 "  --sandbox vm|docker  the sandbox to check (default: $BERTH_SANDBOX, else vm)\n"
	 "  --json               print the report as JSON (schemaVersion 1)\n\n"
	 "Exit status 0 when a VM can boot, 1 when it cannot, 2 on a usage error.\n"},
	{NULL, "validate", cmd_validate, "check an app's berth.yml", "[DIR|FILE] [--json]",
	 "Check DIR/berth.yml (default: ./berth.yml), or FILE. Prints 'berth.yml is valid.'\n"
	 "or every problem found, one line each, and exits 1 when there is any.\n\n"
	 "  --json  on success, print the manifest with its defaults filled in instead\n"},
	{NULL, "rpc", cmd_rpc, "call an export of a running app",
	 "APP --export NAME [--input JSON] [--runtime vm|docker] [--socket PATH]",
	 "Call export NAME of APP in the VM that runs it (berth dev's berth-dev-APP, or a\n"
	 "berth mcp session's) and print its result as JSON; an app's error exits 1.\n\n"
	 "  --export NAME   the export to call (required)\n"
	 "  --input JSON    its input, a JSON object (default {})\n"
	 "  --runtime R     refuse unless the app runs in R (vm or docker)\n"
	 "  --socket PATH   call the app on this socket instead (a deployed image's\n"
	 "                  /run/berth-rpc/APP.sock; see berth deploy)\n"},
	{NULL, "init", cmd_init, "create an app folder from a template",
	 "NAME [--template hello-world|python]",
	 "Create the folder NAME holding a new app (berth.yml and its code) from a template.\n\n"
	 "  --template T   hello-world (Node, the default) or python\n"},
	{NULL, "dev", cmd_dev, "run the app in a VM, reloading on changes",
	 "[DIR] [--apps A,B] [--runtime vm|docker] [--env NAME[=VALUE]]... [--env-file PATH]... [--cold] [--reboot-on-change]",
	 "Boot the app in DIR (default .) in its own VM as berth-dev-NAME, stream its log,\n"
	 "and reboot it whenever a file of the app changes. Ctrl-C stops it.\n\n"
	 "  --runtime vm|docker   vm (the default: Berth's pinned kernel) or docker (a\n"
	 "                        container on this host's kernel; docs/runtimes.md)\n"
	 "  --env NAME[=VALUE]    a secret for the app: VALUE, or NAME from this environment\n"
	 "  --env-file PATH       secrets from a .env file (docs/secrets.md)\n"
	 "  --apps A,B            companions in the same VM: app folders, as given or beside DIR\n"
	 "                        (at most 3; they are bundled once, DIR alone is watched)\n"
	 "  --cold                boot the kernel, not the warm-start snapshot (docs/warm-start.md)\n"
	 "  --reboot-on-change    restart the VM on every change, never reload the app in place\n"},
	{NULL, "mcp", cmd_mcp, "serve an app's exports as MCP tools over stdio",
	 "--app NAME [--app-dir DIR] [options]\n"
	 "--print-config CLIENT --app NAME [--app-dir DIR] [options]",
	 "Serve the app's exports as MCP tools on standard input and output, in the app's VM\n"
	 "(attached to a running one, or booted for the session). Standard output carries\n"
	 "only MCP; human lines go to standard error.\n\n"
	 "  --app NAME          the app to serve (its berth.yml name)\n"
	 "  --app-dir DIR       the app's folder (default .)\n"
	 "  --only A,B          serve only these exports\n"
	 "  --container NAME    attach to this VM instead of berth-dev-NAME/berth-mcp-NAME\n"
	 "  --no-boot           only attach to a running VM; never boot one\n"
	 "  --warm              boot the app once (installing and bundling), stop, exit\n"
	 "  --boot-timeout S    seconds to wait for the app to be ready (default 120)\n"
	 "  --runtime vm|docker the sandbox runtime for a VM this command boots (docs/runtimes.md)\n"
	 "  --run-id ID         the audit run id (default mcp-<app>-<time>-<hex>)\n"
	 "  --env NAME[=VALUE], --env-file PATH\n"
	 "                      secrets for a VM this command boots (docs/secrets.md)\n"
	 "  --print-config CLIENT\n"
	 "                      print what adds this server to CLIENT (claude-code,\n"
	 "                      claude-desktop, cursor, vscode or codex) and exit\n\n"
	 "See docs/mcp.md.\n"},
	{NULL, "attest", cmd_attest, "print or verify the attestation record of a VM boot",
	 "<runId> [--out PATH] [--json]\n--verify FILE [--json]",
	 "Print the attestation record of a finished VM boot (runId = its boot id,\n"
	 "or the run id of a berth mcp session in it), or check a record: recompute\n"
	 "its digest and every derived field.\n\n"
	 "  -o, --out PATH     write the record to PATH (mode 0600) instead of stdout\n"
	 "  --verify FILE      check the record in FILE; exit 0 only if it has no problems\n"
	 "  --json             with --verify: print {ok, problems[{code,message}]}\n"},
	{NULL, "test", cmd_test, "build the app's image and call every export with stub inputs",
	 "[DIR]",
	 "Build the app in DIR (default .) into a Docker image on Berth's base image, run it\n"
	 "once with each export called with stub inputs (strings \"berth-test-stub\", numbers\n"
	 "1, booleans true, arrays []; url, selector and email get an example), confined as\n"
	 "always, and print {\"ok\", \"results\":[{\"export\",\"ok\",\"error\"?}]} as one line.\n"
	 "Exits 0 when every export answered. See docs/runtimes.md.\n"},
	{NULL, "deploy", cmd_deploy, "build a runnable image of the app",
	 "[DIR] [--tag TAG] [--push REPOSITORY[:TAG]]",
	 "Build the app in DIR (default .) into a self-contained Docker image: Berth's base\n"
	 "image (the pinned rootfs), the bundle and its compiled policy, berth-init as its\n"
	 "entrypoint. Prints its digest and how to run it; pushes nowhere unless --push names\n"
	 "a repository. See docs/runtimes.md.\n\n"
	 "  --tag TAG        the local tag (default berth-app-NAME:VERSION)\n"
	 "  --push REPO      tag the image REPO and docker push it\n"},
};

static const char *const groups[] = {"vm", "audit"};

static const Verb *current;
static int help_fd = STDOUT_FILENO;

static void full_name(const Verb *v, char *buf, size_t size)
{
	snprintf(buf, size, "%s%s%s", v->group ?: "", v->group ? " " : "", v->name);
}

void cli_set_help_fd(int fd)
{
	help_fd = fd;
}

/* "usage: berth NAME LINE" for every line of @v's usage. */
static void print_usage(FILE *f, const Verb *v)
{
	char name[64];
	const char *p = v->usage;
	bool first = true;

	full_name(v, name, sizeof(name));
	while (*p) {
		size_t n = strcspn(p, "\n");

		fprintf(f, "%s berth %s %.*s\n", first ? "usage:" : "      ", name, (int)n, p);
		first = false;
		p += n + (p[n] == '\n');
	}
}

void cli_print_help(void)
{
	FILE *f;
	int fd;

	if (!current)
		return;
	fflush(stdout);
	fd = dup(help_fd);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	print_usage(f, current);
	fprintf(f, "\n%s", current->help);
	fclose(f);
}

int cli_usage_error(const char *fmt, ...)
{
	char name[64] = "";
	va_list ap;

	if (current)
		full_name(current, name, sizeof(name));
	fflush(stdout);
	fprintf(stderr, "berth%s%s: ", *name ? " " : "", name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (current) {
		print_usage(stderr, current);
		fprintf(stderr, "Run 'berth %s --help' for its options.\n", name);
	}
	fflush(stderr);
	return CLI_EXIT_USAGE;
}

int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *longopts)
{
	char opts[64];
	int c;

	/* ':' first: a missing argument is returned as ':', and getopt prints nothing. */
	snprintf(opts, sizeof(opts), ":%sh", shortopts);
	opterr = 0;
	c = getopt_long(argc, argv, opts, longopts, NULL);
	if (c == 'h')
		return CLI_OPT_HELP;
	if (c == ':') {
		cli_usage_error("%s needs a value", argv[optind - 1]);
		return CLI_OPT_BAD;
	}
	if (c == '?') {
		if (optopt)
			cli_usage_error("unknown option '-%c'", optopt);
		else
			cli_usage_error("unknown option '%s'", argv[optind - 1]);
		return CLI_OPT_BAD;
	}
	return c;
}

static void usage(FILE *f, const char *group)
{
	if (group)
		fprintf(f, "usage: berth %s <command> [options]\n\ncommands:\n", group);
	else
		fprintf(f, "usage: berth <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
		char name[64];

		if (group && (!verbs[i].group || !streq(group, verbs[i].group)))
			continue;
		full_name(&verbs[i], name, sizeof(name));
		fprintf(f, "  %-16s %s\n", name, verbs[i].summary);
	}
	fprintf(f, "\nRun 'berth %s%s<command> --help' for a command's options.\n",
		group ? group : "", group ? " " : "");
	if (!group)
		fprintf(f, "'berth --version' prints the version.\n");
}

/* "'berth vm' needs a command: install, status, logs or stop" */
static void group_needs_command(const char *group)
{
	size_t n = 0, k = 0;

	for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
		n += verbs[i].group && streq(verbs[i].group, group);
	fprintf(stderr, "'berth %s' needs a command: ", group);
	for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
		if (verbs[i].group && streq(verbs[i].group, group)) {
			const char *sep = k == 0 ? "" : k == n - 1 ? " or " : ", ";

			fprintf(stderr, "%s%s", sep, verbs[i].name);
			k++;
		}
	fputs("\n\n", stderr);
}

static bool is_help(const char *arg)
{
	return streq(arg, "--help") || streq(arg, "-h");
}

static const char *find_group(const char *arg)
{
	for (size_t i = 0; i < ELEMENTSOF(groups); i++)
		if (streq(arg, groups[i]))
			return groups[i];
	return NULL;
}

int main(int argc, char **argv)
{
	const char *group = NULL;
	int shift = 1;

	log_setup("berth", LOG_LEVEL_INFO);
	if (argc < 2) {
		usage(stderr, NULL);
		return CLI_EXIT_USAGE;
	}
	if (is_help(argv[1])) {
		usage(stdout, NULL);
		return 0;
	}
	if (streq(argv[1], "--version")) {
		printf("berth %s\n", BERTH_VERSION);
		return 0;
	}
	group = find_group(argv[1]);
	if (group) {
		shift = 2;
		if (argc < 3) {
			group_needs_command(group);
			usage(stderr, group);
			return CLI_EXIT_USAGE;
		}
		if (is_help(argv[2])) {
			usage(stdout, group);
			return 0;
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(verbs); i++) {
		if ((group == NULL) != (verbs[i].group == NULL))
			continue;
		if (group && !streq(group, verbs[i].group))
			continue;
		if (!streq(argv[shift], verbs[i].name))
			continue;
		current = &verbs[i];
		/* Answered here, before the command does anything (berth mcp moves its standard
		 * output first); the commands' own parsers answer --help anywhere else. */
		if (argc > shift + 1 && is_help(argv[shift + 1])) {
			cli_print_help();
			return 0;
		}
		return verbs[i].run(argc - shift, argv + shift);
	}
	fprintf(stderr, "berth: unknown command '%s%s%s'\n", group ?: "", group ? " " : "",
		argv[shift]);
	usage(stderr, group);
	return CLI_EXIT_USAGE;
}
