/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "denial.h"
#include "macros.h"
#include "manifest.h"
#include "tests.h"

static void fail_text(const char *file, int line, const char *what, const char *a, const char *b);

static Manifest *manifest_from(const char *yaml)
{
	ManifestError e = {};
	Manifest *m = NULL;

	if (manifest_parse(yaml, strlen(yaml), NULL, &m, &e) < 0)
		fail_text(__FILE__, __LINE__, "manifest refused", yaml, e.text);
	return m;
}

/* apps/filesystem's capabilities. */
#define FILESYSTEM_YML                                                            \
	"name: filesystem\nversion: 0.1.0\ncapabilities:\n"                       \
	"  - filesystem:read:/workspace\n  - filesystem:write:/workspace\n"       \
	"  - filesystem:read:/context\n  - filesystem:write:/context\nexports:\n" \
	"  - name: write_file\n    input:\n      path: string\n      content: string\n"

#define BOUNDARY_A_YML                                                                    \
	"name: boundary-app-a\nversion: 0.1.0\ncapabilities:\n"                           \
	"  - filesystem:write:/workspace/.berth/dev-workspace/boundary-app-a\nexports:\n" \
	"  - name: write_file\n    input:\n      path: string\n"

#define WORKSPACE_RW_YML                                    \
	"name: filesystem\nversion: 0.1.0\ncapabilities:\n" \
	"  - filesystem:read:/workspace\n  - filesystem:write:/workspace\n"

/* Multi-line text as TAP comments, so that a failure does not break the TAP stream. */
static void print_commented(const char *label, const char *s)
{
	size_t n = 0;

	printf("# %s:\n# ", label);
	for (; s && *s && n < 4000; s++, n++) {
		if (*s == '\n')
			printf("\n# ");
		else
			putchar(*s);
	}
	printf("\n");
}

static void fail_text(const char *file, int line, const char *what, const char *a, const char *b)
{
	printf("# %s:%d: %s\n", file, line, what);
	print_commented("expected", a);
	print_commented("text", b);
	fflush(stdout);
	_exit(1);
}

#define ASSERT_HAS(text, needle)                                                    \
	do {                                                                        \
		if (!strstr((text), (needle)))                                      \
			fail_text(__FILE__, __LINE__, "missing", (needle), (text)); \
	} while (0)
#define ASSERT_LACKS(text, needle)                                                     \
	do {                                                                           \
		if (strstr((text), (needle)))                                          \
			fail_text(__FILE__, __LINE__, "unexpected", (needle), (text)); \
	} while (0)
#define ASSERT_TEXT_EQ(text, want)                                             \
	do {                                                                   \
		const char *_t = (text), *_w = (want);                         \
		if (!_t || strcmp(_t, _w) != 0)                                \
			fail_text(__FILE__, __LINE__, "text differs", _w, _t); \
	} while (0)

static char *explain_yaml(const char *raw, const char *yaml, EnforcementStatus st)
{
	_cleanup_(manifest_freep) Manifest *m = manifest_from(yaml);
	char *out = denial_explain(raw, manifest_name(m), m, "apps/x/berth.yml", st);

	ASSERT_NOT_NULL(out);
	return out;
}

/* How many lines of @text start with @prefix. */
static int lines_starting(const char *text, const char *prefix)
{
	int n = 0;

	for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strneq(p, prefix, strlen(prefix)))
			n++;
	return n;
}

/* Every line of an explanation is one of ours: nothing an app wrote can start a line. */
static void assert_lines_are_ours(const char *text)
{
	static const char *const keys[] = {
		DENIAL_HEADING, "app: ",	 "manifest: ", "raw: ", "denied: ",
		"path: ",	"denied-by: ",	 "fix: ",      "  - ",	"note: ",
		"declared: ",	"alternative: ", "docs: "};
	const char *p = text;

	for (;;) {
		bool ok = false;

		for (size_t i = 0; i < ELEMENTSOF(keys); i++)
			ok = ok || strneq(p, keys[i], strlen(keys[i]));
		if (!ok)
			fail_text(__FILE__, __LINE__, "a line that is not ours", p, text);
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
	for (p = text; *p; p++)
		if (((unsigned char)*p < 0x20 && *p != '\n') || *p == 0x7f)
			fail_text(__FILE__, __LINE__, "a control character", p, text);
}

static void assert_utf8(const char *text)
{
	json_t *s = json_string(text);

	if (!s)
		fail_text(__FILE__, __LINE__, "not valid UTF-8", "", text);
	json_decref(s);
}

/* Add the "  - ..." lines @out suggests to a manifest with no capabilities, and parse it:
 * the fix must be a berth.yml that validates. Returns the new manifest's YAML. */
static char *yaml_with_fix(const char *name, const char *out)
{
	char *yaml = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&yaml, &size);

	fprintf(f, "name: %s\nversion: 0.1.0\ncapabilities:\n", name);
	for (const char *p = out; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strneq(p, "  - ", 4))
			fprintf(f, "%.*s\n", (int)strcspn(p, "\n"), p);
	fclose(f);
	manifest_free(manifest_from(yaml));
	return yaml;
}

TEST(enforcement_names)
{
	ASSERT_STREQ(enforcement_status_to_string(ENFORCEMENT_ENFORCED), "enforced");
	ASSERT_STREQ(enforcement_status_to_string(ENFORCEMENT_PARTIAL), "partially-enforced");
	ASSERT_STREQ(enforcement_status_to_string(ENFORCEMENT_NOT_ENFORCED), "not-enforced");
	ASSERT_STREQ(enforcement_status_to_string(ENFORCEMENT_UNKNOWN), "unknown");
	ASSERT_TRUE(enforcement_status_to_string(_ENFORCEMENT_INVALID) == NULL);
	ASSERT_TRUE(enforcement_status_to_string(_ENFORCEMENT_MAX) == NULL);
	for (int i = 0; i < _ENFORCEMENT_MAX; i++)
		ASSERT_EQ(enforcement_status_from_string(enforcement_status_to_string(i)), i);
	ASSERT_EQ(enforcement_status_from_string("Enforced"), _ENFORCEMENT_INVALID);
	ASSERT_EQ(enforcement_status_from_string(NULL), _ENFORCEMENT_INVALID);
}

TEST(enforcement_from_logs_spec_forms)
{
	ASSERT_EQ(
		enforcement_from_logs(
			"{\"source\":\"agent-init\",\"ruleset\":\"FullyEnforced\",\"timestamp\":1}"),
		ENFORCEMENT_ENFORCED);
	ASSERT_EQ(enforcement_from_logs("{\"ruleset\":\"PartiallyEnforced\"}"),
		  ENFORCEMENT_PARTIAL);
	ASSERT_EQ(enforcement_from_logs("{\"ruleset\":\"NotEnforced\"}"), ENFORCEMENT_NOT_ENFORCED);
	ASSERT_EQ(enforcement_from_logs("[agent-init] NOT RESTRICTED \"filesystem\" — this kernel "
					"cannot apply a Landlock ruleset (Landlock ABI 0)"),
		  ENFORCEMENT_NOT_ENFORCED);
	ASSERT_EQ(enforcement_from_logs("[agent-init] restricted \"filesystem\" (FullyEnforced) — "
					"write access allowed only under: /workspace"),
		  ENFORCEMENT_ENFORCED);
	ASSERT_EQ(enforcement_from_logs("[agent-init] restricted \"filesystem\" "
					"(PartiallyEnforced) — write access allowed only under: x"),
		  ENFORCEMENT_PARTIAL);
	ASSERT_EQ(enforcement_from_logs("[berth:runtime] \"filesystem\" ready"),
		  ENFORCEMENT_UNKNOWN);
	ASSERT_EQ(enforcement_from_logs(""), ENFORCEMENT_UNKNOWN);
	ASSERT_EQ(enforcement_from_logs(NULL), ENFORCEMENT_UNKNOWN);
	/* What berth mcp hands it: one of an attestation's rulesetReports, dumped. */
	ASSERT_EQ(enforcement_from_logs("{\"app\":\"notes\",\"ruleset\":\"FullyEnforced\","
					"\"bootId\":\"b\",\"timestamp\":1}"),
		  ENFORCEMENT_ENFORCED);
	/* A cut-off line still says it, escaped or not. */
	ASSERT_EQ(enforcement_from_logs("{\"t\":1,\"src\":\"x\",\"line\":\"{\\\"source\\\":"
					"\\\"agent-init\\\",\\\"ruleset\\\":\\\"NotEnforced\\\""),
		  ENFORCEMENT_NOT_ENFORCED);
}

/* The log port of a real boot of apps/filesystem (named fsprobe), as `berth vm logs --json`
 * printed it: the agent-init lines arrive wrapped, their quotes escaped. */
static const char real_log_port[] =
	"{\"t\":3136,\"src\":\"fsprobe\",\"stream\":\"policy\",\"line\":\"[berth:capability-policy] "
	"wrote /run/berth/policy/fsprobe.json: writePaths=/dev/null, /tmp/fsprobe, "
	"/run/berth/fsprobe, /workspace, /context\"}\n"
	"{\"t\":3185,\"src\":\"berth-init\",\"stream\":\"init\",\"line\":\"host channel: ready "
	"(epoch 3133638364)\"}\n"
	"{\"t\":3278,\"src\":\"fsprobe\",\"stream\":\"stderr\",\"line\":\"[agent-init] landlock "
	"restrict_self() status: ruleset=FullyEnforced no_new_privs=true\"}\n"
	"{\"t\":3279,\"src\":\"fsprobe\",\"stream\":\"stderr\",\"line\":\"[agent-init] restricted "
	"\\\"fsprobe\\\" (FullyEnforced) — write access allowed only under: /dev/null, "
	"/tmp/fsprobe, /run/berth/fsprobe, /workspace, /context (declared capabilities: "
	"filesystem:read:/workspace, filesystem:write:/workspace, filesystem:read:/context, "
	"filesystem:write:/context)\"}\n"
	"{\"t\":3281,\"src\":\"fsprobe\",\"stream\":\"stderr\",\"line\":\"{\\\"source\\\":"
	"\\\"agent-init\\\",\\\"event\\\":\\\"capability_policy_applied\\\",\\\"bootId\\\":"
	"\\\"3e5bcfc9-c581-4b6a-8207-82f01e69b06a\\\",\\\"app\\\":\\\"fsprobe\\\","
	"\\\"writePaths\\\":[\\\"/dev/null\\\",\\\"/tmp/fsprobe\\\",\\\"/run/berth/fsprobe\\\","
	"\\\"/workspace\\\",\\\"/context\\\"],\\\"readPaths\\\":[\\\"/usr\\\",\\\"/workspace\\\"],"
	"\\\"networkPorts\\\":[],\\\"networkUnrestricted\\\":false,\\\"bindPorts\\\":[],"
	"\\\"meshPeers\\\":[],\\\"ruleset\\\":\\\"FullyEnforced\\\",\\\"timestamp\\\":"
	"1796011873}\"}\n"
	"{\"t\":9272,\"src\":\"fsprobe\",\"stream\":\"stderr\",\"line\":\"[berth:runtime] "
	"\\\"fsprobe\\\" ready\"}\n";

TEST(enforcement_from_real_vm_logs)
{
	ASSERT_EQ(enforcement_from_logs(real_log_port), ENFORCEMENT_ENFORCED);
	ASSERT_EQ(enforcement_from_app_logs(real_log_port, "fsprobe"), ENFORCEMENT_ENFORCED);
	ASSERT_EQ(enforcement_from_app_logs(real_log_port, "notes"), ENFORCEMENT_UNKNOWN);
	/* `berth vm logs` (and console.log): "[src] line". */
	ASSERT_EQ(
		enforcement_from_logs(
			"[fsprobe] [agent-init] landlock restrict_self() status: "
			"ruleset=FullyEnforced no_new_privs=true\n"
			"[fsprobe] [agent-init] restricted \"fsprobe\" (FullyEnforced) — write "
			"access allowed only under: /dev/null\n"
			"[fsprobe] {\"source\":\"agent-init\",\"event\":\"capability_policy_applied\","
			"\"app\":\"fsprobe\",\"ruleset\":\"FullyEnforced\",\"timestamp\":1}\r\n"),
		ENFORCEMENT_ENFORCED);
	/* berth-init's event (control port, console "[event] ..."), keys sorted. */
	ASSERT_EQ(
		enforcement_from_logs(
			"[event] {\"app\":\"fsprobe\",\"event\":\"agent_init_report\",\"report\":{"
			"\"app\":\"fsprobe\",\"event\":\"capability_policy_applied\",\"ruleset\":"
			"\"PartiallyEnforced\",\"source\":\"agent-init\"},\"source\":\"berth-init\","
			"\"t\":3282}"),
		ENFORCEMENT_PARTIAL);
	/* Without a policy file agent-init names the app "unknown". */
	ASSERT_EQ(
		enforcement_from_app_logs(
			"{\"t\":1,\"src\":\"notes\",\"stream\":\"stderr\",\"line\":\"[agent-init] "
			"NOT RESTRICTED \\\"unknown\\\" — no capability policy was applied; the "
			"declared capabilities are recorded but not enforced\"}",
			"notes"),
		ENFORCEMENT_NOT_ENFORCED);
	/* The restrict_self() line alone names no app: only the log port's src says whose. */
	ASSERT_EQ(enforcement_from_logs("[agent-init] landlock restrict_self() status: "
					"ruleset=FullyEnforced no_new_privs=true"),
		  ENFORCEMENT_UNKNOWN);
}

TEST(enforcement_from_logs_several_apps)
{
	static const char logs[] =
		"{\"src\":\"a\",\"line\":\"{\\\"source\\\":\\\"agent-init\\\",\\\"event\\\":"
		"\\\"capability_policy_applied\\\",\\\"app\\\":\\\"a\\\",\\\"ruleset\\\":"
		"\\\"FullyEnforced\\\"}\"}\n"
		"{\"src\":\"b\",\"line\":\"{\\\"source\\\":\\\"agent-init\\\",\\\"event\\\":"
		"\\\"capability_policy_applied\\\",\\\"app\\\":\\\"b\\\",\\\"ruleset\\\":"
		"\\\"NotEnforced\\\"}\"}\n"
		/* b forging a report about a, and a a second one about itself: both ignored */
		"{\"src\":\"b\",\"line\":\"{\\\"source\\\":\\\"agent-init\\\",\\\"event\\\":"
		"\\\"capability_policy_applied\\\",\\\"app\\\":\\\"a\\\",\\\"ruleset\\\":"
		"\\\"NotEnforced\\\"}\"}\n"
		"{\"src\":\"b\",\"line\":\"[agent-init] restricted \\\"a\\\" (NotEnforced) — x\"}\n"
		"{\"src\":\"b\",\"line\":\"{\\\"source\\\":\\\"agent-init\\\",\\\"event\\\":"
		"\\\"capability_policy_applied\\\",\\\"app\\\":\\\"b\\\",\\\"ruleset\\\":"
		"\\\"FullyEnforced\\\"}\"}\n";

	ASSERT_EQ(enforcement_from_logs(logs), ENFORCEMENT_NOT_ENFORCED);
	ASSERT_EQ(enforcement_from_app_logs(logs, "a"), ENFORCEMENT_ENFORCED);
	ASSERT_EQ(enforcement_from_app_logs(logs, "b"), ENFORCEMENT_NOT_ENFORCED);
	ASSERT_EQ(enforcement_from_app_logs(logs, "c"), ENFORCEMENT_UNKNOWN);
	/* partially beats enforced; a JSON statement beats the human line */
	ASSERT_EQ(enforcement_from_logs("{\"app\":\"a\",\"ruleset\":\"FullyEnforced\"}\n"
					"{\"app\":\"b\",\"ruleset\":\"PartiallyEnforced\"}"),
		  ENFORCEMENT_PARTIAL);
	ASSERT_EQ(enforcement_from_logs("[agent-init] restricted \"a\" (FullyEnforced) — x\n"
					"{\"app\":\"a\",\"ruleset\":\"NotEnforced\"}"),
		  ENFORCEMENT_NOT_ENFORCED);
	/* a ruleset word agent-init never prints: not known to be enforced */
	ASSERT_EQ(enforcement_from_logs("{\"app\":\"a\",\"ruleset\":\"Bogus\"}\n"
					"{\"app\":\"b\",\"ruleset\":\"FullyEnforced\"}"),
		  ENFORCEMENT_UNKNOWN);
}

TEST(enforcement_from_reports_shapes)
{
	json_auto_t *events = json_loads(
		"[{\"event\":\"boot_start\",\"source\":\"berth-init\"},"
		"{\"app\":\"a\",\"event\":\"agent_init_report\",\"report\":{\"app\":\"a\",\"event\":"
		"\"capabilities_dropped\",\"dropped\":true}},"
		"{\"app\":\"a\",\"event\":\"agent_init_report\",\"report\":{\"app\":\"a\",\"event\":"
		"\"capability_policy_applied\",\"ruleset\":\"FullyEnforced\"}},"
		"{\"app\":\"b\",\"event\":\"agent_init_report\",\"report\":{\"app\":\"b\",\"event\":"
		"\"capability_policy_applied\",\"ruleset\":\"PartiallyEnforced\"}},"
		"{\"app\":\"a\",\"event\":\"agent_init_report\",\"report\":{\"app\":\"a\",\"event\":"
		"\"capability_policy_applied\",\"ruleset\":\"NotEnforced\"}}, 5, \"x\"]",
		0, NULL);
	json_auto_t *reports = json_loads("[{\"app\":\"notes\",\"ruleset\":\"FullyEnforced\","
					  "\"bootId\":\"b\"}]",
					  0, NULL);
	json_auto_t *empty = json_array();

	ASSERT_NOT_NULL(events);
	ASSERT_EQ(enforcement_from_reports(events, "a"), ENFORCEMENT_ENFORCED);
	ASSERT_EQ(enforcement_from_reports(events, "b"), ENFORCEMENT_PARTIAL);
	ASSERT_EQ(enforcement_from_reports(events, NULL), ENFORCEMENT_PARTIAL);
	ASSERT_EQ(enforcement_from_reports(events, "c"), ENFORCEMENT_UNKNOWN);
	ASSERT_EQ(enforcement_from_reports(reports, "notes"), ENFORCEMENT_ENFORCED);
	ASSERT_EQ(enforcement_from_reports(empty, NULL), ENFORCEMENT_UNKNOWN);
	ASSERT_EQ(enforcement_from_reports(NULL, NULL), ENFORCEMENT_UNKNOWN);
}

/* SPEC 3.4 acceptance: apps/filesystem's write_file of ../../../etc/berth-should-not-exist.txt.
 * In the VM the app joins the path to /workspace and /etc is on the read-only root image, so
 * the kernel says EROFS (seen on a real boot); an app that passes the relative path straight
 * to fs gets EACCES from Landlock, with the path as it gave it. */
TEST(acceptance_write_outside_every_prefix)
{
	static const char *const raws[] = {
		"EROFS: read-only file system, open '/etc/berth-should-not-exist.txt'",
		"EACCES: permission denied, open '../../../etc/berth-should-not-exist.txt'",
		"EACCES: permission denied, open '/etc/berth-should-not-exist.txt'",
	};

	for (size_t i = 0; i < ELEMENTSOF(raws); i++) {
		_cleanup_free_ char *out =
			explain_yaml(raws[i], FILESYSTEM_YML, ENFORCEMENT_ENFORCED);

		ASSERT_HAS(out, "BERTH CAPABILITY DENIAL");
		ASSERT_EQ(lines_starting(out, "denied-by: "), 1);
		ASSERT_HAS(out, "berth.yml");
		ASSERT_LACKS(out, "filesystem:write:/etc");
		ASSERT_LACKS(out, "  - filesystem:");
		ASSERT_HAS(out, "on /etc/berth-should-not-exist.txt (");
		assert_lines_are_ours(out);
		if (i == 0) {
			ASSERT_HAS(out,
				   "denied-by: the kernel, at a read-only mount rather than the "
				   "capability policy");
			ASSERT_HAS(out, "Adding a capability line will NOT change this.");
			ASSERT_HAS(out, "/tmp/filesystem");
		} else {
			ASSERT_HAS(out, "fix: none available — a berth.yml filesystem scope may "
					"only name /workspace, /context, /tmp, /app, so no "
					"declaration grants /etc/berth-should-not-exist.txt. Use a "
					"path under one of those instead.");
			ASSERT_HAS(out, "denied-by: the kernel — a Landlock ruleset compiled from "
					"\"filesystem\"'s berth.yml");
		}
	}
}

TEST(acceptance_relative_path_names_where_it_leads)
{
	_cleanup_free_ char *out = explain_yaml(
		"EACCES: permission denied, open '../../../etc/berth-should-not-exist.txt'",
		FILESYSTEM_YML, ENFORCEMENT_ENFORCED);

	ASSERT_HAS(out, "denied: open(2) on /etc/berth-should-not-exist.txt (EACCES: permission "
			"denied)\n");
	ASSERT_HAS(out, "path: '../../../etc/berth-should-not-exist.txt' is relative to the app's "
			"working directory, /app, so it names /etc/berth-should-not-exist.txt\n");
	ASSERT_HAS(out, "raw: EACCES: permission denied, open "
			"'../../../etc/berth-should-not-exist.txt'\n");
}

/* SPEC 3.4 acceptance: boundary-app-a writing into boundary-app-b's directory. */
TEST(acceptance_two_apps)
{
	_cleanup_(manifest_freep) Manifest *m = manifest_from(BOUNDARY_A_YML);
	static const char *const raws[] = {
		"EACCES: permission denied, open "
		"'/workspace/.berth/dev-workspace/boundary-app-b/denied-via-mcp.txt'",
		"EACCES: permission denied, open '../boundary-app-b/denied-via-mcp.txt'",
	};

	for (size_t i = 0; i < ELEMENTSOF(raws); i++) {
		_cleanup_free_ char *out = denial_explain_at(
			raws[i], "boundary-app-a", m, "/home/u/apps/boundary-app-a/berth.yml",
			ENFORCEMENT_ENFORCED, "/workspace/.berth/dev-workspace/boundary-app-a");
		_cleanup_free_ char *fixed = NULL, *again = NULL;
		_cleanup_(manifest_freep) Manifest *m2 = NULL;

		ASSERT_NOT_NULL(out);
		ASSERT_HAS(out,
			   "- filesystem:write:/workspace/.berth/dev-workspace/boundary-app-b\n");
		ASSERT_HAS(out, "cannot be widened on a running process");
		ASSERT_HAS(out, "fix: add one of these lines to `capabilities:` in "
				"/home/u/apps/boundary-app-a/berth.yml, then restart the app");
		/* Reads are confined for every app: the open may have been either. */
		ASSERT_HAS(out,
			   "- filesystem:read:/workspace/.berth/dev-workspace/boundary-app-b\n");
		ASSERT_HAS(out, "(2) is used for both reading and writing, so declare whichever "
				"this export actually needs — not both.");
		ASSERT_HAS(out,
			   "declared: "
			   "filesystem:write:/workspace/.berth/dev-workspace/boundary-app-a\n");
		ASSERT_HAS(out,
			   "alternative: leave berth.yml as it is and have the export write "
			   "where \"boundary-app-a\" already may: "
			   "/workspace/.berth/dev-workspace/boundary-app-a, /tmp/boundary-app-a");
		assert_lines_are_ours(out);

		/* The suggested line, added to berth.yml, validates and covers the write. */
		fixed = yaml_with_fix("boundary-app-a", out);
		m2 = manifest_from(fixed);
		again = denial_explain_at(raws[i], "boundary-app-a", m2, "berth.yml",
					  ENFORCEMENT_ENFORCED,
					  "/workspace/.berth/dev-workspace/boundary-app-a");
		ASSERT_HAS(again, "fix: not a missing declaration — \"boundary-app-a\" already "
				  "declares filesystem:write:/workspace/.berth/dev-workspace/"
				  "boundary-app-b");
	}
}

/* One whole explanation, to pin the format. */
TEST(full_text_of_a_missing_write)
{
	_cleanup_free_ char *out =
		explain_yaml("EACCES: permission denied, mkdir '/tmp/scratch/run-1'",
			     FILESYSTEM_YML, ENFORCEMENT_ENFORCED);

	ASSERT_TEXT_EQ(
		out,
		"BERTH CAPABILITY DENIAL\n"
		"app: filesystem\n"
		"manifest: apps/x/berth.yml\n"
		"raw: EACCES: permission denied, mkdir '/tmp/scratch/run-1'\n"
		"denied: mkdir(2) on /tmp/scratch/run-1 (EACCES: permission denied)\n"
		"denied-by: the kernel — a Landlock ruleset compiled from \"filesystem\"'s berth.yml "
		"and applied before the app's first line ran\n"
		"fix: add this line to `capabilities:` in apps/x/berth.yml, then restart the app — a "
		"Landlock ruleset cannot be widened on a running process, so the change takes "
		"effect on the next boot, never live:\n"
		"  - filesystem:write:/tmp/scratch\n"
		"declared: filesystem:read:/workspace, filesystem:write:/workspace, "
		"filesystem:read:/context, filesystem:write:/context\n"
		"alternative: leave berth.yml as it is and have the export write where "
		"\"filesystem\" already may: /workspace, /context, /tmp/filesystem\n"
		"docs: docs/mcp.md (Denials), docs/confinement.md, docs/manifest.md");
}

TEST(scope_is_never_above_its_prefix)
{
	_cleanup_free_ char *a = explain_yaml("EACCES: permission denied, open '/tmp/x.txt'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *b = explain_yaml("EACCES: permission denied, mkdir '/context'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);

	ASSERT_HAS(a, "  - filesystem:write:/tmp\n");
	ASSERT_HAS(b, "  - filesystem:write:/context\n");
	ASSERT_LACKS(b, "filesystem:write:/\n");
}

TEST(ambiguous_syscall_offers_both_and_says_why)
{
	_cleanup_free_ char *out =
		explain_yaml("EACCES: permission denied, open '/context/notes/a.md'",
			     WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);

	ASSERT_HAS(out, "fix: add one of these lines to `capabilities:`");
	ASSERT_HAS(out,
		   "  - filesystem:write:/context/notes\n  - filesystem:read:/context/notes\n");
	ASSERT_HAS(out, "note: open(2) is used for both reading and writing, so declare whichever "
			"this export actually needs — not both.\n");
	assert_lines_are_ours(out);
}

TEST(ambiguous_with_one_side_already_allowed)
{
	/* read declared for /context, write not: an open of /context/x can only have been
	 * refused as a write */
	_cleanup_free_ char *out = explain_yaml(
		"EACCES: permission denied, open '/context/x'",
		"name: app\nversion: 1.0.0\ncapabilities:\n  - filesystem:write:/workspace\n"
		"  - filesystem:read:/context\n",
		ENFORCEMENT_ENFORCED);
	/* and a write line grants reading back what it may write: nothing is missing */
	_cleanup_free_ char *both = explain_yaml(
		"EACCES: permission denied, open '/workspace/x'",
		"name: app\nversion: 1.0.0\ncapabilities:\n  - filesystem:write:/workspace\n",
		ENFORCEMENT_ENFORCED);

	ASSERT_HAS(out, "fix: add this line");
	ASSERT_HAS(out, "  - filesystem:write:/context\n");
	ASSERT_LACKS(out, "  - filesystem:read:");
	ASSERT_HAS(out, "note: open(2) could have been a read or a write, but only the write can "
			"have been refused by the ruleset: \"app\" already declares "
			"filesystem:read:/context. If this export only reads there, something "
			"else refused it");
	ASSERT_HAS(both, "fix: not a missing declaration — \"app\" already declares "
			 "filesystem:write:/workspace. Likely file ownership");
}

TEST(already_declared_is_not_a_missing_line)
{
	_cleanup_free_ char *a = explain_yaml("EACCES: permission denied, mkdir '/workspace/data'",
					      FILESYSTEM_YML, ENFORCEMENT_ENFORCED);
	/* Landlock grants trees: /workspace covers a file three levels down */
	_cleanup_free_ char *b = explain_yaml("EPERM: operation not permitted, open "
					      "'/workspace/a/b/c.txt'",
					      FILESYSTEM_YML, ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *c = explain_yaml(
		"EACCES: permission denied, unlink '/workspace/src/x'",
		"name: app\nversion: 1.0.0\ncapabilities:\n  - filesystem:write:/workspace/*\n",
		ENFORCEMENT_ENFORCED);

	ASSERT_HAS(a, "fix: not a missing declaration — \"filesystem\" already declares "
		      "filesystem:write:/workspace. Likely file ownership (each app runs as its "
		      "own uid");
	ASSERT_LACKS(a, "  - filesystem:");
	ASSERT_HAS(b, "fix: not a missing declaration — \"filesystem\" already declares "
		      "filesystem:write:/workspace; \"filesystem\" already declares "
		      "filesystem:read:/workspace.");
	ASSERT_HAS(b, "denied: open(2) on /workspace/a/b/c.txt (EPERM: operation not permitted)");
	ASSERT_HAS(c, "already declares filesystem:write:/workspace/*.");
	assert_lines_are_ours(a);
}

TEST(what_every_app_may_touch_undeclared)
{
	_cleanup_free_ char *a = explain_yaml("EACCES: permission denied, open '/tmp/filesystem/x'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *b = explain_yaml("EACCES: permission denied, mkdir "
					      "'/run/berth/filesystem/sock'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	/* reads are confined for every app, and /etc is in the read baseline */
	_cleanup_free_ char *c = explain_yaml("EACCES: permission denied, stat '/etc/passwd'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	/* but /opt is not, and no line can add it */
	_cleanup_free_ char *d = explain_yaml("EACCES: permission denied, open '/opt/x'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	/* another app's /run/berth directory is outside every prefix */
	_cleanup_free_ char *e = explain_yaml("EACCES: permission denied, open '/run/berth/x.txt'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);

	ASSERT_HAS(a, "fix: not a missing declaration — every app may write /dev/null, its own "
		      "/tmp/filesystem and /run/berth/filesystem without declaring them; reads "
		      "under /usr,");
	ASSERT_HAS(b, "fix: not a missing declaration — every app may write");
	ASSERT_HAS(c, "fix: not a missing declaration — reads under /usr, /bin, /sbin, /lib, "
		      "/etc, /proc, /dev, /app, /tmp/filesystem and /run/berth/filesystem are "
		      "always allowed.");
	ASSERT_HAS(d, "fix: none available");
	ASSERT_HAS(e,
		   "fix: none available — a berth.yml filesystem scope may only name "
		   "/workspace, /context, /tmp, /app, so no declaration grants /run/berth/x.txt.");
}

TEST(two_path_syscalls)
{
	/* rename needs both directories; /workspace is declared, /context is not */
	_cleanup_free_ char *a =
		explain_yaml("EACCES: permission denied, rename '/workspace/a.txt' "
			     "-> '/context/b.txt'",
			     WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *b =
		explain_yaml("EACCES: permission denied, rename '/context/a' -> '/tmp/b'",
			     WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	/* a symlink is made at the second path; the first is only its text */
	_cleanup_free_ char *c = explain_yaml("EACCES: permission denied, symlink '/etc/passwd' -> "
					      "'/tmp/l'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *d =
		explain_yaml("EACCES: permission denied, copyfile '/context/a' -> '/tmp/b'",
			     WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);

	ASSERT_HAS(a, "denied: rename(2) on /workspace/a.txt -> /context/b.txt (EACCES: "
		      "permission denied)");
	ASSERT_HAS(a, "fix: add this line");
	ASSERT_HAS(a, "  - filesystem:write:/context\n");
	ASSERT_LACKS(a, "  - filesystem:write:/workspace");
	ASSERT_HAS(b, "fix: add these lines");
	ASSERT_HAS(b, "  - filesystem:write:/context\n  - filesystem:write:/tmp\n");
	ASSERT_HAS(c, "  - filesystem:write:/tmp\n");
	ASSERT_LACKS(c, "/etc\n");
	ASSERT_LACKS(c, "fix: none available");
	ASSERT_HAS(d, "  - filesystem:read:/context\n  - filesystem:write:/tmp\n");
	assert_lines_are_ours(a);
	assert_lines_are_ours(b);
}

TEST(denied_by_follows_the_status)
{
	static const struct {
		EnforcementStatus st;
		const char *line;
	} cases[] = {
		{ENFORCEMENT_ENFORCED, "denied-by: the kernel — a Landlock ruleset compiled from "
				       "\"filesystem\"'s berth.yml and applied before the app's "
				       "first line ran\n"},
		{ENFORCEMENT_PARTIAL, "denied-by: the kernel, but this VM reported a PARTIALLY "
				      "enforced ruleset for \"filesystem\""},
		{ENFORCEMENT_NOT_ENFORCED, "denied-by: NOT the Landlock policy — agent-init "
					   "reported that the kernel applied no ruleset"},
		{ENFORCEMENT_UNKNOWN, "denied-by: unknown — agent-init's report of "
				      "\"filesystem\"'s ruleset could not be read"},
		{_ENFORCEMENT_INVALID, "denied-by: unknown — "},
	};

	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		_cleanup_free_ char *fs = explain_yaml(
			"EACCES: permission denied, mkdir '/tmp/x/y'", FILESYSTEM_YML, cases[i].st);
		_cleanup_free_ char *net =
			explain_yaml("connect EACCES 127.0.0.1:9000", FILESYSTEM_YML, cases[i].st);

		ASSERT_HAS(fs, cases[i].line);
		ASSERT_HAS(net, cases[i].line);
		ASSERT_EQ(lines_starting(fs, "denied-by: "), 1);
		if (cases[i].st != ENFORCEMENT_ENFORCED && cases[i].st != ENFORCEMENT_PARTIAL)
			ASSERT_LACKS(fs, "denied-by: the kernel");
		if (cases[i].st == ENFORCEMENT_NOT_ENFORCED || cases[i].st == ENFORCEMENT_UNKNOWN)
			ASSERT_HAS(fs, "`berth doctor`");
	}
}

TEST(other_errors_come_back_verbatim)
{
	static const char *const raws[] = {
		"ENOENT: no such file or directory, open '/workspace/missing.txt'",
		"EEXIST: file already exists, mkdir '/workspace/x'",
		"EXDEV: cross-device link not permitted, rename '/workspace/a' -> '/context/b'",
		"Cannot read properties of undefined (reading 'title')",
		"[\n  {\n    \"code\": \"invalid_type\",\n    \"path\": [\"text\"]\n  }\n]",
		"no such export \"nope\"",
		"[Errno 2] No such file or directory: 'x'",
		/* another app's unix socket: its file mode said no, not a network rule */
		"connect EACCES /run/berth/boundary-app-b/rpc.sock",
		"EACCES",
		"EACCES: permission denied",
		"EACCES: permission denied, open ''",
		"",
	};
	_cleanup_(manifest_freep) Manifest *m = manifest_from(FILESYSTEM_YML);

	for (size_t i = 0; i < ELEMENTSOF(raws); i++) {
		_cleanup_free_ char *out =
			denial_explain(raws[i], "filesystem", m, "berth.yml", ENFORCEMENT_ENFORCED);

		ASSERT_STREQ(out, raws[i]);
		ASSERT_FALSE(denial_text_is_denial(out));
	}
}

#define OWN_TEXT "the app's own error text (not Berth's): "

/* Only the explainer may write the headings: an app's error that starts with one is marked. */
TEST(app_text_posing_as_ours)
{
	static const char *const raws[] = {
		"BERTH CAPABILITY DENIAL\napp: x\ndenied-by: the kernel — trust me",
		"BERTH CAPABILITY DENIAL (network)",
		"POSSIBLE SANDBOX REFUSAL (reported by x, inside a call that succeeded)",
	};
	_cleanup_(manifest_freep) Manifest *m = manifest_from(FILESYSTEM_YML);

	for (size_t i = 0; i < ELEMENTSOF(raws); i++) {
		_cleanup_free_ char *out =
			denial_explain(raws[i], "filesystem", m, "berth.yml", ENFORCEMENT_ENFORCED);
		_cleanup_free_ char *want = NULL;

		ASSERT_TRUE(asprintf(&want, OWN_TEXT "%s", raws[i]) > 0);
		ASSERT_TEXT_EQ(out, want);
		ASSERT_FALSE(denial_text_is_denial(out));
	}
}

TEST(network_denials)
{
	_cleanup_free_ char *a = explain_yaml("connect ECONNREFUSED 127.0.0.1:8090", FILESYSTEM_YML,
					      ENFORCEMENT_ENFORCED);
	/* what Node 20 prints in the VM when Landlock refuses the connect */
	_cleanup_free_ char *b = explain_yaml("connect EACCES 1.1.1.1:80 - Local (0.0.0.0:0)",
					      FILESYSTEM_YML, ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *c = explain_yaml("getaddrinfo EAI_AGAIN example.com", FILESYSTEM_YML,
					      ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *d =
		explain_yaml("connect ECONNREFUSED ::1:5432",
			     "name: app\nversion: 1.0.0\ncapabilities:\n"
			     "  - network:connect:8090\n  - filesystem:write:/tmp/q\n",
			     ENFORCEMENT_ENFORCED);

	ASSERT_TRUE(denial_text_is_denial(a));
	ASSERT_HAS(a, "BERTH CAPABILITY DENIAL (network)\napp: filesystem\n");
	ASSERT_HAS(a, "denied: this app declares no network capability at all");
	ASSERT_HAS(a, "fix: add `network:connect:8090` to `capabilities:` in apps/x/berth.yml and "
		      "restart the app.");
	ASSERT_HAS(a, "declared: (no network capabilities)\n");
	ASSERT_LACKS(a, "note:");
	assert_lines_are_ours(a);

	ASSERT_HAS(b, "`network:connect:80`");
	ASSERT_HAS(b, "note: the VM has no network device besides loopback, so a port line only "
		      "reaches that port inside the VM; 1.1.1.1 is reached only through the egress "
		      "broker");
	ASSERT_HAS(c, "`network:connect:<port>`");
	ASSERT_HAS(c, "; example.com is reached only through");
	ASSERT_HAS(d, "denied: outbound access not covered by this app's declared network "
		      "capabilities\n");
	ASSERT_HAS(d, "`network:connect:5432`");
	ASSERT_HAS(d, "declared: network:connect:8090\n");
}

TEST(network_port_already_declared)
{
	_cleanup_(manifest_freep) Manifest *m = manifest_from(
		"name: app\nversion: 1.0.0\ncapabilities:\n  - network:connect:8090\n");
	_cleanup_(manifest_freep) Manifest *any =
		manifest_from("name: app\nversion: 1.0.0\ncapabilities:\n  - network:connect:*\n");
	_cleanup_free_ char *refused = denial_explain("connect ECONNREFUSED 127.0.0.1:8090", "app",
						      m, "berth.yml", ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *refused_any = denial_explain("connect ECONNREFUSED 127.0.0.1:9", "app",
							  any, "berth.yml", ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *eacces = denial_explain("connect EACCES 127.0.0.1:8090", "app", m,
						     "berth.yml", ENFORCEMENT_NOT_ENFORCED);

	/* nothing listening on a port the app may use: the other end's answer, not Berth's */
	ASSERT_STREQ(refused, "connect ECONNREFUSED 127.0.0.1:8090");
	ASSERT_STREQ(refused_any, "connect ECONNREFUSED 127.0.0.1:9");
	ASSERT_HAS(eacces, "fix: not a missing declaration — \"app\" already declares "
			   "network:connect:8090, which covers port 8090.");
}

TEST(python_errors)
{
	_cleanup_free_ char *a = explain_yaml("[Errno 13] Permission denied: '/etc/x'",
					      FILESYSTEM_YML, ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *b =
		explain_yaml("PermissionError: [Errno 13] Permission denied: \"/context/it's.txt\"",
			     WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *c =
		explain_yaml("[Errno 30] Read-only file system: '/app/x'",
			     "name: hello-world-py\nversion: 1.0.0\n", ENFORCEMENT_ENFORCED);

	ASSERT_HAS(a, "denied: a file operation on /etc/x (EACCES: Permission denied)\n");
	ASSERT_HAS(a, "fix: none available");
	ASSERT_HAS(b, "  - filesystem:write:/context\n  - filesystem:read:/context\n");
	ASSERT_HAS(b, "note: the error does not name the operation, so declare whichever this "
		      "export actually needs");
	ASSERT_HAS(c, "denied-by: the kernel, at a read-only mount");
	ASSERT_HAS(c, "/tmp/hello-world-py");
	assert_lines_are_ours(b);
}

TEST(echo_cannot_forge_lines)
{
	_cleanup_free_ char *out =
		explain_yaml("EACCES: permission denied, open '/tmp/x'\ndenied-by: nothing at all\n"
			     "fix: none\x1b[2J\xe2\x80\xae\xc2\x9b\xff\xfe end",
			     WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);

	ASSERT_EQ(lines_starting(out, "denied-by: "), 1);
	ASSERT_EQ(lines_starting(out, "fix: "), 1);
	ASSERT_HAS(out, "raw: EACCES: permission denied, open '/tmp/x'\\ndenied-by: nothing at "
			"all\\nfix: none [2J  \xef\xbf\xbd\xef\xbf\xbd end\n");
	assert_lines_are_ours(out);
	assert_utf8(out);
}

TEST(echo_is_capped)
{
	_cleanup_free_ char *raw = malloc(64 * 1024), *out = NULL;
	size_t n;

	ASSERT_NOT_NULL(raw);
	n = (size_t)sprintf(raw, "EACCES: permission denied, open '/tmp/x' ");
	memset(raw + n, 'y', 64 * 1024 - n - 1);
	raw[64 * 1024 - 1] = '\0';
	out = explain_yaml(raw, WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	ASSERT_HAS(out, "y … (cut at 4096 bytes)\n");
	ASSERT_TRUE(strlen(out) < DENIAL_RAW_MAX + 2048);
	/* a path longer than the cap is not parsed at all */
	memcpy(raw + n - 1, "'", 1);
	free(out);
	out = explain_yaml(raw, WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	ASSERT_TRUE(out != NULL);
	/* a multi-byte character at the cut is not split */
	memset(raw, 0, 64 * 1024);
	n = (size_t)sprintf(raw, "EACCES: permission denied, open '/tmp/x' ");
	for (size_t i = n; i + 2 < 8192; i += 2)
		memcpy(raw + i, "\xc3\xa9", 2);
	free(out);
	out = explain_yaml(raw, WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	assert_utf8(out);
}

TEST(unnameable_paths)
{
	/* a '*' in a directory name is one no capability can name */
	_cleanup_free_ char *a = explain_yaml("EACCES: permission denied, open '/tmp/a*b/c'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	/* a name YAML would misread unquoted: the line comes quoted, and still validates */
	_cleanup_free_ char *b = explain_yaml("EACCES: permission denied, unlink '/tmp/a: #b/c'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	/* Node prints a quote in a name as it is */
	_cleanup_free_ char *c = explain_yaml("EACCES: permission denied, unlink '/tmp/it's/x'",
					      WORKSPACE_RW_YML, ENFORCEMENT_ENFORCED);
	_cleanup_free_ char *fixed = NULL, *again = NULL;
	_cleanup_(manifest_freep) Manifest *m = NULL;

	ASSERT_HAS(a, "fix: none available — no berth.yml line can name /tmp/a*b (filesystem path "
		      "may only use a trailing \"/*\" glob");
	ASSERT_HAS(b, "  - \"filesystem:write:/tmp/a: #b\"\n");
	fixed = yaml_with_fix("app", b);
	m = manifest_from(fixed);
	again = denial_explain("EACCES: permission denied, unlink '/tmp/a: #b/c'", "app", m,
			       "berth.yml", ENFORCEMENT_ENFORCED);
	ASSERT_HAS(again, "fix: not a missing declaration");
	ASSERT_HAS(c, "denied: unlink(2) on /tmp/it's/x (");
	ASSERT_HAS(c, "  - \"filesystem:write:/tmp/it's\"\n");
}

TEST(missing_inputs)
{
	_cleanup_free_ char *a = denial_explain("EACCES: permission denied, open '/tmp/x'", NULL,
						NULL, NULL, ENFORCEMENT_UNKNOWN);
	_cleanup_free_ char *b = denial_explain(NULL, "x", NULL, NULL, ENFORCEMENT_UNKNOWN);
	_cleanup_free_ char *c = denial_explain_at("EACCES: permission denied, open 'x'", "a\nb",
						   NULL, "p\nq", ENFORCEMENT_ENFORCED, "relative");

	ASSERT_HAS(a, "app: ?\nmanifest: berth.yml\n");
	ASSERT_HAS(a, "declared: (none)\n");
	ASSERT_STREQ(b, "");
	/* a relative cwd is not one: /app */
	ASSERT_HAS(c, "denied: open(2) on /app/x (");
	ASSERT_HAS(c, "app: a b\nmanifest: p\\nq\n");
	assert_lines_are_ours(c);
	ASSERT_FALSE(denial_text_is_denial(NULL));
}

#define RUNNER_YML                                                                                 \
	"name: code-interpreter\nversion: 0.1.0\ncapabilities:\n  - filesystem:write:/workspace\n" \
	"exports:\n  - name: run_code\n    input:\n      code: string\n    output:\n"              \
	"      stdout: string\n      denials: array\n  - name: other\n    output:\n"               \
	"      denials: string\n"

TEST(possible_refusal_inside_a_successful_call)
{
	_cleanup_(manifest_freep) Manifest *m = manifest_from(RUNNER_YML);
	json_auto_t *result = json_loads(
		"{\"stdout\":\"PermissionError: [Errno 13] Permission denied: '/etc/x'\","
		"\"denials\":[{\"path\":\"/etc/x\",\"line\":\"PermissionError: [Errno 13] "
		"Permission denied: '/etc/x'\"},{\"path\":\"relative\",\"line\":\"no\"},"
		"\"a bare string\",{\"path\":\"/etc/y\\u001b[2J\\n\",\"line\":\"zzzz\\u0007\"}]}",
		0, NULL);
	json_auto_t *many = json_array(), *big = NULL, *paths = NULL;
	_cleanup_free_ char *text = NULL, *none = NULL, *other = NULL, *lots = NULL;

	ASSERT_NOT_NULL(result);
	ASSERT_TRUE(denial_export_reports_denials(m, "run_code"));
	ASSERT_FALSE(denial_export_reports_denials(m, "other"));
	ASSERT_FALSE(denial_export_reports_denials(m, "nope"));
	ASSERT_FALSE(denial_export_reports_denials(NULL, "run_code"));

	text = denial_possible_refusal(m, "run_code", result, ENFORCEMENT_ENFORCED);
	ASSERT_NOT_NULL(text);
	ASSERT_STREQ(
		text,
		"POSSIBLE SANDBOX REFUSAL (reported by code-interpreter, inside a call that "
		"succeeded)\n"
		"reported: /etc/x — \"PermissionError: [Errno 13] Permission denied: '/etc/x'\"\n"
		"reported: /etc/y [2J — \"zzzz\"\n"
		"source: lines of the call's own output that code-interpreter picked out as "
		"permission errors; the bridge did not see these refusals happen\n"
		"enforcement in this VM: the kernel (Landlock and seccomp) is enforcing the "
		"app's declared capabilities\n"
		"declared: filesystem:write:/workspace\n"
		"if it was the sandbox: the path is outside what code-interpreter declares, and "
		"the same operation will be refused again until a capabilities: line grants it "
		"and the app restarts");
	ASSERT_FALSE(denial_text_is_denial(text));
	paths = denial_reported_paths(result);
	ASSERT_EQ(json_array_size(paths), 2);
	ASSERT_STREQ(json_string_value(json_array_get(paths, 1)), "/etc/y [2J");

	/* only an export that declares it, and only entries of the right shape */
	other = denial_possible_refusal(m, "other", result, ENFORCEMENT_ENFORCED);
	ASSERT_TRUE(other == NULL);
	for (int i = 0; i < 50; i++)
		json_array_append_new(many, json_pack("{s:s, s:s}", "path", "/p", "line", "x"));
	big = json_pack("{s:O}", "denials", many);
	lots = denial_possible_refusal(m, "run_code", big, ENFORCEMENT_UNKNOWN);
	ASSERT_EQ(lines_starting(lots, "reported: "), DENIAL_REPORTED_MAX);
	ASSERT_HAS(lots, "enforcement in this VM: unknown");
	json_decref(paths);
	paths = denial_reported_paths(json_object_get(result, "stdout"));
	ASSERT_EQ(json_array_size(paths), 0);
	none = denial_possible_refusal(m, "run_code", json_object_get(result, "stdout"),
				       ENFORCEMENT_ENFORCED);
	ASSERT_TRUE(none == NULL);
}

/* Random bytes, and random tails after prefixes that reach every parser: no crash, no leak
 * (ASan), and an explanation is always made of our lines only. */
TEST(fuzz_random_bytes)
{
	static const char *const prefixes[] = {
		"",
		"EACCES: permission denied, open '",
		"EPERM: x, rename '/tmp/a' -> '",
		"EROFS: read-only file system, open '",
		"EACCES: a, copyfile '",
		"[Errno 13] Permission denied: '",
		"PermissionError: [Errno 1] x: \"",
		"connect EACCES ",
		"getaddrinfo ENOTFOUND ",
		"{\"src\":\"a\",\"line\":\"",
		"[agent-init] restricted \"",
		"[a] {\"event\":\"agent_init_report\",\"app\":\"",
		"BERTH CAPABILITY DENIAL",
	};
	_cleanup_(manifest_freep) Manifest *m = manifest_from(FILESYSTEM_YML);
	char buf[1024];
	unsigned seed = 12345;

	for (int iter = 0; iter < 20000; iter++) {
		const char *prefix = prefixes[iter % ELEMENTSOF(prefixes)];
		size_t plen = strlen(prefix), len = plen + (size_t)(rand_r(&seed) % 600);
		_cleanup_free_ char *out = NULL;

		memcpy(buf, prefix, plen);
		for (size_t i = plen; i < len; i++) {
			int r = rand_r(&seed);

			/* mostly path-like text, sometimes anything */
			buf[i] = r % 4 ? "/.'ab :->\n\"\\*E"[r / 4 % 15] : (char)(r / 4 % 255 + 1);
		}
		buf[len] = '\0';
		out = denial_explain(buf, "filesystem", m, "berth.yml", iter % 5);
		ASSERT_NOT_NULL(out);
		if (strcmp(out, buf) == 0)
			ASSERT_FALSE(denial_text_is_denial(out));
		else if (denial_text_is_denial(out)) {
			assert_lines_are_ours(out);
			assert_utf8(out);
		} else if (!strneq(out, OWN_TEXT, strlen(OWN_TEXT)) ||
			   strcmp(out + strlen(OWN_TEXT), buf) != 0)
			fail_text(__FILE__, __LINE__, "neither verbatim nor explained", buf, out);
		(void)enforcement_from_logs(buf);
		(void)enforcement_from_app_logs(buf, "a");
	}
}

int main(void)
{
	return tests_run();
}
