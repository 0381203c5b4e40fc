/* sfs_http_do against a scripted server on 127.0.0.1: retries, streaming,
 * multipart, JSON errors and redaction. */
#include "check.h"

#include "providers/config.h"
#include "providers/http/http.h"
#include "providers/redact.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <time.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* One scripted answer per request: raw HTTP, or NULL to drop the connection;
 * a leading '!' closes the connection after the answer. */
static const char *script[16];
static int nscript, served, accepted;
/* the script is set by the test and read by the server thread */
static pthread_mutex_t script_mu = PTHREAD_MUTEX_INITIALIZER;
static char last_request[8192];
static int listen_fd, port;
static pthread_t server;

static void *serve(void *arg)
{
	int lfd = (int)(intptr_t)arg;
	for (;;) {
		int c = accept(lfd, NULL, NULL);
		if (c < 0)
			return NULL;
		__atomic_add_fetch(&accepted, 1, __ATOMIC_SEQ_CST);
		for (;;) {
			char buf[8192];
			size_t got = 0;
			char *end = NULL;
			while (!end && got < sizeof(buf) - 1) {
				ssize_t n = read(c, buf + got, sizeof(buf) - 1 - got);
				if (n <= 0)
					break;
				got += (size_t)n;
				buf[got] = 0;
				end = strstr(buf, "\r\n\r\n");
			}
			if (!end)
				break;
			char *cl = strcasestr(buf, "Content-Length:");
			size_t want =
			    (size_t)(end + 4 - buf) + (cl ? strtoul(cl + 15, NULL, 10) : 0);
			while (got < want && got < sizeof(buf) - 1) {
				ssize_t n = read(c, buf + got, sizeof(buf) - 1 - got);
				if (n <= 0)
					break;
				got += (size_t)n;
			}
			buf[got] = 0;
			memcpy(last_request, buf, got + 1);
			pthread_mutex_lock(&script_mu);
			const char *ans = served < nscript ? script[served] : NULL;
			served++;
			pthread_mutex_unlock(&script_mu);
			if (!ans)
				break;
			bool then_close = ans[0] == '!';
			if (then_close)
				ans++;
			if (write(c, ans, strlen(ans)) < 0 || then_close)
				break;
		}
		close(c);
	}
}

static void start_server(void)
{
	listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	bind(listen_fd, (struct sockaddr *)&a, sizeof(a));
	listen(listen_fd, 8);
	socklen_t al = sizeof(a);
	getsockname(listen_fd, (struct sockaddr *)&a, &al);
	port = ntohs(a.sin_port);
	pthread_create(&server, NULL, serve, (void *)(intptr_t)listen_fd);
}

static void use(int n, const char **answers)
{
	pthread_mutex_lock(&script_mu);
	for (int i = 0; i < n; i++)
		script[i] = answers[i];
	nscript = n;
	served = 0;
	pthread_mutex_unlock(&script_mu);
}

static int served_so_far(void)
{
	pthread_mutex_lock(&script_mu);
	int n = served;
	pthread_mutex_unlock(&script_mu);
	return n;
}

static char url[256];
static const char *at(const char *path)
{
	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", port, path);
	return url;
}

#define R503 "HTTP/1.1 503 Busy\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n"
#define R500 "HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n"
#define R429 "HTTP/1.1 429 Slow down\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n"
#define ROK "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
/* the next request then opens a fresh connection: libcurl itself repeats a
 * request once when a reused connection turns out dead */
#define ROKC "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"

static void test_get_retries_5xx(void)
{
	const char *a[] = {R503, R500, ROK};
	use(3, a);
	unsigned long calls = 0;
	struct sfs_http_req req = {.method = "GET", .url = at("/x"), .calls = &calls};
	struct sfs_http_resp resp;
	struct sfs_err err = {0};
	CHECK_INT(sfs_http_do(&req, &resp, &err), 0);
	CHECK_INT(resp.status, 200);
	CHECK_STREQ(resp.body, "ok");
	CHECK_INT(calls, 3);
	sfs_http_resp_free(&resp);
}

static void test_post_not_retried_unless_safe(void)
{
	const char *a[] = {R503, ROK};
	use(2, a);
	unsigned long calls = 0;
	struct sfs_http_req req = {.method = "POST", .url = at("/p"), .calls = &calls};
	struct sfs_http_resp resp;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 503);
	CHECK_INT(calls, 1);
	sfs_http_resp_free(&resp);

	use(2, a);
	calls = 0;
	req.retry_unsafe = true;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 200);
	CHECK_INT(calls, 2);
	sfs_http_resp_free(&resp);

	/* throttled: refused, not run, so even a POST is repeated */
	const char *b[] = {R429, ROK};
	use(2, b);
	calls = 0;
	req.retry_unsafe = false;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 200);
	CHECK_INT(calls, 2);
	sfs_http_resp_free(&resp);
}

static void test_dropped_connection(void)
{
	const char *c[] = {ROKC};
	use(1, c);
	struct sfs_http_req req = {.method = "GET", .url = at("/d")};
	struct sfs_http_resp resp;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	sfs_http_resp_free(&resp);
	const char *a[] = {NULL, ROKC};
	use(2, a);
	unsigned long calls = 0;
	req.calls = &calls;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 200);
	CHECK_INT(calls, 2);
	sfs_http_resp_free(&resp);

	use(2, a);
	calls = 0;
	struct sfs_err err = {0};
	req.method = "POST";
	int r = sfs_http_do(&req, &resp, &err);
	CHECK(r == -ECONNRESET || r == -EIO);
	CHECK_INT(calls, 1);
	CHECK(strstr(err.msg, "POST") != NULL);
}

static int sink(const void *data, size_t len, void *arg)
{
	char *s = arg;
	strncat(s, data, len);
	return 0;
}

static int sink_reset(void *arg)
{
	((char *)arg)[0] = 0;
	return 0;
}

static void test_streaming_sink(void)
{
	const char *a[] = {"!HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
			   "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
			   "HTTP/1.1 404 Nope\r\nContent-Length: 4\r\n\r\ngone"};
	use(3, a);
	char got[64] = "";
	struct sfs_http_req req = {.method = "GET",
				   .url = at("/s"),
				   .sink = sink,
				   .sink_reset = sink_reset,
				   .sink_arg = got};
	struct sfs_http_resp resp;
	/* the first answer is cut short and the connection dropped: rewound and repeated */
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 200);
	CHECK_STREQ(got, "hello");
	sfs_http_resp_free(&resp);
	/* error bodies never reach the sink */
	got[0] = 0;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 404);
	CHECK_STREQ(got, "");
	CHECK_STREQ(resp.body, "gone");
	sfs_http_resp_free(&resp);
}

/* A transport as a provider has one: the route under this server. */
static int perform_here(void *ctx, const char *route, struct sfs_http_req *req,
			struct sfs_http_resp *resp, struct sfs_err *err)
{
	CHECK_STREQ(ctx, "ctx");
	req->url = at(route);
	return sfs_http_do(req, resp, err);
}

static void test_download_fd(void)
{
	const char *a[] = {"!HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
			   "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
			   "HTTP/1.1 404 Nope\r\nContent-Length: 18\r\n\r\n{\"message\":\"gone\"}",
			   "HTTP/1.1 400 Bad\r\nContent-Length: 18\r\n\r\nx/ is a directory!"};
	use(4, a);
	char path[] = "/tmp/sfs-test-download-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	CHECK_INT(write(fd, "old longer content", 18), 18);
	struct sfs_err err = {0};
	struct sfs_http_req req = {.method = "GET"};
	/* cut short, repeated: the file holds the second answer only */
	CHECK_INT(
	    sfs_http_download_fd(perform_here, "ctx", "/f", &req, fd, &err, "unit: read %s", "a"),
	    0);
	char got[64] = "";
	CHECK_INT(pread(fd, got, sizeof(got) - 1, 0), 5);
	CHECK_STREQ(got, "hello");
	/* a non-2xx answer: its errno and message; the file is not touched */
	CHECK_INT(
	    sfs_http_download_fd(perform_here, "ctx", "/f", &req, fd, &err, "unit: read %s", "b"),
	    -ENOENT);
	CHECK_STREQ(err.msg, "unit: read b: HTTP 404: gone");
	CHECK_INT(pread(fd, got, sizeof(got) - 1, 0), 5);
	CHECK_INT(
	    sfs_http_download_fd(perform_here, "ctx", "/f", &req, fd, &err, "unit: read %s", "x"),
	    -EISDIR);
	close(fd);
}

static void test_multipart(void)
{
	const char *a[] = {ROK};
	use(1, a);
	FILE *f = tmpfile();
	fputs("file-bytes\n", f);
	fflush(f);
	struct sfs_http_req req = {.method = "POST",
				   .url = at("/files/upload?path=a"),
				   .upload_field = "file",
				   .upload_fd = fileno(f),
				   .upload_name = "a.txt"};
	struct sfs_http_resp resp;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 200);
	CHECK(strstr(last_request, "multipart/form-data") != NULL);
	CHECK(strstr(last_request, "name=\"file\"; filename=\"a.txt\"") != NULL);
	CHECK(strstr(last_request, "file-bytes\n") != NULL);
	sfs_http_resp_free(&resp);
	fclose(f);
}

static void test_json_errors_are_redacted(void)
{
	sfs_redact_add_secret("sk-unit-test-secret");
	const char *a[] = {"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
			   "Content-Length: 58\r\n\r\n"
			   "{\"statusCode\":404,\"message\":\"no sk-unit-test-secret here\"}",
			   "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{\"a\":42}"};
	use(2, a);
	json_t *body = json_pack("{s:s}", "k", "v");
	struct sfs_http_req req = {.method = "POST",
				   .url = at("/j"),
				   .json = body,
				   .bearer = "sk-unit-test-secret",
				   .what = "unit"};
	struct sfs_err err = {0};
	json_t *out = NULL;
	long status = 0;
	CHECK_INT(sfs_http_json(&req, &status, &out, &err), -ENOENT);
	CHECK_INT(status, 404);
	CHECK(strstr(err.msg, "unit: POST http://127.0.0.1:") == err.msg);
	CHECK(strstr(err.msg, "HTTP 404: no [redacted] here") != NULL);
	CHECK(strstr(err.msg, "sk-unit") == NULL);
	CHECK(strstr(last_request, "Authorization: Bearer sk-unit-test-secret") != NULL);
	CHECK(strstr(last_request, "{\"k\":\"v\"}") != NULL);
	CHECK_INT(sfs_http_json(&req, &status, &out, &err), 0);
	CHECK_INT(json_integer_value(json_object_get(out, "a")), 42);
	json_decref(out);
	json_decref(body);
}

static void test_connection_refused(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	bind(s, (struct sockaddr *)&a, sizeof(a));
	socklen_t al = sizeof(a);
	getsockname(s, (struct sockaddr *)&a, &al);
	close(s); /* nothing listens there now */
	char u[64];
	snprintf(u, sizeof(u), "http://127.0.0.1:%d/", ntohs(a.sin_port));
	unsigned long calls = 0;
	struct sfs_http_req req = {.method = "POST", .url = u, .calls = &calls, .max_attempts = 3};
	struct sfs_http_resp resp;
	struct sfs_err err = {0};
	CHECK_INT(sfs_http_do(&req, &resp, &err), -ECONNREFUSED);
	CHECK_INT(calls, 3); /* nothing was sent, so even a POST is repeated */
}

static void *get_ok(void *arg)
{
	struct sfs_http_req req = {.method = "GET", .url = arg};
	struct sfs_http_resp resp;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 200);
	sfs_http_resp_free(&resp);
	return NULL;
}

/* The pool: calls made one after another, from any thread, share one
 * connection (a handle per thread would open one per thread). */
static void test_connection_reuse(void)
{
	sfs_http_close_idle();
	const char *a[] = {ROK, ROK, ROK, ROK};
	use(4, a);
	int before = __atomic_load_n(&accepted, __ATOMIC_SEQ_CST);
	char u[256];
	snprintf(u, sizeof(u), "%s", at("/reuse"));
	get_ok(u);
	get_ok(u);
	for (int i = 0; i < 2; i++) {
		pthread_t t;
		pthread_create(&t, NULL, get_ok, u);
		pthread_join(t, NULL);
	}
	CHECK_INT(served_so_far(), 4);
	CHECK_INT(__atomic_load_n(&accepted, __ATOMIC_SEQ_CST) - before, 1);
	/* a connection the server takes over is never pooled (the scripted
	 * server serves one connection at a time: close the idle one first) */
	sfs_http_close_idle();
	use(2, a);
	before = __atomic_load_n(&accepted, __ATOMIC_SEQ_CST);
	struct sfs_http_req req = {.method = "GET", .url = u, .forbid_reuse = true};
	struct sfs_http_resp resp;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	sfs_http_resp_free(&resp);
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	sfs_http_resp_free(&resp);
	CHECK_INT(__atomic_load_n(&accepted, __ATOMIC_SEQ_CST) - before, 2);
}

static void test_unix_socket_and_header(void)
{
	char path[108];
	snprintf(path, sizeof(path), "/tmp/sfs-http-test-%d.sock", (int)getpid());
	unlink(path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	CHECK_INT(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	listen(fd, 4);
	pthread_t t;
	pthread_create(&t, NULL, serve, (void *)(intptr_t)fd);
	const char *ans[] = {"HTTP/1.1 200 OK\r\nX-Docker-Container-Path-Stat: e30=  \r\n"
			     "Content-Length: 2\r\n\r\n{}"};
	use(1, ans);
	struct sfs_http_req req = {.method = "HEAD",
				   .url = "http://localhost/v1.41/containers/x/archive?path=/",
				   .unix_socket = path,
				   .capture_header = "X-Docker-Container-Path-Stat"};
	struct sfs_http_resp resp;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 200);
	CHECK_STREQ(resp.header, "e30=");
	CHECK(strstr(last_request, "HEAD /v1.41/containers/x/archive?path=/ HTTP/1.1") ==
	      last_request);
	sfs_http_resp_free(&resp);
	CHECK(resp.header == NULL);
	sfs_http_close_idle();
	shutdown(fd, SHUT_RDWR);
	close(fd);
	pthread_join(t, NULL);
	unlink(path);
}

struct src {
	const char *text;
	size_t pos;
};

static size_t src_read(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct src *s = arg;
	size_t n = strlen(s->text + s->pos);
	if (n > size * nmemb)
		n = size * nmemb;
	memcpy(buf, s->text + s->pos, n);
	s->pos += n;
	return n;
}

static void test_streamed_upload(void)
{
	const char *a[] = {ROK};
	use(1, a);
	struct src s = {.text = "tar-bytes-here"};
	struct sfs_http_req req = {.method = "PUT",
				   .url = at("/archive?path=/w"),
				   .read = src_read,
				   .read_arg = &s,
				   .read_len = 14,
				   .content_type = "application/x-tar"};
	struct sfs_http_resp resp;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 200);
	CHECK(strstr(last_request, "PUT /archive?path=/w") == last_request);
	CHECK(strstr(last_request, "Content-Type: application/x-tar") != NULL);
	CHECK(strstr(last_request, "\r\n\r\ntar-bytes-here") != NULL);
	sfs_http_resp_free(&resp);
}

static int stop_after_first(const void *data, size_t len, void *arg)
{
	(*(int *)arg)++;
	return 1; /* enough: end quietly */
}

static int stop_flag;

static void *set_stop(void *arg)
{
	usleep(200000);
	__atomic_store_n(&stop_flag, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void test_stop(void)
{
	/* the sink says enough */
	const char *a[] = {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789"};
	use(1, a);
	int pieces = 0;
	struct sfs_http_req req = {
	    .method = "GET", .url = at("/stream"), .sink = stop_after_first, .sink_arg = &pieces};
	struct sfs_http_resp resp;
	CHECK_INT(sfs_http_do(&req, &resp, NULL), 0);
	CHECK_INT(resp.status, 200);
	CHECK(resp.stopped);
	CHECK_INT(pieces, 1);
	sfs_http_resp_free(&resp);
	/* a stream that never ends, stopped from another thread */
	const char *b[] = {"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part"};
	use(1, b);
	char got[64] = "";
	stop_flag = 0;
	struct sfs_http_req sreq = {.method = "GET",
				    .url = at("/forever"),
				    .sink = sink,
				    .sink_arg = got,
				    .stop = &stop_flag,
				    .timeout_ms = -1,
				    .forbid_reuse = true};
	pthread_t t;
	pthread_create(&t, NULL, set_stop, NULL);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK_INT(sfs_http_do(&sreq, &resp, NULL), 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_join(t, NULL);
	CHECK(resp.stopped);
	CHECK_STREQ(got, "only part");
	CHECK(t1.tv_sec - t0.tv_sec < 5);
	sfs_http_resp_free(&resp);
}

static void test_shutdown(void)
{
	sfs_http_shutdown();
	shutdown(listen_fd, SHUT_RDWR);
	close(listen_fd);
	pthread_join(server, NULL);
	sfs_kv_free(&sfs_config);
	CHECK(1);
}

static void setup(void)
{
	start_server();
	CHECK(port > 0);
}

CHECK_MAIN(CHECK_CASE(setup), CHECK_CASE(test_get_retries_5xx),
	   CHECK_CASE(test_post_not_retried_unless_safe), CHECK_CASE(test_dropped_connection),
	   CHECK_CASE(test_streaming_sink), CHECK_CASE(test_download_fd),
	   CHECK_CASE(test_multipart), CHECK_CASE(test_json_errors_are_redacted),
	   CHECK_CASE(test_connection_refused), CHECK_CASE(test_connection_reuse),
	   CHECK_CASE(test_unix_socket_and_header), CHECK_CASE(test_streamed_upload),
	   CHECK_CASE(test_stop), CHECK_CASE(test_shutdown))
