/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>

#include "digest.h"
#include "macros.h"

struct Sha256 {
	EVP_MD_CTX *ctx;
};

Sha256 *sha256_new(void)
{
	Sha256 *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->ctx = EVP_MD_CTX_new();
	if (!s->ctx || EVP_DigestInit_ex(s->ctx, EVP_sha256(), NULL) != 1)
		return sha256_free(s);
	return s;
}

int sha256_update(Sha256 *s, const void *data, size_t len)
{
	return EVP_DigestUpdate(s->ctx, data, len) == 1 ? 0 : -EIO;
}

int sha256_final_hex(Sha256 *s, char ret_hex[SHA256_HEX_LEN + 1])
{
	static const char hex[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	if (EVP_DigestFinal_ex(s->ctx, md, &len) != 1 || len != SHA256_DIGEST_BYTES)
		return -EIO;
	for (unsigned int i = 0; i < len; i++) {
		ret_hex[2 * i] = hex[md[i] >> 4];
		ret_hex[2 * i + 1] = hex[md[i] & 15];
	}
	ret_hex[SHA256_HEX_LEN] = '\0';
	return 0;
}

Sha256 *sha256_free(Sha256 *s)
{
	if (s) {
		EVP_MD_CTX_free(s->ctx);
		free(s);
	}
	return NULL;
}

int sha256_buffer_hex(const void *data, size_t len, char ret_hex[SHA256_HEX_LEN + 1])
{
	_cleanup_(sha256_freep) Sha256 *s = sha256_new();
	int r;

	if (!s)
		return -ENOMEM;
	r = sha256_update(s, data, len);
	if (r < 0)
		return r;
	return sha256_final_hex(s, ret_hex);
}

int sha256_fd_hex(int fd, char ret_hex[SHA256_HEX_LEN + 1], uint64_t *ret_size)
{
	_cleanup_(sha256_freep) Sha256 *s = sha256_new();
	static char buf[1 << 20];
	uint64_t total = 0;

	if (!s)
		return -ENOMEM;
	/* pread from 0: the descriptor's own offset is left alone for whoever reads it next. */
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof(buf), (off_t)total);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		if (sha256_update(s, buf, (size_t)n) < 0)
			return -EIO;
		total += (uint64_t)n;
	}
	if (ret_size)
		*ret_size = total;
	return sha256_final_hex(s, ret_hex);
}

int sha256_file_hex(const char *path, char ret_hex[SHA256_HEX_LEN + 1], uint64_t *ret_size)
{
	_cleanup_close_ int fd = RET_NERRNO(open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY));

	if (fd < 0)
		return fd;
	return sha256_fd_hex(fd, ret_hex, ret_size);
}

void sha256_preload(void)
{
	char hex[SHA256_HEX_LEN + 1];

	(void)sha256_buffer_hex("", 0, hex);
}

int sha256_hex_valid(const char *s)
{
	if (!s || strlen(s) != SHA256_HEX_LEN)
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

static int sha256_raw(const void *data, size_t len, unsigned char out[SHA256_DIGEST_BYTES])
{
	unsigned int n = 0;

	return EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) == 1 && n == SHA256_DIGEST_BYTES
		       ? 0
		       : -EIO;
}

#define COPY_PAGE_BYTES 4096

static bool page_is_zero(const unsigned char *p, size_t len)
{
	static const unsigned char zeros[COPY_PAGE_BYTES];

	return memcmp(p, zeros, MIN(len, sizeof(zeros))) == 0;
}

/* Write @buf's pages that are not all zeros to @out_fd at @off, runs of them at once. */
static int write_nonzero_pages(int out_fd, const unsigned char *buf, size_t len, uint64_t off)
{
	size_t run = 0, at = 0;

	/* One step past the last page, which may be short, writes the last run out. */
	for (size_t i = 0;; i += COPY_PAGE_BYTES) {
		bool end = i >= len,
		     zero = end || page_is_zero(buf + i, MIN(COPY_PAGE_BYTES, len - i));

		if (!zero) {
			if (run == 0)
				at = i;
			run += MIN(COPY_PAGE_BYTES, len - i);
			continue;
		}
		while (run > 0) {
			ssize_t n = pwrite(out_fd, buf + at, run, (off_t)(off + at));

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return n < 0 ? -errno : -EIO;
			at += (size_t)n;
			run -= (size_t)n;
		}
		if (end)
			break;
	}
	return 0;
}

int sha256_chunked_fd_hex(int fd, uint64_t chunk, char ret_hex[SHA256_HEX_LEN + 1],
			  uint64_t *ret_hashed_bytes)
{
	return sha256_chunked_copy_fd_hex(fd, chunk, -EBADF, ret_hex, ret_hashed_bytes);
}

/* Chunks per round of the workers: their digests are folded in order between rounds, so
 * memory stays bounded whatever the file's size. */
#define CHUNKED_ROUND 1024
#define CHUNKED_WORKERS_MAX 4

/* One round of sha256_chunked_copy_fd_hex(): chunks [first, first + count), each worker
 * taking every step-th of them, so that a file whose data lies in one part of it still
 * spreads over all of them. */
typedef struct ChunkedRound {
	int fd, out_fd;
	uint64_t size, chunk, first, count;
	unsigned step;
	const unsigned char *zero_md;
	unsigned char (*md)[SHA256_DIGEST_BYTES]; /* NULL: copy only */
	atomic_int error;
} ChunkedRound;

typedef struct ChunkedWorker {
	ChunkedRound *round;
	unsigned index;
	unsigned char *buf;
	uint64_t hashed;
	pthread_t thread;
	bool started;
} ChunkedWorker;

static int chunked_one(ChunkedRound *rd, unsigned char *buf, uint64_t i, uint64_t *hashed)
{
	uint64_t off = (rd->first + i) * rd->chunk;
	size_t len = (size_t)MIN(rd->chunk, rd->size - off);
	off_t data = lseek(rd->fd, (off_t)off, SEEK_DATA);
	ssize_t n;
	int r;

	/* No data in [off, off+len): the chunk is a hole, all zeros. */
	if (len == rd->chunk &&
	    ((data < 0 && errno == ENXIO) || (data >= 0 && (uint64_t)data >= off + len))) {
		if (rd->md)
			memcpy(rd->md[i], rd->zero_md, SHA256_DIGEST_BYTES);
		return 0;
	}
	n = pread(rd->fd, buf, len, (off_t)off);
	if (n != (ssize_t)len)
		return n < 0 ? -errno : -EIO;
	*hashed += len;
	r = rd->md ? sha256_raw(buf, len, rd->md[i]) : 0;
	if (r >= 0 && rd->out_fd >= 0)
		r = write_nonzero_pages(rd->out_fd, buf, len, off);
	return r;
}

static void *chunked_worker(void *userdata)
{
	ChunkedWorker *w = userdata;
	ChunkedRound *rd = w->round;

	for (uint64_t i = w->index; i < rd->count && atomic_load(&rd->error) == 0; i += rd->step) {
		int r = chunked_one(rd, w->buf, i, &w->hashed);

		if (r < 0) {
			int none = 0;

			(void)atomic_compare_exchange_strong(&rd->error, &none, r);
		}
	}
	return NULL;
}

/* Run a round on @n workers: the calling thread is the first; a worker whose thread cannot
 * be made runs on it too, afterwards. */
static int chunked_round(ChunkedRound *rd, ChunkedWorker *workers, unsigned n)
{
	for (unsigned k = 1; k < n; k++)
		workers[k].started =
			pthread_create(&workers[k].thread, NULL, chunked_worker, &workers[k]) == 0;
	(void)chunked_worker(&workers[0]);
	for (unsigned k = 1; k < n; k++) {
		if (workers[k].started)
			(void)pthread_join(workers[k].thread, NULL);
		else
			(void)chunked_worker(&workers[k]);
	}
	return atomic_load(&rd->error);
}

int sha256_chunked_copy_fd_hex(int fd, uint64_t chunk, int out_fd, char ret_hex[SHA256_HEX_LEN + 1],
			       uint64_t *ret_hashed_bytes)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	return sha256_chunked_copy_fd_hex_workers(fd, chunk, out_fd, (unsigned)MAX(cpus, 1L),
						  ret_hex, ret_hashed_bytes);
}

int chunked_copy_fd(int fd, uint64_t chunk, int out_fd, uint64_t *ret_copied_bytes)
{
	return sha256_chunked_copy_fd_hex(fd, chunk, out_fd, NULL, ret_copied_bytes);
}

int sha256_chunked_copy_fd_hex_workers(int fd, uint64_t chunk, int out_fd, unsigned n_workers,
				       char ret_hex[SHA256_HEX_LEN + 1], uint64_t *ret_hashed_bytes)
{
	/* Without @ret_hex, no digest: nothing to fold them into, nor the chunks' digests. */
	_cleanup_(sha256_freep) Sha256 *outer = ret_hex ? sha256_new() : NULL;
	_cleanup_free_ unsigned char(*md)[SHA256_DIGEST_BYTES] = NULL;
	_cleanup_free_ unsigned char *bufs = NULL;
	ChunkedWorker workers[CHUNKED_WORKERS_MAX] = {};
	unsigned char zero_md[SHA256_DIGEST_BYTES];
	unsigned n = MIN(MAX(n_workers, 1u), (unsigned)CHUNKED_WORKERS_MAX);
	ChunkedRound rd;
	uint64_t chunks, hashed = 0;
	struct stat st;
	int r;

	if (chunk == 0 || chunk > (64u << 20))
		return -EINVAL;
	if (ret_hex && !outer)
		return -ENOMEM;
	if (fstat(fd, &st) < 0)
		return -errno;
	/* One buffer per worker, the first zeroed for the zero chunk's digest. */
	bufs = calloc(n, chunk);
	md = ret_hex ? calloc(CHUNKED_ROUND, sizeof(*md)) : NULL;
	if (!bufs || (ret_hex && !md))
		return -ENOMEM;
	r = md ? sha256_raw(bufs, chunk, zero_md) : 0;
	if (r < 0)
		return r;
	rd = (ChunkedRound){.fd = fd,
			    .out_fd = out_fd,
			    .size = (uint64_t)st.st_size,
			    .chunk = chunk,
			    .step = n,
			    .zero_md = zero_md,
			    .md = md};
	chunks = rd.size / chunk + (rd.size % chunk != 0);
	for (unsigned k = 0; k < n; k++)
		workers[k] = (ChunkedWorker){.round = &rd, .index = k, .buf = bufs + k * chunk};
	for (uint64_t first = 0; first < chunks; first += CHUNKED_ROUND) {
		rd.first = first;
		rd.count = MIN((uint64_t)CHUNKED_ROUND, chunks - first);
		r = chunked_round(&rd, workers, n);
		if (r < 0)
			return r;
		for (uint64_t i = 0; md && i < rd.count; i++) {
			r = sha256_update(outer, md[i], sizeof(md[i]));
			if (r < 0)
				return r;
		}
	}
	for (unsigned k = 0; k < n; k++)
		hashed += workers[k].hashed;
	if (ret_hashed_bytes)
		*ret_hashed_bytes = hashed;
	return md ? sha256_final_hex(outer, ret_hex) : 0;
}
