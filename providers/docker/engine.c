#include "engine.h"

#include "../config.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define POOL_MAX 8

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static CURLcode init_rc = CURLE_FAILED_INIT;
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static CURL *pool[POOL_MAX];
static int npool;

static void global_init(void)
{
	init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* The endpoint, from -o docker.host=, DOCKER_HOST, or the default socket. */
static const char *host_setting(void)
{
	const char *h = sfs_config_get("docker.host", NULL);
	if (!h || !*h)
		h = getenv("DOCKER_HOST");
	if (!h || !*h)
		h = "unix:///var/run/docker.sock";
	return h;
}

const char *dk_where(void)
{
	const char *h = host_setting();
	return strncmp(h, "unix://", 7) == 0 ? h + 7 : h;
}

struct target {
	char url_base[512]; /* "http://localhost" or "https://host:port" */
	char socket[512];   /* unix socket path, or "" */
	bool tls;
};

static int get_target(struct target *t, struct sfs_err *err)
{
	const char *h = host_setting();
	memset(t, 0, sizeof(*t));
	if (strncmp(h, "unix://", 7) == 0) {
		snprintf(t->socket, sizeof(t->socket), "%s", h + 7);
		snprintf(t->url_base, sizeof(t->url_base), "http://localhost");
		return 0;
	}
	if (strncmp(h, "tcp://", 6) == 0) {
		const char *v = getenv("DOCKER_TLS_VERIFY");
		t->tls = v && *v && strcmp(v, "0") != 0;
		snprintf(t->url_base, sizeof(t->url_base), "%s://%s", t->tls ? "https" : "http",
			 h + 6);
		size_t l = strlen(t->url_base);
		if (l && t->url_base[l - 1] == '/')
			t->url_base[l - 1] = '\0';
		return 0;
	}
	return sfs_errf(err, -EINVAL,
			"docker: DOCKER_HOST=%s: expected unix:///PATH or tcp://HOST:PORT", h);
}

static CURL *borrow(void)
{
	pthread_once(&init_once, global_init);
	if (init_rc != CURLE_OK)
		return NULL;
	pthread_mutex_lock(&pool_mu);
	CURL *c = npool ? pool[--npool] : NULL;
	pthread_mutex_unlock(&pool_mu);
	if (c)
		curl_easy_reset(c); /* keeps its open connection */
	else
		c = curl_easy_init();
	return c;
}

static void give_back(CURL *c)
{
	pthread_mutex_lock(&pool_mu);
	if (npool < POOL_MAX) {
		pool[npool++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&pool_mu);
	if (c)
		curl_easy_cleanup(c);
}

struct body_buf {
	char *data;
	size_t len, cap;
	bool oom;
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct body_buf *b = arg;
	size_t n = size * nmemb;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *grown = realloc(b->data, cap);
		if (!grown) {
			b->oom = true;
			return 0;
		}
		b->data = grown;
		b->cap = cap;
	}
	memcpy(b->data + b->len, ptr, n);
	b->len += n;
	b->data[b->len] = '\0';
	return n;
}

#define PATH_STAT_HEADER "X-Docker-Container-Path-Stat:"

static size_t on_header(char *line, size_t size, size_t nmemb, void *arg)
{
	struct dk_resp *resp = arg;
	size_t n = size * nmemb, hl = strlen(PATH_STAT_HEADER);
	if (n > hl && strncasecmp(line, PATH_STAT_HEADER, hl) == 0 && !resp->path_stat) {
		const char *v = line + hl;
		size_t vl = n - hl;
		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		resp->path_stat = strndup(v, vl);
		if (!resp->path_stat)
			return 0;
	}
	return n;
}

static int setup(CURL *c, const struct target *t, const char *method, const char *path,
		 struct curl_slist **hdrs, const char *ctype, char *errbuf, struct sfs_err *err)
{
	char url[2048];
	if (snprintf(url, sizeof(url), "%s%s%s", t->url_base, DK_API, path) >= (int)sizeof(url))
		return sfs_errf(err, -ENAMETOOLONG, "docker: request path too long");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (t->socket[0])
		curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, t->socket);
	if (t->tls) {
		const char *dir = getenv("DOCKER_CERT_PATH");
		char p[1024];
		if (dir && *dir) {
			snprintf(p, sizeof(p), "%s/ca.pem", dir);
			curl_easy_setopt(c, CURLOPT_CAINFO, p);
			snprintf(p, sizeof(p), "%s/cert.pem", dir);
			curl_easy_setopt(c, CURLOPT_SSLCERT, p);
			snprintf(p, sizeof(p), "%s/key.pem", dir);
			curl_easy_setopt(c, CURLOPT_SSLKEY, p);
		}
	}
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	*hdrs = NULL;
	if (ctype) {
		char h[256];
		snprintf(h, sizeof(h), "Content-Type: %s", ctype);
		*hdrs = curl_slist_append(NULL, h);
		if (!*hdrs)
			return sfs_errf(err, -ENOMEM, "out of memory");
	}
	/* no "Expect: 100-continue" round trip for bodies */
	struct curl_slist *more = curl_slist_append(*hdrs, "Expect:");
	if (!more) {
		curl_slist_free_all(*hdrs);
		*hdrs = NULL;
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	*hdrs = more;
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
	return 0;
}

/* A transport failure, said so that a user knows what to fix. */
static int transport_error(const struct target *t, CURLcode rc, const char *errbuf,
			   struct sfs_err *err)
{
	struct stat st;
	if (t->socket[0] && stat(t->socket, &st) < 0)
		return sfs_errf(err, -EIO,
				"docker: cannot reach %s: %s (is dockerd running? set DOCKER_HOST "
				"or -o docker.host=)",
				t->socket, strerror(errno));
	return sfs_errf(err, -EIO, "docker: cannot reach %s: %s", dk_where(),
			errbuf[0] ? errbuf : curl_easy_strerror(rc));
}

/* The shared body of dk_request and dk_upload. */
static int perform(const char *method, const char *path, const char *ctype, const void *body,
		   size_t len, dk_source read, void *read_arg, long timeout_s, struct dk_resp *resp,
		   struct sfs_err *err)
{
	memset(resp, 0, sizeof(*resp));
	struct target t;
	int r = get_target(&t, err);
	if (r)
		return r;
	CURL *c = borrow();
	if (!c)
		return sfs_errf(err, -ENOMEM, "docker: cannot initialise libcurl");
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	r = setup(c, &t, method, path, &hdrs, ctype, errbuf, err);
	if (r) {
		give_back(c);
		return r;
	}
	struct body_buf b = {0};
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);
	if (read) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, read);
		curl_easy_setopt(c, CURLOPT_READDATA, read_arg);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)len);
	} else if (body || strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
	}
	if (timeout_s > 0)
		curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
	CURLcode rc = curl_easy_perform(c);
	curl_slist_free_all(hdrs);
	if (rc != CURLE_OK) {
		free(b.data);
		dk_resp_free(resp);
		r = b.oom ? sfs_errf(err, -ENOMEM, "out of memory")
			  : transport_error(&t, rc, errbuf, err);
		curl_easy_cleanup(c); /* its connection is in an unknown state */
		return r;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	give_back(c);
	if (!b.data && !(b.data = calloc(1, 1))) {
		dk_resp_free(resp);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	resp->body = b.data;
	resp->len = b.len;
	return 0;
}

int dk_request(const char *method, const char *path, const char *ctype, const void *body,
	       size_t len, long timeout_s, struct dk_resp *resp, struct sfs_err *err)
{
	return perform(method, path, ctype, body, len, NULL, NULL, timeout_s, resp, err);
}

int dk_upload(const char *method, const char *path, const char *ctype, dk_source read, void *arg,
	      size_t size, long timeout_s, struct dk_resp *resp, struct sfs_err *err)
{
	return perform(method, path, ctype, NULL, size, read, arg, timeout_s, resp, err);
}

void dk_resp_free(struct dk_resp *resp)
{
	free(resp->body);
	free(resp->path_stat);
	resp->body = resp->path_stat = NULL;
	resp->len = 0;
}

int dk_errno(long status)
{
	switch (status) {
	case 400:
		return -EINVAL;
	case 401:
	case 403:
		return -EACCES;
	case 404:
		return -ENOENT;
	case 409:
		return -EBUSY;
	default:
		return -EIO;
	}
}

void dk_reply_message(const struct dk_resp *resp, char *buf, size_t len)
{
	json_t *j = resp->len ? json_loadb(resp->body, resp->len, 0, NULL) : NULL;
	const char *m = j ? json_string_value(json_object_get(j, "message")) : NULL;
	if (m)
		snprintf(buf, len, "%s", m);
	else if (resp->len)
		snprintf(buf, len, "%.*s", (int)(resp->len > 300 ? 300 : resp->len), resp->body);
	else
		snprintf(buf, len, "HTTP %ld", resp->status);
	json_decref(j);
	size_t l = strlen(buf);
	while (l && (buf[l - 1] == '\n' || buf[l - 1] == ' '))
		buf[--l] = '\0';
}

int dk_json(const char *method, const char *path, json_t *body, long timeout_s, json_t **out,
	    const char *what, struct sfs_err *err)
{
	if (out)
		*out = NULL;
	char *text = NULL;
	if (body && !(text = json_dumps(body, JSON_COMPACT)))
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct dk_resp resp;
	int r = dk_request(method, path, text ? "application/json" : NULL, text,
			   text ? strlen(text) : 0, timeout_s, &resp, err);
	free(text);
	if (r)
		return r;
	if (resp.status >= 400) {
		char msg[512];
		dk_reply_message(&resp, msg, sizeof(msg));
		r = sfs_errf(err, dk_errno(resp.status), "docker: %s: %s", what, msg);
		dk_resp_free(&resp);
		return r;
	}
	if (out && resp.len) {
		json_error_t jerr;
		*out = json_loadb(resp.body, resp.len, 0, &jerr);
		if (!*out) {
			dk_resp_free(&resp);
			return sfs_errf(err, -EIO, "docker: %s: unreadable reply: %s", what,
					jerr.text);
		}
	}
	r = (int)resp.status;
	dk_resp_free(&resp);
	return r;
}

struct stream_ctx {
	dk_sink sink;
	void *arg;
	const int *stop;
	struct body_buf errbody; /* the body of an error status, for its message */
	CURL *c;
};

/* *stop is set by another thread: read it atomically. */
static bool stop_requested(const int *stop)
{
	return stop && __atomic_load_n(stop, __ATOMIC_ACQUIRE);
}

static size_t on_stream(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct stream_ctx *s = arg;
	size_t n = size * nmemb;
	long status = 0;
	curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &status);
	if (status >= 400)
		return on_body(ptr, size, nmemb, &s->errbody);
	if (stop_requested(s->stop))
		return 0;
	return s->sink(s->arg, ptr, n) ? n : 0;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	const struct stream_ctx *s = arg;
	return stop_requested(s->stop) ? 1 : 0;
}

int dk_stream(const char *method, const char *path, json_t *body, dk_sink sink, void *arg,
	      const int *stop, struct sfs_err *err)
{
	struct target t;
	int r = get_target(&t, err);
	if (r)
		return r;
	char *text = NULL;
	if (body && !(text = json_dumps(body, JSON_COMPACT)))
		return sfs_errf(err, -ENOMEM, "out of memory");
	/* its own handle: the connection is hijacked and cannot be reused */
	pthread_once(&init_once, global_init);
	CURL *c = init_rc == CURLE_OK ? curl_easy_init() : NULL;
	if (!c) {
		free(text);
		return sfs_errf(err, -ENOMEM, "docker: cannot initialise libcurl");
	}
	char errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdrs = NULL;
	r = setup(c, &t, method, path, &hdrs, text ? "application/json" : NULL, errbuf, err);
	if (r) {
		curl_easy_cleanup(c);
		free(text);
		return r;
	}
	struct stream_ctx s = {.sink = sink, .arg = arg, .stop = stop, .c = c};
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, &s);
	curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	if (text) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, text);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(text));
	} else if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
	}
	CURLcode rc = curl_easy_perform(c);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(c);
	free(text);
	bool stopped =
	    stop_requested(stop) || rc == CURLE_WRITE_ERROR || rc == CURLE_ABORTED_BY_CALLBACK;
	if (rc != CURLE_OK && !(stopped && status > 0 && status < 400)) {
		free(s.errbody.data);
		if (s.errbody.oom)
			return sfs_errf(err, -ENOMEM, "out of memory");
		if (stopped && status == 0)
			return sfs_errf(err, -ECANCELED, "docker: stream stopped");
		return transport_error(&t, rc, errbuf, err);
	}
	if (status >= 400) {
		struct dk_resp resp = {
		    .status = status, .body = s.errbody.data, .len = s.errbody.len};
		char msg[512];
		dk_reply_message(&resp, msg, sizeof(msg));
		free(s.errbody.data);
		return sfs_errf(err, dk_errno(status), "docker: %s", msg);
	}
	free(s.errbody.data);
	return (int)status;
}

char *dk_urlencode(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(n * 3 + 1), *o = out;
	if (!out)
		return NULL;
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
			*o++ = (char)ch;
		} else {
			snprintf(o, 4, "%%%02X", ch);
			o += 3;
		}
	}
	*o = '\0';
	return out;
}

void dk_engine_shutdown(void)
{
	pthread_mutex_lock(&pool_mu);
	while (npool)
		curl_easy_cleanup(pool[--npool]);
	pthread_mutex_unlock(&pool_mu);
}
