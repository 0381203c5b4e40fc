/*
 * The shared HTTP kit for providers: libcurl with a pool of reused easy
 * handles (so connections stay open between calls, whichever thread makes
 * them), unix sockets and client certificates (the Docker Engine API),
 * timeouts, retries with
 * exponential backoff and jitter on 429/5xx/connection failures (honouring
 * Retry-After), JSON bodies via jansson, multipart upload, streamed bodies,
 * line parsers for NDJSON and SSE, base64, and credential lookup.
 *
 * A non-idempotent call (POST) is retried only when nothing reached the
 * server (connect failure, 429) unless the caller marks it safe.  Every
 * message passes the redactor (via sfs_errf); credential values found by
 * sfs_http_credential are registered as secrets.
 */
#ifndef SFS_HTTP_H
#define SFS_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../err.h"
#include "../strbuf.h"

struct sfs_http_req {
	const char *method;	    /* "GET", "POST", "PUT", "DELETE" */
	const char *url;	    /* absolute */
	const char *const *headers; /* NULL-terminated "Name: value", or NULL */
	const char *bearer;	    /* Authorization: Bearer value, or NULL */
	json_t *json;		    /* request body as JSON, or NULL */
	const void *body;	    /* raw request body (when json is NULL) */
	size_t body_len;
	const char *content_type;
	/* multipart/form-data with one file part read from upload_fd (offset 0) */
	const char *upload_field;
	int upload_fd;
	const char *upload_name;
	/* A 2xx body goes to sink instead of resp->body; a negative return
	 * aborts with an error, a positive one ends the transfer quietly (the
	 * call returns 0 with resp->status).  sink_reset (may be NULL) rewinds
	 * the sink before a retry; without it nothing is retried once bytes
	 * were delivered. */
	int (*sink)(const void *data, size_t len, void *arg);
	int (*sink_reset)(void *arg);
	void *sink_arg;
	/* A streamed request body of read_len bytes, by curl's
	 * CURLOPT_READFUNCTION contract; such a request is made once. */
	size_t (*read)(char *buf, size_t size, size_t nmemb, void *arg);
	void *read_arg;
	uint64_t read_len;
	const char *unix_socket;		 /* connect here instead of the URL's host */
	const char *tls_ca, *tls_cert, *tls_key; /* PEM files, or NULL */
	const char *capture_header;		 /* its value goes to resp->header */
	const int *stop;      /* read atomically: once set, the transfer ends (resp->stopped;
				 -ECANCELED when no response had begun) */
	bool forbid_reuse;    /* a connection the server takes over (attach, hijack) */
	bool retry_unsafe;    /* repeating this POST is harmless */
	long timeout_ms;      /* whole request; 0: config http.timeout (60 s); -1: none */
	int max_attempts;     /* 0: config http.attempts (4) */
	const char *what;     /* message prefix, e.g. "daytona" */
	unsigned long *calls; /* incremented once per attempt, or NULL */
};

struct sfs_http_resp {
	long status; /* HTTP status of the last attempt */
	char *body;  /* NUL-terminated; error bodies always land here */
	size_t len;
	char *header; /* the value of req->capture_header, or NULL */
	bool stopped; /* the sink or req->stop ended the transfer early */
};

/*
 * Performs the request with retries.  0 when a response arrived (any
 * status: check resp->status); a negative errno with a message when no
 * response could be had (-ETIMEDOUT, -ECONNREFUSED, -EIO ...).
 */
int sfs_http_do(const struct sfs_http_req *req, struct sfs_http_resp *resp, struct sfs_err *err);
void sfs_http_resp_free(struct sfs_http_resp *resp);

/* A 2xx body written into a file from offset 0 (fdsink.c): .sink =
 * sfs_http_fd_sink, .sink_reset = sfs_http_fd_rewind (truncates it for a
 * retry), .sink_arg = &(struct sfs_http_fd){.fd = fd}. */
struct sfs_http_fd {
	int fd;
	off_t pos;
};
int sfs_http_fd_sink(const void *data, size_t len, void *arg);
int sfs_http_fd_rewind(void *arg);

/* A provider's transport: makes req (a path or route relative to its API,
 * its base URL and auth added) for ctx (its sandbox, or NULL). */
typedef int sfs_http_perform_fn(void *ctx, const char *route, struct sfs_http_req *req,
				struct sfs_http_resp *resp, struct sfs_err *err);

/* A non-2xx response as an error: the status's errno (-EISDIR for a 400
 * that says "is a directory"; -EIO when the status maps to none) and
 * "WHAT: HTTP N: message", WHAT from fmt (e.g. "daytona: read %s"). */
int sfs_http_status_errf(struct sfs_err *err, const struct sfs_http_resp *resp, const char *fmt,
			 ...) __attribute__((format(printf, 3, 4)));

/* The download every fs_read makes: req (method, body, retry_unsafe set by
 * the caller; its sink fields are set here) made by perform(ctx, route),
 * its 2xx body written into fd from offset 0 (truncated and written again
 * on a retry).  0, perform's error, or sfs_http_status_errf(fmt, ...) of a
 * non-2xx answer. */
int sfs_http_download_fd(sfs_http_perform_fn *perform, void *ctx, const char *route,
			 struct sfs_http_req *req, int fd, struct sfs_err *err, const char *fmt,
			 ...) __attribute__((format(printf, 7, 8)));

/* Like sfs_http_do, then maps a non-2xx status to an errno with the
 * server's message; *out (may be NULL) gets the parsed JSON body or NULL. */
int sfs_http_json(const struct sfs_http_req *req, long *status, json_t **out, struct sfs_err *err);

/* errno for an HTTP status: 404 ENOENT, 401/403 EACCES, 409 EBUSY, ... */
int sfs_http_status_errno(long status);
/* The human part of an error body: its JSON "message"/"error", else the
 * text (cut short).  Writes into buf. */
void sfs_http_error_text(const char *body, size_t len, char *buf, size_t cap);

/* Total attempts made by this process (debugging, tests). */
unsigned long sfs_http_total_calls(void);

/* Closes the pooled handles (and their connections) that nobody uses now;
 * the pool fills again on the next call. */
void sfs_http_close_idle(void);
/* Frees the pool and libcurl; call once at exit, after other threads stopped. */
void sfs_http_shutdown(void);

/* ---- retry policy (retry.c): pure functions -------------------------- */

enum sfs_http_failure {
	SFS_HTTP_OK,	     /* a response arrived */
	SFS_HTTP_NO_CONNECT, /* nothing was sent */
	SFS_HTTP_BROKEN,     /* connection reset / empty reply mid-request */
	SFS_HTTP_TIMEOUT,
	SFS_HTTP_FATAL, /* not worth repeating (bad URL, TLS setup ...) */
};

/* Whether attempt number `attempt` (1-based) may be followed by another. */
bool sfs_http_should_retry(bool idempotent, enum sfs_http_failure f, long status, int attempt,
			   int max_attempts);
/* Delay before attempt+1: base * 2^(attempt-1) capped, with jitter from
 * rnd in [0,1); at least retry_after_ms when the server asked. */
long sfs_http_backoff_ms(int attempt, long retry_after_ms, double rnd);
/* Retry-After as delta seconds or an HTTP date; -1 if unparseable. */
long sfs_http_parse_retry_after(const char *value, int64_t now);

/* ---- multipart/form-data bodies (multipart.c): pure ------------------- */

/* Calls on_part for each part of a whole multipart body whose Content-Type
 * value is ctype (name and filename of its Content-Disposition, "" when
 * absent; data borrowed).  0, -EPROTO when malformed, or on_part's non-zero
 * return. */
int sfs_multipart_parse(const char *ctype, const char *body, size_t len,
			int (*on_part)(const char *name, const char *filename, const char *data,
				       size_t len, void *arg),
			void *arg);

/* ---- line parsers (lines.c): pure, incremental ----------------------- */

struct sfs_linebuf {
	struct sfs_buf text; /* the unfinished line */
};

/* Feeds bytes; calls on_line for each complete line (without "\n" or
 * "\r\n").  A non-zero return from on_line stops and is returned. */
int sfs_lines_feed(struct sfs_linebuf *lb, const char *data, size_t n,
		   int (*on_line)(const char *line, size_t len, void *arg), void *arg);
/* Delivers a last unterminated line, if any. */
int sfs_lines_finish(struct sfs_linebuf *lb,
		     int (*on_line)(const char *line, size_t len, void *arg), void *arg);
void sfs_linebuf_free(struct sfs_linebuf *lb);

/* NDJSON: one JSON value per non-blank line; a bad line gives -EPROTO. */
struct sfs_ndjson {
	struct sfs_linebuf lb;
	int (*on_value)(json_t *v, void *arg); /* v is borrowed */
	void *arg;
};
int sfs_ndjson_feed(struct sfs_ndjson *p, const char *data, size_t n);
int sfs_ndjson_finish(struct sfs_ndjson *p);
void sfs_ndjson_free(struct sfs_ndjson *p);

/* Server-sent events: `event:`, `data:` (joined with "\n"), `id:`; an
 * event is dispatched at a blank line; comments (":") are ignored. */
struct sfs_sse {
	struct sfs_linebuf lb;
	char *event, *id;
	struct sfs_buf data; /* data lines joined with "\n" */
	bool has_data;
	int (*on_event)(const char *event, const char *data, size_t len, const char *id, void *arg);
	void *arg;
};
int sfs_sse_feed(struct sfs_sse *p, const char *data, size_t n);
void sfs_sse_free(struct sfs_sse *p);

/* ---- Connect-RPC envelopes (connect.c): pure, incremental ------------ */

#define SFS_CONNECT_END 0x02		    /* flag of the end-of-stream message */
#define SFS_CONNECT_MAX_DEFAULT (16u << 20) /* a longer message is refused */

/* A server-streaming response: flag byte, 4-byte big-endian length, JSON. */
struct sfs_connect_dec {
	size_t max; /* longest message accepted; 0: SFS_CONNECT_MAX_DEFAULT */
	/* Each whole message (json is NUL-terminated, borrowed); flags has
	 * SFS_CONNECT_END on the last one.  A non-zero return stops the feed
	 * and is returned. */
	int (*on_msg)(unsigned flags, const char *json, size_t len, void *arg);
	void *arg;
	/* internal */
	unsigned char hdr[5];
	size_t hlen;
	uint32_t need;
	struct sfs_buf msg;
	bool ended;
};
/* Feeds bytes: 0, on_msg's non-zero, -EMSGSIZE (a length over max), -EPROTO
 * (a compressed message, or bytes after the end-of-stream message),
 * -ENOMEM. */
int sfs_connect_feed(struct sfs_connect_dec *d, const void *data, size_t n);
/* 0 when the stream ended with its end-of-stream message and nothing after
 * it was cut short, else -EPROTO. */
int sfs_connect_finish(const struct sfs_connect_dec *d);
void sfs_connect_dec_free(struct sfs_connect_dec *d);
/* Appends one envelope (a streaming request's body is one). */
int sfs_connect_envelope(struct sfs_buf *out, unsigned flags, const char *json, size_t len);
/* A Connect error code ("not_found", ...) as a negative errno (-EIO if
 * unknown). */
int sfs_connect_code_errno(const char *code);
/* o is an end-of-stream message ({"error":{...}}) or a unary error body
 * ({"code","message"}): 0 when it carries no error, else the errno with
 * "WHAT: message (code)" in err. */
int sfs_connect_error(json_t *o, const char *what, struct sfs_err *err);

/* ---- base64 (base64.c) ----------------------------------------------- */

/* Decodes standard base64, skipping whitespace; out needs 3*(n/4)+3 bytes.
 * Returns bytes written or -EINVAL (bad character, or a frame that ends
 * mid-quantum). */
long sfs_base64_decode(const char *in, size_t n, unsigned char *out);
/* Encodes into out (4*((n+2)/3)+1 bytes), NUL-terminated; returns length. */
size_t sfs_base64_encode(const unsigned char *in, size_t n, char *out);
/* base64url without padding (RFC 4648 §5, as JWTs use it); out needs
 * 4*((n+2)/3)+1 bytes (the padded length, trimmed after).  Returns strlen(out). */
size_t sfs_base64url_encode(const unsigned char *in, size_t n, char *out);

/* ---- configuration (creds.c) ----------------------------------------- */

/* The credential from env var `env`, else config `config_key`; registered
 * with the redactor.  NULL when neither is set. */
const char *sfs_http_credential(const char *env, const char *config_key);
/* Base URL: config key, else env var, else fallback; without a trailing '/'.
 * Returns a malloc'd string or NULL. */
char *sfs_http_base_url(const char *config_key, const char *env, const char *fallback);
/* Percent-encodes s for a URL path ('/' kept; RFC 3986 unreserved kept). malloc'd. */
char *sfs_http_escape(const char *s);
/* The same, with '/' encoded too: one query value or path segment. */
char *sfs_http_escape_component(const char *s);

#endif
