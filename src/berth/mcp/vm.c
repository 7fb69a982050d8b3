/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The VM a session serves (docs/mcp.md, "Which VM serves the calls"): a running one for
 * the app (--container, berth dev's, or another session's), attached to and left running;
 * or the session's own, booted on its event loop while it already answers the client,
 * and stopped when the session ends.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macros.h"
#include "mcp.h"
#include "paths.h"
#include "rundir.h"
#include "vm-client.h"

/* --- finding or booting the VM ------------------------------------------------------ */

static int app_index_in(const char *run_dir, const char *app, char **ret_apps)
{
	json_auto_t *vm = vm_json_load(run_dir);
	json_t *a;
	size_t i;
	char *list = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&list, &len);
	int found = -ENOENT;

	json_array_foreach(json_object_get(vm, "apps"), i, a) {
		const char *name = json_string_value(json_object_get(a, "name"));

		if (f)
			fprintf(f, "%s%s", i ? ", " : "", name ?: "?");
		if (name && streq(name, app) && found < 0)
			found = (int)i;
	}
	if (f)
		fclose(f);
	if (ret_apps)
		*ret_apps = list;
	else
		free(list);
	return found;
}

static int use_vm(Mcp *c, const char *vm_name)
{
	free(c->vm_name);
	free(c->run_dir);
	c->vm_name = strdup(vm_name);
	c->run_dir = berth_run_dir(vm_name);
	return c->vm_name && c->run_dir ? 0 : -ENOMEM;
}

/* A running VM for this app: --container, berth dev's, or another session's. */
int mcp_find_running(Mcp *c)
{
	const char *prefixes[] = {"berth-dev-", "berth-mcp-"};
	pid_t pid;

	for (size_t i = 0; i < (c->container ? 1 : ELEMENTSOF(prefixes)); i++) {
		_cleanup_free_ char *name = NULL, *dir = NULL;

		if (c->container)
			name = strdup(c->container);
		else if (asprintf(&name, "%s%s", prefixes[i], c->l.name) < 0)
			name = NULL;
		dir = name ? berth_run_dir(name) : NULL;
		if (!dir)
			return -ENOMEM;
		if (rundir_inspect(dir, &pid) == RUNDIR_RUNNING)
			return use_vm(c, name);
	}
	/* A companion of another app's VM (berth dev --apps). */
	if (!c->container) {
		_cleanup_free_ char *name = NULL, *dir = NULL;
		int index;

		if (vm_find_app(c->l.name, &name, &dir, &index) >= 0 && name)
			return use_vm(c, name);
	}
	return -ENOENT;
}

/* Which app of the running VM this session serves: checked before serving. */
int mcp_attach(Mcp *c)
{
	_cleanup_free_ char *apps = NULL;
	int idx;

	idx = app_index_in(c->run_dir, c->l.name, &apps);
	if (idx < 0)
		return log_error("the VM %s runs %s, not \"%s\"; stop it or pick another with "
				 "--container",
				 c->vm_name, apps && *apps ? apps : "no app", c->l.name);
	c->attach_index = idx;
	return 0;
}

/*
 * The VM may still be booting (a berth dev started a moment ago): follow its boot on the
 * control port, on the loop, while the client is answered and its calls wait with
 * progress, as for a VM of the session's own.
 */
typedef struct AttachWait {
	Mcp *mcp;
	void (*done)(Mcp *c, int r);
	LineConn *control;
	EvSource *timer;
	VmReadiness readiness;
	bool replayed;	   /* the control port's replay of the boot so far is over */
	bool app_started;  /* and it held this app's app_started */
	char reason[512];
} AttachWait;

static void stage_reached(Mcp *c, VmLaunchStage stage, const char *what);

static void attach_finish(AttachWait *w, int r)
{
	Mcp *c = w->mcp;
	void (*done)(Mcp *c, int r) = w->done;
	_cleanup_(json_decrefp) json_t *vm = NULL;

	if (r == -ETIME)
		log_error("the VM %s is running but not ready: it did not get ready in %u s",
			  c->vm_name, c->boot_timeout_s);
	else if (r < 0)
		log_error("the VM %s is running but not ready: %s", c->vm_name, w->reason);
	line_conn_free(w->control);
	ev_source_free(w->timer);
	free(w);
	c->attach = NULL;
	if (r >= 0) {
		vm = vm_json_load(c->run_dir);
		if (asprintf(&c->rpc_socket, "rpc-%d.sock", c->attach_index) < 0)
			r = -ENOMEM;
		else if (json_array_size(json_object_get(vm, "apps")) > 1)
			snprintf(c->app_cwd, sizeof(c->app_cwd), "/app/%s", c->l.name);
	}
	if (r >= 0) {
		mcp_say("attached to the running VM \"%s\"", c->vm_name);
		if (c->env_given)
			log_warning("--env and --env-file apply to a VM this command boots; %s keeps "
				    "the values it was booted with (stop it to boot one with yours)",
				    c->vm_name);
	}
	done(c, r);
}

/* Told only once the replay shows the VM is not ready yet: a ready one needs no word. */
static void attach_progress(AttachWait *w)
{
	_cleanup_free_ char *text = NULL;
	Mcp *c = w->mcp;

	if (!w->replayed)
		return;
	if (w->app_started) {
		if (asprintf(&text, "starting \"%s\" in the VM", c->l.name) < 0)
			text = NULL;
		stage_reached(c, VM_LAUNCH_STAGE_APP_STARTING, text);
	} else {
		if (asprintf(&text, "waiting for the VM %s to boot", c->vm_name) < 0)
			text = NULL;
		stage_reached(c, VM_LAUNCH_STAGE_BOOTING, text);
	}
}

static void on_attach_line(LineConn *conn, char *line, size_t len, void *userdata)
{
	AttachWait *w = userdata;
	_cleanup_(json_decrefp) json_t *ev = json_loadb(line, len, 0, NULL);
	const char *name = json_string_value(json_object_get(ev, "event"));
	int r;

	/* The answer to our status request comes after the replay. */
	if (!name && json_is_string(json_object_get(ev, "op"))) {
		w->replayed = true;
		attach_progress(w);
		return;
	}
	r = vm_readiness_event(&w->readiness, ev, w->reason, sizeof(w->reason));
	if (r == 0 && name && streq(name, "app_started") &&
	    streq(json_string_value(json_object_get(ev, "app")) ?: "", w->mcp->l.name)) {
		w->app_started = true;
		attach_progress(w);
	}
	if (r != 0)
		attach_finish(w, r > 0 ? 0 : -EIO);
}

static void on_attach_close(LineConn *conn, int error, void *userdata)
{
	AttachWait *w = userdata;

	w->control = NULL; /* freed by LineConn right after this */
	vm_await_failure_reason(w->mcp->run_dir, w->reason, sizeof(w->reason));
	attach_finish(w, -EIO);
}

static int on_attach_timeout(EvSource *s, uint64_t usec, void *userdata)
{
	attach_finish(userdata, -ETIME);
	return 0;
}

int mcp_attach_wait_start(Mcp *c, void (*done)(Mcp *c, int r))
{
	_cleanup_(json_decrefp) json_t *vm = vm_json_load(c->run_dir);
	AttachWait *w;
	int fd, r;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	*w = (AttachWait){.mcp = c, .done = done};
	snprintf(w->reason, sizeof(w->reason), "the VM went away during its boot");
	vm_readiness_init(&w->readiness, (unsigned)json_array_size(json_object_get(vm, "apps")));
	c->attach = w;
	c->phase = MCP_PHASE_BOOTING;
	r = ev_add_time_relative(c->loop, &w->timer,
				 (uint64_t)c->boot_timeout_s * 1000 * USEC_PER_MSEC, on_attach_timeout,
				 w);
	fd = r >= 0 ? vm_socket_connect(c->run_dir, "control.sock") : r;
	if (fd >= 0)
		r = line_conn_new(c->loop, fd, VM_LINE_MAX, 4096, on_attach_line, on_attach_close, w,
				  &w->control);
	else
		r = fd;
	if (r >= 0)
		r = line_conn_write(w->control, "{\"op\":\"status\"}", 15);
	if (r < 0) {
		snprintf(w->reason, sizeof(w->reason), "cannot read its control port: %s",
			 strerror(-r));
		attach_finish(w, -EIO);
	}
	return 0;
}

void mcp_attach_wait_cancel(Mcp *c)
{
	AttachWait *w = c->attach;

	if (!w)
		return;
	line_conn_free(w->control);
	ev_source_free(w->timer);
	free(w);
	c->attach = NULL;
}

/* Find berth-vmm and the artifacts, and bundle the app: what a boot needs first. */
int mcp_prepare_own(Mcp *c)
{
	char err[1024];
	int r;

	r = vm_launch_prepare(&c->l);
	if (r < 0)
		return r;
	r = vm_launch_bundle(&c->l, err, sizeof(err));
	if (r < 0)
		return log_error("bundling %s failed: %s", c->l.app_dir, err);
	mcp_say("booting \"%s\" in VM %s", c->l.name, c->l.vm_name);
	c->owned = true;
	return 0;
}

/* --warm: boot and wait for it. */
int mcp_boot_own(Mcp *c)
{
	int r = mcp_prepare_own(c);

	if (r >= 0)
		r = vm_launch_boot(&c->l);
	if (r == -ECANCELED)
		return r;
	if (r < 0)
		return log_error("\"%s\" did not start; see above", c->l.name);
	mcp_say("VM %s ready in %lld ms (boot %s)", c->l.vm_name, c->l.boot_ms, c->l.boot_id);
	return 0;
}

/* Serve the VM this session booted. */
static int adopt_own_vm(Mcp *c)
{
	int r = use_vm(c, c->l.vm_name);

	if (r >= 0 && !(c->rpc_socket = strdup("rpc-0.sock")))
		r = -ENOMEM;
	return r;
}

/*
 * The boot's evidence while it runs: vm.json and the guest's boot events, which the
 * control port replays to every new connection. The status request's answer comes after
 * the replay, so everything before it is the whole record so far.
 */

/* The own VM's boot reached @stage: tell the calls that asked for progress, in words. */
static void stage_reached(Mcp *c, VmLaunchStage stage, const char *what)
{
	if (stage < 0 || stage >= _VM_LAUNCH_STAGE_MAX || (int)stage + 1 < c->stage)
		return;
	c->stage = (int)stage + 1;
	snprintf(c->stage_text, sizeof(c->stage_text), "%s", what ?: "");
	calls_progress(c);
}

static void on_stage(VmLaunch *l, VmLaunchStage stage, void *userdata)
{
	_cleanup_free_ char *text = NULL;
	int r = -EINVAL;

	switch (stage) {
	case VM_LAUNCH_STAGE_INSTALLING:
		r = asprintf(&text, "installing the pinned kernel and root image");
		break;
	case VM_LAUNCH_STAGE_BOOTING:
		r = asprintf(&text, "booting the VM %s", l->vm_name);
		break;
	case VM_LAUNCH_STAGE_APP_STARTING:
		r = asprintf(&text, "starting \"%s\" in the VM", l->name);
		break;
	case _VM_LAUNCH_STAGE_MAX:
	case _VM_LAUNCH_STAGE_INVALID:
		break;
	}
	stage_reached(userdata, stage, r >= 0 ? text : NULL);
}

/* The VM booted (or did not): send what waited for it, or tell it why it never will. */
static void on_own_recorded(Mcp *c)
{
	c->phase = MCP_PHASE_READY;
	calls_send_waiting(c);
}

static void on_boot_done(VmLaunch *l, int r, void *userdata)
{
	Mcp *c = userdata;

	/* Cancelled: the session is ending, and says so for the calls still waiting. */
	if (r == -ECANCELED)
		return;
	if (r >= 0) {
		mcp_say("VM %s ready in %lld ms (boot %s)", l->vm_name, l->boot_ms, l->boot_id);
		r = adopt_own_vm(c);
	} else
		log_error("\"%s\" did not start; see above", l->name);
	if (r >= 0)
		r = boot_record_start(c, on_own_recorded);
	if (r < 0) {
		c->phase = MCP_PHASE_FAILED;
		calls_refuse_waiting(c);
		c->exit_code = 1;
		mcp_stop_serving(c);
	}
}

/* Boot the VM on the loop while it answers the client: one whose start-up timeout is
 * shorter than a boot still gets its session. */
int mcp_start_own_boot(Mcp *c)
{
	_cleanup_free_ char *text = NULL;
	int r;

	c->phase = MCP_PHASE_BOOTING;
	c->l.on_stage = on_stage;
	c->l.stage_userdata = c;
	/* Bundling the app (and installing the artifacts when they are missing) runs on
	 * the loop before the boot: a call read before it is told so. */
	if (asprintf(&text, "installing \"%s\" for its VM: bundling the app", c->l.name) < 0)
		text = NULL;
	stage_reached(c, VM_LAUNCH_STAGE_INSTALLING, text);
	r = mcp_prepare_own(c);
	if (r >= 0)
		r = vm_launch_boot_start(&c->l, c->loop, on_boot_done, c);
	if (r < 0)
		on_boot_done(&c->l, -EIO, c);
	return 0;
}
