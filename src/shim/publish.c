/* SPDX-License-Identifier: Apache-2.0 */
/* Events to containerd: one ttrpc call of containerd.services.events.ttrpc.v1.Events/Forward
 * on containerd's ttrpc socket, as containerd's own shims publish them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "shim.h"
#include "shim.pb-c.h"
#include "ttrpc-frame.h"

#define PUBLISH_TIMEOUT_S 2

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = PUBLISH_TIMEOUT_S};
	int fd;

	if (strneq(path, "unix://", 7))
		path += 7;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

void shim_publish(const char *address, const char *ns, const char *topic, const char *type_url,
		  const uint8_t *event, size_t len)
{
	Berthshim__Timestamp ts = BERTHSHIM__TIMESTAMP__INIT;
	Berthshim__Any any = BERTHSHIM__ANY__INIT;
	Berthshim__Envelope env = BERTHSHIM__ENVELOPE__INIT;
	Berthshim__ForwardRequest fwd = BERTHSHIM__FORWARD_REQUEST__INIT;
	Berthshim__Request req = BERTHSHIM__REQUEST__INIT;
	_cleanup_free_ uint8_t *payload = NULL, *frame = NULL;
	uint8_t head[TTRPC_HEADER_SIZE];
	TtrpcHeader h = {.stream_id = 1, .type = TTRPC_REQUEST};
	struct timespec now;
	size_t n;
	int fd;

	if (!address || !*address)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	ts.seconds = now.tv_sec;
	ts.nanos = (int32_t)now.tv_nsec;
	any.type_url = (char *)type_url;
	any.value.data = (uint8_t *)event;
	any.value.len = len;
	env.timestamp = &ts;
	env.namespace_ = (char *)ns;
	env.topic = (char *)topic;
	env.event = &any;
	fwd.envelope = &env;
	n = berthshim__forward_request__get_packed_size(&fwd);
	payload = malloc(n ? n : 1);
	if (!payload)
		return;
	berthshim__forward_request__pack(&fwd, payload);
	req.service = "containerd.services.events.ttrpc.v1.Events";
	req.method = "Forward";
	req.payload.data = payload;
	req.payload.len = n;
	h.length = (uint32_t)berthshim__request__get_packed_size(&req);
	frame = malloc(h.length ? h.length : 1);
	if (!frame)
		return;
	berthshim__request__pack(&req, frame);
	ttrpc_header_encode(&h, head);
	fd = connect_unix(address);
	if (fd < 0) {
		log_warning("cannot publish %s to %s: %s", topic, address, strerror(-fd));
		return;
	}
	if (loop_write(fd, head, sizeof(head)) < 0 || loop_write(fd, frame, h.length) < 0)
		log_warning("cannot publish %s: %m", topic);
	else {
		/* The reply says nothing we act on; read its header so the call completes. */
		uint8_t reply[TTRPC_HEADER_SIZE];

		(void)!read(fd, reply, sizeof(reply));
	}
	close(fd);
}
