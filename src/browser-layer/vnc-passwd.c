/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vnc-passwd FILE: read a VNC password on standard input and write FILE in the format of
 * x11vnc's -rfbauth (libvncserver's own encoder), mode 0400. berth-init runs it in the
 * guest with the session's password, which must never be an argument: any process in the
 * VM can read another's command line.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rfb/rfb.h>

/* VNC authentication uses the first 8 bytes; a longer password would be cut silently. */
#define VNC_PASSWORD_MAX 8

int main(int argc, char **argv)
{
	char buf[VNC_PASSWORD_MAX + 2] = {0};
	size_t n = 0;
	ssize_t k;

	if (argc != 2) {
		fprintf(stderr, "usage: vnc-passwd FILE  (the password on standard input)\n");
		return 2;
	}
	while (n < sizeof(buf) - 1 && (k = read(STDIN_FILENO, buf + n, sizeof(buf) - 1 - n)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			perror("vnc-passwd: reading standard input");
			return 1;
		}
		n += (size_t)k;
	}
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	if (n == 0 || n > VNC_PASSWORD_MAX || memchr(buf, '\0', n)) {
		fprintf(stderr, "vnc-passwd: the password must be 1 to %d bytes\n",
			VNC_PASSWORD_MAX);
		return 1;
	}
	umask(0377);
	(void)unlink(argv[1]);
	if (rfbEncryptAndStorePasswd(buf, argv[1]) != 0) {
		fprintf(stderr, "vnc-passwd: cannot write %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	explicit_bzero(buf, sizeof(buf));
	return 0;
}
