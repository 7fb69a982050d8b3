/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

/*
 * The GitHub broker's TLS (docs/github.md), with OpenSSL's library: the per-boot CA and the
 * leaf it signs for api.github.com, the server context the app's connections are answered
 * with, the client context GitHub is reached with, and a socket BIO that first hands
 * OpenSSL bytes already read.
 *
 * SECURITY: the CA's private key exists only inside tls_ca_make(): it signs the leaf and is
 * freed, so nothing (a file, a later compromise of the broker) can mint another
 * certificate under the CA the app trusts. The CA is also name-constrained to
 * api.github.com, so even its certificate vouches for that one name.
 */

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stddef.h>

#define TLS_CA_CN "Berth Local MITM CA"
#define TLS_CA_DAYS 2
#define TLS_SYSTEM_ROOTS "/etc/ssl/certs/ca-certificates.crt"
/* Of a PEM bundle read: the system's is about 220 KiB. */
#define TLS_BUNDLE_MAX (4 * 1024 * 1024)

typedef struct TlsCa {
	X509 *ca;	    /* the CA's certificate (its key is gone) */
	X509 *leaf;	    /* for @host, signed by the CA */
	EVP_PKEY *leaf_key; /* the leaf's key */
} TlsCa;

void tls_ca_done(TlsCa *c);

/*
 * tls_ca_make() - a new P-256 CA (CN TLS_CA_CN, TLS_CA_DAYS days, path length 0, permitted
 * DNS name @host only) and a leaf for @host (subjectAltName DNS:@host, serverAuth), each
 * with a random 128-bit serial. Returns 0 or -ENOMEM / -EIO.
 */
int tls_ca_make(const char *host, TlsCa *ret);

/* The PEM text of a certificate, malloc()ed and NUL-terminated; NULL on OOM. */
char *tls_cert_pem(X509 *cert);

/* The server context: the leaf (with the CA in its chain), TLS 1.2 and later. NULL on error. */
SSL_CTX *tls_server_ctx(const TlsCa *c);

/*
 * tls_client_ctx() - the context for reaching @host's server: TLS 1.2 and later, the peer
 * verified against @roots_pem (PEM text, one or more certificates), or against the file
 * @roots_file when @roots_pem is NULL. Hostname checking is per connection
 * (tls_client_new()). Returns NULL and a reason in @why.
 */
SSL_CTX *tls_client_ctx(const char *roots_pem, const char *roots_file, char *why, size_t whylen);

/* An SSL for a connection to @host through @fd: SNI, and the certificate must name @host. */
SSL *tls_client_new(SSL_CTX *ctx, int fd, const char *host, const void *pending, size_t n_pending);

/* An SSL answering the app on @fd, @pending (@n_pending bytes the app sent right behind its
 * CONNECT head) read first. */
SSL *tls_server_new(SSL_CTX *ctx, int fd, const void *pending, size_t n_pending);

/* Why the last handshake or I/O on @ssl failed (@ret from SSL_*), for a log line. */
const char *tls_error(SSL *ssl, int ret, char *buf, size_t size);
