/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "manifest.h"

/*
 * The denial explainer: turns the error string an app's export failed with into text an
 * agent (the first reader of `berth mcp`) can act on — what was refused, what refused it,
 * and the berth.yml line that would allow it, or why no line can. docs/mcp.md (Denials)
 * shows the output. Pure functions: no I/O, no logging.
 *
 * SECURITY: every string given here comes from the app (a peer). At most DENIAL_RAW_MAX
 * bytes of an error and DENIAL_LOGS_MAX bytes of log text are looked at; what is echoed is
 * cut to those caps, made valid UTF-8, and stripped of control characters (a line break is
 * shown as the two characters "\n"), so an app cannot forge a line of the explanation.
 */

#define DENIAL_RAW_MAX 4096		    /* bytes of an app's error that are parsed and echoed */
#define DENIAL_LOGS_MAX (16u * 1024 * 1024) /* bytes of log text enforcement_from_logs() reads */
#define DENIAL_LOG_LINE_MAX (256u * 1024)   /* longer log lines are skipped */
#define DENIAL_REPORTED_MAX 10		    /* entries of a `denials` array that are reported */
#define DENIAL_REPORTED_CHARS 200	    /* bytes kept of each reported path and line */
#define DENIAL_HEADING "BERTH CAPABILITY DENIAL" /* how an explanation starts, and nothing else */
#define DENIAL_REFUSAL_HEADING "POSSIBLE SANDBOX REFUSAL"

/* What the guest kernel did with an app's capability policy, as agent-init reported it. */
typedef enum EnforcementStatus {
	ENFORCEMENT_ENFORCED,	  /* Landlock ruleset FullyEnforced */
	ENFORCEMENT_PARTIAL,	  /* PartiallyEnforced: the kernel lacked some rights */
	ENFORCEMENT_NOT_ENFORCED, /* NotEnforced: recorded, not enforced */
	ENFORCEMENT_UNKNOWN,	  /* no report could be read */
	_ENFORCEMENT_MAX,
	_ENFORCEMENT_INVALID = -22,
} EnforcementStatus;

/* "enforced", "partially-enforced", "not-enforced", "unknown"; NULL when out of range. */
const char *enforcement_status_to_string(EnforcementStatus s);
EnforcementStatus enforcement_status_from_string(const char *s);

/*
 * enforcement_from_logs() - the enforcement status stated in @text, log lines of a VM in
 * any of the forms the host sees them (one per line, mixed freely):
 *   - agent-init's audit line, {"source":"agent-init","event":"capability_policy_applied",
 *     ...,"ruleset":"FullyEnforced",...}, or any JSON object with a "ruleset" string and no
 *     other "event" (an attestation's rulesetReports entry);
 *   - the log port's lines {"t":..,"src":"<app>","stream":"stderr","line":"<one of these>"}
 *     (`berth vm logs --json`); a report whose "app" differs from "src" is ignored, since
 *     the app named in "src" printed it;
 *   - berth-init's {"event":"agent_init_report","app":..,"report":{..}} (control port);
 *   - agent-init's human lines, "[agent-init] restricted \"<app>\" (FullyEnforced) — ..."
 *     and "[agent-init] NOT RESTRICTED \"<app>\" — ...";
 *   - any of those behind a console prefix "[<src>] " (`berth vm logs`, console.log).
 * JSON statements win over human lines; ruleset FullyEnforced, PartiallyEnforced and
 * NotEnforced map to enforced, partially-enforced and not-enforced. Only the first
 * statement per app counts (agent-init speaks before the app's first line; a later one
 * could be the app's own). Several apps: the worst status wins (not-enforced, unknown,
 * partially-enforced, enforced, from worst). No statement at all: ENFORCEMENT_UNKNOWN.
 * @text may be NULL; only the first DENIAL_LOGS_MAX bytes are read.
 */
EnforcementStatus enforcement_from_logs(const char *text);

/* As enforcement_from_logs(), but only statements about @app (NULL: every app). Statements
 * that name no app (a bare "ruleset=" JSON object) count for every app. */
EnforcementStatus enforcement_from_app_logs(const char *text, const char *app);

/*
 * enforcement_from_reports() - the same from parsed JSON: @items is an array of berth-init's
 * agent_init_report events (the control port's events, or an evidence.json's "events"), of
 * agent-init audit objects, or of an attestation's enforcement.rulesetReports entries
 * ({"app","ruleset"}); other elements are skipped. @app as for enforcement_from_app_logs().
 * The first capability_policy_applied report per app counts; the worst status wins.
 * This is the source to prefer while the VM runs: berth-init takes agent-init's reports
 * before the app's own code runs, so an app cannot forge them.
 */
EnforcementStatus enforcement_from_reports(json_t *items, const char *app);

/*
 * denial_explain() - the explanation of @raw_error, an error an export of @app failed with,
 * as a new string (free() it); NULL only on OOM.
 *
 * When @raw_error is a Node fs error (`EACCES: permission denied, open '/etc/x'`, also
 * `rename 'a' -> 'b'`) or a Python OSError (`[Errno 13] Permission denied: '/etc/x'`) with
 * EACCES, EPERM or EROFS, the text starts with DENIAL_HEADING and says what was refused,
 * what refused it (from @st), and the capabilities: line to add to @manifest_path, or why
 * none can help (EROFS: a read-only mount; a path outside /workspace, /context, /tmp and
 * /app; a path the app already declares or may use anyway). When it is a network error
 * (ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EAI_AGAIN, ENOTFOUND, or EACCES/EPERM naming
 * connect) it starts with DENIAL_HEADING " (network)". Anything else (ENOENT, input
 * validation, app bugs) comes back verbatim — except an error that itself starts with
 * DENIAL_HEADING or DENIAL_REFUSAL_HEADING, which gets "the app's own error text (not
 * Berth's): " in front, so that only this function can produce either heading.
 *
 * A relative path in the error is taken relative to the app's working directory in the
 * VM, "/app" (berth dev's single-app VM); denial_explain_at() names another.
 * @app: the RPC target's name; @m: its manifest (NULL: nothing declared); @manifest_path:
 * berth.yml as the reader would edit it, a host path (NULL: "berth.yml").
 */
char *denial_explain(const char *raw_error, const char *app, const Manifest *m,
		     const char *manifest_path, EnforcementStatus st);

/* As denial_explain(), with @cwd the app's working directory ("/app/<app>" in a VM with
 * several apps). NULL means "/app". */
char *denial_explain_at(const char *raw_error, const char *app, const Manifest *m,
			const char *manifest_path, EnforcementStatus st, const char *cwd);

/* Whether @text (from denial_explain()) reports a denial: the audit's decision "denied". */
bool denial_text_is_denial(const char *text);

/*
 * Possible refusals inside a call that succeeded (SPEC 3.3). An export whose berth.yml
 * output declares `denials: array` (a code runner that caught "Permission denied" in the
 * code it ran) may return {"denials":[{"path":"/abs","line":"..."}]} in its result. Only
 * for such an export, and only in that shape, the bridge passes them on — as the app's
 * report, never under DENIAL_HEADING: the bridge did not see them happen.
 */

/* Whether export @export_name of @m declares `denials: array` in its output. */
bool denial_export_reports_denials(const Manifest *m, const char *export_name);

/*
 * denial_reported_paths() - the paths of @result's "denials" entries that count: objects
 * with an absolute "path" string and a "line" string, at most DENIAL_REPORTED_MAX, each
 * cleaned of control characters and cut to DENIAL_REPORTED_CHARS. For the audit record
 * (meta.reportedDeniedPaths). Returns a new array (empty when there are none), NULL on OOM.
 */
json_t *denial_reported_paths(json_t *result);

/*
 * denial_possible_refusal() - the second text item for a successful call of @export_name:
 * "POSSIBLE SANDBOX REFUSAL (reported by <app>, inside a call that succeeded)" and one
 * "reported:" line per entry. NULL when there is nothing to add (the export does not
 * declare `denials: array`, or no entry counts) or on OOM; free() the result.
 */
char *denial_possible_refusal(const Manifest *m, const char *export_name, json_t *result,
			      EnforcementStatus st);
