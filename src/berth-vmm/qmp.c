/* SPDX-License-Identifier: Apache-2.0 */
/* A small QMP client for saving and restoring a VM (qmp.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "line-reader.h"
#include "macros.h"
#include "qmp.h"
#include "time-util.h"

struct Qmp {
	int fd;
	LineReader lr;
};

Qmp *qmp_free(Qmp *q)
{
	if (!q)
		return NULL;
	line_reader_done(&q->lr);
	safe_close(q->fd);
	free(q);
	return NULL;
}

/* The next JSON object QEMU sends, before @deadline (ms). */
static int read_message(Qmp *q, int64_t deadline, json_t **ret)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		char *line;
		int r;

		if (left <= 0)
			return -ETIME;
		r = line_reader_next(&q->lr, (int)MIN(left, (int64_t)INT32_MAX), &line, NULL);
		if (r == 0)
			return -ECONNRESET;
		if (r == -EMSGSIZE)
			continue;
		if (r < 0)
			return r;
		*ret = json_loads(line, JSON_REJECT_DUPLICATES, NULL);
		if (json_is_object(*ret))
			return 0;
		json_decref(*ret);
	}
}

static int send_line(Qmp *q, json_t *msg, int fd)
{
	_cleanup_free_ char *text = json_dumps(msg, JSON_COMPACT);
	char control[CMSG_SPACE(sizeof(int))] = {};
	struct iovec iov;
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	size_t len;

	if (!text)
		return -ENOMEM;
	len = strlen(text);
	text[len++] = '\n'; /* json_dumps left room: the NUL */
	iov = (struct iovec){.iov_base = text, .iov_len = len};
	if (fd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = control;
		mh.msg_controllen = sizeof(control);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	/* A command line is small: one sendmsg takes it whole, or the socket is broken. */
	return sendmsg(q->fd, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -EIO;
}

static int execute(Qmp *q, const char *command, json_t *args, int fd, int timeout_ms,
		   json_t **ret, char *err, size_t errlen)
{
	_cleanup_(json_decrefp) json_t *msg = json_pack("{s:s}", "execute", command);
	int64_t deadline = now_ms() + timeout_ms;
	int r;

	if (!msg || (args && json_object_set(msg, "arguments", args) < 0))
		return -ENOMEM;
	r = send_line(q, msg, fd);
	if (r < 0)
		return r;
	for (;;) {
		_cleanup_(json_decrefp) json_t *answer = NULL;
		json_t *v;

		r = read_message(q, deadline, &answer);
		if (r < 0) {
			snprintf(err, errlen, "QEMU did not answer %s (%s)", command, strerror(-r));
			return r;
		}
		if ((v = json_object_get(answer, "error"))) {
			snprintf(err, errlen, "QEMU refused %s: %s", command,
				 json_string_value(json_object_get(v, "desc")) ?: "no reason given");
			return -EIO;
		}
		if ((v = json_object_get(answer, "return"))) {
			if (ret)
				*ret = json_incref(v);
			return 0;
		}
		/* An event ({"event": ...}): not the answer. */
	}
}

int qmp_execute(Qmp *q, const char *command, json_t *args, int timeout_ms, json_t **ret,
		char *err, size_t errlen)
{
	return execute(q, command, args, -EBADF, timeout_ms, ret, err, errlen);
}

int qmp_send_fd(Qmp *q, int fd, const char *name, int timeout_ms, char *err, size_t errlen)
{
	_cleanup_(json_decrefp) json_t *args = json_pack("{s:s}", "fdname", name);

	return args ? execute(q, "getfd", args, fd, timeout_ms, NULL, err, errlen) : -ENOMEM;
}

int qmp_connect(const char *path, int timeout_ms, Qmp **ret)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int64_t deadline = now_ms() + timeout_ms;
	_cleanup_(json_decrefp) json_t *greeting = NULL;
	char err[256];
	Qmp *q;
	int r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	for (;;) {
		q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (q->fd < 0) {
			r = -errno;
			free(q);
			return r;
		}
		if (connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			break;
		r = -errno;
		q->fd = safe_close(q->fd);
		/* QEMU makes the socket a moment after it starts. */
		if ((r != -ENOENT && r != -ECONNREFUSED) || now_ms() >= deadline) {
			free(q);
			return r;
		}
		usleep(10 * 1000);
	}
	line_reader_init(&q->lr, q->fd, QMP_LINE_MAX);
	r = read_message(q, deadline, &greeting);
	if (r >= 0 && !json_object_get(greeting, "QMP"))
		r = -EPROTO;
	if (r >= 0)
		r = qmp_execute(q, "qmp_capabilities", NULL, (int)MAX(deadline - now_ms(), 1), NULL,
				err, sizeof(err));
	if (r < 0) {
		qmp_free(q);
		return r;
	}
	*ret = q;
	return 0;
}
