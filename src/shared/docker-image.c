/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "digest.h"
#include "docker-image.h"
#include "exec-util.h"
#include "fileio.h"
#include "macros.h"
#include "time-util.h"

const char *const docker_confinement_args[] = {
	"--network=none",
	"--cap-drop=ALL",
	"--cap-add=CHOWN",
	"--cap-add=DAC_OVERRIDE",
	"--cap-add=FOWNER",
	"--cap-add=SETUID",
	"--cap-add=SETGID",
	"--cap-add=SETPCAP",
	"--cap-add=KILL",
	"--tmpfs=/run:rw,nosuid,nodev,exec,mode=0755,size=64m",
	"--tmpfs=/tmp:rw,nosuid,nodev,exec,mode=1777,size=256m",
	NULL,
};

#define LABEL_ROOTFS "org.berth.rootfs.sha256"
#define LABEL_LAYER "org.berth.layer.sha256"
#define DOCKER_TIMEOUT_MS (30 * 1000)
#define MAKE_TIMEOUT_MS (5 * 60 * 1000)
#define OUTPUT_MAX (64 * 1024)

char *docker_program(char *err, size_t errlen)
{
	const char *env = getenv("BERTH_DOCKER");
	char *path = NULL;

	if (env && env[0] == '/') {
		if (access(env, X_OK) == 0)
			return strdup(env);
		snprintf(err, errlen, "BERTH_DOCKER=%s is not an executable file; fix or unset it",
			 env);
		return NULL;
	}
	if (find_executable_in_path(env && env[0] ? env : "docker", &path) < 0) {
		snprintf(err, errlen,
			 "no docker program in $PATH: install Docker (Debian: apt-get install "
			 "docker.io) or use --runtime vm");
		return NULL;
	}
	return path;
}

/* Run @argv (stderr included); its output, trimmed, in *@ret_out. */
static int run(char *const argv[], int timeout_ms, char **ret_out, char *err, size_t errlen)
{
	RunCapture o = {.timeout_ms = timeout_ms, .max_bytes = OUTPUT_MAX, .with_stderr = true};
	_cleanup_free_ char *out = NULL;
	int status, r;

	r = run_capture_opts(argv, &o, &out, &status);
	if (r < 0) {
		snprintf(err, errlen, "%s %s: %s", argv[0], argv[1],
			 r == -ETIME ? "timed out" : strerror(-r));
		return r;
	}
	for (size_t n = out ? strlen(out) : 0; n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ');)
		out[--n] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen, "%s %s failed: %.400s", argv[0], argv[1],
			 out && out[0] ? out : "(no output)");
		if (ret_out)
			*ret_out = TAKE_PTR(out);
		return -EIO;
	}
	if (ret_out)
		*ret_out = TAKE_PTR(out);
	return 0;
}

/* The image @tag as Docker has it: 0 and its id and layer when it matches @rootfs_sha256,
 * -ENOENT when it is missing or does not. */
static int inspect(const char *docker, const char *tag, const char *rootfs_sha256, DockerImage *ret,
		   char *why, size_t whylen)
{
	char *const argv[] = {
		(char *)docker,
		"image",
		"inspect",
		"--format",
		"{{.Id}} {{index .RootFS.Layers 0}} {{index .Config.Labels \"" LABEL_ROOTFS
		"\"}} {{index .Config.Labels \"" LABEL_LAYER "\"}}",
		(char *)tag,
		NULL};
	_cleanup_free_ char *out = NULL;
	char id[80], layer[80], rootfs[80], tar[80];
	int r;

	r = run(argv, DOCKER_TIMEOUT_MS, &out, why, whylen);
	if (r < 0) {
		if (out && strstr(out, "No such image")) {
			snprintf(why, whylen, "there is no image %s yet", tag);
			return -ENOENT;
		}
		return r;
	}
	if (sscanf(out, "%79s %79s %79s %79s", id, layer, rootfs, tar) != 4 ||
	    !streq(rootfs, rootfs_sha256) || strlen(tar) != 64 || !strneq(layer, "sha256:", 7) ||
	    !streq(layer + 7, tar)) {
		snprintf(why, whylen, "the image %s does not match the pinned rootfs %.12s", tag,
			 rootfs_sha256);
		return -ENOENT;
	}
	snprintf(ret->id, sizeof(ret->id), "%s", id);
	snprintf(ret->layer, sizeof(ret->layer), "%s", layer);
	return 0;
}

static void remove_tree(const char *dir)
{
	char *const argv[] = {"/bin/rm", "-rf", "--one-file-system", (char *)dir, NULL};
	_cleanup_free_ char *out = NULL;
	int status;

	(void)run_capture(argv, MAKE_TIMEOUT_MS, 4096, &out, &status);
}

static int make(const char *docker, int rootfs_fd, const char *rootfs_sha256, const char *cache_dir,
		const char *tag, char *err, size_t errlen)
{
	_cleanup_free_ char *work = NULL, *tree = NULL, *tar = NULL, *source = NULL,
			    *extract = NULL, *label_rootfs = NULL, *label_layer = NULL;
	char sha[SHA256_HEX_LEN + 1];
	int r;

	if (geteuid() != 0) {
		snprintf(err, errlen,
			 "making Berth's Docker base image needs root once (it extracts the "
			 "pinned rootfs with its files' owners): run 'sudo berth vm install "
			 "--runtime docker'");
		return -EPERM;
	}
	if (mkdir_p(cache_dir, 0700) < 0 ||
	    asprintf(&work, "%s/docker-image.XXXXXX", cache_dir) < 0)
		return -ENOMEM;
	if (!mkdtemp(work)) {
		snprintf(err, errlen, "cannot create a directory in %s: %s", cache_dir,
			 strerror(errno));
		return -errno;
	}
	if (asprintf(&tree, "%s/tree", work) < 0 || asprintf(&tar, "%s/rootfs.tar", work) < 0 ||
	    asprintf(&source, "/proc/%d/fd/%d", (int)getpid(), rootfs_fd) < 0 ||
	    asprintf(&extract, "--extract=%s", tree) < 0) {
		r = -ENOMEM;
		goto out;
	}
	{
		/* The verified descriptor, not the path: what was hashed is what is extracted. */
		_cleanup_free_ char *path = NULL;

		if (find_executable_in_path("fsck.erofs", &path) < 0) {
			snprintf(err, errlen, "no fsck.erofs: install erofs-utils");
			r = -ENOENT;
			goto out;
		}
		char *const fsck[] = {path, extract, "--preserve", source, NULL};

		r = run(fsck, MAKE_TIMEOUT_MS, NULL, err, errlen);
		if (r < 0)
			goto out;
	}
	{
		/* Name order, numeric owners, no extended attributes, /dev left to Docker:
		 * the same rootfs gives the same bytes. */
		char *const tarv[] = {"/bin/tar",
				      "--create",
				      "--format=gnu",
				      "--sort=name",
				      "--numeric-owner",
				      "--no-xattrs",
				      "--no-acls",
				      "--exclude=./dev/*",
				      "-C",
				      tree,
				      "-f",
				      tar,
				      ".",
				      NULL};

		r = run(tarv, MAKE_TIMEOUT_MS, NULL, err, errlen);
		if (r < 0)
			goto out;
	}
	remove_tree(tree);
	r = sha256_file_hex(tar, sha, NULL);
	if (r < 0) {
		snprintf(err, errlen, "cannot hash %s: %s", tar, strerror(-r));
		goto out;
	}
	if (asprintf(&label_rootfs, "LABEL " LABEL_ROOTFS "=%s", rootfs_sha256) < 0 ||
	    asprintf(&label_layer, "LABEL " LABEL_LAYER "=%s", sha) < 0) {
		r = -ENOMEM;
		goto out;
	}
	{
		char *const import[] = {(char *)docker,
					"import",
					"--change",
					label_rootfs,
					"--change",
					label_layer,
					"--change",
					"ENTRYPOINT [\"/usr/sbin/berth-init\"]",
					tar,
					(char *)tag,
					NULL};

		r = run(import, MAKE_TIMEOUT_MS, NULL, err, errlen);
	}
out:
	remove_tree(work);
	return r;
}

int docker_image_find(const char *docker, const char *rootfs_sha256, DockerImage *ret, char *err,
		      size_t errlen)
{
	*ret = (DockerImage){};
	snprintf(ret->tag, sizeof(ret->tag), DOCKER_IMAGE_REPO ":%.16s", rootfs_sha256);
	return inspect(docker, ret->tag, rootfs_sha256, ret, err, errlen);
}

int docker_image_ensure(const char *docker, int rootfs_fd, const char *rootfs_sha256,
			const char *cache_dir, DockerImage *ret, char *err, size_t errlen)
{
	char why[512];
	int64_t t0;
	int r;

	r = docker_image_find(docker, rootfs_sha256, ret, why, sizeof(why));
	if (r >= 0)
		return 0;
	if (r != -ENOENT) {
		snprintf(err, errlen, "%s; is dockerd running? (berth doctor --sandbox docker)",
			 why);
		return r;
	}
	t0 = now_ms();
	r = make(docker, rootfs_fd, rootfs_sha256, cache_dir, ret->tag, err, errlen);
	if (r < 0)
		return r;
	r = inspect(docker, ret->tag, rootfs_sha256, ret, why, sizeof(why));
	if (r < 0) {
		snprintf(err, errlen, "the image just made does not check out: %s", why);
		return r;
	}
	ret->made = true;
	ret->make_ms = (long)(now_ms() - t0);
	return 0;
}
