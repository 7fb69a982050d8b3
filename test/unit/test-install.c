/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Downloads and installs of small made-up artifacts, against a real HTTP server on
 * 127.0.0.1 (test/e2e/http-artifacts-server.py) that can stall, drop the connection,
 * ignore ranges or serve the wrong bytes.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "fetch.h"
#include "fileio.h"
#include "install.h"
#include "macros.h"
#include "pins.h"
#include "tests.h"
#include "time-util.h"

/* Odd sizes, so halves and buffer boundaries do not line up. */
static const size_t artifact_sizes[_ARTIFACT_KIND_MAX] = {
	[ARTIFACT_KERNEL] = 300 * 1024 + 17,
	[ARTIFACT_INITRD] = 96 * 1024 + 5,
	[ARTIFACT_ROOTFS] = 420 * 1024 + 3,
	[ARTIFACT_LAYER_BROWSER] = 200 * 1024 + 11,
};

typedef struct Fixture {
	char tmp[64];
	char assets[PATH_MAX]; /* release asset names, what the server serves */
	char vm_dir[PATH_MAX];
	char log[PATH_MAX];
	PinSet pins;
	unsigned char *data[_ARTIFACT_KIND_MAX];
	int port;
	int server_stdin;
} Fixture;

static void fill(unsigned char *p, size_t n, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (unsigned char)x;
	}
}

static void write_file(const char *path, const void *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	ASSERT_TRUE(fd >= 0);
	ASSERT_OK(loop_write(fd, data, n));
	close(fd);
}

static char *pathf(const char *fmt, ...) _printf_(1, 2);
static char *pathf(const char *fmt, ...)
{
	va_list ap;
	char *p = NULL;

	va_start(ap, fmt);
	ASSERT_TRUE(vasprintf(&p, fmt, ap) >= 0);
	va_end(ap);
	return p;
}

static void fixture_setup(Fixture *f)
{
	char *p;

	memset(f, 0, sizeof(*f));
	f->server_stdin = -1;
	snprintf(f->tmp, sizeof(f->tmp), "/tmp/berth-test-install-XXXXXX");
	ASSERT_NOT_NULL(mkdtemp(f->tmp));
	snprintf(f->assets, sizeof(f->assets), "%s/assets", f->tmp);
	snprintf(f->vm_dir, sizeof(f->vm_dir), "%s/home/vm", f->tmp);
	snprintf(f->log, sizeof(f->log), "%s/server.log", f->tmp);
	ASSERT_OK(mkdir_p(f->assets, 0755));
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++) {
		f->data[k] = malloc(artifact_sizes[k]);
		ASSERT_NOT_NULL(f->data[k]);
		fill(f->data[k], artifact_sizes[k], (uint32_t)k + 1);
		ASSERT_OK(sha256_buffer_hex(f->data[k], artifact_sizes[k], f->pins.sha256[k]));
		f->pins.size[k] = artifact_sizes[k];
	}
	snprintf(f->pins.linux_release, sizeof(f->pins.linux_release), "6.0.0-test");
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++) {
		char *asset = pinset_asset_name(&f->pins, k);

		p = pathf("%s/%s", f->assets, asset);
		write_file(p, f->data[k], artifact_sizes[k]);
		free(p);
		free(asset);
	}
}

static void fixture_done(Fixture *f)
{
	if (f->server_stdin >= 0)
		close(f->server_stdin);
	/* Installed files are 0444 in 0755 directories, which rm_rf() removes as the owner. */
	rm_rf(f->tmp);
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++)
		free(f->data[k]);
}

/* Start the server; it exits when f->server_stdin is closed, by us or by our death. */
static void server_start(Fixture *f)
{
	const char *root = getenv("BERTH_SOURCE_ROOT"), *python = getenv("BERTH_TEST_PYTHON");
	char *script, line[64] = "";
	int in[2], out[2];
	ssize_t n;
	pid_t pid;

	ASSERT_NOT_NULL(root);
	script = pathf("%s/test/e2e/http-artifacts-server.py", root);
	ASSERT_OK(pipe2(in, O_CLOEXEC));
	ASSERT_OK(pipe2(out, O_CLOEXEC));
	pid = fork();
	ASSERT_TRUE(pid >= 0);
	if (pid == 0) {
		dup2(in[0], STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		execlp(python ? python : "python3", "python3", script, "--root", f->assets, "--log",
		       f->log, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	f->server_stdin = in[1];
	/* One line; the server keeps its stdout open, so read up to the newline only. */
	for (n = 0; n < (ssize_t)sizeof(line) - 1 && !strchr(line, '\n');) {
		ssize_t k = read(out[0], line + n, 1);

		if (k < 0 && errno == EINTR)
			continue;
		ASSERT_TRUE(k == 1);
		n += k;
	}
	close(out[0]);
	ASSERT_EQ(sscanf(line, "PORT %d", &f->port), 1);
	ASSERT_TRUE(f->port > 0);
	free(script);
}

/* Lines of the server log that contain every one of the NULL-terminated needles. */
static int server_log_count(const Fixture *f, ...)
{
	_cleanup_free_ char *log = NULL;
	char *save = NULL;
	int count = 0;

	if (read_full_file(f->log, 1 << 20, &log, NULL) < 0)
		return 0;
	for (char *l = strtok_r(log, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		const char *needle;
		bool all = true;
		va_list ap;

		va_start(ap, f);
		while ((needle = va_arg(ap, const char *)))
			if (!strstr(l, needle))
				all = false;
		va_end(ap);
		count += all;
	}
	return count;
}

static char *url_for(const Fixture *f, const char *mode, ArtifactKind kind)
{
	_cleanup_free_ char *asset = pinset_asset_name(&f->pins, kind);

	return pathf("http://127.0.0.1:%d/%s/%s", f->port, mode, asset);
}

/* The file at @path is artifact @kind, read-only. */
static void assert_installed(const Fixture *f, const char *path, ArtifactKind kind)
{
	_cleanup_free_ char *buf = NULL;
	size_t size = 0;
	struct stat st;

	ASSERT_OK(read_full_file(path, 1 << 24, &buf, &size));
	ASSERT_EQ(size, artifact_sizes[kind]);
	ASSERT_TRUE(memcmp(buf, f->data[kind], size) == 0);
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_mode & 07777, 0444);
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Download artifact @kind in @mode to the fixture's vm dir; returns fetch_file()'s result. */
static int download(Fixture *f, const char *mode, ArtifactKind kind, unsigned attempts,
		    FetchReport *report, char *err, size_t errlen, char **ret_dest)
{
	_cleanup_free_ char *url = url_for(f, mode, kind);
	char *dest = pathf("%s/%s", f->tmp, "dest");
	FetchRequest req = {
		.url = url,
		.path = dest,
		.sha256 = f->pins.sha256[kind],
		.size = f->pins.size[kind],
		.mode = 0444,
		.max_attempts = attempts,
	};
	int r = fetch_file(&req, report, err, errlen);

	*ret_dest = dest;
	return r;
}

static void assert_nothing_left(const char *dest)
{
	_cleanup_free_ char *part = pathf("%s.part", dest);

	ASSERT_FALSE(exists(dest));
	ASSERT_FALSE(exists(part));
}

TEST(download_ok)
{
	_cleanup_free_ char *dest = NULL, *part = NULL;
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	ASSERT_OK(download(&f, "ok", ARTIFACT_KERNEL, 0, &rep, err, sizeof(err), &dest));
	assert_installed(&f, dest, ARTIFACT_KERNEL);
	part = pathf("%s.part", dest);
	ASSERT_FALSE(exists(part));
	ASSERT_EQ(rep.attempts, 1);
	ASSERT_EQ(rep.received, artifact_sizes[ARTIFACT_KERNEL]);
	ASSERT_EQ(server_log_count(&f, "\"mode\":\"ok\"", "\"status\":200", NULL), 1);
	fixture_done(&f);
}

TEST(download_stall_is_detected_and_resumed)
{
	_cleanup_free_ char *dest = NULL;
	FetchReport rep;
	char err[512];
	uint64_t start;
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	/* The server stalls for a minute; a 300 ms stall time must cut that short. */
	setenv(FETCH_STALL_ENV, "300", 1);
	ASSERT_EQ(fetch_stall_ms(), 300);
	start = now_ms();
	ASSERT_OK(download(&f, "stall", ARTIFACT_ROOTFS, 0, &rep, err, sizeof(err), &dest));
	ASSERT_TRUE(now_ms() - start < 15000);
	assert_installed(&f, dest, ARTIFACT_ROOTFS);
	ASSERT_EQ(rep.stalls, 1);
	ASSERT_EQ(rep.attempts, 2);
	ASSERT_EQ(rep.resumes, 1);
	ASSERT_TRUE(rep.received == artifact_sizes[ARTIFACT_ROOTFS]);
	ASSERT_EQ(server_log_count(&f, "\"mode\":\"stall\"", "\"range\":\"bytes=", "\"status\":206",
				   NULL),
		  1);
	unsetenv(FETCH_STALL_ENV);
	fixture_done(&f);
}

TEST(download_dropped_connection_is_resumed_with_range)
{
	_cleanup_free_ char *dest = NULL;
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	ASSERT_OK(download(&f, "drop", ARTIFACT_KERNEL, 0, &rep, err, sizeof(err), &dest));
	assert_installed(&f, dest, ARTIFACT_KERNEL);
	ASSERT_EQ(rep.attempts, 2);
	ASSERT_EQ(rep.resumes, 1);
	ASSERT_EQ(rep.restarts, 0);
	/* Resuming means the second transfer carried only the rest. */
	ASSERT_EQ(rep.received, artifact_sizes[ARTIFACT_KERNEL]);
	ASSERT_EQ(
		server_log_count(&f, "\"mode\":\"drop\"", "\"range\":null", "\"status\":200", NULL),
		1);
	ASSERT_EQ(server_log_count(&f, "\"mode\":\"drop\"", "\"range\":\"bytes=", "\"status\":206",
				   NULL),
		  1);
	fixture_done(&f);
}

TEST(download_range_ignored_starts_over)
{
	_cleanup_free_ char *dest = NULL;
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	ASSERT_OK(download(&f, "norange", ARTIFACT_KERNEL, 0, &rep, err, sizeof(err), &dest));
	assert_installed(&f, dest, ARTIFACT_KERNEL);
	ASSERT_EQ(rep.attempts, 2);
	ASSERT_EQ(rep.restarts, 1);
	ASSERT_EQ(rep.resumes, 0);
	ASSERT_TRUE(rep.received > artifact_sizes[ARTIFACT_KERNEL]);
	ASSERT_EQ(server_log_count(&f, "\"mode\":\"norange\"",
				   "\"range\":\"bytes=", "\"status\":200", NULL),
		  1);
	fixture_done(&f);
}

TEST(download_wrong_bytes_are_refused)
{
	_cleanup_free_ char *dest = NULL;
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	ASSERT_ERROR(download(&f, "wrong", ARTIFACT_ROOTFS, 0, &rep, err, sizeof(err), &dest),
		     EBADMSG);
	assert_nothing_left(dest);
	ASSERT_NOT_NULL(strstr(err, "sha256 mismatch"));
	ASSERT_NOT_NULL(strstr(err, f.pins.sha256[ARTIFACT_ROOTFS]));
	/* The server answered in full, so asking again would not help. */
	ASSERT_EQ(rep.attempts, 1);
	fixture_done(&f);
}

TEST(download_announced_too_big_is_refused)
{
	_cleanup_free_ char *dest = NULL;
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	ASSERT_ERROR(download(&f, "toobig", ARTIFACT_INITRD, 0, &rep, err, sizeof(err), &dest),
		     EFBIG);
	assert_nothing_left(dest);
	ASSERT_NOT_NULL(strstr(err, "more than the pinned"));
	ASSERT_EQ(rep.attempts, 1);
	/* Refused on the announced length, before storing a byte. */
	ASSERT_EQ(rep.received, 0);
	fixture_done(&f);
}

TEST(download_streamed_too_big_is_refused)
{
	_cleanup_free_ char *dest = NULL;
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	ASSERT_ERROR(
		download(&f, "toobig-nolength", ARTIFACT_INITRD, 0, &rep, err, sizeof(err), &dest),
		EFBIG);
	assert_nothing_left(dest);
	ASSERT_NOT_NULL(strstr(err, "sent more than the pinned"));
	ASSERT_EQ(rep.attempts, 1);
	ASSERT_TRUE(rep.received <= artifact_sizes[ARTIFACT_INITRD]);
	fixture_done(&f);
}

TEST(download_not_found)
{
	_cleanup_free_ char *dest = NULL;
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	ASSERT_ERROR(download(&f, "missing", ARTIFACT_KERNEL, 0, &rep, err, sizeof(err), &dest),
		     ENOENT);
	assert_nothing_left(dest);
	ASSERT_NOT_NULL(strstr(err, "HTTP 404"));
	ASSERT_EQ(rep.attempts, 1);
	fixture_done(&f);
}

TEST(download_server_error_is_retried)
{
	_cleanup_free_ char *dest = NULL;
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	ASSERT_OK(download(&f, "flaky", ARTIFACT_INITRD, 0, &rep, err, sizeof(err), &dest));
	assert_installed(&f, dest, ARTIFACT_INITRD);
	ASSERT_EQ(rep.attempts, 2);
	ASSERT_EQ(server_log_count(&f, "\"mode\":\"flaky\"", "\"status\":503", NULL), 1);
	fixture_done(&f);
}

TEST(download_gives_up_and_keeps_the_part_for_later)
{
	_cleanup_free_ char *dest = NULL, *part = NULL;
	FetchReport rep;
	char err[512];
	struct stat st;
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	ASSERT_TRUE(download(&f, "short-nolength", ARTIFACT_KERNEL, 2, &rep, err, sizeof(err),
			     &dest) < 0);
	ASSERT_EQ(rep.attempts, 2);
	ASSERT_NOT_NULL(strstr(err, "gave up after 2 attempts"));
	ASSERT_FALSE(exists(dest));
	part = pathf("%s.part", dest);
	ASSERT_OK(stat(part, &st));
	ASSERT_EQ(st.st_size, artifact_sizes[ARTIFACT_KERNEL] / 2);
	fixture_done(&f);
}

TEST(download_continues_a_part_left_by_an_earlier_run)
{
	_cleanup_free_ char *dest = NULL, *part = NULL;
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	part = pathf("%s/dest.part", f.tmp);
	write_file(part, f.data[ARTIFACT_KERNEL], 100000);
	ASSERT_OK(download(&f, "ok", ARTIFACT_KERNEL, 0, &rep, err, sizeof(err), &dest));
	assert_installed(&f, dest, ARTIFACT_KERNEL);
	ASSERT_EQ(rep.attempts, 1);
	ASSERT_EQ(rep.resumes, 1);
	ASSERT_EQ(rep.received, artifact_sizes[ARTIFACT_KERNEL] - 100000);
	ASSERT_EQ(server_log_count(&f, "\"range\":\"bytes=100000-\"", "\"status\":206", NULL), 1);
	ASSERT_FALSE(exists(part));
	fixture_done(&f);
}

TEST(download_damaged_part_from_an_earlier_run_is_redone)
{
	_cleanup_free_ char *dest = NULL, *part = NULL;
	unsigned char junk[50000];
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	part = pathf("%s/dest.part", f.tmp);
	fill(junk, sizeof(junk), 99);
	write_file(part, junk, sizeof(junk));
	ASSERT_OK(download(&f, "ok", ARTIFACT_KERNEL, 0, &rep, err, sizeof(err), &dest));
	assert_installed(&f, dest, ARTIFACT_KERNEL);
	/* The resumed file fails its hash, so one clean download from zero follows. */
	ASSERT_EQ(rep.attempts, 2);
	ASSERT_EQ(server_log_count(&f, "\"range\":\"bytes=50000-\"", "\"status\":206", NULL), 1);
	ASSERT_EQ(server_log_count(&f, "\"range\":null", "\"status\":200", NULL), 1);
	fixture_done(&f);
}

TEST(download_file_url)
{
	_cleanup_free_ char *asset = NULL, *url = NULL, *dest = NULL;
	FetchReport rep;
	char err[512];
	Fixture f;

	fixture_setup(&f);
	asset = pinset_asset_name(&f.pins, ARTIFACT_INITRD);
	url = pathf("file://%s/%s", f.assets, asset);
	dest = pathf("%s/dest", f.tmp);
	FetchRequest req = {
		.url = url,
		.path = dest,
		.sha256 = f.pins.sha256[ARTIFACT_INITRD],
		.size = f.pins.size[ARTIFACT_INITRD],
		.mode = 0444,
	};
	ASSERT_OK(fetch_file(&req, &rep, err, sizeof(err)));
	assert_installed(&f, dest, ARTIFACT_INITRD);

	/* The kernel's pin with the initrd's bytes: the length alone gives it away. */
	free(dest);
	dest = pathf("%s/dest2", f.tmp);
	req.path = dest;
	req.sha256 = f.pins.sha256[ARTIFACT_KERNEL];
	req.size = f.pins.size[ARTIFACT_KERNEL];
	ASSERT_ERROR(fetch_file(&req, &rep, err, sizeof(err)), EBADMSG);
	assert_nothing_left(dest);

	free(url);
	url = pathf("file://%s/nothing-here", f.assets);
	req.url = url;
	ASSERT_ERROR(fetch_file(&req, &rep, err, sizeof(err)), ENOENT);
	assert_nothing_left(dest);
	fixture_done(&f);
}

TEST(download_other_schemes_are_refused)
{
	FetchRequest req = {
		.url = "ftp://127.0.0.1/x",
		.path = "/nonexistent/x",
		.sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
		.size = 1,
		.mode = 0444,
	};
	char err[512];

	ASSERT_ERROR(fetch_file(&req, NULL, err, sizeof(err)), EPROTONOSUPPORT);
	ASSERT_NOT_NULL(strstr(err, "http, https and file"));
	req.url = "gopher://127.0.0.1/x";
	ASSERT_ERROR(fetch_file(&req, NULL, err, sizeof(err)), EPROTONOSUPPORT);
}

TEST(stall_env)
{
	unsetenv(FETCH_STALL_ENV);
	ASSERT_EQ(fetch_stall_ms(), FETCH_STALL_MS_DEFAULT);
	setenv(FETCH_STALL_ENV, "1500", 1);
	ASSERT_EQ(fetch_stall_ms(), 1500);
	setenv(FETCH_STALL_ENV, "0", 1);
	ASSERT_EQ(fetch_stall_ms(), FETCH_STALL_MS_DEFAULT);
	setenv(FETCH_STALL_ENV, "-5", 1);
	ASSERT_EQ(fetch_stall_ms(), FETCH_STALL_MS_DEFAULT);
	setenv(FETCH_STALL_ENV, "12ms", 1);
	ASSERT_EQ(fetch_stall_ms(), FETCH_STALL_MS_DEFAULT);
	unsetenv(FETCH_STALL_ENV);
}

/* --from layouts: where each artifact goes inside the source directory. */
typedef enum Layout {
	LAYOUT_FLAT,
	LAYOUT_ASSETS,
	LAYOUT_SHA_DIRS,
	LAYOUT_INSTALLED,
} Layout;

static char *layout_dir(Fixture *f, Layout layout)
{
	char *dir = pathf("%s/from-%d", f->tmp, (int)layout);

	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++) {
		_cleanup_free_ char *p = NULL, *asset = pinset_asset_name(&f->pins, k);
		_cleanup_free_ char *parent = NULL;

		switch (layout) {
		case LAYOUT_FLAT:
			p = pathf("%s/%s", dir, install_flat_name(k));
			break;
		case LAYOUT_ASSETS:
			p = pathf("%s/%s", dir, asset);
			break;
		case LAYOUT_SHA_DIRS:
			p = pathf("%s/%s/artifact-%d.bin", dir, f->pins.sha256[k], k);
			break;
		case LAYOUT_INSTALLED:
			p = pinset_install_path(&f->pins, dir, k);
			break;
		}
		parent = strndup(p, (size_t)(strrchr(p, '/') - p));
		ASSERT_OK(mkdir_p(parent, 0755));
		write_file(p, f->data[k], artifact_sizes[k]);
	}
	if (layout == LAYOUT_FLAT) {
		_cleanup_free_ char *m = pathf("%s/manifest-kernel.json", dir);

		write_file(m, "{}\n", 3);
	}
	return dir;
}

static void install_all_from(Layout layout)
{
	_cleanup_free_ char *dir = NULL;
	Fixture f;

	fixture_setup(&f);
	dir = layout_dir(&f, layout);
	InstallOptions o = {.from_dir = dir, .no_download = true};
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++) {
		_cleanup_free_ char *want = pinset_install_path(&f.pins, f.vm_dir, k);
		InstallResult res;
		char err[2048];

		ASSERT_OK(install_artifact(&f.pins, f.vm_dir, k, &o, &res, err, sizeof(err)));
		ASSERT_EQ(res.origin, INSTALL_ORIGIN_DIR);
		ASSERT_STREQ(res.path, want);
		ASSERT_TRUE(strncmp(res.source, dir, strlen(dir)) == 0);
		ASSERT_STREQ(res.note, "");
		assert_installed(&f, want, k);
	}
	fixture_done(&f);
}

TEST(install_from_flat_build_output)
{
	install_all_from(LAYOUT_FLAT);
}

TEST(install_from_release_assets)
{
	install_all_from(LAYOUT_ASSETS);
}

TEST(install_from_sha_subdirectories)
{
	install_all_from(LAYOUT_SHA_DIRS);
}

TEST(install_from_installed_layout)
{
	install_all_from(LAYOUT_INSTALLED);
}

TEST(install_skips_what_is_in_place_unless_forced)
{
	_cleanup_free_ char *dir = NULL, *want = NULL;
	InstallResult res;
	char err[2048];
	struct stat a, b;
	Fixture f;

	fixture_setup(&f);
	dir = layout_dir(&f, LAYOUT_FLAT);
	InstallOptions o = {.from_dir = dir, .no_download = true};
	ASSERT_OK(install_artifact(&f.pins, f.vm_dir, ARTIFACT_KERNEL, &o, &res, err, sizeof(err)));
	ASSERT_EQ(res.origin, INSTALL_ORIGIN_DIR);
	want = strdup(res.path);
	ASSERT_OK(stat(want, &a));
	ASSERT_OK(install_artifact(&f.pins, f.vm_dir, ARTIFACT_KERNEL, &o, &res, err, sizeof(err)));
	ASSERT_EQ(res.origin, INSTALL_ORIGIN_ALREADY);
	ASSERT_OK(stat(want, &b));
	ASSERT_EQ(a.st_ino, b.st_ino);
	o.force = true;
	ASSERT_OK(install_artifact(&f.pins, f.vm_dir, ARTIFACT_KERNEL, &o, &res, err, sizeof(err)));
	ASSERT_EQ(res.origin, INSTALL_ORIGIN_DIR);
	ASSERT_OK(stat(want, &b));
	ASSERT_TRUE(a.st_ino != b.st_ino);
	assert_installed(&f, want, ARTIFACT_KERNEL);
	fixture_done(&f);
}

TEST(install_replaces_a_damaged_installed_file)
{
	_cleanup_free_ char *dir = NULL, *want = NULL;
	InstallResult res;
	char err[2048];
	int fd;
	Fixture f;

	fixture_setup(&f);
	dir = layout_dir(&f, LAYOUT_ASSETS);
	InstallOptions o = {.from_dir = dir, .no_download = true};
	ASSERT_OK(install_artifact(&f.pins, f.vm_dir, ARTIFACT_ROOTFS, &o, &res, err, sizeof(err)));
	want = strdup(res.path);
	ASSERT_OK(chmod(want, 0644));
	fd = open(want, O_WRONLY | O_CLOEXEC);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(pwrite(fd, "X", 1, 1000), 1);
	close(fd);
	ASSERT_OK(install_artifact(&f.pins, f.vm_dir, ARTIFACT_ROOTFS, &o, &res, err, sizeof(err)));
	ASSERT_EQ(res.origin, INSTALL_ORIGIN_DIR);
	ASSERT_NOT_NULL(strstr(res.note, "damaged"));
	assert_installed(&f, want, ARTIFACT_ROOTFS);
	fixture_done(&f);
}

TEST(install_no_download_reports_what_is_missing)
{
	_cleanup_free_ char *dir = NULL, *p = NULL, *want = NULL;
	InstallResult res;
	char err[2048];
	Fixture f;

	fixture_setup(&f);
	dir = layout_dir(&f, LAYOUT_FLAT);
	p = pathf("%s/rootfs.erofs", dir);
	ASSERT_OK(unlink(p));
	InstallOptions o = {
		.from_dir = dir, .no_download = true, .url_template = "http://127.0.0.1:1/{asset}"};
	ASSERT_ERROR(
		install_artifact(&f.pins, f.vm_dir, ARTIFACT_ROOTFS, &o, &res, err, sizeof(err)),
		ENOENT);
	ASSERT_EQ(res.origin, INSTALL_ORIGIN_MISSING);
	ASSERT_NOT_NULL(strstr(err, "rootfs: not in"));
	ASSERT_NOT_NULL(strstr(err, "rootfs.erofs"));
	ASSERT_NOT_NULL(strstr(err, f.pins.sha256[ARTIFACT_ROOTFS]));
	ASSERT_NOT_NULL(strstr(install_missing_hint(&o), "--no-download"));
	want = pinset_install_path(&f.pins, f.vm_dir, ARTIFACT_ROOTFS);
	ASSERT_FALSE(exists(want));
	fixture_done(&f);
}

TEST(install_without_sources_says_what_to_pass)
{
	InstallResult res;
	char err[2048];
	Fixture f;

	fixture_setup(&f);
	InstallOptions o = {};
	ASSERT_ERROR(
		install_artifact(&f.pins, f.vm_dir, ARTIFACT_KERNEL, &o, &res, err, sizeof(err)),
		ENOENT);
	ASSERT_EQ(res.origin, INSTALL_ORIGIN_MISSING);
	ASSERT_NOT_NULL(strstr(install_missing_hint(&o), "--from"));
	ASSERT_NOT_NULL(strstr(install_missing_hint(&o), "--url"));
	ASSERT_NOT_NULL(strstr(install_missing_hint(&o), "out/artifacts"));
	fixture_done(&f);
}

TEST(install_tampered_from_file_is_refused)
{
	_cleanup_free_ char *dir = NULL, *p = NULL, *want = NULL;
	InstallResult res;
	char err[2048];
	int fd;
	Fixture f;

	fixture_setup(&f);
	dir = layout_dir(&f, LAYOUT_FLAT);
	p = pathf("%s/vmlinux", dir);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(pwrite(fd, "X", 1, 4242), 1);
	close(fd);
	InstallOptions o = {.from_dir = dir, .no_download = true};
	ASSERT_ERROR(
		install_artifact(&f.pins, f.vm_dir, ARTIFACT_KERNEL, &o, &res, err, sizeof(err)),
		ENOENT);
	ASSERT_NOT_NULL(strstr(err, "has sha256"));
	ASSERT_NOT_NULL(strstr(err, f.pins.sha256[ARTIFACT_KERNEL]));
	want = pinset_install_path(&f.pins, f.vm_dir, ARTIFACT_KERNEL);
	ASSERT_FALSE(exists(want));
	fixture_done(&f);
}

TEST(install_downloads_what_the_directory_lacks)
{
	_cleanup_free_ char *dir = NULL, *p = NULL, *tmpl = NULL;
	InstallResult res;
	char err[2048];
	int fd;
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	dir = layout_dir(&f, LAYOUT_FLAT);
	/* A damaged kernel in the directory: downloaded instead, and the user is told. */
	p = pathf("%s/vmlinux", dir);
	fd = open(p, O_WRONLY | O_CLOEXEC);
	ASSERT_TRUE(fd >= 0);
	ASSERT_EQ(pwrite(fd, "X", 1, 4242), 1);
	close(fd);
	tmpl = pathf("http://127.0.0.1:%d/ok/{asset}", f.port);
	InstallOptions o = {.from_dir = dir, .url_template = tmpl};
	ASSERT_OK(install_artifact(&f.pins, f.vm_dir, ARTIFACT_KERNEL, &o, &res, err, sizeof(err)));
	ASSERT_EQ(res.origin, INSTALL_ORIGIN_DOWNLOAD);
	ASSERT_NOT_NULL(strstr(res.note, "has sha256"));
	ASSERT_TRUE(strstr(res.source, "/ok/vmlinux-") != NULL);
	assert_installed(&f, res.path, ARTIFACT_KERNEL);
	ASSERT_OK(install_artifact(&f.pins, f.vm_dir, ARTIFACT_INITRD, &o, &res, err, sizeof(err)));
	ASSERT_EQ(res.origin, INSTALL_ORIGIN_DIR);
	fixture_done(&f);
}

TEST(install_download_refused_says_check_the_url)
{
	_cleanup_free_ char *tmpl = NULL, *part = NULL;
	InstallResult res;
	char err[2048];
	Fixture f;

	fixture_setup(&f);
	server_start(&f);
	tmpl = pathf("http://127.0.0.1:%d/wrong/{asset}", f.port);
	InstallOptions o = {.url_template = tmpl, .url_hint = "BERTH_VM_ARTIFACTS_URL"};
	ASSERT_ERROR(
		install_artifact(&f.pins, f.vm_dir, ARTIFACT_ROOTFS, &o, &res, err, sizeof(err)),
		EBADMSG);
	ASSERT_NOT_NULL(strstr(err, "rootfs: sha256 mismatch: expected"));
	ASSERT_NOT_NULL(strstr(err, "is not the pinned rootfs"));
	ASSERT_NOT_NULL(strstr(err, "check BERTH_VM_ARTIFACTS_URL"));
	ASSERT_NOT_NULL(strstr(err, res.source));
	ASSERT_FALSE(exists(res.path));
	part = pathf("%s.part", res.path);
	ASSERT_FALSE(exists(part));
	fixture_done(&f);
}

TEST(install_with_file_url_template)
{
	_cleanup_free_ char *tmpl = NULL;
	InstallResult res;
	char err[2048];
	Fixture f;

	fixture_setup(&f);
	tmpl = pathf("file://%s/{asset}", f.assets);
	InstallOptions o = {.url_template = tmpl};
	for (int k = 0; k < _ARTIFACT_KIND_MAX; k++) {
		ASSERT_OK(install_artifact(&f.pins, f.vm_dir, k, &o, &res, err, sizeof(err)));
		ASSERT_EQ(res.origin, INSTALL_ORIGIN_DOWNLOAD);
		assert_installed(&f, res.path, k);
	}
	fixture_done(&f);
}

TEST(install_bad_template_is_an_error)
{
	InstallResult res;
	char err[2048];
	Fixture f;

	fixture_setup(&f);
	InstallOptions o = {.url_template = "https://mirror/{assets}", .url_hint = "--url"};
	ASSERT_ERROR(
		install_artifact(&f.pins, f.vm_dir, ARTIFACT_KERNEL, &o, &res, err, sizeof(err)),
		EINVAL);
	ASSERT_NOT_NULL(strstr(err, "{assets}"));
	ASSERT_NOT_NULL(strstr(err, "check --url"));
	fixture_done(&f);
}

TEST(install_vmm_copies_executable)
{
	_cleanup_free_ char *src = NULL;
	char path[PATH_MAX], err[512];
	struct stat st;
	Fixture f;

	fixture_setup(&f);
	src = pathf("%s/berth-vmm-src", f.tmp);
	write_file(src, "#!/bin/sh\nexit 0\n", 17);
	ASSERT_EQ(install_vmm(src, f.vm_dir, path, err, sizeof(err)), 1);
	ASSERT_OK(stat(path, &st));
	ASSERT_EQ(st.st_mode & 07777, 0755);
	ASSERT_EQ(st.st_size, 17);
	/* Installing the installed file is a no-op, not a copy over itself. */
	ASSERT_EQ(install_vmm(path, f.vm_dir, path, err, sizeof(err)), 0);
	ASSERT_TRUE(install_vmm("/nonexistent/berth-vmm", f.vm_dir, path, err, sizeof(err)) < 0);
	ASSERT_NOT_NULL(strstr(err, "/nonexistent/berth-vmm"));
	fixture_done(&f);
}

int main(void)
{
	static const char *const proxies[] = {"http_proxy",  "HTTP_PROXY", "https_proxy",
					      "HTTPS_PROXY", "all_proxy",  "ALL_PROXY"};

	/* A server that stalls may still be writing when a test ends. */
	signal(SIGPIPE, SIG_IGN);
	/* The server is on 127.0.0.1; a proxy from the environment must not get in between. */
	for (size_t i = 0; i < ELEMENTSOF(proxies); i++)
		unsetenv(proxies[i]);
	return tests_run();
}
