/* SPDX-License-Identifier: Apache-2.0 */
/* The kernel's static keys switched in the template or at the resume (kernel-keys.h). */
#include "kernel-keys.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine.h"
#include "journal.h"
#include "macros.h"
#include "missing-in6.h"

/* Each returns 0, or -1 with the failure logged. */
static int held_socket(int family, int type, const char *what, int *ret)
{
	*ret = socket(family, type | SOCK_CLOEXEC, 0);
	if (*ret >= 0)
		return 0;
	journal_logf("static key for %s not switched in the template: socket: %s", what,
		     strerror(errno));
	return -1;
}

static int set_option(int fd, int level, int name, const void *value, socklen_t len,
		      const char *what)
{
	if (fd < 0)
		return -1;
	if (setsockopt(fd, level, name, value, len) == 0)
		return 0;
	journal_logf("static key for %s not switched in the template: %s", what, strerror(errno));
	return -1;
}

int kernel_keys_hold(void)
{
	static const int one = 1;
	int tcp4 = -1, tcp6 = -1, udp6 = -1, encap = UDP_ENCAP_L2TPINUDP, r, failed = 0;
	struct tcp_md5sig md5 = {.tcpm_keylen = 1, .tcpm_key = {1}};
	struct sockaddr_in *peer = (struct sockaddr_in *)&md5.tcpm_addr;
	struct in6_flowlabel_request label = {
		.dst = IN6ADDR_LOOPBACK_INIT,
		.label = htonl(0x5eed),
		.action = IPV6_FL_ACTION_GET,
		.share = IPV6_FL_SHARE_EXCL,
		.flags = IPV6_FL_FLAG_CREATE | IPV6_FL_FLAG_EXCL,
	};

	/* Held until the VM stops, close-on-exec, in PID 1: these keys count their users
	 * and go off with the last. tcp6's are one-way: it is closed after. */
	failed |= held_socket(AF_INET, SOCK_STREAM, "TCP MD5 keys", &tcp4);
	failed |= held_socket(AF_INET6, SOCK_STREAM, "IPv6 hop counts", &tcp6);
	failed |= held_socket(AF_INET6, SOCK_DGRAM, "UDP encapsulation", &udp6);
	/* An inet socket's: a unix socket's timestamps need no network time stamps. */
	failed |=
		set_option(udp6, SOL_SOCKET, SO_TIMESTAMP, &one, sizeof(one), "socket timestamps");
	failed |= set_option(tcp4, IPPROTO_IP, IP_MINTTL, &one, sizeof(one), "IPv4 minimum TTLs");
	failed |= set_option(tcp6, IPPROTO_IPV6, IPV6_MINHOPCOUNT, &one, sizeof(one),
			     "IPv6 hop counts");
	peer->sin_family = AF_INET;
	peer->sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
	failed |= set_option(tcp4, IPPROTO_TCP, TCP_MD5SIG, &md5, sizeof(md5), "TCP MD5 keys");
	/* An IPv6 socket's encapsulation counts for UDP over IPv4 and IPv6 both. */
	failed |= set_option(udp6, IPPROTO_UDP, UDP_ENCAP, &encap, sizeof(encap),
			     "UDP encapsulation");
	failed |= set_option(udp6, IPPROTO_IPV6, IPV6_FLOWLABEL_MGR_OPT, &label, sizeof(label),
			     "exclusive IPv6 flow labels");
	r = confine_cgroup_hold_cpu_quota();
	if (r < 0) {
		journal_logf("static key for CPU quotas not switched in the template: %s",
			     strerror(-r));
		failed = -1;
	}
	if (tcp6 >= 0)
		close(tcp6);
	return failed ? -EIO : 0;
}

/* One listener on loopback (two UDP sockets sharing a port), connected to or sent to
 * once, so that the kernel's lookups hash with their secrets. 0, or -errno. */
static int draw_over_loopback(int family, int type)
{
	struct sockaddr_storage a = {};
	socklen_t len =
		family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	static const int one = 1;
	int fds[3] = {-1, -1, -1}, n = type == SOCK_DGRAM ? 2 : 1, r = 0;
	char byte = 0;

	a.ss_family = family;
	if (family == AF_INET)
		((struct sockaddr_in *)&a)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)&a)->sin6_addr = in6addr_loopback;
	for (int i = 0; i < n && r == 0; i++) {
		fds[i] = socket(family, type | SOCK_CLOEXEC, 0);
		if (fds[i] < 0 ||
		    setsockopt(fds[i], SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) < 0 ||
		    bind(fds[i], (struct sockaddr *)&a, len) < 0 ||
		    getsockname(fds[i], (struct sockaddr *)&a, &len) < 0)
			r = -errno;
	}
	if (r == 0 && type == SOCK_STREAM && listen(fds[0], 1) < 0)
		r = -errno;
	if (r == 0) {
		fds[2] = socket(family, type | SOCK_CLOEXEC, 0);
		if (fds[2] < 0 || connect(fds[2], (struct sockaddr *)&a, len) < 0 ||
		    (type == SOCK_DGRAM && send(fds[2], &byte, 1, 0) != 1))
			r = -errno;
	}
	for (size_t i = 0; i < ELEMENTSOF(fds); i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return r;
}

static const struct {
	int family, type;
	const char *what;
} draws[] = {
	{AF_INET, SOCK_STREAM, "TCP over IPv4"},
	{AF_INET6, SOCK_STREAM, "TCP over IPv6"},
	{AF_INET, SOCK_DGRAM, "UDP over IPv4"},
	{AF_INET6, SOCK_DGRAM, "UDP over IPv6"},
};

/* The child's exit status, should PID 1's reaping of orphans have taken it first. */
static struct {
	pid_t pid;
	int status;
	bool reaped;
} drawer;

bool kernel_keys_child_exited(pid_t pid, int status)
{
	if (pid <= 0 || pid != drawer.pid)
		return false;
	drawer.status = status;
	drawer.reaped = true;
	return true;
}

void kernel_keys_draw_once_start(void)
{
	/* A child of PID 1's, which must not touch the journal (its channel is PID 1's): its
	 * exit code says which draws failed. */
	pid_t pid = fork();

	if (pid == 0) {
		int failed = 0;

		for (size_t i = 0; i < ELEMENTSOF(draws); i++)
			if (draw_over_loopback(draws[i].family, draws[i].type) < 0)
				failed |= 1 << i;
		_exit(failed);
	}
	if (pid < 0)
		journal_logf("the kernel's once-drawn secrets were not drawn at the resume: "
			     "fork: %s",
			     strerror(errno));
	drawer.pid = pid;
}

void kernel_keys_draw_once_wait(void)
{
	pid_t pid = drawer.pid;
	int status;

	if (pid <= 0)
		return;
	if (drawer.reaped)
		status = drawer.status;
	else if (waitpid(pid, &status, 0) != pid)
		return;
	drawer.pid = 0;
	if (!WIFEXITED(status)) {
		journal_logf("the kernel's once-drawn secrets: the child drawing them died");
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(draws); i++)
		if (WEXITSTATUS(status) & (1 << i))
			journal_logf("the kernel's %s secrets were not drawn at the resume",
				     draws[i].what);
	journal_event("kernel_secrets_drawn", json_pack("{s:i}", "failed", WEXITSTATUS(status)));
}
