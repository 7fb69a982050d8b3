/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bundle-stamp.h"
#include "dev-bundle.h"
#include "digest.h"
#include "exec-util.h"
#include "fileio.h"
#include "line-reader.h"
#include "macros.h"
#include "paths.h"
#include "share.h"
#include "source-dir.h"
#include "time-util.h"

#define BUNDLER_OUTPUT_MAX (1024 * 1024)
#define BUNDLER_TIMEOUT_MS (5 * 60 * 1000)
#define BUNDLER_STOP_MS 2000 /* a kept bundler's time to end once it has no more requests */

/* @path is @dir or lies below it (both absolute and without symlinks). */
static bool path_is_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/*
 * node from an absolute $PATH entry, never one inside the app: a relative entry (".",
 * "node_modules/.bin") is looked up in the directory berth was started from, which is often
 * the app's own, and whatever an app ships must not run on the host.
 */
static bool node_outside_app(const char *path, void *userdata)
{
	const char *app_real = userdata;
	_cleanup_free_ char *real = realpath(path, NULL);

	return real && !(app_real && path_is_under(real, app_real));
}

static int find_node(const char *app_real, char **ret)
{
	return find_executable_in_path_if("node", node_outside_app, (void *)app_real, ret);
}

/* Berth's own bundler and the host's node (both outside the app), malloc()ed. */
static int find_tools(const char *app_dir, char **ret_node, char **ret_bundler, char *err,
		      size_t errlen)
{
	_cleanup_free_ char *found = NULL, *bundler = NULL, *node = NULL,
			    *app_real = realpath(app_dir, NULL);
	int r;

	if (berth_source_path("sdk/node/bundle.mjs", &found) < 0 ||
	    !(bundler = realpath(found, NULL))) {
		snprintf(err, errlen,
			 "cannot find the SDK's bundler: set BERTH_SOURCE_DIR to a Berth checkout");
		return -ENOENT;
	}
	if (app_real && path_is_under(bundler, app_real)) {
		snprintf(err, errlen,
			 "the bundler %s is inside the app's folder, and nothing of an app may run "
			 "on the host: set BERTH_SOURCE_DIR to a Berth checkout outside it",
			 bundler);
		return -EPERM;
	}
	r = find_node(app_real, &node);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		snprintf(
			err, errlen,
			"node is not installed; bundling an app needs Node.js (apt-get install nodejs)");
		return -ENOENT;
	}
	*ret_node = TAKE_PTR(node);
	*ret_bundler = TAKE_PTR(bundler);
	return 0;
}

/* The bundler's verdict @line (its last line of output): 0 when it says ok and the bundler
 * ended well (@ended_ok), else -EIO with its message in @err. */
static int take_verdict(const char *line, bool ended_ok, char *err, size_t errlen)
{
	_cleanup_(json_decrefp) json_t *verdict = json_loads(line, 0, NULL);
	const char *msg;

	if (ended_ok && json_is_true(json_object_get(verdict, "ok")))
		return 0;
	msg = json_string_value(json_object_get(verdict, "error"));
	snprintf(
		err, errlen, "%s",
		msg ? msg
		    : "the bundler failed (run it by hand: node sdk/node/bundle.mjs APP_DIR OUT_DIR)");
	return -EIO;
}

/* Run the bundler; its last line of output is a JSON verdict. Only Berth's own bundler and
 * the host's node run here: the bundler takes its tools from Berth's checkout alone. */
static int run_bundler(const char *node, const char *bundler, const char *app_dir,
		       const char *out_dir, char *err, size_t errlen)
{
	_cleanup_free_ char *out = NULL;
	char *last;
	int status, r;

	{
		char *argv[] = {(char *)node, (char *)bundler, (char *)app_dir, (char *)out_dir,
				NULL};

		r = run_capture(argv, BUNDLER_TIMEOUT_MS, BUNDLER_OUTPUT_MAX, &out, &status);
	}
	if (r < 0) {
		snprintf(err, errlen, "the bundler did not finish: %s", strerror(-r));
		return r;
	}
	while (*out && out[strlen(out) - 1] == '\n')
		out[strlen(out) - 1] = '\0';
	last = strrchr(out, '\n');
	return take_verdict(last ? last + 1 : out, WIFEXITED(status) && WEXITSTATUS(status) == 0,
			    err, errlen);
}

/*
 * berth dev's bundler, kept running between its builds (bundle_keep_bundler()): the
 * bundler's --serve form, one request line in and one verdict line out, which spares each
 * build Node's start, the bundler's own loading and, with esbuild's context kept, parsing
 * what did not change.
 */
static struct {
	bool wanted;
	int pidfd; /* -EBADF: none running */
	int fd;	   /* its stdin and stdout */
	LineReader lines;
	char *node, *bundler;
} kept = {.pidfd = -EBADF, .fd = -EBADF};

void bundle_keep_bundler(void)
{
	kept.wanted = true;
}

/* Forget the kept bundler, killed and reaped; returns its wait status. */
static int kept_stop(void)
{
	int status = kept.pidfd >= 0 ? pidfd_kill_and_reap(kept.pidfd) : 0;

	kept.pidfd = safe_close(kept.pidfd);
	kept.fd = safe_close(kept.fd);
	line_reader_done(&kept.lines);
	free(kept.node);
	free(kept.bundler);
	kept.node = kept.bundler = NULL;
	return status;
}

void bundle_stop_bundler(void)
{
	struct pollfd p = {.fd = kept.pidfd, .events = POLLIN};

	if (kept.pidfd < 0)
		return;
	/* The end of its requests is its end; then it has a moment to close esbuild's. */
	kept.fd = safe_close(kept.fd);
	while (poll(&p, 1, BUNDLER_STOP_MS) < 0 && errno == EINTR)
		;
	(void)kept_stop();
}

static int kept_start(const char *node, const char *bundler)
{
	char *argv[] = {(char *)node, (char *)bundler, "--serve", NULL};
	int r;

	kept.node = strdup(node);
	kept.bundler = strdup(bundler);
	if (!kept.node || !kept.bundler) {
		(void)kept_stop();
		return -ENOMEM;
	}
	r = spawn_socket(argv, &kept.pidfd, &kept.fd);
	if (r < 0) {
		(void)kept_stop();
		return r;
	}
	line_reader_init(&kept.lines, kept.fd, BUNDLER_OUTPUT_MAX);
	return 0;
}

/* Between requests the kept bundler says nothing: output now, or its end, means it cannot
 * be asked (whatever it said would be taken for the next answer). */
static bool kept_idle(void)
{
	struct pollfd p = {.fd = kept.fd, .events = POLLIN};

	return kept.lines.start == kept.lines.end && poll(&p, 1, 0) == 0;
}

/* Send one request and read its one line of answer by @deadline: 1 and the line (valid
 * until the next read), 0 when the bundler ended first, -ETIME, or -errno. */
static int kept_ask(const char *request, int64_t deadline, char **ret_line)
{
	size_t sent = 0, want = strlen(request);
	int64_t left;

	while (sent < want) {
		ssize_t n = send(kept.fd, request + sent, want - sent, MSG_NOSIGNAL);

		if (n < 0 && errno != EINTR)
			return errno == EPIPE || errno == ECONNRESET ? 0 : -errno;
		sent += n > 0 ? (size_t)n : 0;
	}
	left = deadline - now_ms();
	if (left <= 0)
		return -ETIME;
	return line_reader_next(&kept.lines, (int)MIN(left, (int64_t)INT32_MAX), ret_line, NULL);
}

/*
 * The kept bundler's build of @app_dir into @out_dir. One that is gone before the request
 * is started again; one that ends by itself without an answer (its own code changed on
 * the disk) leaves this build to the one-shot way. One killed meanwhile (Ctrl-C reaches
 * it too) fails the build, as a one-shot bundler's death would.
 */
static int run_kept_bundler(const char *node, const char *bundler, const char *app_dir,
			    const char *out_dir, char *err, size_t errlen)
{
	_cleanup_(json_decrefp) json_t *req =
		json_pack("{s:s, s:s}", "app", app_dir, "out", out_dir);
	_cleanup_free_ char *text = req ? json_dumps(req, JSON_COMPACT) : NULL, *request = NULL;
	char *line = NULL;
	int status, r;

	if (!text || asprintf(&request, "%s\n", text) < 0)
		return -ENOMEM;
	if (kept.pidfd >= 0 &&
	    (!streq(kept.node, node) || !streq(kept.bundler, bundler) || !kept_idle()))
		(void)kept_stop();
	if (kept.pidfd < 0 && kept_start(node, bundler) < 0)
		return run_bundler(node, bundler, app_dir, out_dir, err, errlen);
	r = kept_ask(request, now_ms() + BUNDLER_TIMEOUT_MS, &line);
	if (r > 0)
		return take_verdict(line, true, err, errlen);
	status = kept_stop();
	if (r == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return run_bundler(node, bundler, app_dir, out_dir, err, errlen);
	if (r == 0)
		r = -ECONNRESET;
	snprintf(err, errlen, "the bundler did not finish: %s", strerror(-r));
	return r;
}

/*
 * The stamp of everything the bundler reads: the app's folder, Berth's SDK, its
 * package.json and node_modules (the SDK's own dependencies, esbuild among them), the
 * bundler, node itself, and the environment it looks at. 0 and the stamp, or -errno when
 * it cannot be taken (the bundler then runs).
 */
static int stamp_inputs(const char *app_dir, const char *node, const char *bundler,
			char ret[SHA256_HEX_LEN + 1], bool *ret_racy)
{
	_cleanup_free_ char *sdk = NULL, *root = NULL, *pkg = NULL, *mods = NULL,
			    *node_real = realpath(node, NULL);
	static const char *const env[] = {"SOURCE_DATE_EPOCH", "NODE_OPTIONS", "NODE_PATH", NULL};

	/* bundler is <root>/sdk/node/bundle.mjs, already resolved. */
	sdk = strdup(bundler);
	if (!sdk || !node_real)
		return -ENOMEM;
	for (int i = 0; i < 2; i++) {
		char *slash = strrchr(sdk, '/');

		if (!slash || slash == sdk)
			return -EINVAL;
		*slash = '\0';
	}
	root = strdup(sdk);
	if (!root || !strrchr(root, '/'))
		return -ENOMEM;
	*strrchr(root, '/') = '\0';
	if (asprintf(&pkg, "%s/package.json", root) < 0 ||
	    asprintf(&mods, "%s/node_modules", root) < 0)
		return -ENOMEM;
	const char *paths[] = {app_dir, sdk, pkg, mods, node_real, NULL};

	return bundle_stamp(paths, env, ret, ret_racy);
}

/* The bundle an earlier run made from inputs with this stamp, if it is still there. */
static int stamp_lookup(const char *base, const char *name, const char *stamp, char **ret_dir,
			char ret_digest[65])
{
	_cleanup_free_ char *path = NULL, *text = NULL, *dir = NULL;
	size_t len;

	if (asprintf(&path, "%s/inputs/%s", base, stamp) < 0)
		return -ENOMEM;
	if (read_full_file(path, 128, &text, &len) < 0 || len < SHA256_HEX_LEN)
		return -ENOENT;
	text[SHA256_HEX_LEN] = '\0';
	if (!sha256_hex_valid(text) || asprintf(&dir, "%s/%.16s/%s", base, text, name) < 0 ||
	    access(dir, F_OK) < 0)
		return -ENOENT;
	memcpy(ret_digest, text, SHA256_HEX_LEN + 1);
	*ret_dir = TAKE_PTR(dir);
	return 0;
}

static void stamp_record(const char *base, const char *stamp, const char *digest)
{
	_cleanup_free_ char *dir = NULL, *path = NULL;

	if (asprintf(&dir, "%s/inputs", base) < 0 || asprintf(&path, "%s/%s", dir, stamp) < 0)
		return;
	/* Only a speed-up: a failure here costs the next start a bundler run. */
	if (mkdir_p(dir, 0700) >= 0)
		(void)write_file_atomic(path, digest, strlen(digest), 0600);
}

void bundle_start_bundler(const char *app_dir)
{
	_cleanup_free_ char *node = NULL, *bundler = NULL;
	char err[256];

	if (kept.wanted && kept.pidfd < 0 &&
	    find_tools(app_dir, &node, &bundler, err, sizeof(err)) >= 0)
		(void)kept_start(node, bundler);
}

int bundle_app(const char *app_dir, const char *name, Bundle *ret, char *err, size_t errlen)
{
	_cleanup_free_ char *vm_dir = berth_vm_dir(), *base = NULL, *work = NULL, *tmp_share = NULL,
			    *final_parent = NULL, *final = NULL, *node = NULL, *bundler = NULL;
	char path_hash[65], stamp[SHA256_HEX_LEN + 1];
	ShareDigest d;
	long long t0 = now_ms();
	bool stamped, racy = true;
	int r;

	*ret = (Bundle){};
	if (!vm_dir)
		return -ENOMEM;
	(void)sha256_buffer_hex(app_dir, strlen(app_dir), path_hash);
	if (asprintf(&base, "%s/apps/%s-%.16s", vm_dir, name, path_hash) < 0 ||
	    asprintf(&work, "%s/tmp.%d", base, (int)getpid()) < 0 ||
	    asprintf(&tmp_share, "%s/%s", work, name) < 0)
		return -ENOMEM;
	r = find_tools(app_dir, &node, &bundler, err, errlen);
	if (r < 0)
		return r;
	stamped = stamp_inputs(app_dir, node, bundler, stamp, &racy) >= 0;
	if (stamped && stamp_lookup(base, name, stamp, &ret->dir, ret->digest) >= 0) {
		ret->cached = ret->reused = true;
		ret->ms = now_ms() - t0;
		return 0;
	}
	(void)rm_rf(work);
	r = mkdir_p(work, 0700);
	if (r < 0) {
		snprintf(err, errlen, "cannot create %s: %s", work, strerror(-r));
		return r;
	}
	r = kept.wanted ? run_kept_bundler(node, bundler, app_dir, tmp_share, err, errlen)
			: run_bundler(node, bundler, app_dir, tmp_share, err, errlen);
	if (r >= 0)
		r = share_digest(tmp_share, &d, err, errlen);
	if (r < 0) {
		(void)rm_rf(work);
		return r;
	}
	if (asprintf(&final_parent, "%s/%.16s", base, d.tree_sha256) < 0 ||
	    asprintf(&final, "%s/%s", final_parent, name) < 0)
		return -ENOMEM;
	if (access(final, F_OK) == 0) {
		ret->cached = true;
		(void)rm_rf(work);
	} else {
		(void)rm_rf(final_parent);
		if (rename(work, final_parent) < 0) {
			r = -errno;
			snprintf(err, errlen, "cannot store the bundle in %s: %s", final_parent,
				 strerror(errno));
			(void)rm_rf(work);
			return r;
		}
	}
	memcpy(ret->digest, d.tree_sha256, sizeof(ret->digest));
	ret->dir = TAKE_PTR(final);
	if (stamped && !racy)
		stamp_record(base, stamp, ret->digest);
	ret->ms = now_ms() - t0;
	return 0;
}

void bundle_done(Bundle *b)
{
	free(b->dir);
	*b = (Bundle){};
}
