/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "macros.h"
#include "tls.h"

void tls_ca_done(TlsCa *c)
{
	X509_free(c->ca);
	X509_free(c->leaf);
	EVP_PKEY_free(c->leaf_key);
	*c = (TlsCa){};
}

static void x509_freep(X509 **x)
{
	X509_free(*x);
}

static void pkey_freep(EVP_PKEY **k)
{
	EVP_PKEY_free(*k);
}

static int set_serial(X509 *x)
{
	unsigned char raw[16];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return -EIO;
	raw[0] &= 0x7f; /* a positive INTEGER */
	bn = BN_bin2bn(raw, sizeof(raw), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != NULL;
	BN_free(bn);
	return ok ? 0 : -ENOMEM;
}

/* One extension in openssl's config syntax ("critical,CA:TRUE"). */
static int add_ext(X509 *x, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return -EIO;
	ok = X509_add_ext(x, ext, -1);
	X509_EXTENSION_free(ext);
	return ok ? 0 : -ENOMEM;
}

typedef struct Ext {
	int nid;
	const char *value;
} Ext;

/* A v3 certificate for @key named CN=@cn, issued by @issuer (NULL: itself) and signed with
 * @issuer_key. One hour of slack before now, for a clock that is a little behind. */
static X509 *make_cert(EVP_PKEY *key, const char *cn, X509 *issuer, EVP_PKEY *issuer_key,
		       const Ext *exts, size_t n_exts)
{
	_cleanup_(x509_freep) X509 *x = X509_new();
	X509_NAME *name;

	if (!x || !X509_set_version(x, 2) || set_serial(x) < 0 ||
	    !X509_gmtime_adj(X509_getm_notBefore(x), -3600) ||
	    !X509_gmtime_adj(X509_getm_notAfter(x), (long)TLS_CA_DAYS * 24 * 3600) ||
	    !X509_set_pubkey(x, key))
		return NULL;
	name = X509_get_subject_name(x);
	if (!X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1,
					-1, 0))
		return NULL;
	if (!X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : name))
		return NULL;
	for (size_t i = 0; i < n_exts; i++)
		if (add_ext(x, issuer ?: x, exts[i].nid, exts[i].value) < 0)
			return NULL;
	if (X509_sign(x, issuer_key, EVP_sha256()) <= 0)
		return NULL;
	return TAKE_PTR(x);
}

int tls_ca_make(const char *host, TlsCa *ret)
{
	_cleanup_(pkey_freep) EVP_PKEY *ca_key = EVP_EC_gen("P-256");
	_cleanup_(pkey_freep) EVP_PKEY *leaf_key = EVP_EC_gen("P-256");
	_cleanup_(x509_freep) X509 *ca = NULL, *leaf = NULL;
	_cleanup_free_ char *constraint = NULL, *san = NULL;

	if (!ca_key || !leaf_key || asprintf(&constraint, "critical,permitted;DNS:%s", host) < 0 ||
	    asprintf(&san, "DNS:%s", host) < 0)
		return -ENOMEM;
	const Ext ca_exts[] = {
		{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
		{NID_key_usage, "critical,keyCertSign,cRLSign"},
		{NID_subject_key_identifier, "hash"},
		/* Even the CA's certificate vouches for the API host alone. */
		{NID_name_constraints, constraint},
	};
	const Ext leaf_exts[] = {
		{NID_basic_constraints, "critical,CA:FALSE"},
		{NID_key_usage, "critical,digitalSignature"},
		{NID_ext_key_usage, "serverAuth"},
		{NID_subject_alt_name, san},
		{NID_authority_key_identifier, "keyid:always"},
	};

	ca = make_cert(ca_key, TLS_CA_CN, NULL, ca_key, ca_exts, ELEMENTSOF(ca_exts));
	if (!ca)
		return -EIO;
	leaf = make_cert(leaf_key, host, ca, ca_key, leaf_exts, ELEMENTSOF(leaf_exts));
	if (!leaf)
		return -EIO;
	/* ca_key is freed on return: no one can sign anything with it again. */
	*ret = (TlsCa){.ca = TAKE_PTR(ca), .leaf = TAKE_PTR(leaf), .leaf_key = TAKE_PTR(leaf_key)};
	return 0;
}

char *tls_cert_pem(X509 *cert)
{
	BIO *b = BIO_new(BIO_s_mem());
	char *data = NULL, *out = NULL;
	long n;

	if (b && PEM_write_bio_X509(b, cert)) {
		n = BIO_get_mem_data(b, &data);
		if (n > 0)
			out = strndup(data, (size_t)n);
	}
	BIO_free(b);
	return out;
}

SSL_CTX *tls_server_ctx(const TlsCa *c)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
	    SSL_CTX_use_certificate(ctx, c->leaf) != 1 ||
	    SSL_CTX_use_PrivateKey(ctx, c->leaf_key) != 1 || SSL_CTX_check_private_key(ctx) != 1 ||
	    SSL_CTX_add1_chain_cert(ctx, c->ca) != 1) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	return ctx;
}

/* Every certificate in @pem into @store; the number added, or -EINVAL for none. */
static int add_pem_roots(X509_STORE *store, const char *pem)
{
	BIO *b = BIO_new_mem_buf(pem, -1);
	X509 *x;
	int n = 0;

	if (!b)
		return -ENOMEM;
	while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
		if (X509_STORE_add_cert(store, x) == 1)
			n++;
		X509_free(x);
	}
	ERR_clear_error(); /* the end of the text reads as an error */
	BIO_free(b);
	return n > 0 ? n : -EINVAL;
}

SSL_CTX *tls_client_ctx(const char *roots_pem, const char *roots_file, char *why, size_t whylen)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
		snprintf(why, whylen, "cannot make a TLS client context");
		SSL_CTX_free(ctx);
		return NULL;
	}
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
	if (roots_pem) {
		if (add_pem_roots(SSL_CTX_get_cert_store(ctx), roots_pem) < 0) {
			snprintf(why, whylen, "the trust anchors given hold no PEM certificate");
			SSL_CTX_free(ctx);
			return NULL;
		}
	} else if (SSL_CTX_load_verify_locations(ctx, roots_file, NULL) != 1) {
		snprintf(why, whylen, "cannot read the trust anchors in %s", roots_file);
		ERR_clear_error();
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

/* --- a socket BIO with bytes already read in front ------------------------------------- */

typedef struct FdBio {
	int fd;
	char *pending;
	size_t n, off;
} FdBio;

static int fd_bio_write(BIO *b, const char *data, int len)
{
	FdBio *p = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	do
		n = send(p->fd, data, (size_t)len, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -1 : (int)n;
}

static int fd_bio_read(BIO *b, char *buf, int len)
{
	FdBio *p = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	if (len <= 0)
		return 0;
	if (p->off < p->n) {
		size_t take = MIN((size_t)len, p->n - p->off);

		memcpy(buf, p->pending + p->off, take);
		p->off += take;
		return (int)take;
	}
	/* A blocking socket with a receive timeout: EAGAIN is a timeout, and an error. */
	do
		n = recv(p->fd, buf, (size_t)len, 0);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -1 : (int)n;
}

static long fd_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	FdBio *p = BIO_get_data(b);

	switch (cmd) {
	case BIO_CTRL_FLUSH:
		return 1;
	case BIO_CTRL_PENDING:
		return p ? (long)(p->n - p->off) : 0;
	default:
		return 0;
	}
}

static int fd_bio_destroy(BIO *b)
{
	FdBio *p = BIO_get_data(b);

	if (p) {
		free(p->pending);
		free(p);
	}
	BIO_set_data(b, NULL);
	return 1;
}

static int fd_bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static BIO_METHOD *fd_bio_method(void)
{
	static BIO_METHOD *m;

	if (m)
		return m;
	m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "berth-fd");
	if (m && (!BIO_meth_set_write(m, fd_bio_write) || !BIO_meth_set_read(m, fd_bio_read) ||
		  !BIO_meth_set_ctrl(m, fd_bio_ctrl) || !BIO_meth_set_create(m, fd_bio_create) ||
		  !BIO_meth_set_destroy(m, fd_bio_destroy))) {
		BIO_meth_free(m);
		m = NULL;
	}
	return m;
}

static SSL *ssl_on_fd(SSL_CTX *ctx, int fd, const void *pending, size_t n_pending)
{
	BIO_METHOD *m = fd_bio_method();
	FdBio *p = calloc(1, sizeof(*p));
	BIO *b = m ? BIO_new(m) : NULL;
	SSL *ssl = SSL_new(ctx);

	if (!p || !b || !ssl || (n_pending > 0 && !(p->pending = malloc(n_pending)))) {
		free(p);
		BIO_free(b);
		SSL_free(ssl);
		return NULL;
	}
	p->fd = fd;
	p->n = n_pending;
	if (n_pending > 0)
		memcpy(p->pending, pending, n_pending);
	BIO_set_data(b, p);
	SSL_set_bio(ssl, b, b);
	return ssl;
}

SSL *tls_server_new(SSL_CTX *ctx, int fd, const void *pending, size_t n_pending)
{
	SSL *ssl = ssl_on_fd(ctx, fd, pending, n_pending);

	if (ssl)
		SSL_set_accept_state(ssl);
	return ssl;
}

SSL *tls_client_new(SSL_CTX *ctx, int fd, const char *host, const void *pending, size_t n_pending)
{
	SSL *ssl = ssl_on_fd(ctx, fd, pending, n_pending);

	if (!ssl)
		return NULL;
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	if (!SSL_set_tlsext_host_name(ssl, host) || !SSL_set1_host(ssl, host)) {
		SSL_free(ssl);
		return NULL;
	}
	SSL_set_connect_state(ssl);
	return ssl;
}

const char *tls_error(SSL *ssl, int ret, char *buf, size_t size)
{
	int e = SSL_get_error(ssl, ret);
	long v = SSL_get_verify_result(ssl);
	unsigned long err;

	switch (e) {
	case SSL_ERROR_ZERO_RETURN:
		snprintf(buf, size, "the peer closed the TLS connection");
		break;
	case SSL_ERROR_SYSCALL:
		snprintf(buf, size, "%s",
			 errno == EAGAIN ? "timed out"
			 : errno	 ? strerror(errno)
					 : "the connection closed");
		break;
	case SSL_ERROR_SSL:
		if (v != X509_V_OK) {
			snprintf(buf, size, "certificate verify failed: %s",
				 X509_verify_cert_error_string(v));
			break;
		}
		err = ERR_peek_last_error();
		snprintf(buf, size, "%s", err ? ERR_reason_error_string(err) ?: "TLS error" : "TLS error");
		break;
	default:
		snprintf(buf, size, "TLS error %d", e);
		break;
	}
	ERR_clear_error();
	return buf;
}
