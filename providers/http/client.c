/* Requests over libcurl: one easy handle per thread, retried by retry.c's rules. */
#include "http.h"

#include "../config.h"
#include "../options.h"
#include "../strbuf.h"
#include "../util.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ERROR_BODY_MAX (1 << 20)
#define BODY_MAX (256 << 20)

/* Idle handles kept for reuse; a handle keeps its connections open, so a
 * pool (not one handle per thread) lets any thread reuse them: FUSE worker
 * threads come and go, and a sink that makes a call of its own gets another
 * handle instead of re-entering the busy one. */
#define POOL_MAX 8

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool global_ok;
static unsigned long total_calls;

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static CURL *pool[POOL_MAX];
static int npool;

static void init_once(void)
{
	global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

static CURL *borrow(bool fresh)
{
	pthread_once(&once, init_once);
	if (!global_ok)
		return NULL;
	CURL *h = NULL;
	if (!fresh) {
		pthread_mutex_lock(&pool_mu);
		if (npool)
			h = pool[--npool];
		pthread_mutex_unlock(&pool_mu);
	}
	if (h) {
		curl_easy_reset(h); /* options go, connections stay */
		return h;
	}
	return curl_easy_init();
}

/* Back to the pool, unless it is full or the handle's connection is in an
 * unknown state (a failed or taken-over transfer). */
static void give_back(CURL *h, bool keep)
{
	if (keep) {
		pthread_mutex_lock(&pool_mu);
		if (npool < POOL_MAX) {
			pool[npool++] = h;
			h = NULL;
		}
		pthread_mutex_unlock(&pool_mu);
	}
	if (h)
		curl_easy_cleanup(h);
}

void sfs_http_close_idle(void)
{
	pthread_mutex_lock(&pool_mu);
	while (npool)
		curl_easy_cleanup(pool[--npool]);
	pthread_mutex_unlock(&pool_mu);
}

void sfs_http_shutdown(void)
{
	pthread_once(&once, init_once);
	if (!global_ok)
		return;
	sfs_http_close_idle();
	curl_global_cleanup();
	global_ok = false;
}

unsigned long sfs_http_total_calls(void)
{
	return __atomic_load_n(&total_calls, __ATOMIC_RELAXED);
}

void sfs_http_resp_free(struct sfs_http_resp *resp)
{
	if (!resp)
		return;
	free(resp->body);
	free(resp->header);
	resp->body = resp->header = NULL;
	resp->len = 0;
}

/* ---- one attempt ------------------------------------------------------- */

struct xfer {
	const struct sfs_http_req *req;
	CURL *h;
	struct sfs_http_resp *resp;
	struct sfs_buf body;
	size_t delivered;
	bool sink_failed, sink_stopped, too_big, oom;
	long retry_after_ms;
};

/* *stop is set by another thread: read it atomically. */
static bool stop_requested(const struct sfs_http_req *req)
{
	return req->stop && __atomic_load_n(req->stop, __ATOMIC_ACQUIRE);
}

static int body_append(struct xfer *x, const char *p, size_t n, size_t max)
{
	if (x->body.len + n > max) {
		x->too_big = true;
		return -1;
	}
	if (sfs_buf_add(&x->body, p, n)) {
		x->oom = true;
		return -1;
	}
	return 0;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;
	long code = 0;
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	if (x->req->sink && code >= 200 && code < 300) {
		if (stop_requested(x->req)) {
			x->sink_stopped = true;
			return 0;
		}
		int r = x->req->sink(p, n, x->req->sink_arg);
		if (r) {
			if (r > 0)
				x->sink_stopped = true;
			else
				x->sink_failed = true;
			return 0;
		}
		x->delivered += n;
		return n;
	}
	size_t max = code >= 200 && code < 300 ? BODY_MAX : ERROR_BODY_MAX;
	return body_append(x, p, n, max) ? 0 : n;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	const struct xfer *x = arg;
	return stop_requested(x->req) ? 1 : 0;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;
	const char *want = x->req->capture_header;
	size_t wl = want ? strlen(want) : 0;
	if (want && !x->resp->header && n > wl && p[wl] == ':' && !strncasecmp(p, want, wl)) {
		const char *v = p + wl + 1;
		size_t vl = n - wl - 1;
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		if (!(x->resp->header = strndup(v, vl))) {
			x->oom = true;
			return 0;
		}
	}
	if (n > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
		char v[128];
		size_t vl = n - 12 < sizeof(v) - 1 ? n - 12 : sizeof(v) - 1;
		memcpy(v, p + 12, vl);
		v[vl] = '\0';
		char *e = v + strlen(v);
		while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' '))
			*--e = '\0';
		x->retry_after_ms = sfs_http_parse_retry_after(v, (int64_t)time(NULL));
	}
	return n;
}

struct upload {
	int fd;
	off_t pos;
};

static size_t upload_read(char *buf, size_t size, size_t nitems, void *arg)
{
	struct upload *u = arg;
	ssize_t n;
	do
		n = pread(u->fd, buf, size * nitems, u->pos);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return CURL_READFUNC_ABORT;
	u->pos += n;
	return (size_t)n;
}

static int upload_seek(void *arg, curl_off_t offset, int origin)
{
	struct upload *u = arg;
	if (origin != SEEK_SET)
		return CURL_SEEKFUNC_CANTSEEK;
	u->pos = (off_t)offset;
	return CURL_SEEKFUNC_OK;
}

static enum sfs_http_failure classify(CURLcode c)
{
	switch (c) {
	case CURLE_OK:
		return SFS_HTTP_OK;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return SFS_HTTP_NO_CONNECT;
	case CURLE_OPERATION_TIMEDOUT:
		return SFS_HTTP_TIMEOUT;
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_PARTIAL_FILE:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return SFS_HTTP_BROKEN;
	default:
		return SFS_HTTP_FATAL;
	}
}

static int failure_errno(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return -EHOSTUNREACH;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	case CURLE_GOT_NOTHING:
		return -ECONNRESET;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

static CURLcode attempt(CURL *h, struct xfer *x, const char *json_body, char *errbuf)
{
	const struct sfs_http_req *req = x->req;
	struct curl_slist *hdrs = NULL, *l;
	curl_mime *mime = NULL;
	struct upload up = {.fd = req->upload_fd, .pos = 0};
	char auth[4200];
	CURLcode c = CURLE_OUT_OF_MEMORY;

	long timeout =
	    req->timeout_ms ? req->timeout_ms : (long)(sfs_opt_get_double("http.timeout") * 1000);
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (timeout > 0)
		curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 timeout > 0 && timeout < 10000 ? timeout : 10000L);
	if (req->unix_socket)
		curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
	if (req->tls_ca)
		curl_easy_setopt(h, CURLOPT_CAINFO, req->tls_ca);
	if (req->tls_cert)
		curl_easy_setopt(h, CURLOPT_SSLCERT, req->tls_cert);
	if (req->tls_key)
		curl_easy_setopt(h, CURLOPT_SSLKEY, req->tls_key);
	if (req->forbid_reuse)
		curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
	if (req->stop) {
		/* the progress callback runs about once a second even when idle */
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	}
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "sandboxfs/" SFS_VERSION);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");

	for (const char *const *p = req->headers; p && *p; p++) {
		if (!(l = curl_slist_append(hdrs, *p)))
			goto out;
		hdrs = l;
	}
	if (req->bearer) {
		if (sfs_pathf(auth, sizeof(auth), "Authorization: Bearer %s", req->bearer) < 0 ||
		    !(l = curl_slist_append(hdrs, auth)))
			goto out;
		hdrs = l;
	}
	const char *method = req->method ? req->method : "GET";
	if (json_body || req->body) {
		char ct[256];
		if (sfs_pathf(ct, sizeof(ct), "Content-Type: %s",
			      json_body ? "application/json"
					: (req->content_type ? req->content_type
							     : "application/octet-stream")) < 0 ||
		    !(l = curl_slist_append(hdrs, ct)))
			goto out;
		hdrs = l;
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body ? json_body : req->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(json_body ? strlen(json_body) : req->body_len));
	} else if (req->read) {
		if (req->content_type) {
			char ct[256];
			if (sfs_pathf(ct, sizeof(ct), "Content-Type: %s", req->content_type) < 0 ||
			    !(l = curl_slist_append(hdrs, ct)))
				goto out;
			hdrs = l;
		}
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, req->read);
		curl_easy_setopt(h, CURLOPT_READDATA, req->read_arg);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->read_len);
	} else if (req->upload_field) {
		struct stat st;
		if (fstat(req->upload_fd, &st) < 0) {
			c = CURLE_READ_ERROR;
			goto out;
		}
		if (!(mime = curl_mime_init(h)))
			goto out;
		curl_mimepart *part = curl_mime_addpart(mime);
		if (!part)
			goto out;
		curl_mime_name(part, req->upload_field);
		curl_mime_filename(part, req->upload_name ? req->upload_name : "file");
		curl_mime_type(part, "application/octet-stream");
		curl_mime_data_cb(part, (curl_off_t)st.st_size, upload_read, upload_seek, NULL,
				  &up);
		curl_easy_setopt(h, CURLOPT_MIMEPOST, mime);
	} else if (!strcmp(method, "POST") || !strcmp(method, "PUT")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
	}
	/* no Expect: 100-continue round trip before uploads */
	if (!(l = curl_slist_append(hdrs, "Expect:")))
		goto out;
	hdrs = l;
	if (!strcmp(method, "HEAD"))
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") && strcmp(method, "POST"))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	else if (!strcmp(method, "GET") && !req->read)
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	else if (!strcmp(method, "POST") && req->read)
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "POST");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	c = curl_easy_perform(h);
out:
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_MIMEPOST, NULL);
	curl_mime_free(mime);
	curl_slist_free_all(hdrs);
	return c;
}

static double rnd01(void)
{
	static __thread unsigned seed;
	if (!seed)
		seed = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)&seed;
	return (double)rand_r(&seed) / ((double)RAND_MAX + 1.0);
}

/* The URL without its query, for messages. */
static void url_for_msg(const char *url, char *buf, size_t cap)
{
	size_t n = strcspn(url, "?");
	snprintf(buf, cap, "%.*s", (int)n, url); /* message: may be cut */
}

int sfs_http_do(const struct sfs_http_req *req, struct sfs_http_resp *resp, struct sfs_err *err)
{
	const char *what = req->what ? req->what : "http";
	const char *method = req->method ? req->method : "GET";
	char where[512];
	url_for_msg(req->url, where, sizeof(where));
	memset(resp, 0, sizeof(*resp));
	char *json_body = NULL;
	if (req->json && !(json_body = json_dumps(req->json, JSON_COMPACT)))
		return sfs_errf(err, -ENOMEM, "out of memory");
	bool idempotent = req->retry_unsafe || !strcmp(method, "GET") || !strcmp(method, "HEAD") ||
			  !strcmp(method, "PUT") || !strcmp(method, "DELETE");
	int max = req->max_attempts ? req->max_attempts : (int)sfs_opt_get_double("http.attempts");
	if (max < 1 || req->read)
		max = 1; /* a streamed body cannot be sent twice */
	int rc = 0;
	for (int n = 1;; n++) {
		CURL *h = borrow(req->forbid_reuse);
		if (!h) {
			rc = sfs_errf(err, -ENOMEM, "%s: cannot set up libcurl", what);
			break;
		}
		struct xfer x = {.req = req, .h = h, .resp = resp, .retry_after_ms = -1};
		char errbuf[CURL_ERROR_SIZE] = "";
		sfs_http_resp_free(resp);
		resp->status = 0;
		if (req->calls)
			__atomic_add_fetch(req->calls, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&total_calls, 1, __ATOMIC_RELAXED);
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CURLcode c = attempt(h, &x, json_body, errbuf);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
		bool stopped = x.sink_stopped || stop_requested(req);
		/* a handle whose transfer failed or was cut off may hold a
		 * connection in an unknown state: it is not pooled */
		give_back(h, c == CURLE_OK && !req->forbid_reuse);
		sfs_log(SFS_LOG_DEBUG, "%s: %s %s -> %ld%s%s (%ld ms, attempt %d)", what, method,
			where, resp->status, c ? " " : "", c ? curl_easy_strerror(c) : "", ms, n);
		resp->len = x.body.len;
		resp->body = sfs_buf_take(&x.body); /* "" when there was none */
		if (x.oom || !resp->body) {
			rc = sfs_errf(err, -ENOMEM, "out of memory");
			break;
		}
		if (x.sink_failed) {
			rc = sfs_errf(err, -EIO, "%s: %s %s: the response could not be stored",
				      what, method, where);
			break;
		}
		if (x.too_big) {
			rc = sfs_errf(err, -EFBIG, "%s: %s %s: response too large", what, method,
				      where);
			break;
		}
		if (stopped && c != CURLE_OK) {
			/* ended on purpose: fine once a response had begun */
			resp->stopped = true;
			if (resp->status <= 0)
				rc = sfs_errf(err, -ECANCELED, "%s: %s %s: stopped", what, method,
					      where);
			break;
		}
		enum sfs_http_failure f = classify(c);
		bool can_rewind = x.delivered == 0 || req->sink_reset;
		if (!can_rewind || !sfs_http_should_retry(idempotent, f, resp->status, n, max)) {
			if (f != SFS_HTTP_OK)
				rc = sfs_errf(err, failure_errno(c), "%s: %s %s: %s", what, method,
					      where, errbuf[0] ? errbuf : curl_easy_strerror(c));
			break;
		}
		if (x.delivered && req->sink_reset && req->sink_reset(req->sink_arg)) {
			rc = sfs_errf(err, -EIO, "%s: %s %s: cannot retry a partial download", what,
				      method, where);
			break;
		}
		long wait = sfs_http_backoff_ms(n, x.retry_after_ms, rnd01());
		sfs_log(SFS_LOG_INFO, "%s: %s %s: %s; retrying in %ld ms", what, method, where,
			f == SFS_HTTP_OK ? "server busy" : curl_easy_strerror(c), wait);
		struct timespec d = {wait / 1000, (wait % 1000) * 1000000L};
		while (nanosleep(&d, &d) < 0 && errno == EINTR)
			;
	}
	free(json_body);
	if (rc)
		sfs_http_resp_free(resp);
	return rc;
}
