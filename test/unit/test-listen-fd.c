/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The listening socket berth-init hands a daemon (listen-fd.h): taken only when
 * BERTH_LISTEN_FD=3 names a listening unix stream socket on fd 3, made non-blocking and
 * close-on-exec, and the variable is gone afterwards whatever it named.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "listen-fd.h"
#include "tests.h"

static char dir[] = "/tmp/test-listen-fd.XXXXXX";

/* Put a socket on fd 3: listening, or only bound. */
static void socket_on_3(bool listening)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT_TRUE(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s%d", dir, listening);
	(void)unlink(sa.sun_path);
	ASSERT_OK(bind(fd, (struct sockaddr *)&sa, sizeof(sa)));
	if (listening)
		ASSERT_OK(listen(fd, 4));
	if (fd != LISTEN_FD) {
		ASSERT_EQ(dup2(fd, LISTEN_FD), LISTEN_FD);
		close(fd);
	}
}

TEST(a_listening_unix_socket_on_3_is_taken)
{
	socket_on_3(true);
	ASSERT_OK(setenv(LISTEN_FD_ENV, "3", 1));
	ASSERT_EQ(listen_fd_take(), LISTEN_FD);
	ASSERT_TRUE(getenv(LISTEN_FD_ENV) == NULL);
	ASSERT_TRUE(fcntl(LISTEN_FD, F_GETFL) & O_NONBLOCK);
	ASSERT_TRUE(fcntl(LISTEN_FD, F_GETFD) & FD_CLOEXEC);
	close(LISTEN_FD);
}

TEST(nothing_named_is_nothing_taken)
{
	(void)unsetenv(LISTEN_FD_ENV);
	ASSERT_ERROR(listen_fd_take(), ENOENT);
}

TEST(a_socket_that_does_not_listen_is_refused)
{
	socket_on_3(false);
	ASSERT_OK(setenv(LISTEN_FD_ENV, "3", 1));
	ASSERT_ERROR(listen_fd_take(), EBADF);
	ASSERT_TRUE(getenv(LISTEN_FD_ENV) == NULL);
	close(LISTEN_FD);
}

TEST(a_file_on_3_is_refused)
{
	ASSERT_EQ(dup2(STDIN_FILENO, LISTEN_FD), LISTEN_FD);
	ASSERT_OK(setenv(LISTEN_FD_ENV, "3", 1));
	ASSERT_ERROR(listen_fd_take(), EBADF);
	close(LISTEN_FD);
}

TEST(another_descriptor_is_refused)
{
	socket_on_3(true);
	ASSERT_OK(setenv(LISTEN_FD_ENV, "4", 1));
	ASSERT_ERROR(listen_fd_take(), EBADF);
	ASSERT_TRUE(getenv(LISTEN_FD_ENV) == NULL);
	close(LISTEN_FD);
}

int main(void)
{
	char path[sizeof(dir) + 8];
	int r;

	if (!mkdtemp(dir))
		return 1;
	r = tests_run();
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/s%d", dir, i);
		(void)unlink(path);
	}
	(void)rmdir(dir);
	return r;
}
