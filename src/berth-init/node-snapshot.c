/* SPDX-License-Identifier: Apache-2.0 */
/* The Node startup snapshot of a template boot (node-snapshot.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macros.h"
#include "node-snapshot.h"
#include "template-exec.h"

static pid_t builder = -1;
static bool made;

const char *node_snapshot_blob(void)
{
	return made ? NODE_SNAPSHOT_BLOB : NULL;
}

static _noreturn_ void exec_builder(void)
{
	char *const argv[] = {(char *)"node",
			      (char *)"--snapshot-blob",
			      (char *)NODE_SNAPSHOT_BLOB,
			      (char *)"--build-snapshot",
			      (char *)NODE_SNAPSHOT_ENTRY,
			      NULL};

	exec_template_program("/usr/bin/node", argv, -EBADF, -1, false);
}

int node_snapshot_start(char *why, size_t whylen)
{
	if (access(NODE_SNAPSHOT_ENTRY, R_OK) < 0) {
		snprintf(why, whylen, "%s: %m", NODE_SNAPSHOT_ENTRY);
		return -errno;
	}
	if (mount("tmpfs", NODE_SNAPSHOT_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		  "mode=0755,size=32m") < 0) {
		snprintf(why, whylen, "cannot mount a tmpfs on %s: %m", NODE_SNAPSHOT_DIR);
		return -errno;
	}
	builder = fork();
	if (builder < 0) {
		int r = -errno;

		snprintf(why, whylen, "fork: %m");
		(void)umount2(NODE_SNAPSHOT_DIR, MNT_DETACH);
		return r;
	}
	if (builder == 0)
		exec_builder();
	return 0;
}

int node_snapshot_wait(char *why, size_t whylen)
{
	_cleanup_close_ int pidfd = -EBADF;
	struct stat st;
	int status = 0, r;

	if (builder <= 0)
		return -ENOENT;
	/* A bounded wait: past it, or without a pidfd to wait on, the builder is killed. */
	pidfd = pidfd_open(builder, 0);
	r = pidfd < 0 ? -errno : wait_fd_readable(pidfd, NODE_SNAPSHOT_TIMEOUT_MSEC);
	if (r < 0)
		(void)kill(builder, SIGKILL);
	if (waitpid(builder, &status, 0) < 0)
		snprintf(why, whylen, "waitpid: %m");
	else if (r < 0)
		snprintf(why, whylen, "node did not make it in %d s (%s)",
			 NODE_SNAPSHOT_TIMEOUT_MSEC / 1000, strerror(-r));
	else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		snprintf(why, whylen, "node --build-snapshot failed (status %d)", status);
	else if (stat(NODE_SNAPSHOT_BLOB, &st) < 0 || st.st_size == 0)
		snprintf(why, whylen, "node made no %s", NODE_SNAPSHOT_BLOB);
	else if (chmod(NODE_SNAPSHOT_BLOB, 0644) < 0 ||
		 mount(NULL, NODE_SNAPSHOT_DIR, NULL,
		       MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		snprintf(why, whylen, "cannot make %s read-only: %m", NODE_SNAPSHOT_DIR);
	else
		made = true;
	builder = -1;
	if (!made)
		(void)umount2(NODE_SNAPSHOT_DIR, MNT_DETACH);
	return made ? 0 : -EIO;
}
