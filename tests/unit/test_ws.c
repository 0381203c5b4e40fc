/*
 * The WebSocket codec, handshake and client (providers/http/ws*.c): frames
 * as RFC 6455 writes them, every refusal a client owes a bad server, and the
 * client against a small server thread on 127.0.0.1 (ping answered with
 * pong, the close handshake both ways).
 */
#include "check.h"

#include "providers/http/http.h"
#include "providers/http/ws.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- decoding helpers -------------------------------------------------- */

struct got {
	int n;
	int opcode[16];
	int code[16];
	char data[16][256];
	size_t len[16];
};

static int collect(const struct sfs_ws_msg *m, void *arg)
{
	struct got *g = arg;
	if (g->n < 16) {
		g->opcode[g->n] = m->opcode;
		g->code[g->n] = m->code;
		g->len[g->n] = m->len;
		memcpy(g->data[g->n], m->data, m->len < 255 ? m->len : 255);
		g->data[g->n][m->len < 255 ? m->len : 255] = 0;
	}
	g->n++;
	return 0;
}

/* Feeds bytes to a client-side decoder, one byte at a time when `bytewise`. */
static int decode(const void *bytes, size_t n, bool bytewise, struct got *g, int *close_code)
{
	struct sfs_ws_decoder d = {.max_message = 1000};
	struct sfs_err err = {0};
	int rc = 0;
	memset(g, 0, sizeof *g);
	if (bytewise) {
		for (size_t i = 0; i < n && rc == 0; i++)
			rc = sfs_ws_feed(&d, (const uint8_t *)bytes + i, 1, collect, g, &err);
	} else {
		rc = sfs_ws_feed(&d, bytes, n, collect, g, &err);
	}
	if (close_code)
		*close_code = d.close_code;
	sfs_ws_decoder_free(&d);
	return rc;
}

static void test_sha1_vectors(void)
{
	static const struct {
		const char *in, *hex;
	} v[] = {
	    {"", "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
	    {"abc", "a9993e364706816aba3e25717850c26c9cd0d89d"},
	    {"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
	     "84983e441c3bd26ebaae4aa1f95129e5e54670f1"},
	};
	for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
		uint8_t d[20];
		char hex[41];
		sfs_sha1(v[i].in, strlen(v[i].in), d);
		for (int j = 0; j < 20; j++)
			sprintf(hex + 2 * j, "%02x", d[j]);
		CHECK_STREQ(hex, v[i].hex);
	}
	/* a million 'a's crosses many blocks */
	char *a = malloc(1000000);
	memset(a, 'a', 1000000);
	uint8_t d[20];
	char hex[41];
	sfs_sha1(a, 1000000, d);
	for (int j = 0; j < 20; j++)
		sprintf(hex + 2 * j, "%02x", d[j]);
	CHECK_STREQ(hex, "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
	free(a);
}

static void test_accept_rfc_example(void)
{
	char out[29];
	sfs_ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out); /* RFC 6455 §1.3 */
	CHECK_STREQ(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	char key[25];
	CHECK_INT(sfs_ws_make_key(key, NULL), 0);
	CHECK_INT(strlen(key), 24);
}

static void test_check_response(void)
{
	const char *key = "dGhlIHNhbXBsZSBub25jZQ==";
	const char *ok = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: WebSocket\r\n"
			 "Connection: keep-alive, Upgrade\r\n"
			 "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
	long st;
	struct sfs_err err = {0};
	CHECK_INT(sfs_ws_check_response(ok, strlen(ok), key, &st, &err), 0);
	CHECK_INT(st, 101);
	const char *wrong = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			    "Connection: Upgrade\r\nSec-WebSocket-Accept: AAAA\r\n\r\n";
	CHECK_INT(sfs_ws_check_response(wrong, strlen(wrong), key, &st, &err), -EPROTO);
	CHECK(strstr(err.msg, "Accept") != NULL);
	const char *refused = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\n\r\n{}";
	CHECK_INT(sfs_ws_check_response(refused, strlen(refused), key, &st, &err), -EPROTO);
	CHECK_INT(st, 401);
	const char *ext = "HTTP/1.1 101 x\r\nUpgrade: websocket\r\nConnection: upgrade\r\n"
			  "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
			  "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n";
	CHECK_INT(sfs_ws_check_response(ext, strlen(ext), key, &st, &err), -EPROTO);
	const char *noconn = "HTTP/1.1 101 x\r\nUpgrade: websocket\r\n"
			     "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
	CHECK_INT(sfs_ws_check_response(noconn, strlen(noconn), key, &st, &err), -EPROTO);
}

/* RFC 6455 §5.7's examples, and a client frame's mask. */
static void test_encode_and_mask(void)
{
	struct sfs_buf b = {0};
	CHECK_INT(sfs_ws_frame(&b, true, SFS_WS_TEXT, "Hello", 5, NULL), 0);
	CHECK_INT(b.len, 7);
	CHECK(!memcmp(b.buf, "\x81\x05Hello", 7));
	sfs_buf_reset(&b);
	const uint8_t mask[4] = {0x37, 0xfa, 0x21, 0x3d};
	CHECK_INT(sfs_ws_frame(&b, true, SFS_WS_TEXT, "Hello", 5, mask), 0);
	CHECK_INT(b.len, 11);
	CHECK(!memcmp(b.buf, "\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58", 11));
	/* a server decoder takes the mask off; a client decoder refuses it */
	struct sfs_ws_decoder srv = {.server = true};
	struct got g = {0};
	CHECK_INT(sfs_ws_feed(&srv, b.buf, b.len, collect, &g, NULL), 0);
	CHECK_INT(g.n, 1);
	CHECK_STREQ(g.data[0], "Hello");
	sfs_ws_decoder_free(&srv);
	int code;
	CHECK_INT(decode(b.buf, b.len, false, &g, &code), -EPROTO);
	CHECK_INT(code, 1002);
	/* lengths: 7, 16 and 64 bits, each in its shortest form */
	uint8_t h[SFS_WS_HEADER_MAX];
	CHECK_INT(sfs_ws_header(h, true, SFS_WS_BINARY, 125, NULL), 2);
	CHECK_INT(sfs_ws_header(h, true, SFS_WS_BINARY, 126, NULL), 4);
	CHECK_INT(h[1], 126);
	CHECK_INT(sfs_ws_header(h, true, SFS_WS_BINARY, 65536, mask), 14);
	CHECK_INT(h[1], 0x80 | 127);
	CHECK_INT(h[7], 1);
	/* masking in pieces equals masking at once */
	uint8_t a[10] = "abcdefghij", c[10];
	memcpy(c, a, 10);
	sfs_ws_mask(a, 10, mask, 0);
	sfs_ws_mask(c, 3, mask, 0);
	sfs_ws_mask(c + 3, 7, mask, 3);
	CHECK(!memcmp(a, c, 10));
	sfs_buf_free(&b);
}

static void test_fragments_and_interleaved_control(void)
{
	/* "Hel" + ping + "lo", §5.6: a control frame between fragments */
	const uint8_t s[] = {0x01, 0x03, 'H', 'e', 'l', 0x89, 0x02, 'p', '!', 0x80, 0x02, 'l', 'o'};
	struct got g;
	for (int bytewise = 0; bytewise < 2; bytewise++) {
		CHECK_INT(decode(s, sizeof s, bytewise, &g, NULL), 0);
		CHECK_INT(g.n, 2);
		CHECK_INT(g.opcode[0], SFS_WS_PING);
		CHECK_STREQ(g.data[0], "p!");
		CHECK_INT(g.opcode[1], SFS_WS_TEXT);
		CHECK_STREQ(g.data[1], "Hello");
	}
	/* a continuation with nothing begun; a new message inside one */
	int code;
	const uint8_t cont[] = {0x80, 0x01, 'x'};
	CHECK_INT(decode(cont, sizeof cont, false, &g, &code), -EPROTO);
	CHECK_INT(code, 1002);
	const uint8_t twice[] = {0x01, 0x01, 'a', 0x82, 0x01, 'b'};
	CHECK_INT(decode(twice, sizeof twice, false, &g, &code), -EPROTO);
	/* an empty final fragment ends the message */
	const uint8_t empty_end[] = {0x02, 0x01, 7, 0x80, 0x00};
	CHECK_INT(decode(empty_end, sizeof empty_end, true, &g, NULL), 0);
	CHECK_INT(g.n, 1);
	CHECK_INT(g.len[0], 1);
	CHECK_INT(g.opcode[0], SFS_WS_BINARY);
}

static void test_refusals(void)
{
	struct got g;
	int code;
	const uint8_t rsv[] = {0xc1, 0x01, 'x'}; /* RSV1 */
	CHECK_INT(decode(rsv, sizeof rsv, false, &g, &code), -EPROTO);
	CHECK_INT(code, 1002);
	const uint8_t op3[] = {0x83, 0x00};
	CHECK_INT(decode(op3, sizeof op3, false, &g, &code), -EPROTO);
	const uint8_t opb[] = {0x8b, 0x00};
	CHECK_INT(decode(opb, sizeof opb, false, &g, &code), -EPROTO);
	const uint8_t frag_ping[] = {0x09, 0x00};
	CHECK_INT(decode(frag_ping, sizeof frag_ping, false, &g, &code), -EPROTO);
	uint8_t big_ping[2 + 2 + 126] = {0x89, 126, 0, 126};
	CHECK_INT(decode(big_ping, sizeof big_ping, false, &g, &code), -EPROTO);
	const uint8_t not_short[] = {0x82, 126, 0, 5, 1, 2, 3, 4, 5};
	CHECK_INT(decode(not_short, sizeof not_short, false, &g, &code), -EPROTO);
	const uint8_t top_bit[] = {0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 1};
	CHECK_INT(decode(top_bit, sizeof top_bit, false, &g, &code), -EPROTO);
	/* oversized: refused from the length field alone, nothing buffered */
	const uint8_t huge[] = {0x82, 127, 0, 0, 0, 1, 0, 0, 0, 0};
	CHECK_INT(decode(huge, sizeof huge, false, &g, &code), -EMSGSIZE);
	CHECK_INT(code, 1009);
	/* over the limit (1000) only when the fragments add up */
	uint8_t two[2 * (4 + 600)];
	memset(two, 'a', sizeof two);
	two[0] = 0x02, two[1] = 126, two[2] = 600 >> 8, two[3] = 600 & 0xff;
	two[604] = 0x80, two[605] = 126, two[606] = 600 >> 8, two[607] = 600 & 0xff;
	CHECK_INT(decode(two, sizeof two, false, &g, &code), -EMSGSIZE);
	CHECK_INT(g.n, 0);
	/* after an error everything is refused */
	struct sfs_ws_decoder d = {0};
	CHECK_INT(sfs_ws_feed(&d, rsv, sizeof rsv, collect, &g, NULL), -EPROTO);
	const uint8_t fine[] = {0x81, 0x01, 'x'};
	CHECK_INT(sfs_ws_feed(&d, fine, sizeof fine, collect, &g, NULL), -EPROTO);
	sfs_ws_decoder_free(&d);
}

static void test_utf8(void)
{
	struct got g;
	int code;
	/* "é" split across two fragments is fine */
	const uint8_t split[] = {0x01, 0x01, 0xc3, 0x80, 0x01, 0xa9};
	CHECK_INT(decode(split, sizeof split, true, &g, NULL), 0);
	CHECK_STREQ(g.data[0], "\xc3\xa9");
	/* a message that ends mid-character */
	const uint8_t cut[] = {0x81, 0x01, 0xc3};
	CHECK_INT(decode(cut, sizeof cut, false, &g, &code), -EPROTO);
	CHECK_INT(code, 1007);
	/* overlong, surrogate, past U+10FFFF, a bare continuation */
	const char *bad[] = {"\xc0\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80", "\xff"};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		uint8_t f[8] = {0x81, (uint8_t)strlen(bad[i])};
		memcpy(f + 2, bad[i], strlen(bad[i]));
		CHECK_INT(decode(f, 2 + strlen(bad[i]), false, &g, &code), -EPROTO);
		CHECK_INT(code, 1007);
	}
	/* binary is not checked */
	const uint8_t bin[] = {0x82, 0x01, 0xff};
	CHECK_INT(decode(bin, sizeof bin, false, &g, NULL), 0);
	uint32_t st = 0;
	CHECK(sfs_ws_utf8(&st, (const uint8_t *)"\xf0\x9f\x98\x80", 4) && st == 0);
}

static void test_close_frames(void)
{
	struct got g;
	int code;
	const uint8_t normal[] = {0x88, 0x04, 0x03, 0xe8, 'o', 'k'};
	CHECK_INT(decode(normal, sizeof normal, false, &g, NULL), 0);
	CHECK_INT(g.opcode[0], SFS_WS_CLOSE);
	CHECK_INT(g.code[0], 1000);
	CHECK_STREQ(g.data[0], "ok");
	const uint8_t none[] = {0x88, 0x00};
	CHECK_INT(decode(none, sizeof none, false, &g, NULL), 0);
	CHECK_INT(g.code[0], 1005);
	const uint8_t one[] = {0x88, 0x01, 0x03};
	CHECK_INT(decode(one, sizeof one, false, &g, &code), -EPROTO);
	const uint8_t reserved[] = {0x88, 0x02, 0x03, 0xed}; /* 1005 is never sent */
	CHECK_INT(decode(reserved, sizeof reserved, false, &g, &code), -EPROTO);
	const uint8_t bad_reason[] = {0x88, 0x03, 0x03, 0xe8, 0xff};
	CHECK_INT(decode(bad_reason, sizeof bad_reason, false, &g, &code), -EPROTO);
	CHECK_INT(code, 1007);
	CHECK(sfs_ws_close_code_ok(4000) && !sfs_ws_close_code_ok(999) &&
	      !sfs_ws_close_code_ok(1015) && !sfs_ws_close_code_ok(5000));
}

/* ---- the client against a server thread ---------------------------------- */

struct server {
	int lfd;
	int port;
	bool saw_pong, saw_close, pong_matches;
	int close_code;
};

static ssize_t read_n(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/* Reads one client frame (masked, small) into payload; its opcode. */
static int read_client_frame(int fd, uint8_t *payload, size_t *len)
{
	uint8_t h[2], mask[4];
	if (read_n(fd, h, 2) < 0 || !(h[1] & 0x80) || (h[1] & 0x7f) > 125)
		return -1;
	*len = h[1] & 0x7f;
	if (read_n(fd, mask, 4) < 0 || read_n(fd, payload, *len) < 0)
		return -1;
	sfs_ws_mask(payload, *len, mask, 0);
	return h[0] & 0x0f;
}

static void *serve(void *arg)
{
	struct server *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	if (fd < 0)
		return NULL;
	char req[4096];
	size_t n = 0;
	while (n < sizeof req - 1 && !strstr(req, "\r\n\r\n")) {
		ssize_t r = read(fd, req + n, sizeof req - 1 - n);
		if (r <= 0)
			goto out;
		n += (size_t)r;
		req[n] = 0;
	}
	char *k = strstr(req, "Sec-WebSocket-Key: ");
	if (!k)
		goto out;
	char key[25] = {0}, acc[29];
	memcpy(key, k + 19, 24);
	sfs_ws_accept(key, acc);
	char resp[512];
	int rl = snprintf(resp, sizeof resp,
			  "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
			  "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			  acc);
	/* the head and the first frames in one write: a ping, then a
	 * fragmented binary message */
	memcpy(resp + rl, "\x89\x04ping\x02\x02hi\x80\x01!", 13);
	if (write(fd, resp, (size_t)rl + 13) < 0)
		goto out;
	uint8_t p[128];
	size_t l;
	int op = read_client_frame(fd, p, &l);
	s->saw_pong = op == SFS_WS_PONG;
	s->pong_matches = l == 4 && !memcmp(p, "ping", 4);
	/* the client's text message comes back as text */
	op = read_client_frame(fd, p, &l);
	if (op != SFS_WS_TEXT)
		goto out;
	uint8_t echo[130] = {0x81, (uint8_t)l};
	memcpy(echo + 2, p, l);
	if (write(fd, echo, 2 + l) < 0)
		goto out;
	/* then we close; the client must echo it */
	if (write(fd, "\x88\x02\x03\xe8", 4) < 0)
		goto out;
	op = read_client_frame(fd, p, &l);
	s->saw_close = op == SFS_WS_CLOSE;
	s->close_code = l >= 2 ? p[0] << 8 | p[1] : 0;
out:
	close(fd);
	return NULL;
}

/* A listener on 127.0.0.1 (any port, in s->port) and a thread serving it. */
static void start_server(struct server *s, void *(*fn)(void *), pthread_t *t)
{
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	CHECK(bind(s->lfd, (struct sockaddr *)&a, sizeof a) == 0);
	CHECK(listen(s->lfd, 1) == 0);
	getsockname(s->lfd, (struct sockaddr *)&a, &al);
	s->port = ntohs(a.sin_port);
	CHECK(pthread_create(t, NULL, fn, s) == 0);
}

static void test_client_roundtrip(void)
{
	struct server s = {0};
	pthread_t t;
	start_server(&s, serve, &t);

	char url[128];
	snprintf(url, sizeof url, "ws://127.0.0.1:%d/v1/x/exec?cmd=a&cmd=b", s.port);
	struct sfs_ws *ws = NULL;
	long status;
	struct sfs_err err = {0};
	int rc = sfs_ws_connect(&(struct sfs_ws_opts){.url = url, .bearer = "tok", .what = "t"},
				&ws, &status, NULL, &err);
	CHECK_INT(rc, 0);
	if (rc == 0) {
		const uint8_t *d;
		size_t l;
		CHECK_INT(sfs_ws_recv(ws, 5000, &d, &l, NULL, &err), SFS_WS_BINARY);
		CHECK(l == 3 && !memcmp(d, "hi!", 3));
		CHECK_INT(sfs_ws_send(ws, SFS_WS_TEXT, "echo", 4, &err), 0);
		CHECK_INT(sfs_ws_recv(ws, 5000, &d, &l, NULL, &err), SFS_WS_TEXT);
		CHECK(l == 4 && !memcmp(d, "echo", 4));
		int code = 0;
		CHECK_INT(sfs_ws_recv(ws, 5000, &d, &l, &code, &err), -ECONNRESET);
		CHECK_INT(code, 1000);
		CHECK_INT(sfs_ws_send(ws, SFS_WS_TEXT, "late", 4, &err), -EPIPE);
		sfs_ws_close(ws, 1000, 100);
	}
	pthread_join(t, NULL);
	close(s.lfd);
	CHECK(s.saw_pong);
	CHECK(s.pong_matches);
	CHECK(s.saw_close);
	CHECK_INT(s.close_code, 1000);
}

/* A refused upgrade reads as the HTTP error, with the server's message. */
static void *refuse(void *arg)
{
	struct server *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	char buf[2048];
	if (fd < 0)
		return NULL;
	if (read(fd, buf, sizeof buf) > 0) {
		const char *r =
		    "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
		    "Content-Length: 40\r\n\r\n{\"error\":\"not_found\",\"message\":\"gone\"}  ";
		if (write(fd, r, strlen(r)) < 0)
			s->close_code = -1; /* seen by nobody: the client reports */
	}
	close(fd);
	return NULL;
}

static void test_client_refused(void)
{
	struct server s = {0};
	pthread_t t;
	start_server(&s, refuse, &t);
	char url[128];
	snprintf(url, sizeof url, "http://127.0.0.1:%d/x", s.port);
	struct sfs_ws *ws = NULL;
	long status;
	struct sfs_err err = {0};
	CHECK_INT(sfs_ws_connect(&(struct sfs_ws_opts){.url = url, .what = "t"}, &ws, &status, NULL,
				 &err),
		  -ENOENT);
	CHECK_INT(status, 404);
	CHECK(strstr(err.msg, "gone") != NULL);
	CHECK(ws == NULL);
	pthread_join(t, NULL);
	close(s.lfd);
}

CHECK_MAIN(CHECK_CASE(test_sha1_vectors), CHECK_CASE(test_accept_rfc_example),
	   CHECK_CASE(test_check_response), CHECK_CASE(test_encode_and_mask),
	   CHECK_CASE(test_fragments_and_interleaved_control), CHECK_CASE(test_refusals),
	   CHECK_CASE(test_utf8), CHECK_CASE(test_close_frames), CHECK_CASE(test_client_roundtrip),
	   CHECK_CASE(test_client_refused))
