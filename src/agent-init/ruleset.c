/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "landlock-abi.h"
#include "macros.h"
#include "missing-landlock.h"
#include "mkdir-beneath.h"
#include "ruleset.h"

/* The "write set" of ABI 3 (SPEC 4.4). Execute and IoctlDev are never handled. */
#define ACCESS_FS_WRITE_SET                                                                       \
	(LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |                          \
	 LANDLOCK_ACCESS_FS_REMOVE_FILE | LANDLOCK_ACCESS_FS_MAKE_CHAR |                          \
	 LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |                              \
	 LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO |                            \
	 LANDLOCK_ACCESS_FS_MAKE_BLOCK | LANDLOCK_ACCESS_FS_MAKE_SYM | LANDLOCK_ACCESS_FS_REFER | \
	 LANDLOCK_ACCESS_FS_TRUNCATE)
/* What Landlock accepts on a rule for a non-directory, within the sets handled here. */
#define ACCESS_FS_FILE_WRITE (LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE)
#define ACCESS_FS_READ (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define ACCESS_NET_TCP (LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP)
#define SCOPES (LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL)

static const char *const status_names[_RULESET_STATUS_MAX] = {
	[RULESET_NOT_ENFORCED] = "NotEnforced",
	[RULESET_PARTIALLY_ENFORCED] = "PartiallyEnforced",
	[RULESET_FULLY_ENFORCED] = "FullyEnforced",
};

const char *ruleset_status_to_string(RulesetStatus s)
{
	return s >= 0 && s < _RULESET_STATUS_MAX ? status_names[s] : NULL;
}

void ruleset_done(Ruleset *r)
{
	safe_close(r->fd);
	free(r->missing);
	policy_strings_done(&r->granted_write);
	*r = (Ruleset){.fd = -EBADF};
}

static _printf_(1, 2) void warn(const char *fmt, ...)
{
	va_list ap;

	fputs("[agent-init] WARNING: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* Fail with @error, and a message built from @fmt in *@reterr_message. */
static _printf_(3, 4) int failf(char **reterr_message, int error, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	if (vasprintf(reterr_message, fmt, ap) < 0)
		*reterr_message = NULL;
	va_end(ap);
	return error;
}

int ruleset_abi(void)
{
	int abi = landlock_abi_version();
#ifdef AGENT_INIT_TEST_HOOKS
	/* Test builds only: pretend the kernel is older, to exercise the refusal path. */
	const char *cap = getenv("BERTH_TEST_LANDLOCK_ABI");

	if (cap && cap[0] >= '0' && cap[0] <= '9' && !cap[1] && cap[0] - '0' < abi) {
		abi = cap[0] - '0';
		fprintf(stderr,
			"[agent-init] TEST BUILD: Landlock ABI capped at %d by BERTH_TEST_LANDLOCK_ABI\n",
			abi);
	}
#endif
	return abi;
}

/* Names of the rights in @mask, for the log. */
static void append_names(FILE *f, uint64_t fs, uint64_t net, bool *first)
{
	static const struct {
		uint64_t bit;
		bool net;
		const char *name;
	} names[] = {
		{LANDLOCK_ACCESS_FS_REFER, false, "Refer"},
		{LANDLOCK_ACCESS_FS_TRUNCATE, false, "Truncate"},
		{LANDLOCK_ACCESS_NET_BIND_TCP, true, "BindTcp"},
		{LANDLOCK_ACCESS_NET_CONNECT_TCP, true, "ConnectTcp"},
	};

	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if ((names[i].net ? net : fs) & names[i].bit) {
			fprintf(f, "%s%s", *first ? "" : ", ", names[i].name);
			*first = false;
		}
}

/* What the policy asks for, the ABI's share of it, and the honest status of the result. */
static int rights_for_abi(const CapabilityPolicy *p, Ruleset *r)
{
	uint64_t want_fs = ACCESS_FS_WRITE_SET, want_net = 0;
	struct landlock_ruleset_attr_v6 attr;
	_cleanup_free_ char *buf = NULL;
	size_t size = 0;
	bool first = true;
	FILE *f;

	if (p->read_paths.n > 0)
		want_fs |= ACCESS_FS_READ;
	if (!p->network_unrestricted)
		want_net = ACCESS_NET_TCP;
	attr = (struct landlock_ruleset_attr_v6){want_fs, want_net, SCOPES};
	/* The sandboxer.c pattern: start from what the policy needs, keep the ABI's share. */
	landlock_abi_restrict(&attr, r->abi);
	r->handled_fs = attr.handled_access_fs;
	r->handled_net = attr.handled_access_net;
	r->scoped = attr.scoped;
	if (r->abi <= 0) {
		r->status = RULESET_NOT_ENFORCED;
		return 0;
	}
	if (r->handled_fs == want_fs && r->handled_net == want_net) {
		r->status = RULESET_FULLY_ENFORCED;
		return 0;
	}
	/* A right the policy needs and this kernel cannot handle: not FullyEnforced. */
	r->status = RULESET_PARTIALLY_ENFORCED;
	f = open_memstream(&buf, &size);
	if (!f)
		return -ENOMEM;
	append_names(f, want_fs & ~r->handled_fs, want_net & ~r->handled_net, &first);
	if (fclose(f) != 0)
		return -ENOMEM;
	r->missing = TAKE_PTR(buf);
	return 0;
}

/* mkdir -p as root, never through a symlink; what it creates goes to the app. */
static void create_write_path(const char *path, const AppIdentity *id)
{
	char bad[256] = "";
	int fd = mkdir_beneath(path, 0755, id->set ? id->uid : (uid_t)-1,
			       id->set ? id->gid : (gid_t)-1, NULL, bad, sizeof(bad));

	if (fd < 0)
		warn("couldn't create \"%s\" ahead of granting write access (\"%s\": %s)", path,
		     bad, strerror(-fd));
	safe_close(fd);
}

static bool is_device_path(const char *path)
{
	return streq(path, "/dev/null") || streq(path, "/dev/pts") || streq(path, "/dev/ptmx");
}

/* O_PATH on a write path; symlinks followed only for the device paths (/dev/ptmx is one). */
static int open_write_path(const char *path)
{
	struct open_how how = {
		.flags = O_PATH | O_CLOEXEC,
		.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	int fd;

	if (is_device_path(path))
		return RET_NERRNO(open(path, O_PATH | O_CLOEXEC));
	fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));
	/* FIXME: drop when the baseline is >= 5.6 (openat2). */
	if (fd < 0 && errno == ENOSYS)
		fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int add_path_rule(int ruleset_fd, int fd, uint64_t access)
{
	struct landlock_path_beneath_attr attr = {.allowed_access = access, .parent_fd = fd};

	return RET_NERRNO(
		missing_landlock_add_rule(ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &attr, 0));
}

static int add_port_rule(int ruleset_fd, int port, uint64_t access)
{
	struct landlock_net_port_attr attr = {.allowed_access = access, .port = (uint64_t)port};

	return RET_NERRNO(missing_landlock_add_rule(ruleset_fd, LANDLOCK_RULE_NET_PORT, &attr, 0));
}

/* Directories get the whole handled set; anything else only what a file can carry. */
static uint64_t rights_for_fd(int fd, uint64_t dir_rights, uint64_t file_mask)
{
	struct stat st;

	if (fstat(fd, &st) < 0 || S_ISDIR(st.st_mode))
		return dir_rights;
	return dir_rights & file_mask;
}

static int add_write_rules(const CapabilityPolicy *p, const AppIdentity *id, Ruleset *r,
			   char **reterr_message)
{
	uint64_t write = r->handled_fs & ACCESS_FS_WRITE_SET;

	for (size_t i = 0; i < p->write_paths.n; i++) {
		const char *path = p->write_paths.v[i];
		_cleanup_close_ int fd = -EBADF;
		struct stat st;
		int k;

		if (!capability_write_path_allowed(path, strlen(path), p->app_name)) {
			warn("refusing to create or grant write access to \"%s\" — outside the allowed prefixes " CAPABILITY_FS_PREFIXES_TEXT
			     " (plus /run/berth/%s). Fix the filesystem:write capability in berth.yml.",
			     path, p->app_name);
			continue;
		}
		if (stat(path, &st) < 0 && errno == ENOENT)
			create_write_path(path, id);
		if (r->fd < 0) /* ABI 0: created, nothing to grant */
			continue;
		fd = open_write_path(path);
		if (fd < 0) {
			warn("couldn't open \"%s\" to grant write access (%s), skipping", path,
			     strerror(-fd));
			continue;
		}
		k = add_path_rule(r->fd, fd, rights_for_fd(fd, write, ACCESS_FS_FILE_WRITE));
		if (k < 0)
			return failf(reterr_message, k, "landlock_add_rule(\"%s\"): %s", path,
				     strerror(-k));
		k = policy_strings_add(&r->granted_write, path, strlen(path));
		if (k < 0)
			return k;
	}
	return 0;
}

/*
 * The read baseline is the root image's own, read-only (where /lib is a link into /usr):
 * opened as it resolves. Every other read path lies where an app may write (its
 * directories, the state disk) and is opened without following a link, as a write path
 * is: a link an app left there must not lend it reads on whatever the link points to.
 */
static int open_read_path(const char *path)
{
	for (size_t i = 0; i < ELEMENTSOF(capability_read_baseline); i++)
		if (streq(path, capability_read_baseline[i]))
			return RET_NERRNO(open(path, O_PATH | O_CLOEXEC));
	return open_write_path(path);
}

static int add_read_rules(const CapabilityPolicy *p, Ruleset *r, char **reterr_message)
{
	if (!(r->handled_fs & ACCESS_FS_READ))
		return 0;
	for (size_t i = 0; i < p->read_paths.n; i++) {
		const char *path = p->read_paths.v[i];
		_cleanup_close_ int fd = open_read_path(path);
		int k;

		if (fd == -ELOOP) {
			warn("\"%s\" is or passes through a symbolic link, so read access is NOT granted there: Berth grants reads on a path itself, never through a link. Declare the path the link points to.",
			     path);
			continue;
		}
		if (fd < 0) {
			warn("couldn't open \"%s\" to grant read access (%s) — reads there will be DENIED for the whole life of this process, since the ruleset is about to be sealed. Create the path before boot if the app needs it.",
			     path, strerror(-fd));
			continue;
		}
		k = add_path_rule(r->fd, fd,
				  rights_for_fd(fd, ACCESS_FS_READ, LANDLOCK_ACCESS_FS_READ_FILE));
		if (k < 0)
			return failf(reterr_message, k, "landlock_add_rule(\"%s\"): %s", path,
				     strerror(-k));
	}
	return 0;
}

static int add_net_rules(const CapabilityPolicy *p, Ruleset *r, char **reterr_message)
{
	const struct {
		const PolicyPorts *ports;
		uint64_t access;
	} lists[] = {
		{&p->network_ports, LANDLOCK_ACCESS_NET_CONNECT_TCP},
		{&p->bind_ports, LANDLOCK_ACCESS_NET_BIND_TCP},
	};

	if (!r->handled_net)
		return 0;
	for (size_t l = 0; l < ELEMENTSOF(lists); l++) {
		for (size_t i = 0; i < lists[l].ports->n; i++) {
			int port = lists[l].ports->v[i];
			int k = add_port_rule(r->fd, port, lists[l].access);

			if (k < 0)
				return failf(reterr_message, k, "landlock_add_rule(port %d): %s",
					     port, strerror(-k));
		}
	}
	return 0;
}

int ruleset_build(const CapabilityPolicy *policy, const AppIdentity *id, int abi, Ruleset *ret,
		  char **reterr_message)
{
	_cleanup_(ruleset_done) Ruleset r = {.fd = -EBADF, .abi = abi};
	int k;

	*reterr_message = NULL;
	k = rights_for_abi(policy, &r);
	if (k < 0)
		return k;
	if (abi > 0) {
		struct landlock_ruleset_attr_v6 attr = {
			.handled_access_fs = r.handled_fs,
			.handled_access_net = r.handled_net,
			.scoped = r.scoped,
		};

		r.fd = missing_landlock_create_ruleset(&attr, sizeof(attr), 0);
		if (r.fd < 0)
			return failf(reterr_message, -errno, "landlock_create_ruleset(): %s",
				     strerror(errno));
	}
	k = add_write_rules(policy, id, &r, reterr_message);
	if (k >= 0 && r.fd >= 0)
		k = add_read_rules(policy, &r, reterr_message);
	if (k >= 0 && r.fd >= 0)
		k = add_net_rules(policy, &r, reterr_message);
	if (k < 0)
		return k;
	*ret = r;
	r = (Ruleset){.fd = -EBADF};
	return 0;
}
