/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "macros.h"
#include "paths.h"
#include "rundir.h"
#include "term-text.h"
#include "time-util.h"
#include "vm-client.h"

int vm_socket_connect(const char *run_dir, const char *socket_name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, n;

	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", run_dir, socket_name);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

int vm_control_request(const char *run_dir, const char *request, int timeout_ms, json_t **ret)
{
	_cleanup_(json_decrefp) json_t *req = json_loads(request, 0, NULL);
	const char *op = json_string_value(json_object_get(req, "op"));
	long long deadline = now_ms() + timeout_ms;
	LineReader lr;
	char *line;
	int fd, r;

	if (!op)
		return -EINVAL;
	fd = vm_socket_connect(run_dir, "control.sock");
	if (fd < 0)
		return fd;
	r = loop_write(fd, request, strlen(request));
	if (r >= 0)
		r = loop_write(fd, "\n", 1);
	line_reader_init(&lr, fd, VM_LINE_MAX);
	while (r >= 0) {
		long long left = deadline - now_ms();
		json_t *o;

		r = line_reader_next(&lr, left > 0 ? (int)left : 0, &line, NULL);
		if (r <= 0) {
			r = r == 0 ? -ECONNRESET : r;
			break;
		}
		o = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
		if (json_is_object(o) && json_is_string(json_object_get(o, "op")) &&
		    streq(json_string_value(json_object_get(o, "op")), op)) {
			*ret = o;
			r = 0;
			break;
		}
		json_decref(o);
	}
	line_reader_done(&lr);
	close(fd);
	return r;
}

bool vm_log_line_print(FILE *f, const char *line, size_t len)
{
	_cleanup_(json_decrefp) json_t *o = json_loadb(line, len, 0, NULL);
	json_t *text = json_object_get(o, "line");

	if (!json_is_string(text))
		return false;
	fputc('[', f);
	term_text_puts(f, json_string_value(json_object_get(o, "src")) ?: "?", TERM_TEXT_LOG_LINE);
	fputs("] ", f);
	term_text_write(f, json_string_value(text), json_string_length(text), TERM_TEXT_LOG_LINE);
	fputc('\n', f);
	return true;
}

json_t *vm_json_load(const char *run_dir)
{
	_cleanup_free_ char *path = NULL, *text = NULL;

	if (asprintf(&path, "%s/vm.json", run_dir) < 0)
		return NULL;
	if (read_full_file(path, 4 * 1024 * 1024, &text, NULL) < 0)
		return NULL;
	return json_loads(text, JSON_REJECT_DUPLICATES, NULL);
}

static void describe_failure(json_t *ev, char *reason, size_t size)
{
	const char *event = json_string_value(json_object_get(ev, "event"));
	const char *app = json_string_value(json_object_get(ev, "app")) ?: "?";

	if (streq(event, "boot_failed"))
		snprintf(reason, size, "the guest's boot failed in phase %s: %s",
			 json_string_value(json_object_get(ev, "phase")) ?: "?",
			 json_string_value(json_object_get(ev, "reason")) ?: "?");
	else if (streq(event, "app_refused"))
		snprintf(reason, size, "app \"%s\" could not start: %s", app,
			 json_string_value(json_object_get(ev, "reason")) ?: "?");
	else if (json_is_integer(json_object_get(ev, "exitCode")))
		snprintf(reason, size, "app \"%s\" exited with code %lld before it was ready", app,
			 json_integer_value(json_object_get(ev, "exitCode")));
	else
		snprintf(reason, size, "app \"%s\" was killed by signal %lld before it was ready",
			 app, json_integer_value(json_object_get(ev, "signal")));
}

char *vm_failure_reason(const char *run_dir)
{
	_cleanup_(json_decrefp) json_t *vm = vm_json_load(run_dir);
	const char *reason =
		json_string_value(json_object_get(json_object_get(vm, "failure"), "reason"));

	return reason ? strdup(reason) : NULL;
}

void vm_await_failure_reason(const char *run_dir, char *reason, size_t size)
{
	/* berth-vmm writes its reason, then ends: wait for the end (up to 5 s), then read. */
	_cleanup_close_ int pidfd = rundir_open_pidfd(run_dir);
	_cleanup_free_ char *failure = NULL;
	struct pollfd p = {.fd = pidfd, .events = POLLIN};

	if (pidfd >= 0)
		while (poll(&p, 1, 5000) < 0 && errno == EINTR)
			;
	failure = vm_failure_reason(run_dir);
	if (failure)
		snprintf(reason, size, "%s", failure);
}

void vm_readiness_init(VmReadiness *r, unsigned n_apps)
{
	*r = (VmReadiness){.n_apps = n_apps};
}

int vm_readiness_event(VmReadiness *r, json_t *ev, char *reason, size_t reason_size)
{
	const char *event = json_string_value(json_object_get(ev, "event"));

	if (!event)
		return 0;
	if (streq(event, "boot_complete"))
		r->complete = true;
	else if (streq(event, "app_ready"))
		r->ready++;
	else if (streq(event, "boot_failed") || streq(event, "app_refused") ||
		 streq(event, "app_exited")) {
		describe_failure(ev, reason, reason_size);
		return -EIO;
	} else if (streq(event, "power_off"))
		return -EIO;
	return r->complete && r->ready >= r->n_apps ? 1 : 0;
}

int vm_wait_ready(const char *run_dir, unsigned n_apps, int timeout_ms, char *reason,
		  size_t reason_size)
{
	long long deadline = now_ms() + timeout_ms;
	VmReadiness readiness;
	LineReader lr;
	char *line;
	int fd, r;

	snprintf(reason, reason_size, "the VM went away during its boot");
	vm_readiness_init(&readiness, n_apps);
	fd = vm_socket_connect(run_dir, "control.sock");
	if (fd < 0) {
		vm_await_failure_reason(run_dir, reason, reason_size);
		return fd == -ECONNREFUSED || fd == -ENOENT ? -EIO : fd;
	}
	line_reader_init(&lr, fd, VM_LINE_MAX);
	for (;;) {
		long long left = deadline - now_ms();
		json_t *ev;

		r = line_reader_next(&lr, left > 0 ? (int)left : 0, &line, NULL);
		if (r == 0) {
			/* berth-vmm closed us: it failed the VM, and vm.json says why. */
			vm_await_failure_reason(run_dir, reason, reason_size);
			r = -EIO;
		}
		if (r <= 0)
			break;
		ev = json_loads(line, 0, NULL);
		r = vm_readiness_event(&readiness, ev, reason, reason_size);
		json_decref(ev);
		if (r != 0)
			break;
	}
	line_reader_done(&lr);
	close(fd);
	return r < 0 ? r : 0;
}

int vm_find_app(const char *app, char **ret_vm_name, char **ret_dir, int *ret_index)
{
	_cleanup_free_ char *root = berth_run_root();
	char *names[2] = {NULL, NULL};
	int r = -ENOENT;

	if (!root)
		return -ENOMEM;
	if (asprintf(&names[0], "berth-dev-%s", app) < 0)
		return -ENOMEM;
	for (int pass = 0; pass < 2 && r < 0; pass++) {
		_cleanup_(json_decrefp) json_t *list = json_array();
		struct dirent **ents = NULL;
		int n = 0;

		if (pass == 0)
			json_array_append_new(list, json_string(names[0]));
		else if ((n = scandir(root, &ents, NULL, alphasort)) > 0) {
			for (int i = 0; i < n; i++) {
				if (vm_name_valid(ents[i]->d_name))
					json_array_append_new(list, json_string(ents[i]->d_name));
				free(ents[i]);
			}
			free(ents);
		}
		for (size_t i = 0; i < json_array_size(list) && r < 0; i++) {
			_cleanup_free_ char *dir =
				berth_run_dir(json_string_value(json_array_get(list, i)));
			_cleanup_(json_decrefp) json_t *vm = NULL;
			json_t *a;
			size_t k;
			pid_t pid;

			if (!dir || rundir_inspect(dir, &pid) != RUNDIR_RUNNING)
				continue;
			vm = vm_json_load(dir);
			json_array_foreach(json_object_get(vm, "apps"), k, a) {
				if (streq(json_string_value(json_object_get(a, "name")) ?: "",
					  app)) {
					*ret_index = (int)json_integer_value(
						json_object_get(a, "index"));
					if (ret_vm_name)
						*ret_vm_name = strdup(json_string_value(
							json_array_get(list, i)));
					*ret_dir = TAKE_PTR(dir);
					r = 0;
					break;
				}
			}
		}
	}
	free(names[0]);
	return r;
}
