/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The boot a session's calls run on (SPEC §3.5): its evidence, read on the event loop,
 * becomes one sandbox.boot audit record, and agent-init's reports in it say how the
 * kernel enforces the app's berth.yml, which the denial explainer needs. berth dev
 * reboots its VM on every change, so before each call the session looks whether vm.json
 * names a new boot; calls wait while one is recorded, so that the trail says where each
 * ran and a denial is explained with the boot it happened on.
 */
#include <errno.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attest.h"
#include "log.h"
#include "mcp.h"
#include "time-util.h"
#include "vm-client.h"

struct BootRecord {
	Mcp *mcp;
	void (*done)(Mcp *c);
	json_t *vm;	/* vm.json when the record began */
	json_t *events; /* the boot events the control port replayed */
	LineConn *control;
	EvSource *timer;
};

static void record_write(Mcp *c, json_t *evidence)
{
	json_auto_t *rec = NULL, *chain = json_object(), *run = json_object(), *ev = NULL;
	_cleanup_free_ char *error = NULL, *target = NULL;
	struct passwd *pw = getpwuid(getuid());
	json_t *boot, *enf, *meta, *be;
	char now[40];

	now_rfc3339(now, sizeof(now), false);
	if (!evidence || attest_record_build(evidence, chain, run, now, &rec, &error) < 0) {
		log_warning("could not read the boot evidence of %s%s%s; the session's boot is not "
			    "recorded, calls are",
			    c->vm_name, error ? ": " : "", error ?: "");
		return;
	}
	boot = json_object_get(rec, "boot");
	enf = json_object_get(rec, "enforcement");
	be = json_pack("{s:O*, s:O*, s:O*, s:O*, s:O*, s:O*, s:O*, s:O*, s:O*}", "bootId",
		       json_object_get(boot, "bootId"), "containerName",
		       json_object_get(boot, "containerName"), "imageTag",
		       json_object_get(boot, "imageTag"), "imageDigest",
		       json_object_get(boot, "imageDigest"), "runtime",
		       json_object_get(boot, "runtime"), "isolation",
		       json_object_get(boot, "isolation"), "rulesetReports",
		       json_object_get(enf, "rulesetReports"), "policies",
		       json_object_get(rec, "policies"), "doctorProbe",
		       json_object_get(enf, "doctorProbe"));
	meta = mcp_audit_meta(c);
	json_object_set_new(meta, "evidence", be);
	json_object_set_new(meta, "owned", json_boolean(c->owned));
	if (asprintf(&target, "container:%s", c->vm_name) < 0)
		target = NULL;
	ev = json_pack("{s:{s:s, s:s, s:s}, s:s, s:s*, s:s, s:o}", "actor", "kind", "operator",
		       "id", pw && pw->pw_name ? pw->pw_name : "unknown", "verifiedBy",
		       "self-asserted", "action", "sandbox.boot", "target", target, "decision",
		       "allowed", "meta", meta);
	mcp_audit(c, ev);
}

/* The app's share in vm.json (its treeSha256), "" when it is not there. */
static const char *app_share(const json_t *vm, const char *name)
{
	size_t i;
	json_t *app;

	json_array_foreach(json_object_get(vm, "apps"), i, app)
		if (streq(json_string_value(json_object_get(app, "name")) ?: "", name))
			return json_string_value(json_object_get(app, "treeSha256")) ?: "";
	return "";
}

/* The record is complete (or could not be): log, write it, and let the calls go. */
static void record_finish(BootRecord *b)
{
	Mcp *c = b->mcp;
	void (*done)(Mcp *) = b->done;
	json_auto_t *evidence = NULL;

	if (b->vm && b->events)
		evidence =
			json_pack("{s:i, s:s, s:O*, s:O, s:O}", "schema", 1, "kind",
				  "berth.boot-evidence", "bootId", json_object_get(b->vm, "bootId"),
				  "vm", b->vm, "events", b->events);
	snprintf(c->boot_id, sizeof(c->boot_id), "%s",
		 json_string_value(json_object_get(b->vm, "bootId")) ?: "");
	snprintf(c->share_sha256, sizeof(c->share_sha256), "%s", app_share(b->vm, c->l.name));
	/* berth-init took these reports before the app's code ran: the app cannot forge them. */
	c->enforcement = enforcement_from_reports(b->events, c->l.name);
	mcp_say("kernel enforcement in this VM: %s", enforcement_status_to_string(c->enforcement));
	record_write(c, evidence);
	boot_record_free(c);
	done(c);
}

/* The control port replays the boot's events to every new connection; the answer to the
 * status request comes after them, so everything before it is the whole record so far. */
static void on_control_line(LineConn *conn, char *line, size_t len, void *userdata)
{
	BootRecord *b = userdata;
	json_t *o = json_loadb(line, len, 0, NULL);

	if (json_is_string(json_object_get(o, "event"))) {
		/* Bounded by berth-vmm, which keeps a capped history; capped here again. */
		if (json_array_size(b->events) < 4096)
			json_array_append_new(b->events, o);
		else
			json_decref(o);
		return;
	}
	if (json_is_string(json_object_get(o, "op"))) {
		json_decref(o);
		record_finish(b);
		return;
	}
	json_decref(o);
}

static void on_control_close(LineConn *conn, int error, void *userdata)
{
	BootRecord *b = userdata;

	b->control = NULL; /* freed by LineConn right after */
	record_finish(b);
}

static int on_record_timeout(EvSource *s, uint64_t usec, void *userdata)
{
	BootRecord *b = userdata;

	if (b->control)
		log_warning(
			"the control port of %s did not answer within %d s; recording what it sent",
			b->mcp->vm_name, MCP_RECORD_TIMEOUT_MS / 1000);
	record_finish(b);
	return 0;
}

int boot_record_start(Mcp *c, void (*done)(Mcp *c))
{
	BootRecord *b;
	int fd, r;

	if (c->record)
		return -EBUSY;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	*b = (BootRecord){
		.mcp = c, .done = done, .vm = vm_json_load(c->run_dir), .events = json_array()};
	r = ev_add_time_relative(c->loop, &b->timer,
				 (uint64_t)MCP_RECORD_TIMEOUT_MS * USEC_PER_MSEC, on_record_timeout,
				 b);
	if (r < 0) {
		json_decref(b->vm);
		json_decref(b->events);
		free(b);
		return r;
	}
	c->record = b;
	c->phase = MCP_PHASE_RECORDING;
	fd = vm_socket_connect(c->run_dir, "control.sock");
	if (fd >= 0)
		r = line_conn_new(c->loop, fd, VM_LINE_MAX, 4096, on_control_line, on_control_close,
				  b, &b->control);
	else
		r = fd;
	if (r >= 0)
		r = line_conn_write(b->control, "{\"op\":\"status\"}", 15);
	if (r < 0) {
		/* Nothing to read: the record says what vm.json says. Finished from the loop,
		 * never from inside the caller, which may be sending a call. */
		log_debug_errno(r, "cannot read the control port of %s: %m", c->vm_name);
		b->control = line_conn_free(b->control);
		(void)ev_source_set_time_relative(b->timer, 0);
		(void)ev_source_set_enabled(b->timer, EV_ONESHOT);
	}
	return 0;
}

static void on_followed(Mcp *c)
{
	c->phase = MCP_PHASE_READY;
	calls_send_waiting(c);
}

bool boot_record_follow(Mcp *c)
{
	json_auto_t *vm = NULL;
	const char *boot_id;

	if (c->record)
		return true;
	/* vm.json is a small file berth-vmm rewrites atomically: a read, not a wait. */
	vm = vm_json_load(c->run_dir);
	boot_id = json_string_value(json_object_get(vm, "bootId"));
	if (!boot_id)
		return false;
	if (!streq(boot_id, c->boot_id))
		mcp_say("the VM %s was rebooted (boot %s); recording the new boot", c->vm_name,
			boot_id);
	else if (!streq(app_share(vm, c->l.name), c->share_sha256))
		mcp_say("the app in VM %s was reloaded in place (share %.12s); recording it",
			c->vm_name, app_share(vm, c->l.name));
	else
		return false;
	return boot_record_start(c, on_followed) >= 0;
}

void boot_record_free(Mcp *c)
{
	BootRecord *b = c->record;

	if (!b)
		return;
	line_conn_free(b->control);
	ev_source_free(b->timer);
	json_decref(b->vm);
	json_decref(b->events);
	free(b);
	c->record = NULL;
}
