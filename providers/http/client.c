/* Requests over libcurl: one easy handle per thread, retried by retry.c's rules. */
#include "http.h"

#include "../config.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define ERROR_BODY_MAX (1 << 20)
#define BODY_MAX (256 << 20)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t handle_key;
static bool global_ok;
static unsigned long total_calls;

/* Every live handle, so shutdown can free those of threads that are gone. */
static pthread_mutex_t handles_mu = PTHREAD_MUTEX_INITIALIZER;
static CURL **handles;
static size_t nhandles;

static void forget_handle(CURL *h)
{
	pthread_mutex_lock(&handles_mu);
	for (size_t i = 0; i < nhandles; i++) {
		if (handles[i] == h) {
			handles[i] = handles[--nhandles];
			break;
		}
	}
	pthread_mutex_unlock(&handles_mu);
}

static void thread_gone(void *h)
{
	forget_handle(h);
	curl_easy_cleanup(h);
}

static void init_once(void)
{
	global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK &&
		    pthread_key_create(&handle_key, thread_gone) == 0;
}

static CURL *thread_handle(void)
{
	pthread_once(&once, init_once);
	if (!global_ok)
		return NULL;
	CURL *h = pthread_getspecific(handle_key);
	if (h) {
		curl_easy_reset(h); /* options go, connections stay */
		return h;
	}
	h = curl_easy_init();
	if (!h)
		return NULL;
	pthread_mutex_lock(&handles_mu);
	CURL **grown = realloc(handles, (nhandles + 1) * sizeof(*grown));
	if (grown) {
		handles = grown;
		handles[nhandles++] = h;
	}
	pthread_mutex_unlock(&handles_mu);
	if (!grown || pthread_setspecific(handle_key, h) != 0) {
		forget_handle(h);
		curl_easy_cleanup(h);
		return NULL;
	}
	return h;
}

void sfs_http_shutdown(void)
{
	pthread_once(&once, init_once);
	if (!global_ok)
		return;
	pthread_setspecific(handle_key, NULL);
	pthread_mutex_lock(&handles_mu);
	for (size_t i = 0; i < nhandles; i++)
		curl_easy_cleanup(handles[i]);
	free(handles);
	handles = NULL;
	nhandles = 0;
	pthread_mutex_unlock(&handles_mu);
	pthread_key_delete(handle_key);
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
	resp->body = NULL;
	resp->len = 0;
}

/* ---- one attempt ------------------------------------------------------- */

struct xfer {
	const struct sfs_http_req *req;
	CURL *h;
	struct sfs_http_resp *resp;
	size_t delivered;
	bool sink_failed, too_big;
	long retry_after_ms;
};

static int body_append(struct xfer *x, const char *p, size_t n, size_t max)
{
	struct sfs_http_resp *r = x->resp;
	if (r->len + n > max) {
		x->too_big = true;
		return -1;
	}
	char *grown = realloc(r->body, r->len + n + 1);
	if (!grown)
		return -1;
	r->body = grown;
	memcpy(r->body + r->len, p, n);
	r->len += n;
	r->body[r->len] = '\0';
	return 0;
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;
	long code = 0;
	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &code);
	if (x->req->sink && code >= 200 && code < 300) {
		if (x->req->sink(p, n, x->req->sink_arg)) {
			x->sink_failed = true;
			return 0;
		}
		x->delivered += n;
		return n;
	}
	size_t max = code >= 200 && code < 300 ? BODY_MAX : ERROR_BODY_MAX;
	return body_append(x, p, n, max) ? 0 : n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *arg)
{
	struct xfer *x = arg;
	size_t n = size * nmemb;
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

	long timeout = req->timeout_ms ? req->timeout_ms
				       : (long)(sfs_config_get_double("http.timeout", 60.0) * 1000);
	curl_easy_setopt(h, CURLOPT_URL, req->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout < 10000 ? timeout : 10000L);
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
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", req->bearer);
		if (!(l = curl_slist_append(hdrs, auth)))
			goto out;
		hdrs = l;
	}
	const char *method = req->method ? req->method : "GET";
	if (json_body || req->body) {
		char ct[256];
		snprintf(ct, sizeof(ct), "Content-Type: %s",
			 json_body ? "application/json"
				   : (req->content_type ? req->content_type
							: "application/octet-stream"));
		if (!(l = curl_slist_append(hdrs, ct)))
			goto out;
		hdrs = l;
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, json_body ? json_body : req->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)(json_body ? strlen(json_body) : req->body_len));
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
	if (strcmp(method, "GET") && strcmp(method, "POST"))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	else if (!strcmp(method, "GET"))
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
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
	snprintf(buf, cap, "%.*s", (int)n, url);
}

int sfs_http_do(const struct sfs_http_req *req, struct sfs_http_resp *resp, struct sfs_err *err)
{
	const char *what = req->what ? req->what : "http";
	const char *method = req->method ? req->method : "GET";
	char where[512];
	url_for_msg(req->url, where, sizeof(where));
	memset(resp, 0, sizeof(*resp));
	CURL *h = thread_handle();
	if (!h)
		return sfs_errf(err, -ENOMEM, "%s: cannot set up libcurl", what);
	char *json_body = NULL;
	if (req->json && !(json_body = json_dumps(req->json, JSON_COMPACT)))
		return sfs_errf(err, -ENOMEM, "out of memory");
	bool idempotent = req->retry_unsafe || !strcmp(method, "GET") || !strcmp(method, "HEAD") ||
			  !strcmp(method, "PUT") || !strcmp(method, "DELETE");
	int max =
	    req->max_attempts ? req->max_attempts : (int)sfs_config_get_double("http.attempts", 4);
	if (max < 1)
		max = 1;
	int rc = 0;
	for (int n = 1;; n++) {
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
		if (c == CURLE_OK)
			curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
		sfs_log(SFS_LOG_DEBUG, "%s: %s %s -> %ld%s%s (%ld ms, attempt %d)", what, method,
			where, resp->status, c ? " " : "", c ? curl_easy_strerror(c) : "", ms, n);
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
