/* SPDX-License-Identifier: Apache-2.0 */
/*
 * github-api-broker: the GitHub app's only way to api.github.com (SPEC 6.2, docs/github.md).
 *
 * A CONNECT proxy on 127.0.0.1:8092 that takes api.github.com:443 only, answers the TLS
 * itself with a per-boot CA the app was told to trust, and maps each request inside to the
 * capability github:<action>:<scope> it asks for: one that a declared github: capability
 * covers goes to GitHub, with the broker's own token, through the host dialer (the dial
 * socket berth-init bridges to berth-vmm, as the egress broker's); anything else is denied
 * by default with a JSON message, and every decision is one JSON log line.
 *
 * The app never holds the token: GITHUB_TOKEN comes to this process alone (the secrets
 * disk's daemon scope), and goes only into requests that were allowed.
 *
 * It runs under agent-init as uid 9003: bind TCP 8092, connect to no TCP port, write only
 * its certificate directory and /tmp/berth-github. Each connection is served by a child
 * process of its own (session.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "evloop.h"
#include "fileio.h"
#include "macros.h"
#include "parse-util.h"
#include "routes.h"
#include "session.h"
#include "tls.h"

#define POLICY_DEFAULT "/run/berth/github/policy.json"
#define DIAL_SOCKET_DEFAULT "/run/berth/github/dial.sock"
#define PORT_DEFAULT 8092
#define CONNS_MAX_DEFAULT 32
#define CONNS_MAX_LIMIT 256
#define HEAD_TIMEOUT_MS_DEFAULT 10000
#define IDLE_TIMEOUT_MS_DEFAULT (300 * 1000)

typedef struct Broker {
	EvLoop *loop;
	BrokerConfig cfg;
	int listen_fd;
	pid_t *children;
	unsigned n_children, max_conns;
} Broker;

static unsigned env_uint(const char *name, unsigned def, unsigned min, unsigned max)
{
	const char *v = getenv(name);
	unsigned n;

	if (!v || !*v)
		return def;
	if (parse_uint_range(v, min, max, &n) < 0) {
		broker_log("WARNING: ignoring %s=%s (expected %u to %u)", name, v, min, max);
		return def;
	}
	return n;
}

/*
 * The token, copied out of the environment, whose copy is then wiped: /proc/<pid>/environ
 * shows the bytes the process started with, and after this they are zeros. Returns 0 (and
 * NULL when no token was given), or -EINVAL for a value that cannot be a header's.
 */
static int take_token(char **ret)
{
	char *v = getenv("GITHUB_TOKEN");
	size_t n = v ? strlen(v) : 0;

	*ret = NULL;
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] <= 0x20 || (unsigned char)v[i] >= 0x7f) {
			n = BROKER_TOKEN_MAX + 1;
			break;
		}
	if (n > BROKER_TOKEN_MAX) {
		explicit_bzero(v, strlen(v));
		return -EINVAL;
	}
	*ret = strdup(v);
	explicit_bzero(v, n);
	(void)unsetenv("GITHUB_TOKEN");
	return *ret ? 0 : -ENOMEM;
}

static CapabilityPolicy *load_policy(const char *path)
{
	_cleanup_free_ char *text = NULL, *err = NULL;
	CapabilityPolicy *p = NULL;
	size_t size;
	int r = read_full_file(path, POLICY_FILE_SIZE_MAX, &text, &size);

	/* The one reader (src/capability): what agent-init enforces is what is read here. */
	if (r >= 0)
		r = capability_policy_decode(text, size, &p, &err);
	if (r < 0) {
		broker_log("WARNING: cannot read the policy %s (%s): every request will be denied",
			   path, err ?: strerror(-r));
		return NULL;
	}
	broker_log("policy %s: %zu github: capabilit%s", path, github_policy_count(p),
		   github_policy_count(p) == 1 ? "y" : "ies");
	return p;
}

static int write_file_at(int dir, const char *name, const char *data, size_t len)
{
	_cleanup_close_ int fd = -EBADF;

	if (unlinkat(dir, name, 0) < 0 && errno != ENOENT)
		return -errno;
	fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (fchmod(fd, 0644) < 0)
		return -errno;
	return loop_write(fd, data, len);
}

/*
 * The CA certificate for the app: ca.crt (what NODE_EXTRA_CA_CERTS adds to Node's roots),
 * and ca-bundle.crt, the system's roots followed by it (what SSL_CERT_FILE replaces
 * OpenSSL's roots with, for Python: other hosts must still verify). The directory is made
 * 0700 again first; berth-init narrows it for the app once the broker listens.
 */
static int write_ca(const char *dir, const TlsCa *ca)
{
	_cleanup_free_ char *pem = tls_cert_pem(ca->ca), *roots = NULL, *bundle = NULL;
	_cleanup_close_ int dfd = -EBADF;
	size_t roots_len = 0;
	struct stat st;
	int r;

	if (!pem)
		return -ENOMEM;
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (fstat(dfd, &st) < 0 || st.st_uid != geteuid())
		return -EPERM;
	if (fchmod(dfd, 0700) < 0)
		return -errno;
	r = read_full_file(TLS_SYSTEM_ROOTS, TLS_BUNDLE_MAX, &roots, &roots_len);
	if (r < 0)
		broker_log("WARNING: cannot read %s (%s): ca-bundle.crt holds the broker's CA alone",
			   TLS_SYSTEM_ROOTS, strerror(-r));
	if (asprintf(&bundle, "%s%s%s", roots ?: "",
		     roots_len && roots[roots_len - 1] != '\n' ? "\n" : "", pem) < 0)
		return -ENOMEM;
	r = write_file_at(dfd, "ca.crt", pem, strlen(pem));
	if (r >= 0)
		r = write_file_at(dfd, "ca-bundle.crt", bundle, strlen(bundle));
	return r;
}

static int listen_tcp(unsigned port, unsigned *ret_port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 128) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	*ret_port = ntohs(sa.sin_port);
	return fd;
}

static _noreturn_ void run_child(Broker *b, int cfd)
{
	sigset_t none;

	/* The loop's signals are blocked (signalfd); this process has no loop. */
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);
	(void)signal(SIGTERM, SIG_DFL);
	close(b->listen_fd);
	/* Blocking I/O, each wait bounded by a socket timeout; and no Nagle delay: the TLS
	 * handshake's small records would otherwise wait on the app's delayed ACKs. */
	(void)fcntl(cfd, F_SETFL, 0);
	(void)setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	session_run(&b->cfg, cfd);
	_exit(0);
}

static int on_accept(EvSource *s, int fd, uint32_t revents, void *userdata)
{
	Broker *b = userdata;
	int cfd = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	pid_t pid;

	if (cfd < 0)
		return 0;
	if (b->n_children >= b->max_conns) {
		static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n\r\n";

		broker_log_json(json_pack("{s:s, s:i}", "event", "too_many_connections", "max",
					  (int)b->max_conns));
		(void)send(cfd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
		close(cfd);
		return 0;
	}
	pid = fork();
	if (pid == 0)
		run_child(b, cfd);
	close(cfd);
	if (pid < 0) {
		broker_log("WARNING: cannot fork for a connection: %s", strerror(errno));
		return 0;
	}
	b->children[b->n_children++] = pid;
	return 0;
}

static int on_sigchld(EvSource *s, const struct signalfd_siginfo *si, void *userdata)
{
	Broker *b = userdata;
	pid_t pid;

	while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
		for (unsigned i = 0; i < b->n_children; i++)
			if (b->children[i] == pid) {
				b->children[i] = b->children[--b->n_children];
				break;
			}
	return 0;
}

static int on_stop(EvSource *s, const struct signalfd_siginfo *si, void *userdata)
{
	Broker *b = userdata;

	for (unsigned i = 0; i < b->n_children; i++)
		(void)kill(b->children[i], SIGTERM);
	ev_exit(b->loop, 0);
	return 0;
}

/* Everything the children share, made before the first connection. */
static int setup(Broker *b, const char *cert_dir, char **ret_token,
		 CapabilityPolicy **ret_policy)
{
	_cleanup_(tls_ca_done) TlsCa ca = {};
	const char *test_roots = getenv("BERTH_GITHUB_UPSTREAM_CA");
	char why[256];
	int r;

	r = take_token(ret_token);
	if (r == -EINVAL) {
		broker_log("FATAL: GITHUB_TOKEN holds a space or control character, or is longer than %d bytes: it cannot go in an Authorization header; pass the token itself",
			   BROKER_TOKEN_MAX);
		return r;
	}
	if (r < 0)
		return r;
	broker_log("%s", *ret_token ? "GITHUB_TOKEN received: the broker adds it to allowed requests"
				    : "no GITHUB_TOKEN: requests go to GitHub without credentials");
	*ret_policy = load_policy(getenv("BERTH_GITHUB_POLICY") ?: POLICY_DEFAULT);
	if (tls_ca_make(GITHUB_API_HOST, &ca) < 0) {
		broker_log("FATAL: cannot make the per-boot CA");
		return -EIO;
	}
	r = write_ca(cert_dir, &ca);
	if (r < 0) {
		broker_log("FATAL: cannot write the CA certificate into %s: %s (it must be a directory of this user's)",
			   cert_dir, strerror(-r));
		return r;
	}
	broker_log("generated a CA for %s: %s/ca.crt", GITHUB_API_HOST, cert_dir);
	b->cfg.server = tls_server_ctx(&ca);
	if (test_roots && *test_roots)
		broker_log("WARNING: BERTH_GITHUB_UPSTREAM_CA is set: %s is verified against the certificates it holds, not the system's (tests only)",
			   GITHUB_API_HOST);
	b->cfg.client = tls_client_ctx(test_roots && *test_roots ? test_roots : NULL,
				       TLS_SYSTEM_ROOTS, why, sizeof(why));
	if (!b->cfg.server || !b->cfg.client) {
		broker_log("FATAL: cannot set up TLS: %s", b->cfg.client ? "the server side" : why);
		return -EIO;
	}
	return 0;
}

int main(int argc, char *argv[])
{
	_cleanup_(ev_loop_freep) EvLoop *loop = NULL;
	_cleanup_(capability_policy_freep) CapabilityPolicy *policy = NULL;
	_cleanup_free_ char *token = NULL;
	const char *cert_dir = getenv("BERTH_GITHUB_API_BROKER_CERT_DIR") ?: CAPABILITY_GITHUB_BROKER_DIR;
	Broker b = {.listen_fd = -EBADF};
	unsigned port = 0, want_port;
	int r;

	if (argc > 1) {
		dprintf(STDERR_FILENO,
			"usage: %s (configured by BERTH_GITHUB_POLICY, BERTH_GITHUB_DIALER_SOCKET, BERTH_GITHUB_API_BROKER_PORT, BERTH_GITHUB_API_BROKER_CERT_DIR, GITHUB_TOKEN; see docs/github.md)\n",
			argv[0]);
		return 2;
	}
	(void)signal(SIGPIPE, SIG_IGN);
	if (!OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, NULL)) {
		broker_log("FATAL: cannot initialise OpenSSL");
		return 1;
	}
	b.cfg.dial_path = getenv("BERTH_GITHUB_DIALER_SOCKET") ?: DIAL_SOCKET_DEFAULT;
	if (strlen(b.cfg.dial_path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		broker_log("FATAL: BERTH_GITHUB_DIALER_SOCKET is longer than a unix socket path may be");
		return 1;
	}
	b.max_conns = env_uint("BERTH_GITHUB_MAX_CONNS", CONNS_MAX_DEFAULT, 1, CONNS_MAX_LIMIT);
	b.cfg.head_timeout_ms =
		env_uint("BERTH_GITHUB_HEAD_TIMEOUT_MS", HEAD_TIMEOUT_MS_DEFAULT, 100, 600000);
	b.cfg.idle_timeout_ms =
		env_uint("BERTH_GITHUB_IDLE_TIMEOUT_MS", IDLE_TIMEOUT_MS_DEFAULT, 100, 86400000);
	b.children = calloc(b.max_conns, sizeof(pid_t));
	if (!b.children)
		return 1;
	r = setup(&b, cert_dir, &token, &policy);
	if (r < 0)
		return 1;
	b.cfg.token = token;
	b.cfg.policy = policy;

	r = ev_loop_new(&loop);
	if (r < 0) {
		broker_log("FATAL: cannot create the event loop: %s", strerror(-r));
		return 1;
	}
	b.loop = loop;
	want_port = env_uint("BERTH_GITHUB_API_BROKER_PORT", PORT_DEFAULT, 0, 65535);
	b.listen_fd = listen_tcp(want_port, &port);
	if (b.listen_fd < 0) {
		broker_log("FATAL: cannot listen on 127.0.0.1:%u: %s", want_port,
			   strerror(-b.listen_fd));
		return 1;
	}
	if (ev_add_io(loop, NULL, b.listen_fd, EPOLLIN, on_accept, &b) < 0 ||
	    ev_add_signal(loop, NULL, SIGCHLD, on_sigchld, &b) < 0 ||
	    ev_add_signal(loop, NULL, SIGTERM, on_stop, &b) < 0 ||
	    ev_add_signal(loop, NULL, SIGINT, on_stop, &b) < 0) {
		broker_log("FATAL: cannot set up the event loop");
		return 1;
	}
	broker_log("listening on 127.0.0.1:%u", port);
	r = ev_loop(loop);
	safe_close(b.listen_fd);
	SSL_CTX_free(b.cfg.server);
	SSL_CTX_free(b.cfg.client);
	if (token)
		explicit_bzero(token, strlen(token));
	free(b.children);
	return r < 0 ? 1 : 0;
}
