/*
 * The WebSocket opening handshake as text (ws.h), and the SHA-1 it needs.
 *
 * SHA-1 is here, 60 lines, rather than libcrypto's: it only checks that the
 * server understood the upgrade (RFC 6455 §1.3 — no security rests on it),
 * and linking libcrypto directly would tie the daemon to the TLS library of
 * one libcurl flavour (Debian also ships libcurl-gnutls).  Checked against
 * the FIPS 180 vectors and RFC 6455's own example in tests/unit/test_ws.c.
 */
#include "http.h"
#include "ws.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

static uint32_t rol(uint32_t x, int n)
{
	return x << n | x >> (32 - n);
}

static void sha1_block(uint32_t h[5], const uint8_t *b)
{
	uint32_t w[80];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 |
		       (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20)
			f = (bb & c) | (~bb & d), k = 0x5a827999;
		else if (i < 40)
			f = bb ^ c ^ d, k = 0x6ed9eba1;
		else if (i < 60)
			f = (bb & c) | (bb & d) | (c & d), k = 0x8f1bbcdc;
		else
			f = bb ^ c ^ d, k = 0xca62c1d6;
		uint32_t t = rol(a, 5) + f + e + k + w[i];
		e = d, d = c, c = rol(bb, 30), bb = a, a = t;
	}
	h[0] += a, h[1] += bb, h[2] += c, h[3] += d, h[4] += e;
}

void sfs_sha1(const void *data, size_t len, uint8_t out[20])
{
	uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
	const uint8_t *p = data;
	size_t left = len;
	for (; left >= 64; left -= 64, p += 64)
		sha1_block(h, p);
	uint8_t tail[128] = {0};
	memcpy(tail, p, left);
	tail[left] = 0x80;
	size_t tl = left + 1 + 8 <= 64 ? 64 : 128;
	uint64_t bits = (uint64_t)len * 8;
	for (int i = 0; i < 8; i++)
		tail[tl - 1 - i] = (uint8_t)(bits >> (8 * i));
	sha1_block(h, tail);
	if (tl == 128)
		sha1_block(h, tail + 64);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (uint8_t)(h[i] >> (24 - 8 * j));
}

int sfs_ws_make_key(char key[25], struct sfs_err *err)
{
	uint8_t rnd[16];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
		return sfs_errf(err, -EIO, "websocket: no random bytes for the key");
	sfs_base64_encode(rnd, sizeof rnd, key);
	return 0;
}

void sfs_ws_accept(const char *key, char out[29])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	char buf[128];
	size_t kl = strnlen(key, sizeof buf - sizeof guid);
	memcpy(buf, key, kl);
	memcpy(buf + kl, guid, sizeof guid - 1);
	uint8_t digest[20];
	sfs_sha1(buf, kl + sizeof guid - 1, digest);
	sfs_base64_encode(digest, sizeof digest, out);
}

/* The value of header `name` in head (first occurrence), trimmed; false if
 * absent. */
static bool header_value(const char *head, size_t len, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);
	const char *end = head + len;
	const char *line = memchr(head, '\n', len); /* skip the status line */
	while (line && line < end) {
		line++;
		const char *eol = memchr(line, '\n', (size_t)(end - line));
		if (!eol)
			eol = end;
		if ((size_t)(eol - line) > nl && line[nl] == ':' && !strncasecmp(line, name, nl)) {
			const char *v = line + nl + 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			const char *ve = eol;
			while (ve > v && isspace((unsigned char)ve[-1]))
				ve--;
			size_t n = (size_t)(ve - v) < cap - 1 ? (size_t)(ve - v) : cap - 1;
			memcpy(out, v, n);
			out[n] = 0;
			return true;
		}
		line = eol < end ? eol : NULL;
	}
	return false;
}

/* Whether a comma-separated header value holds token (case-insensitive). */
static bool has_token(const char *value, const char *token)
{
	size_t tl = strlen(token);
	for (const char *p = value; *p;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		const char *e = p;
		while (*e && *e != ',')
			e++;
		const char *te = e;
		while (te > p && (te[-1] == ' ' || te[-1] == '\t'))
			te--;
		if ((size_t)(te - p) == tl && !strncasecmp(p, token, tl))
			return true;
		p = e;
	}
	return false;
}

int sfs_ws_check_response(const char *head, size_t len, const char *key, long *status,
			  struct sfs_err *err)
{
	*status = 0;
	int major, minor;
	long code;
	char buf[256];
	size_t fl = len < sizeof buf - 1 ? len : sizeof buf - 1;
	memcpy(buf, head, fl);
	buf[fl] = 0;
	if (sscanf(buf, "HTTP/%d.%d %ld", &major, &minor, &code) != 3)
		return sfs_errf(err, -EPROTO, "websocket: the upgrade's answer is not HTTP");
	*status = code;
	if (code != 101)
		return sfs_errf(err, -EPROTO, "websocket: upgrade refused with HTTP %ld", code);
	if (!header_value(head, len, "Upgrade", buf, sizeof buf) || strcasecmp(buf, "websocket"))
		return sfs_errf(err, -EPROTO, "websocket: the answer lacks Upgrade: websocket");
	if (!header_value(head, len, "Connection", buf, sizeof buf) || !has_token(buf, "upgrade"))
		return sfs_errf(err, -EPROTO, "websocket: the answer lacks Connection: upgrade");
	char want[29];
	sfs_ws_accept(key, want);
	if (!header_value(head, len, "Sec-WebSocket-Accept", buf, sizeof buf) || strcmp(buf, want))
		return sfs_errf(err, -EPROTO,
				"websocket: Sec-WebSocket-Accept does not match the key");
	if (header_value(head, len, "Sec-WebSocket-Extensions", buf, sizeof buf) && buf[0])
		return sfs_errf(err, -EPROTO, "websocket: an extension we did not ask for (%s)",
				buf);
	if (header_value(head, len, "Sec-WebSocket-Protocol", buf, sizeof buf) && buf[0])
		return sfs_errf(err, -EPROTO, "websocket: a subprotocol we did not ask for (%s)",
				buf);
	return 0;
}
