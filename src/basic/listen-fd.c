/* SPDX-License-Identifier: Apache-2.0 */
/* The listening socket berth-init hands a daemon (listen-fd.h). */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "listen-fd.h"
#include "macros.h"

int listen_fd_is_listening_unix(int fd)
{
	int accepting = 0, domain = 0, type = 0;
	socklen_t len = sizeof(int);

	return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0 && accepting &&
	       getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX &&
	       getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
}

int listen_fd_take(void)
{
	const char *v = getenv(LISTEN_FD_ENV);
	bool ok = v && streq(v, "3") && listen_fd_is_listening_unix(LISTEN_FD);

	if (!v)
		return -ENOENT;
	(void)unsetenv(LISTEN_FD_ENV);
	if (!ok)
		return -EBADF;
	if (fcntl(LISTEN_FD, F_SETFD, FD_CLOEXEC) < 0 ||
	    fcntl(LISTEN_FD, F_SETFL, fcntl(LISTEN_FD, F_GETFL) | O_NONBLOCK) < 0)
		return -errno;
	return LISTEN_FD;
}
