/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include "line-reader.h"

/*
 * The host side of a VM's run dir sockets, for commands that talk to a running VM
 * (berth vm status|logs|stop, berth rpc, ...). Every line from the guest is bounded and
 * every wait has a deadline: guest output never decides what the host does.
 */

/* The longest line read from a VM's sockets (line_reader_init()'s @max_line). */
#define VM_LINE_MAX (1024 * 1024)
/* What berth-vmm says on logs.sock, then closes, to a reader past its cap: the prefix, why,
 * and what to do. */
#define LOG_STREAM_REFUSED "log stream refused: "

/* Connect to @socket_name ("control.sock", ...) in @run_dir. Returns an fd or -errno. */
int vm_socket_connect(const char *run_dir, const char *socket_name);

/*
 * vm_control_request() - send @request (a JSON object with "op") on a fresh control
 * connection and wait for the reply whose "op" matches; boot events seen meanwhile are
 * skipped. Returns 0 with the reply in *@ret, or -errno (-ETIME after @timeout_ms).
 */
int vm_control_request(const char *run_dir, const char *request, int timeout_ms, json_t **ret);

/*
 * vm_log_line_print() - one line of logs.sock ({"src":..., "line":...}) for a person:
 * "[src] line" and a newline on @f, the guest's and the app's text neutralised for a
 * terminal. Returns false, printing nothing, when @line (@len bytes) is not such a record.
 */
bool vm_log_line_print(FILE *f, const char *line, size_t len);

/* Load @run_dir/vm.json; NULL when missing or malformed. */
json_t *vm_json_load(const char *run_dir);

/*
 * vm_find_app() - the running VM that has an app named @app: berth dev's VM of that name
 * first (berth-dev-<app>), then every running VM, by name. Its name (may be NULL), run dir
 * and the app's index in it. Returns 0, -ENOENT, or -ENOMEM.
 */
int vm_find_app(const char *app, char **ret_vm_name, char **ret_dir, int *ret_index);

/*
 * Following a boot on the control port: feed each event to vm_readiness_event(), which
 * returns 1 once boot_complete and app_ready for @n_apps apps were seen, 0 while the boot
 * goes on, and -EIO when it failed, an app exited before it was ready or the VM powered off
 * (the reason, when the event gave one, in @reason).
 */
typedef struct VmReadiness {
	unsigned n_apps, ready;
	bool complete;
} VmReadiness;

void vm_readiness_init(VmReadiness *r, unsigned n_apps);
int vm_readiness_event(VmReadiness *r, json_t *ev, char *reason, size_t reason_size);

/*
 * vm_wait_ready() - follow the boot events on the control port until the boot is ready.
 * Returns 0; -EIO when the boot failed, an app exited before it was ready or the VM went
 * away (the reason in @reason: berth-vmm's own, from vm.json, when it failed the VM); -ETIME
 * after @timeout_ms.
 */
int vm_wait_ready(const char *run_dir, unsigned n_apps, int timeout_ms, char *reason,
		  size_t reason_size);

/* berth-vmm let go of a reader: it is failing the VM, or done with it. Its reason reaches
 * vm.json a moment before it ends; wait for that end (up to 5 s) and put the reason, when
 * there is one, in @reason. */
void vm_await_failure_reason(const char *run_dir, char *reason, size_t size);

/* Why berth-vmm failed the VM of @run_dir (vm.json's failure.reason), or NULL. malloc()ed. */
char *vm_failure_reason(const char *run_dir);
