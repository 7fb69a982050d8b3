/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * berth mcp, inside: one session on one event loop (docs/mcp.md).
 *
 *   cmd-mcp.c       options, then attach or boot, then serve
 *   relay.c         standard output kept for MCP; every other line to standard error
 *   session.c       standard input (a LineConn), the answers, the loop
 *   methods.c       what each request gets, in its era (pure; protocol.c, tools.c)
 *   calls.c         tool calls: waiting for the VM, sent to the app, answered, cancelled
 *   boot-record.c   the boot a call runs on, read from the VM and put in the audit trail
 *   vm.c            finding the VM to attach to, or booting the session's own
 *   audit.c         the session's audit records
 *   print-config.c  --print-config
 */

#include <stdbool.h>

#include "audit-log.h"
#include "denial.h"
#include "evloop.h"
#include "line-conn.h"
#include "methods.h"
#include "vm-launch.h"

#define MCP_PREFIX "[berth:mcp] "
/* One RPC answer from the app (one message from the client: MCP_MESSAGE_MAX). */
#define MCP_RPC_ANSWER_MAX (4u * 1024 * 1024)
#define MCP_CALLS_MAX 64
#define MCP_CALL_TIMEOUT_MS_DEFAULT (120 * 1000)
#define MCP_CALL_TIMEOUT_GRACE_MS 15000
#define MCP_BOOT_TIMEOUT_S_DEFAULT 120
/* Reading a boot's evidence from the control port. */
#define MCP_RECORD_TIMEOUT_MS 10000

typedef struct Call Call;
typedef struct BootRecord BootRecord;

/* Where the session is; calls are sent only when it is READY. */
typedef enum McpPhase {
	MCP_PHASE_BOOTING,   /* its own VM boots */
	MCP_PHASE_RECORDING, /* the evidence of the VM's (new) boot is being read */
	MCP_PHASE_READY,
	MCP_PHASE_FAILED, /* the VM did not start: calls are refused, the session ends */
	_MCP_PHASE_MAX,
	_MCP_PHASE_INVALID = -22,
} McpPhase;

typedef struct Mcp {
	/* options */
	const char *app, *app_dir, *container, *runtime, *print_config;
	char *run_id;
	char **only;
	bool warm, no_boot, env_given;
	unsigned boot_timeout_s, call_timeout_ms;
	/* the sandbox */
	VmLaunch l;
	bool owned;
	McpPhase phase;
	int stage;	      /* the own VM's boot stage: VmLaunchStage + 1, 0 before the first */
	char stage_text[160]; /* and what it is doing, in words */
	char *vm_name, *run_dir, *rpc_socket; /* rpc_socket: its name in run_dir */
	int attach_index;		      /* a running VM's: this app's index in it */
	struct AttachWait *attach;	      /* following its boot, NULL when not */
	char *manifest_path;
	char app_cwd[300]; /* the app's working directory in the VM */
	EnforcementStatus enforcement;
	/* serving */
	int out_fd;
	EvLoop *loop;
	LineConn *in;
	McpServer server;
	McpState state;
	bool input_closed; /* end of standard input: stop once no call is left */
	Call *calls;	   /* newest first */
	unsigned n_calls;
	BootRecord *record; /* in progress, NULL when none */
	AuditSink *audit;
	char bridge[17];
	char boot_id[64]; /* the boot the last sandbox.boot record describes */
	char share_sha256[65]; /* and the app's share then: a reload in place changes it */
	int exit_code;
} Mcp;

void mcp_say(const char *fmt, ...) _printf_(1, 2);

/* session.c */
int mcp_serve(Mcp *c);
void mcp_stop_serving(Mcp *c);
void mcp_send(Mcp *c, json_t *msg);
/* A result (taken) for request @id answered under @version. */
void mcp_send_result(Mcp *c, json_t *id, const char *version, json_t *result);
void mcp_send_error(Mcp *c, json_t *id, int code, const char *message, json_t *data);

/* calls.c */
void calls_add(Mcp *c, McpReply *r);
void calls_cancel(Mcp *c, json_t *request_id);
/* The session is READY: send what waits, oldest first. */
void calls_send_waiting(Mcp *c);
/* The VM did not start: tell every waiting call. */
void calls_refuse_waiting(Mcp *c);
/* The own VM's boot reached c->stage (c->stage_text): say so to the calls that wait and
 * asked for progress. */
void calls_progress(Mcp *c);
/* The session ends: record what is still open. */
void calls_end(Mcp *c);

/* boot-record.c */
/*
 * boot_record_start() - read the evidence of the VM's current boot from its run dir and
 * control port on the loop, log the kernel's enforcement for the app, append a
 * sandbox.boot record, then call @done. Sets c->phase to RECORDING meanwhile.
 */
int boot_record_start(Mcp *c, void (*done)(Mcp *c));
/* Before a call is sent: has the VM booted again (berth dev reloads) since the last
 * record? Then it starts recording that boot, and returns true: the call waits. */
bool boot_record_follow(Mcp *c);
void boot_record_free(Mcp *c);

/* vm.c */
int mcp_find_running(Mcp *c);
int mcp_attach(Mcp *c);
/* Follow the running VM's boot on the loop, with progress, then call @done (0 once its
 * apps are ready, -errno after saying why not). */
int mcp_attach_wait_start(Mcp *c, void (*done)(Mcp *c, int r));
void mcp_attach_wait_cancel(Mcp *c);
int mcp_prepare_own(Mcp *c);
int mcp_boot_own(Mcp *c);
int mcp_start_own_boot(Mcp *c);

/* audit.c */
json_t *mcp_audit_meta(Mcp *c);
void mcp_audit(Mcp *c, json_t *event);

/* print-config.c: 0, -errno after saying why, or CLI_EXIT_USAGE for an unknown client. */
int mcp_print_config(Mcp *c);
