/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fs.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "artifact-url.h"
#include "digest.h"
#include "fileio.h"
#include "install.h"
#include "macros.h"

#define ARTIFACT_MODE 0444
#define VMM_MODE 0755
#define DIR_MODE 0755
/* Files tried in one subdirectory per sha256; a real one holds one or two. */
#define SHA_DIR_ENTRIES_MAX 64

static const char *const flat_names[_ARTIFACT_KIND_MAX] = {
	[ARTIFACT_KERNEL] = "vmlinux",
	[ARTIFACT_INITRD] = "initrd.cpio",
	[ARTIFACT_ROOTFS] = "rootfs.erofs",
	[ARTIFACT_LAYER_BROWSER] = "layer-browser.erofs",
};

const char *install_flat_name(ArtifactKind kind)
{
	if (kind < 0 || kind >= _ARTIFACT_KIND_MAX)
		return NULL;
	return flat_names[kind];
}

/* Put a message in a caller's buffer; returns @error so a caller can return it. */
_printf_(4, 5) static int fail(int error, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return error;
}

/* Append to a note, keeping whatever fits. */
_printf_(2, 3) static void note_add(InstallResult *ret, const char *fmt, ...)
{
	size_t used = strlen(ret->note);
	va_list ap;

	if (used + 3 >= sizeof(ret->note))
		return;
	if (used > 0) {
		memcpy(ret->note + used, "; ", 3);
		used += 2;
	}
	va_start(ap, fmt);
	vsnprintf(ret->note + used, sizeof(ret->note) - used, fmt, ap);
	va_end(ap);
}

/* A temporary file that is removed unless it was renamed into place. */
static void unlink_tmpp(char **p)
{
	if (*p) {
		(void)unlink(*p);
		free(*p);
	}
}

static int dir_of(const char *path, char **ret)
{
	const char *slash = strrchr(path, '/');

	*ret = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
	return *ret ? 0 : -ENOMEM;
}

static int fsync_dir_of(const char *path)
{
	_cleanup_free_ char *dir = NULL;
	_cleanup_close_ int fd = -EBADF;

	if (dir_of(path, &dir) < 0)
		return -ENOMEM;
	fd = RET_NERRNO(open(*dir ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (fd < 0)
		return fd;
	return RET_NERRNO(fsync(fd));
}

/*
 * Copy at most @limit + 1 bytes from @in to @out, hashing what was written, so a file that
 * grew after it was measured shows up as too long rather than being cut to size.
 */
static int copy_hashing(int in, int out, uint64_t limit, Sha256 *hash, uint64_t *ret_total)
{
	static char buf[1 << 16];
	uint64_t total = 0;
	int r;

	while (total <= limit) {
		ssize_t n = read(in, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		if (out >= 0) {
			r = loop_write(out, buf, (size_t)n);
			if (r < 0)
				return r;
		}
		if (hash && sha256_update(hash, buf, (size_t)n) < 0)
			return -EIO;
		total += (uint64_t)n;
	}
	*ret_total = total;
	return 0;
}

/*
 * Fill @out with @in's bytes and hash them. A reflink clone costs no space where the file
 * system has them (btrfs, XFS); the clone is then hashed by reading it back, so the check is
 * always of the bytes that will be renamed into place.
 */
static int copy_and_hash(int in, int out, uint64_t limit, char hex[SHA256_HEX_LEN + 1],
			 uint64_t *ret_total)
{
	_cleanup_(sha256_freep) Sha256 *hash = sha256_new();
	int r;

	if (!hash)
		return -ENOMEM;
	if (ioctl(out, FICLONE, in) == 0) {
		if (lseek(out, 0, SEEK_SET) < 0)
			return -errno;
		r = copy_hashing(out, -EBADF, limit, hash, ret_total);
	} else
		r = copy_hashing(in, out, limit, hash, ret_total);
	if (r < 0)
		return r;
	return sha256_final_hex(hash, hex);
}

static int tmp_beside(const char *dest, char **ret_tmp, int *ret_fd)
{
	_cleanup_free_ char *tmp = NULL;
	int fd;

	if (asprintf(&tmp, "%s.tmp.XXXXXX", dest) < 0)
		return -ENOMEM;
	fd = RET_NERRNO(mkostemp(tmp, O_CLOEXEC));
	if (fd < 0)
		return fd;
	*ret_fd = fd;
	*ret_tmp = TAKE_PTR(tmp);
	return 0;
}

static int tmp_commit(int fd, char **tmp, const char *dest, mode_t mode)
{
	if (fchmod(fd, mode) < 0 || fsync(fd) < 0)
		return -errno;
	if (rename(*tmp, dest) < 0)
		return -errno;
	free(*tmp);
	*tmp = NULL;
	(void)fsync_dir_of(dest);
	return 0;
}

/*
 * Copy @src to @dest through a temporary file beside it, renamed only when size and sha256
 * match the pin. Returns 1 when installed, 0 when @src is not the pinned file (the reason in
 * @why), -errno on I/O errors.
 */
static int copy_verified(const char *src, const char *dest, const char *sha, uint64_t size,
			 char *why, size_t whylen)
{
	_cleanup_(unlink_tmpp) char *tmp = NULL;
	_cleanup_close_ int in = -EBADF, out = -EBADF;
	char got[SHA256_HEX_LEN + 1];
	uint64_t total = 0;
	struct stat st;
	int r;

	in = RET_NERRNO(open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY));
	if (in < 0)
		return in == -ENOENT ? fail(0, why, whylen, "%s is gone", src) : in;
	if (fstat(in, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return fail(0, why, whylen, "%s is not a regular file", src);
	if ((uint64_t)st.st_size != size)
		return fail(0, why, whylen, "%s is %" PRIu64 " B, the pin is %" PRIu64 " B", src,
			    (uint64_t)st.st_size, size);
	r = tmp_beside(dest, &tmp, &out);
	if (r < 0)
		return r;
	r = copy_and_hash(in, out, size, got, &total);
	if (r < 0)
		return r;
	if (total != size)
		return fail(0, why, whylen, "%s changed while it was copied", src);
	if (!streq(got, sha))
		return fail(0, why, whylen, "%s has sha256 %s, the pin is %s", src, got, sha);
	r = tmp_commit(out, &tmp, dest, ARTIFACT_MODE);
	return r < 0 ? r : 1;
}

/* Returns 1 when @path is the pinned file, 0 when absent or different (why in @ret->note). */
static int installed_matches(const char *path, const char *sha, uint64_t size, InstallResult *ret)
{
	char got[SHA256_HEX_LEN + 1];
	uint64_t have = 0;
	struct stat st;
	int r;

	if (stat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISREG(st.st_mode))
		return -EISDIR;
	if ((uint64_t)st.st_size != size) {
		note_add(ret,
			 "the installed copy was damaged (%" PRIu64 " B, the pin is %" PRIu64 " B)",
			 (uint64_t)st.st_size, size);
		return 0;
	}
	r = sha256_file_hex(path, got, &have);
	if (r < 0)
		return r;
	if (have == size && streq(got, sha))
		return 1;
	note_add(ret, "the installed copy was damaged (sha256 %.16s…)", got);
	return 0;
}

/* Names in the subdirectory named after the pin, in a stable order. */
static int sha_dir_candidates(const char *dir, const char *sha, char **names, size_t *n)
{
	_cleanup_free_ char *sub = NULL;
	struct dirent **list = NULL;
	int count;

	if (asprintf(&sub, "%s/%s", dir, sha) < 0)
		return -ENOMEM;
	count = scandir(sub, &list, NULL, alphasort);
	if (count < 0)
		return 0;
	for (int i = 0; i < count; i++) {
		if (list[i]->d_name[0] != '.' && *n < SHA_DIR_ENTRIES_MAX + 3 &&
		    asprintf(&names[*n], "%s/%s", sub, list[i]->d_name) >= 0)
			(*n)++;
		free(list[i]);
	}
	free(list);
	return 0;
}

static void candidates_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
}

/*
 * The places @kind may be in a --from directory: the flat build output, a release asset
 * name, anything in the subdirectory named after its sha256, and the installed layout.
 */
static int dir_candidates(const PinSet *pins, const char *dir, ArtifactKind kind, char **names,
			  size_t *n)
{
	_cleanup_free_ char *asset = pinset_asset_name(pins, kind);
	char *installed;
	int r;

	if (!asset)
		return -ENOMEM;
	if (asprintf(&names[(*n)], "%s/%s", dir, flat_names[kind]) < 0)
		return -ENOMEM;
	(*n)++;
	if (asprintf(&names[(*n)], "%s/%s", dir, asset) < 0)
		return -ENOMEM;
	(*n)++;
	r = sha_dir_candidates(dir, pins->sha256[kind], names, n);
	if (r < 0)
		return r;
	installed = pinset_install_path(pins, dir, kind);
	if (!installed)
		return -ENOMEM;
	names[(*n)++] = installed;
	return 0;
}

/* Returns 1 when installed from @dir, 0 when nothing there matched. */
static int install_from_dir(const PinSet *pins, const char *dir, ArtifactKind kind,
			    const char *dest, InstallResult *ret)
{
	char *names[SHA_DIR_ENTRIES_MAX + 4] = {};
	char first_why[512] = "";
	size_t n = 0, mismatches = 0;
	int r;

	r = dir_candidates(pins, dir, kind, names, &n);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		char why[512] = "";

		if (access(names[i], F_OK) < 0)
			continue;
		r = copy_verified(names[i], dest, pins->sha256[kind], pins->size[kind], why,
				  sizeof(why));
		if (r > 0)
			snprintf(ret->source, sizeof(ret->source), "%s", names[i]);
		else if (r == 0 && mismatches++ == 0)
			snprintf(first_why, sizeof(first_why), "%s", why);
		if (r != 0)
			break;
	}
	candidates_free(names, n);
	/* A file that did not match is news only when nothing else in @dir did. */
	if (r == 0 && mismatches > 0)
		note_add(ret, "%s%s", first_why,
			 mismatches > 1 ? " (and other candidates there do not match either)" : "");
	return r;
}

static void missing_message(const PinSet *pins, ArtifactKind kind, const InstallOptions *o,
			    InstallResult *ret, char *err, size_t errlen)
{
	const char *name = artifact_kind_to_string(kind);
	const char *sep = *ret->note ? "; " : "";
	_cleanup_free_ char *asset = NULL, *layout = NULL;
	PinSet shown = *pins;

	if (!o->from_dir) {
		fail(0, err, errlen, "%s: not installed%s%s", name, sep, ret->note);
		return;
	}
	/* Name the candidates with "<sha256>" in place of the pins, then give the pin once. */
	snprintf(shown.sha256[ARTIFACT_KERNEL], sizeof(shown.sha256[0]), "<kernel sha256>");
	snprintf(shown.sha256[kind], sizeof(shown.sha256[0]), "<sha256>");
	asset = pinset_asset_name(&shown, kind);
	layout = pinset_install_path(&shown, "", kind);
	fail(0, err, errlen,
	     "%s: not in %s (looked for %s, %s, <sha256>/*, %s; <sha256> is %s)%s%s", name,
	     o->from_dir, flat_names[kind], asset ? asset : "?", layout ? layout + 1 : "?",
	     pins->sha256[kind], sep, ret->note);
}

const char *install_missing_hint(const InstallOptions *o)
{
	if (o->no_download && o->from_dir)
		return "put them in the --from directory (the build output has vmlinux, initrd.cpio and rootfs.erofs), or drop --no-download and give a download URL with --url";
	if (o->no_download)
		return "--no-download copies from --from only: pass --from with the build output (e.g. out/artifacts)";
	return "no download URL is set: pass --from with the build output (e.g. out/artifacts) or --url with a download URL template (see docs/vm-install.md)";
}

static void download_message(int r, ArtifactKind kind, const char *url, const InstallOptions *o,
			     const char *why, char *err, size_t errlen)
{
	const char *name = artifact_kind_to_string(kind);
	const char *hint = o->url_hint ? o->url_hint : "--url";

	switch (r) {
	case -EFBIG:
	case -EBADMSG:
		fail(0, err, errlen, "%s: %s; the file at %s is not the pinned %s — check %s", name,
		     why, url, name, hint);
		break;
	case -ENOENT:
	case -EACCES:
		fail(0, err, errlen,
		     "%s: %s for %s; that mirror does not serve the pinned %s — check %s", name,
		     why, url, name, hint);
		break;
	case -EPROTONOSUPPORT:
		fail(0, err, errlen, "%s: %s (%s) — check %s", name, why, url, hint);
		break;
	default:
		fail(0, err, errlen,
		     "%s: downloading %s failed: %s; run the command again to retry (what arrived is kept and resumed), or use --from",
		     name, url, why);
		break;
	}
}

static int install_download(const PinSet *pins, ArtifactKind kind, const InstallOptions *o,
			    InstallResult *ret, char *err, size_t errlen)
{
	_cleanup_free_ char *url = NULL;
	char why[1024] = "";
	FetchRequest req;
	int r;

	r = artifact_url_expand(o->url_template, pins, kind, &url, why, sizeof(why));
	if (r < 0) {
		return fail(r, err, errlen, "%s: %s — check %s", artifact_kind_to_string(kind), why,
			    o->url_hint ? o->url_hint : "--url");
	}
	snprintf(ret->source, sizeof(ret->source), "%s", url);
	/* From here on a failure is the download's, not a missing source. */
	ret->origin = INSTALL_ORIGIN_DOWNLOAD;
	req = (FetchRequest){
		.url = url,
		.path = ret->path,
		.sha256 = pins->sha256[kind],
		.size = pins->size[kind],
		.mode = ARTIFACT_MODE,
		.max_attempts = o->max_attempts,
		.stall_ms = o->stall_ms,
		.progress = o->progress,
		.userdata = o->userdata,
	};
	r = fetch_file(&req, &ret->fetch, why, sizeof(why));
	if (r < 0) {
		download_message(r, kind, url, o, why, err, errlen);
		return r;
	}
	return 0;
}

int install_artifact(const PinSet *pins, const char *vm_dir, ArtifactKind kind,
		     const InstallOptions *o, InstallResult *ret, char *err, size_t errlen)
{
	_cleanup_free_ char *dest = NULL, *dir = NULL;
	const char *name = artifact_kind_to_string(kind);
	int r;

	memset(ret, 0, sizeof(*ret));
	ret->origin = INSTALL_ORIGIN_MISSING;
	if (err && errlen > 0)
		*err = '\0';
	if (!name || !sha256_hex_valid(pins->sha256[kind]) || pins->size[kind] == 0)
		return -EINVAL;
	dest = pinset_install_path(pins, vm_dir, kind);
	if (!dest || dir_of(dest, &dir) < 0)
		return -ENOMEM;
	snprintf(ret->path, sizeof(ret->path), "%s", dest);
	r = mkdir_p(dir, DIR_MODE);
	if (r < 0)
		return fail(r, err, errlen, "%s: cannot create %s: %s", name, dir, strerror(-r));

	if (!o->force) {
		r = installed_matches(dest, pins->sha256[kind], pins->size[kind], ret);
		if (r < 0)
			return fail(r, err, errlen, "%s: cannot check %s: %s", name, dest,
				    strerror(-r));
		if (r > 0) {
			snprintf(ret->source, sizeof(ret->source), "%s", dest);
			ret->origin = INSTALL_ORIGIN_ALREADY;
			return 0;
		}
	}
	if (o->from_dir) {
		r = install_from_dir(pins, o->from_dir, kind, dest, ret);
		if (r < 0)
			return fail(r, err, errlen, "%s: cannot copy it from %s: %s", name,
				    o->from_dir, strerror(-r));
		if (r > 0) {
			ret->origin = INSTALL_ORIGIN_DIR;
			return 0;
		}
	}
	if (o->no_download || !o->url_template || !*o->url_template) {
		missing_message(pins, kind, o, ret, err, errlen);
		return -ENOENT;
	}
	return install_download(pins, kind, o, ret, err, errlen);
}

int install_vmm(const char *src, const char *vm_dir, char ret_path[PATH_MAX], char *err,
		size_t errlen)
{
	_cleanup_(unlink_tmpp) char *tmp = NULL;
	_cleanup_free_ char *bin = NULL, *dest = NULL;
	_cleanup_close_ int in = -EBADF, out = -EBADF;
	struct stat st, dst;
	uint64_t total = 0;
	int r;

	if (asprintf(&bin, "%s/bin", vm_dir) < 0 || asprintf(&dest, "%s/berth-vmm", bin) < 0)
		return -ENOMEM;
	snprintf(ret_path, PATH_MAX, "%s", dest);
	in = RET_NERRNO(open(src, O_RDONLY | O_CLOEXEC | O_NOCTTY));
	if (in < 0)
		return fail(in, err, errlen, "berth-vmm: cannot open %s: %s", src, strerror(-in));
	if (fstat(in, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return fail(-EBADFD, err, errlen, "berth-vmm: %s is not a regular file", src);
	if (stat(dest, &dst) == 0 && dst.st_dev == st.st_dev && dst.st_ino == st.st_ino)
		return 0;
	r = mkdir_p(bin, DIR_MODE);
	if (r >= 0)
		r = tmp_beside(dest, &tmp, &out);
	if (r >= 0)
		r = copy_hashing(in, out, UINT64_MAX - 1, NULL, &total);
	if (r >= 0)
		r = tmp_commit(out, &tmp, dest, VMM_MODE);
	if (r < 0)
		return fail(r, err, errlen, "berth-vmm: cannot copy %s to %s: %s", src, dest,
			    strerror(-r));
	return 1;
}
