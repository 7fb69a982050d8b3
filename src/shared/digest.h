/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* SHA-256 through OpenSSL's libcrypto; the only place the project touches it. */

#define SHA256_DIGEST_BYTES 32
#define SHA256_HEX_LEN 64

typedef struct Sha256 Sha256;

Sha256 *sha256_new(void);
int sha256_update(Sha256 *s, const void *data, size_t len);
/* Finish into @ret_hex (65 bytes: 64 lowercase hex digits and a NUL). */
int sha256_final_hex(Sha256 *s, char ret_hex[SHA256_HEX_LEN + 1]);
Sha256 *sha256_free(Sha256 *s);
static inline void sha256_freep(Sha256 **s)
{
	if (*s)
		sha256_free(*s);
}

int sha256_buffer_hex(const void *data, size_t len, char ret_hex[SHA256_HEX_LEN + 1]);
/* Have OpenSSL read its configuration and set up its providers now, as it does on first
 * use, for a process that is about to be copied (a VM's template): draws nothing from its
 * random generator. */
void sha256_preload(void);
/* Hash a whole file (or what @fd holds, read with pread from offset 0); @ret_size (may be
 * NULL) gets its byte count. */
int sha256_fd_hex(int fd, char ret_hex[SHA256_HEX_LEN + 1], uint64_t *ret_size);
int sha256_file_hex(const char *path, char ret_hex[SHA256_HEX_LEN + 1], uint64_t *ret_size);
/* True when @s is 64 lowercase hex digits. */
int sha256_hex_valid(const char *s);

/*
 * sha256_chunked_fd_hex() - the digest of a (sparse) disk image: the sha256 of the
 * concatenated binary sha256s of its consecutive @chunk-byte chunks (the last one short).
 * Holes are known to read as zeros, so a chunk that lies wholly in a hole takes the
 * precomputed digest of a zero chunk instead of being read. *@ret_hashed_bytes (may be
 * NULL) gets how many bytes were actually read.
 */
int sha256_chunked_fd_hex(int fd, uint64_t chunk, char ret_hex[SHA256_HEX_LEN + 1],
			  uint64_t *ret_hashed_bytes);
/* The same digest, writing what it reads into @out_fd at the same offsets, page by page and
 * only the pages that are not all zeros (so that @out_fd, a fresh sparse file or memfd of
 * @fd's size, ends up equal to @fd and no larger than its data). What is hashed is what is
 * written: a file that changes while it is read cannot give @out_fd other bytes than its
 * digest says. */
int sha256_chunked_copy_fd_hex(int fd, uint64_t chunk, int out_fd, char ret_hex[SHA256_HEX_LEN + 1],
			       uint64_t *ret_hashed_bytes);
/* The same on @n_workers threads (1 to 4; sha256_chunked_copy_fd_hex() takes one per CPU),
 * each reading every @n_workers-th chunk: the digest does not depend on how many. With
 * @ret_hex NULL it only copies. */
int sha256_chunked_copy_fd_hex_workers(int fd, uint64_t chunk, int out_fd, unsigned n_workers,
				       char ret_hex[SHA256_HEX_LEN + 1],
				       uint64_t *ret_hashed_bytes);
/* The copy of sha256_chunked_copy_fd_hex() without the digest, for a file known to be
 * unchanged since it was hashed (berth-vmm's hash-record.h). */
int chunked_copy_fd(int fd, uint64_t chunk, int out_fd, uint64_t *ret_copied_bytes);
