/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "apps.h"
#include "container.h"
#include "fileio.h"
#include "journal.h"
#include "macros.h"

#define ACCEPT_TIMEOUT_MS (60 * 1000)

bool container_mode(void)
{
	static int cached = -1;

	if (cached < 0) {
		const char *e = getenv("BERTH_CONTAINER");

		cached = e && streq(e, "1");
	}
	return cached;
}

static bool env_is_1(const char *name)
{
	const char *e = getenv(name);

	return e && streq(e, "1");
}

bool container_standalone(void)
{
	return container_mode() && env_is_1("BERTH_STANDALONE");
}

bool container_check_exports(void)
{
	return container_standalone() && env_is_1("BERTH_CHECK_EXPORTS");
}

int container_channel_accept(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct pollfd pfd = {.events = POLLIN};
	struct stat dir;
	int lfd, fd, r;

	if (stat(CONTAINER_HOST_DIR, &dir) < 0) {
		journal_logf("no %s: the container was started without its run dir",
			     CONTAINER_HOST_DIR);
		return -errno;
	}
	if (container_uid_is_berths(dir.st_uid)) {
		journal_logf("%s is owned by uid %u, which is an app's or a daemon's in the "
			     "container; run berth-vmm as another user",
			     CONTAINER_HOST_DIR, (unsigned)dir.st_uid);
		return -EPERM;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", CONTAINER_CHANNEL_SOCKET);
	(void)unlink(sa.sun_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -errno;
	/* Only the run dir's owner, berth-vmm's user, may connect: never an app (their uids
	 * cannot reach the directory either). */
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chown(sa.sun_path, dir.st_uid, dir.st_gid) < 0 || chmod(sa.sun_path, 0600) < 0 ||
	    listen(lfd, 1) < 0) {
		r = -errno;
		journal_logf("cannot listen on %s: %s", sa.sun_path, strerror(-r));
		close(lfd);
		return r;
	}
	pfd.fd = lfd;
	do
		r = poll(&pfd, 1, ACCEPT_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		journal_logf("berth-vmm did not connect to %s within 60 s; its vmm.log in the run "
			     "dir says why",
			     sa.sun_path);
		close(lfd);
		return r < 0 ? -errno : -ETIMEDOUT;
	}
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	r = fd < 0 ? -errno : fd;
	/* One host only: the name goes, so nobody else connects later. */
	(void)unlink(sa.sun_path);
	close(lfd);
	return r;
}

bool container_uid_is_berths(uid_t uid)
{
	/* The daemons' 9001-9012 and the berth group's 9999, the apps' 10000 and up. */
	return uid >= 9000 && uid < APP_UID_BASE + APPS_MAX;
}

int container_check_confined(char *why, size_t whylen)
{
	/* CHOWN, DAC_OVERRIDE, FOWNER, KILL, SETGID, SETUID, SETPCAP. */
	const unsigned long long allowed =
		1ull << 0 | 1ull << 1 | 1ull << 3 | 1ull << 5 | 1ull << 6 | 1ull << 7 | 1ull << 8;
	_cleanup_free_ char *status = NULL;
	unsigned long long bounding = ~0ull;
	struct dirent *de;
	DIR *d = opendir("/sys/class/net");
	const char *p;

	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' || streq(de->d_name, "lo"))
			continue;
		snprintf(why, whylen,
			 "the container has a network device (%.32s): a Berth container runs "
			 "with --network=none, and the egress broker is its only way out; start it "
			 "as berth deploy prints",
			 de->d_name);
		closedir(d);
		return -EPERM;
	}
	if (d)
		closedir(d);
	if (read_full_file("/proc/self/status", 64 * 1024, &status, NULL) >= 0 &&
	    (p = strstr(status, "CapBnd:")))
		bounding = strtoull(p + 7, NULL, 16);
	if (bounding & ~allowed) {
		snprintf(
			why, whylen,
			"the container has more capabilities than berth-init needs (bounding set "
			"%llx): start it with --cap-drop=ALL and the seven of docs/runtimes.md, as "
			"berth deploy prints",
			bounding);
		return -EPERM;
	}
	return 0;
}

bool container_is_mount(const char *path)
{
	_cleanup_free_ char *parent = NULL;
	struct stat a, b;
	char *slash;

	parent = strdup(path);
	if (!parent)
		return false;
	slash = strrchr(parent, '/');
	if (!slash)
		return false;
	if (slash == parent)
		slash[1] = '\0';
	else
		*slash = '\0';
	return stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}
