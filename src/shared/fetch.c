/* SPDX-License-Identifier: Apache-2.0 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "digest.h"
#include "fetch.h"
#include "fileio.h"
#include "log.h"
#include "macros.h"
#include "time-util.h"

/* Longest wait between retries; the first waits 250 ms, each next one twice as long. */
#define BACKOFF_MS_FIRST 250
#define BACKOFF_MS_MAX 4000
#define REDIRECTS_MAX 10

typedef struct Transfer {
	const FetchRequest *req;
	FetchReport *report;
	CURL *easy;
	int fd;		  /* the .part file */
	bool locked;	  /* this process holds its lock */
	Sha256 *hash;	  /* covers [0, offset) of the .part file */
	uint64_t offset;  /* verified-length prefix already in the .part file */
	bool prefix_kept; /* bytes from an earlier transfer are part of the .part file */
	bool started;	  /* the response's status and length have been checked */
	bool stalled;
	int error;	    /* set by a callback that aborted the transfer */
	bool error_retry;   /* ... and whether another attempt may fix it */
	long long cr_start; /* Content-Range of the current response, -1 when absent */
	long long cr_total;
	uint64_t last_data_ms;
	char *err;
	size_t errlen;
} Transfer;

_printf_(3, 4) static int fetch_fail(Transfer *t, int error, const char *fmt, ...)
{
	va_list ap;

	if (t->err && t->errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(t->err, t->errlen, fmt, ap);
		va_end(ap);
	}
	return error;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = {.tv_sec = (time_t)(ms / 1000),
			      .tv_nsec = (long)(ms % 1000) * 1000000};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

uint64_t fetch_stall_ms(void)
{
	const char *e = getenv(FETCH_STALL_ENV);
	unsigned long long v;
	char *end = NULL;

	if (!e || !*e)
		return FETCH_STALL_MS_DEFAULT;
	errno = 0;
	v = strtoull(e, &end, 10);
	if (errno != 0 || !end || *end || v == 0 || *e == '-')
		return FETCH_STALL_MS_DEFAULT;
	return v;
}

static bool url_is_http(const char *url)
{
	return strncasecmp(url, "http://", 7) == 0 || strncasecmp(url, "https://", 8) == 0;
}

static bool url_scheme_allowed(const char *url)
{
	return url_is_http(url) || strncasecmp(url, "file://", 7) == 0;
}

/* Start the .part file over: a prefix that cannot be trusted or continued is dropped. */
static int part_restart(Transfer *t)
{
	if (ftruncate(t->fd, 0) < 0)
		return -errno;
	sha256_free(t->hash);
	t->hash = sha256_new();
	if (!t->hash)
		return -ENOMEM;
	t->offset = 0;
	t->prefix_kept = false;
	return 0;
}

/*
 * Open and lock the .part file and hash what an earlier run left in it, so a resumed
 * download is verified over all of its bytes, not just the ones this process received.
 */
static int part_open(Transfer *t, const char *part)
{
	static char buf[1 << 16];
	struct stat st;
	uint64_t done = 0;

	t->fd = RET_NERRNO(open(part, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600));
	if (t->fd < 0)
		return fetch_fail(t, t->fd, "cannot open %s: %s", part, strerror(-t->fd));
	if (flock(t->fd, LOCK_EX | LOCK_NB) < 0)
		return fetch_fail(
			t, errno == EWOULDBLOCK ? -EBUSY : -errno,
			"%s is being written by another berth process; wait for it to finish",
			part);
	t->locked = true;
	if (fstat(t->fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return fetch_fail(t, -EBADFD, "%s is not a regular file", part);
	t->hash = sha256_new();
	if (!t->hash)
		return -ENOMEM;
	if ((uint64_t)st.st_size > t->req->size)
		return part_restart(t);
	while (done < (uint64_t)st.st_size) {
		ssize_t n = pread(t->fd, buf, MIN(sizeof(buf), (uint64_t)st.st_size - done),
				  (off_t)done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return part_restart(t);
		if (sha256_update(t->hash, buf, (size_t)n) < 0)
			return -EIO;
		done += (uint64_t)n;
	}
	t->offset = done;
	t->prefix_kept = done > 0;
	return 0;
}

static size_t on_header(char *buf, size_t size, size_t n, void *userdata)
{
	Transfer *t = userdata;
	size_t len = size * n;
	char line[256];
	unsigned long long a, b, total;

	t->last_data_ms = now_ms();
	/* A redirect produces several header blocks; only the last response's range counts. */
	if (len >= 5 && strncasecmp(buf, "HTTP/", 5) == 0) {
		t->cr_start = t->cr_total = -1;
		return len;
	}
	if (len < 14 || strncasecmp(buf, "Content-Range:", 14) != 0)
		return len;
	snprintf(line, sizeof(line), "%.*s", (int)MIN(len, sizeof(line) - 1), buf);
	switch (sscanf(line + 14, " bytes %llu-%llu/%llu", &a, &b, &total)) {
	case 3:
		t->cr_total = (long long)total;
		/* fall through */
	case 2:
		t->cr_start = (long long)a;
		break;
	default:
		break;
	}
	return len;
}

static int transfer_check_length(Transfer *t, long long declared, const char *how)
{
	uint64_t size = t->req->size;

	if (declared < 0 || (uint64_t)declared == size)
		return 0;
	if ((uint64_t)declared > size)
		return fetch_fail(t, -EFBIG,
				  "the server %s %llu B, more than the pinned %" PRIu64 " B", how,
				  declared, size);
	return fetch_fail(t, -EBADMSG, "the server %s %llu B, but the pinned size is %" PRIu64 " B",
			  how, declared, size);
}

/*
 * Look at the response before its first byte is stored: whether a range request was
 * honoured decides between appending and starting over, and a length the server announces
 * that cannot be the pinned one is refused without downloading it.
 */
static int transfer_begin(Transfer *t)
{
	curl_off_t length = -1;
	long code = 0;
	int r;

	curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_getinfo(t->easy, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length);
	t->started = true;
	if (code == 206) {
		if (t->cr_start != (long long)t->offset) {
			t->error_retry = true;
			r = part_restart(t);
			return r < 0 ? r
				     : fetch_fail(
					       t, -EPROTO,
					       "the server answered a request for bytes from %" PRIu64
					       " with a different range",
					       t->offset);
		}
		r = transfer_check_length(t, t->cr_total, "says the file is");
		if (r < 0)
			return r;
		t->report->resumes++;
		t->prefix_kept = t->offset > 0;
	} else if (t->offset > 0) {
		/* A 200 answer to a range request is the whole file: start over with it. */
		t->report->restarts++;
		r = part_restart(t);
		if (r < 0)
			return r;
	}
	if (length >= 0)
		length += (curl_off_t)t->offset;
	return transfer_check_length(t, length, "announced");
}

static size_t on_body(char *buf, size_t size, size_t n, void *userdata)
{
	Transfer *t = userdata;
	size_t len = size * n;
	int r;

	t->last_data_ms = now_ms();
	if (!t->started) {
		r = transfer_begin(t);
		if (r < 0) {
			t->error = r;
			return 0;
		}
	}
	if (len > t->req->size - t->offset) {
		t->error =
			fetch_fail(t, -EFBIG, "the server sent more than the pinned %" PRIu64 " B",
				   t->req->size);
		return 0;
	}
	for (size_t done = 0; done < len;) {
		ssize_t w = pwrite(t->fd, buf + done, len - done, (off_t)(t->offset + done));

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			t->error = fetch_fail(t, w < 0 ? -errno : -EIO,
					      "cannot write the download: %s",
					      strerror(w < 0 ? errno : EIO));
			return 0;
		}
		done += (size_t)w;
	}
	if (sha256_update(t->hash, buf, len) < 0) {
		t->error = -EIO;
		return 0;
	}
	t->offset += len;
	t->report->received += len;
	if (t->req->progress)
		t->req->progress(t->req->userdata, t->offset, t->req->size);
	return len;
}

static int transfer_setup(Transfer *t, char *curl_err)
{
	char range[32];
	CURL *e = t->easy;
	bool http = url_is_http(t->req->url);

	/* Only an HTTP status says whether a range was honoured, so other schemes start over. */
	if (!http && t->offset > 0) {
		int r = part_restart(t);

		if (r < 0)
			return r;
	}
	t->started = false;
	t->stalled = false;
	t->error = 0;
	t->error_retry = false;
	t->cr_start = t->cr_total = -1;
	if (curl_easy_setopt(e, CURLOPT_URL, t->req->url) != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https,file") != CURLE_OK ||
	    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK)
		return -ENOMEM;
	curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L);
	curl_easy_setopt(e, CURLOPT_MAXREDIRS, (long)REDIRECTS_MAX);
	curl_easy_setopt(e, CURLOPT_FAILONERROR, 1L);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_USERAGENT, "berth-vm-install");
	curl_easy_setopt(e, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, t);
	/*
	 * CURLOPT_RANGE rather than CURLOPT_RESUME_FROM_LARGE: libcurl fails a resumed
	 * transfer the server answers with 200, while a plain range lets on_body() take that
	 * answer as the whole file and start over in the same request.
	 */
	if (http && t->offset > 0) {
		snprintf(range, sizeof(range), "%" PRIu64 "-", t->offset);
		if (curl_easy_setopt(e, CURLOPT_RANGE, range) != CURLE_OK)
			return -ENOMEM;
	}
	return 0;
}

/*
 * Drive one transfer through the multi interface, so the stall timer has millisecond
 * precision: the easy interface's progress callback can be a second late when idle.
 */
static CURLcode transfer_run(CURLM *multi, Transfer *t, uint64_t stall_ms)
{
	CURLcode result = CURLE_OK;
	CURLMsg *msg;
	int running = 1, left;

	if (curl_multi_add_handle(multi, t->easy) != CURLM_OK)
		return CURLE_OUT_OF_MEMORY;
	t->last_data_ms = now_ms();
	for (;;) {
		uint64_t idle;

		if (curl_multi_perform(multi, &running) != CURLM_OK) {
			result = CURLE_RECV_ERROR;
			break;
		}
		if (!running)
			break;
		idle = now_ms() - t->last_data_ms;
		if (idle >= stall_ms) {
			t->stalled = true;
			break;
		}
		if (curl_multi_poll(multi, NULL, 0, (int)MIN(stall_ms - idle + 1, 1000), NULL) !=
		    CURLM_OK) {
			result = CURLE_RECV_ERROR;
			break;
		}
	}
	while ((msg = curl_multi_info_read(multi, &left)))
		if (msg->msg == CURLMSG_DONE && msg->easy_handle == t->easy)
			result = msg->data.result;
	curl_multi_remove_handle(multi, t->easy);
	return result;
}

static const struct {
	long status;
	int error;
	bool retry;
} http_errors[] = {
	{401, -EACCES, false}, {403, -EACCES, false}, {404, -ENOENT, false}, {410, -ENOENT, false},
	{408, -EAGAIN, true},  {425, -EAGAIN, true},  {429, -EAGAIN, true},  {416, -ERANGE, true},
};

static const struct {
	CURLcode code;
	int error;
	bool retry;
} curl_errors[] = {
	{CURLE_UNSUPPORTED_PROTOCOL, -EPROTONOSUPPORT, false},
	{CURLE_URL_MALFORMAT, -EINVAL, false},
	{CURLE_FILE_COULDNT_READ_FILE, -ENOENT, false},
	{CURLE_REMOTE_ACCESS_DENIED, -EACCES, false},
	{CURLE_TOO_MANY_REDIRECTS, -ELOOP, false},
	{CURLE_PEER_FAILED_VERIFICATION, -EPERM, false},
	{CURLE_OUT_OF_MEMORY, -ENOMEM, false},
	{CURLE_COULDNT_RESOLVE_HOST, -EHOSTUNREACH, true},
	{CURLE_COULDNT_CONNECT, -ECONNREFUSED, true},
	{CURLE_OPERATION_TIMEDOUT, -ETIMEDOUT, true},
	{CURLE_PARTIAL_FILE, -EPIPE, true},
	{CURLE_GOT_NOTHING, -EPIPE, true},
	{CURLE_RECV_ERROR, -ECONNRESET, true},
	{CURLE_SEND_ERROR, -ECONNRESET, true},
};

static int transfer_http_error(Transfer *t, bool *retry)
{
	long status = 0;

	curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
	*retry = status >= 500;
	for (size_t i = 0; i < ELEMENTSOF(http_errors); i++)
		if (http_errors[i].status == status) {
			*retry = http_errors[i].retry;
			/* The .part file is longer than what the server has: not the same file. */
			if (status == 416 && part_restart(t) < 0)
				*retry = false;
			return fetch_fail(t, http_errors[i].error, "HTTP %ld from the server",
					  status);
		}
	return fetch_fail(t, *retry ? -EAGAIN : -EREMOTEIO, "HTTP %ld from the server", status);
}

/* Classify a finished transfer: 0 when it ended cleanly, else -errno and *@retry. */
static int transfer_result(Transfer *t, CURLcode code, const char *curl_err, uint64_t stall_ms,
			   bool *retry)
{
	*retry = false;
	if (t->stalled) {
		*retry = true;
		t->report->stalls++;
		return fetch_fail(t, -ETIMEDOUT, "received nothing for %" PRIu64 " ms", stall_ms);
	}
	if (code == CURLE_WRITE_ERROR && t->error < 0) {
		*retry = t->error_retry;
		return t->error;
	}
	if (code == CURLE_HTTP_RETURNED_ERROR)
		return transfer_http_error(t, retry);
	if (code != CURLE_OK) {
		int error = -EIO;

		*retry = true;
		for (size_t i = 0; i < ELEMENTSOF(curl_errors); i++)
			if (curl_errors[i].code == code) {
				error = curl_errors[i].error;
				*retry = curl_errors[i].retry;
			}
		if (code == CURLE_UNSUPPORTED_PROTOCOL)
			return fetch_fail(t, error, "only http, https and file URLs are allowed");
		return fetch_fail(t, error, "%s", *curl_err ? curl_err : curl_easy_strerror(code));
	}
	/* An empty body never reached on_body(); its length still has to be the pin's. */
	if (!t->started) {
		int r = transfer_begin(t);

		if (r < 0)
			return r;
	}
	if (t->offset < t->req->size) {
		*retry = true;
		return fetch_fail(t, -EPIPE,
				  "the transfer ended after %" PRIu64 " of %" PRIu64 " B",
				  t->offset, t->req->size);
	}
	return 0;
}

/* One request. Returns 0 when the .part file may now be complete, else -errno and *@retry. */
static int fetch_once(CURLM *multi, Transfer *t, uint64_t stall_ms, bool *retry)
{
	char curl_err[CURL_ERROR_SIZE] = "";
	CURLcode code;
	int r;

	*retry = false;
	t->easy = curl_easy_init();
	if (!t->easy)
		return -ENOMEM;
	r = transfer_setup(t, curl_err);
	if (r >= 0) {
		if (t->req->progress)
			t->req->progress(t->req->userdata, t->offset, t->req->size);
		code = transfer_run(multi, t, stall_ms);
		r = transfer_result(t, code, curl_err, stall_ms, retry);
	}
	curl_easy_cleanup(t->easy);
	t->easy = NULL;
	log_debug("fetch %s: attempt %u: %d, %" PRIu64 " of %" PRIu64 " B", t->req->url,
		  t->report->attempts, r, t->offset, t->req->size);
	return r;
}

static int fsync_parent(const char *path)
{
	_cleanup_free_ char *dir = strdup(path);
	_cleanup_close_ int fd = -EBADF;
	char *slash;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (!slash)
		return 0;
	*(slash == dir ? slash + 1 : slash) = '\0';
	fd = RET_NERRNO(open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	if (fd < 0)
		return fd;
	return RET_NERRNO(fsync(fd));
}

/* Compare the finished .part file with the pin; rename it into place when it matches. */
static int part_commit(Transfer *t, const char *part)
{
	char got[SHA256_HEX_LEN + 1];
	int r;

	r = sha256_final_hex(t->hash, got);
	sha256_free(t->hash);
	t->hash = NULL;
	if (r < 0)
		return r;
	if (!streq(got, t->req->sha256))
		return fetch_fail(t, -EBADMSG, "sha256 mismatch: expected %s, got %s",
				  t->req->sha256, got);
	if (fsync(t->fd) < 0 || fchmod(t->fd, t->req->mode) < 0)
		return fetch_fail(t, -errno, "cannot finish %s: %s", part, strerror(errno));
	if (rename(part, t->req->path) < 0)
		return fetch_fail(t, -errno, "cannot rename %s into place: %s", part,
				  strerror(errno));
	(void)fsync_parent(t->req->path);
	return 0;
}

static bool error_is_refusal(int r)
{
	return r == -EFBIG || r == -EBADMSG;
}

static void curl_init_once(void)
{
	static bool done;

	if (!done && curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK)
		done = true;
}

static int fetch_loop(CURLM *multi, Transfer *t, const char *part)
{
	const FetchRequest *req = t->req;
	unsigned max = req->max_attempts ? req->max_attempts : FETCH_ATTEMPTS_DEFAULT;
	uint64_t stall_ms = req->stall_ms ? req->stall_ms : fetch_stall_ms();
	int r = 0;

	for (;;) {
		bool retry = false;

		if (t->offset == req->size) {
			r = part_commit(t, part);
			if (r != -EBADMSG || !t->prefix_kept || t->report->attempts >= max)
				return r;
			/* An earlier prefix may be what is wrong: one clean download decides. */
			r = part_restart(t);
			if (r < 0)
				return r;
		}
		if (t->report->attempts >= max)
			break;
		if (t->report->attempts > 0)
			sleep_ms(MIN((uint64_t)BACKOFF_MS_FIRST << (t->report->attempts - 1),
				     BACKOFF_MS_MAX));
		t->report->attempts++;
		r = fetch_once(multi, t, stall_ms, &retry);
		if (r < 0 && !retry)
			return r;
	}
	if (t->err && t->errlen > 0 && max > 1) {
		char last[256];

		snprintf(last, sizeof(last), "%s", t->err);
		snprintf(t->err, t->errlen, "gave up after %u attempts; the last one: %s", max,
			 last);
	}
	return r;
}

int fetch_file(const FetchRequest *req, FetchReport *ret_report, char *err, size_t errlen)
{
	_cleanup_free_ char *part = NULL;
	FetchReport report = {};
	Transfer t = {.req = req, .report = &report, .fd = -EBADF, .err = err, .errlen = errlen};
	CURLM *multi = NULL;
	int r;

	if (err && errlen > 0)
		*err = '\0';
	if (!req || !req->url || !req->path || !sha256_hex_valid(req->sha256) || req->size == 0)
		return -EINVAL;
	if (!url_scheme_allowed(req->url))
		return fetch_fail(&t, -EPROTONOSUPPORT,
				  "only http, https and file URLs are allowed");
	if (asprintf(&part, "%s.part", req->path) < 0)
		return -ENOMEM;
	curl_init_once();
	r = part_open(&t, part);
	if (r >= 0) {
		multi = curl_multi_init();
		r = multi ? fetch_loop(multi, &t, part) : -ENOMEM;
		if (multi)
			curl_multi_cleanup(multi);
	}
	/* A refused or empty file is worthless; a partial one is kept for the next run to resume.
	 * Only the lock holder may remove it: another process may be writing it. */
	if (r < 0 && t.locked && (error_is_refusal(r) || t.offset == 0))
		(void)unlink(part);
	sha256_free(t.hash);
	safe_close(t.fd);
	if (ret_report)
		*ret_report = report;
	return r;
}
