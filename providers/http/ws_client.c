/*
 * A WebSocket client over libcurl's CONNECT_ONLY mode (ws.h): curl opens
 * the connection (TCP, TLS, proxy, connect timeout), then this file writes
 * the HTTP/1.1 upgrade itself with curl_easy_send and reads frames with
 * curl_easy_recv.  One thread uses a connection at a time.
 */
#include "http.h"
#include "ws.h"

#include "../config.h"
#include "../options.h"
#include "../util.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#define HEAD_MAX (16 << 10)
#define ERR_BODY_MAX (64 << 10)

struct sfs_ws {
	CURL *h;
	curl_socket_t fd;
	struct sfs_ws_decoder dec;
	struct sfs_buf queue; /* delivered messages: opcode(4) code(4) len(8) data */
	size_t qpos;
	bool closed;	 /* the peer's close arrived, or the connection ended */
	bool close_sent; /* ours went */
	int close_code;
	const char *what;
};

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for fd to be ready until deadline (-1: forever); 1 ready, 0 time up. */
static int wait_fd(curl_socket_t fd, short events, int64_t deadline)
{
	for (;;) {
		int t = -1;
		if (deadline >= 0) {
			int64_t left = deadline - now_ms();
			t = left > 0 ? (int)(left > 1000000 ? 1000000 : left) : 0;
		}
		struct pollfd p = {.fd = fd, .events = events};
		int rc = poll(&p, 1, t);
		if (rc > 0)
			return 1;
		if (rc == 0)
			return 0;
		if (errno != EINTR)
			return -errno;
	}
}

static int send_all(struct sfs_ws *ws, const void *data, size_t len, int64_t deadline,
		    struct sfs_err *err)
{
	const char *p = data;
	while (len) {
		size_t n = 0;
		CURLcode c = curl_easy_send(ws->h, p, len, &n);
		if (c == CURLE_AGAIN) {
			int w = wait_fd(ws->fd, POLLOUT, deadline);
			if (w <= 0)
				return sfs_errf(err, w ? w : -ETIMEDOUT, "%s: websocket send: %s",
						ws->what, w ? strerror(-w) : "timed out");
			continue;
		}
		if (c != CURLE_OK)
			return sfs_errf(err, -EPIPE, "%s: websocket send: %s", ws->what,
					curl_easy_strerror(c));
		p += n;
		len -= n;
	}
	return 0;
}

/* Some bytes: their count, 0 at the end of the connection, -ETIMEDOUT. */
static ssize_t recv_some(struct sfs_ws *ws, void *buf, size_t cap, int64_t deadline,
			 struct sfs_err *err)
{
	for (;;) {
		size_t n = 0;
		CURLcode c = curl_easy_recv(ws->h, buf, cap, &n);
		if (c == CURLE_OK)
			return (ssize_t)n;
		if (c != CURLE_AGAIN)
			return 0; /* reset or TLS failure: the connection is over */
		int w = wait_fd(ws->fd, POLLIN, deadline);
		if (w < 0)
			return sfs_errf(err, w, "%s: websocket: %s", ws->what, strerror(-w));
		if (w == 0)
			return sfs_errf(err, -ETIMEDOUT, "%s: websocket: timed out", ws->what);
	}
}

static int queue_msg(const struct sfs_ws_msg *m, void *arg)
{
	struct sfs_ws *ws = arg;
	int32_t op = m->opcode, code = m->code;
	uint64_t len = m->len;
	if (sfs_buf_reserve(&ws->queue, 16 + m->len) < 0)
		return -ENOMEM;
	sfs_buf_add(&ws->queue, &op, 4);
	sfs_buf_add(&ws->queue, &code, 4);
	sfs_buf_add(&ws->queue, &len, 8);
	sfs_buf_add(&ws->queue, m->data, m->len);
	return 0;
}

static int send_frame(struct sfs_ws *ws, int opcode, const void *data, size_t len,
		      struct sfs_err *err)
{
	uint8_t mask[4];
	if (getrandom(mask, sizeof mask, 0) != (ssize_t)sizeof mask)
		return sfs_errf(err, -EIO, "%s: websocket: no random bytes", ws->what);
	struct sfs_buf f = {0};
	if (sfs_ws_frame(&f, true, opcode, data, len, mask) < 0)
		return sfs_errf(err, -ENOMEM, "%s: websocket: out of memory", ws->what);
	long t = (long)(sfs_opt_get_double("http.timeout") * 1000);
	int rc = send_all(ws, f.buf, f.len, now_ms() + t, err);
	sfs_buf_free(&f);
	return rc;
}

static void send_close(struct sfs_ws *ws, int code)
{
	if (ws->close_sent || !ws->h)
		return;
	ws->close_sent = true;
	uint8_t b[2] = {(uint8_t)(code >> 8), (uint8_t)code};
	send_frame(ws, SFS_WS_CLOSE, b, code ? 2 : 0, NULL);
}

/* Feeds received bytes; a protocol error closes with the decoder's code. */
static int feed(struct sfs_ws *ws, const void *data, size_t n, struct sfs_err *err)
{
	int rc = sfs_ws_feed(&ws->dec, data, n, queue_msg, ws, err);
	if (rc == -ENOMEM)
		return sfs_errf(err, rc, "%s: websocket: out of memory", ws->what);
	if (rc < 0) {
		send_close(ws, ws->dec.close_code);
		ws->closed = true;
	}
	return rc;
}

/* ws:// and wss:// become http:// and https:// for a libcurl without ws. */
static char *curl_url_of(const char *url)
{
	struct sfs_buf b = {0};
	if (!strncasecmp(url, "ws://", 5))
		sfs_buf_printf(&b, "http://%s", url + 5);
	else if (!strncasecmp(url, "wss://", 6))
		sfs_buf_printf(&b, "https://%s", url + 6);
	else
		sfs_buf_adds(&b, url);
	return sfs_buf_take(&b);
}

static int build_request(const struct sfs_ws_opts *o, const char *url, const char *key,
			 struct sfs_buf *req, struct sfs_err *err)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL, *path = NULL, *query = NULL;
	int rc = 0;
	if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
		rc = sfs_errf(err, -EINVAL, "%s: websocket: bad URL", o->what);
		goto out;
	}
	curl_url_get(u, CURLUPART_PORT, &port, 0);
	curl_url_get(u, CURLUPART_QUERY, &query, 0);
	sfs_buf_printf(req, "GET %s%s%s HTTP/1.1\r\nHost: %s%s%s\r\n", path, query ? "?" : "",
		       query ? query : "", host, port ? ":" : "", port ? port : "");
	sfs_buf_printf(req,
		       "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
		       "Sec-WebSocket-Version: 13\r\nUser-Agent: sandboxfs\r\n",
		       key);
	if (o->bearer)
		sfs_buf_printf(req, "Authorization: Bearer %s\r\n", o->bearer);
	for (size_t i = 0; o->headers && o->headers[i]; i++)
		sfs_buf_printf(req, "%s\r\n", o->headers[i]);
	if (sfs_buf_adds(req, "\r\n") < 0)
		rc = sfs_errf(err, -ENOMEM, "%s: websocket: out of memory", o->what);
out:
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_free(query);
	curl_url_cleanup(u);
	return rc;
}

/* The body of a refused upgrade, as far as it comes within the deadline. */
static void read_error_body(struct sfs_ws *ws, const char *head, size_t head_len,
			    struct sfs_buf *body, int64_t deadline)
{
	long want = -1;
	const char *cl = strcasestr(head, "\ncontent-length:");
	if (cl && cl < head + head_len)
		want = strtol(cl + 16, NULL, 10);
	char buf[4096];
	while (body->len < ERR_BODY_MAX && (want < 0 || (long)body->len < want)) {
		ssize_t n = recv_some(ws, buf, sizeof buf, deadline, NULL);
		if (n <= 0)
			break;
		sfs_buf_add(body, buf, (size_t)n);
	}
}

int sfs_ws_connect(const struct sfs_ws_opts *o, struct sfs_ws **out, long *status,
		   char **header_out, struct sfs_err *err)
{
	*out = NULL;
	*status = 0;
	if (header_out)
		*header_out = NULL;
	const char *what = o->what ? o->what : "websocket";
	struct sfs_ws *ws = calloc(1, sizeof *ws);
	char *url = curl_url_of(o->url);
	struct sfs_buf req = {0}, head = {0}, body = {0};
	char key[25];
	int rc;
	if (!ws || !url) {
		rc = sfs_errf(err, -ENOMEM, "%s: websocket: out of memory", what);
		goto fail;
	}
	ws->what = what;
	ws->dec.max_message = o->max_message;
	ws->fd = CURL_SOCKET_BAD;
	long timeout =
	    o->timeout_ms ? o->timeout_ms : (long)(sfs_opt_get_double("http.timeout") * 1000);
	int64_t deadline = now_ms() + timeout;
	if ((rc = sfs_ws_make_key(key, err)) < 0 ||
	    (rc = build_request(o, url, key, &req, err)) < 0)
		goto fail;
	ws->h = curl_easy_init();
	if (!ws->h) {
		rc = sfs_errf(err, -ENOMEM, "%s: websocket: no curl handle", what);
		goto fail;
	}
	curl_easy_setopt(ws->h, CURLOPT_URL, url);
	curl_easy_setopt(ws->h, CURLOPT_CONNECT_ONLY, 1L);
	curl_easy_setopt(ws->h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(ws->h, CURLOPT_CONNECTTIMEOUT_MS, timeout);
	CURLcode c = curl_easy_perform(ws->h);
	if (c != CURLE_OK) {
		rc = sfs_errf(err, c == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED,
			      "%s: websocket connect: %s", what, curl_easy_strerror(c));
		goto fail;
	}
	if (curl_easy_getinfo(ws->h, CURLINFO_ACTIVESOCKET, &ws->fd) != CURLE_OK ||
	    ws->fd == CURL_SOCKET_BAD) {
		rc = sfs_errf(err, -EIO, "%s: websocket: no socket", what);
		goto fail;
	}
	if ((rc = send_all(ws, req.buf, req.len, deadline, err)) < 0)
		goto fail;
	/* The head, byte by byte past its end is not needed: whatever follows
	 * the blank line is the first frames and goes to the decoder. */
	char buf[4096];
	const char *end = NULL;
	while (!end) {
		ssize_t n = recv_some(ws, buf, sizeof buf, deadline, err);
		if (n <= 0) {
			rc = n < 0 ? (int)n
				   : sfs_errf(err, -ECONNRESET,
					      "%s: websocket: the server closed during the upgrade",
					      what);
			goto fail;
		}
		if (sfs_buf_add(&head, buf, (size_t)n) < 0) {
			rc = sfs_errf(err, -ENOMEM, "%s: websocket: out of memory", what);
			goto fail;
		}
		end = memmem(head.buf, head.len, "\r\n\r\n", 4);
		if (!end && head.len > HEAD_MAX) {
			rc = sfs_errf(err, -EPROTO,
				      "%s: websocket: the upgrade's answer is too long", what);
			goto fail;
		}
	}
	size_t head_len = (size_t)(end - head.buf) + 4;
	struct sfs_err herr = {0};
	rc = sfs_ws_check_response(head.buf, head_len, key, status, &herr);
	if (rc < 0) {
		if (*status && *status != 101) {
			sfs_buf_add(&body, head.buf + head_len, head.len - head_len);
			read_error_body(ws, head.buf, head_len, &body, deadline);
			char msg[512];
			sfs_http_error_text(body.buf ? body.buf : "", body.len, msg, sizeof msg);
			rc = sfs_errf(err, sfs_http_status_errno(*status), "%s: HTTP %ld: %s", what,
				      *status, msg);
		} else {
			rc = sfs_errf(err, rc, "%s: %s", what, herr.msg);
		}
		goto fail;
	}
	if (header_out && o->capture_header) {
		char name[128];
		const char *h = sfs_pathf(name, sizeof name, "\n%s:", o->capture_header) < 0
				    ? NULL /* never a header of a cut name */
				    : strcasestr(head.buf, name);
		if (h && h < head.buf + head_len) {
			h += strlen(name);
			while (*h == ' ')
				h++;
			size_t l = strcspn(h, "\r\n");
			*header_out = strndup(h, l);
		}
	}
	if (head.len > head_len &&
	    (rc = feed(ws, head.buf + head_len, head.len - head_len, err)) < 0)
		goto fail;
	sfs_buf_free(&req);
	sfs_buf_free(&head);
	free(url);
	*out = ws;
	return 0;
fail:
	sfs_buf_free(&req);
	sfs_buf_free(&head);
	sfs_buf_free(&body);
	free(url);
	if (ws) {
		if (ws->h)
			curl_easy_cleanup(ws->h);
		sfs_ws_decoder_free(&ws->dec);
		sfs_buf_free(&ws->queue);
		free(ws);
	}
	return rc;
}

int sfs_ws_send(struct sfs_ws *ws, int opcode, const void *data, size_t len, struct sfs_err *err)
{
	if (ws->closed || ws->close_sent)
		return sfs_errf(err, -EPIPE, "%s: websocket: the connection is closed", ws->what);
	return send_frame(ws, opcode, data, len, err);
}

int sfs_ws_fd(const struct sfs_ws *ws)
{
	return (int)ws->fd;
}

int sfs_ws_recv(struct sfs_ws *ws, long timeout_ms, const uint8_t **data, size_t *len,
		int *close_code, struct sfs_err *err)
{
	int64_t deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	if (ws->qpos == ws->queue.len) {
		sfs_buf_reset(&ws->queue);
		ws->qpos = 0;
	}
	for (;;) {
		while (ws->qpos < ws->queue.len) {
			int32_t op, code;
			uint64_t l;
			const char *q = ws->queue.buf + ws->qpos;
			memcpy(&op, q, 4);
			memcpy(&code, q + 4, 4);
			memcpy(&l, q + 8, 8);
			ws->qpos += 16 + (size_t)l;
			const uint8_t *d = (const uint8_t *)q + 16;
			if (op == SFS_WS_PING) {
				if (!ws->close_sent)
					send_frame(ws, SFS_WS_PONG, d, (size_t)l, NULL);
				continue;
			}
			if (op == SFS_WS_PONG)
				continue;
			if (op == SFS_WS_CLOSE) {
				ws->closed = true;
				ws->close_code = code;
				send_close(ws, code == SFS_WS_CLOSE_NO_STATUS ? 0 : code);
				continue;
			}
			*data = d;
			*len = (size_t)l;
			return op;
		}
		if (ws->closed) {
			if (close_code)
				*close_code = ws->close_code;
			return sfs_errf(err, -ECONNRESET, "%s: websocket closed (%d)", ws->what,
					ws->close_code);
		}
		char buf[16384];
		struct sfs_err rerr = {0};
		ssize_t n = recv_some(ws, buf, sizeof buf, deadline, &rerr);
		if (n == -ETIMEDOUT)
			return 0;
		if (n <= 0) {
			ws->closed = true;
			ws->close_code = SFS_WS_CLOSE_NO_STATUS + 1; /* 1006: abnormal */
			continue;
		}
		int rc = feed(ws, buf, (size_t)n, err);
		if (rc < 0)
			return rc;
	}
}

void sfs_ws_close(struct sfs_ws *ws, int code, long linger_ms)
{
	if (!ws)
		return;
	if (!ws->closed) {
		send_close(ws, code);
		const uint8_t *d;
		size_t l;
		int64_t deadline = now_ms() + linger_ms;
		while (!ws->closed) {
			long left = (long)(deadline - now_ms());
			if (left <= 0 || sfs_ws_recv(ws, left, &d, &l, NULL, NULL) == 0)
				break;
		}
	}
	curl_easy_cleanup(ws->h);
	sfs_ws_decoder_free(&ws->dec);
	sfs_buf_free(&ws->queue);
	free(ws);
}
