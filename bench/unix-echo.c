/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The baseline of bench/context-bus.py: a unix-socket echo of one client, blocking, in C,
 * so that the bus's publish → deliver is compared with the same two socket hops and one
 * process wake-up and nothing else. Usage: unix-echo PATH (prints "ready" once listening).
 */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	static char buf[1 << 20];
	int fd, c;

	if (argc != 2 || strlen(argv[1]) >= sizeof(sa.sun_path))
		return 2;
	strcpy(sa.sun_path, argv[1]);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0)
		return 1;
	printf("ready\n");
	fflush(stdout);
	c = accept(fd, NULL, NULL);
	for (;;) {
		ssize_t n = read(c, buf, sizeof(buf)), off = 0;

		if (n <= 0)
			return 0;
		while (off < n) {
			ssize_t w = write(c, buf + off, n - off);

			if (w <= 0)
				return 1;
			off += w;
		}
	}
}
