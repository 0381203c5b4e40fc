/* RFC 6455 framing: encoder and push decoder (ws.h).  No I/O. */
#include "ws.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define WS_DEFAULT_MAX (16u << 20)

size_t sfs_ws_header(uint8_t hdr[SFS_WS_HEADER_MAX], bool fin, int opcode, uint64_t len,
		     const uint8_t *mask)
{
	size_t n = 0;
	hdr[n++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
	uint8_t m = mask ? 0x80 : 0;
	if (len < 126) {
		hdr[n++] = m | (uint8_t)len;
	} else if (len <= 0xffff) {
		hdr[n++] = m | 126;
		hdr[n++] = (uint8_t)(len >> 8);
		hdr[n++] = (uint8_t)len;
	} else {
		hdr[n++] = m | 127;
		for (int i = 7; i >= 0; i--)
			hdr[n++] = (uint8_t)(len >> (8 * i));
	}
	if (mask) {
		memcpy(hdr + n, mask, 4);
		n += 4;
	}
	return n;
}

void sfs_ws_mask(uint8_t *data, size_t len, const uint8_t mask[4], uint64_t at)
{
	for (size_t i = 0; i < len; i++)
		data[i] ^= mask[(at + i) & 3];
}

int sfs_ws_frame(struct sfs_buf *out, bool fin, int opcode, const void *payload, size_t len,
		 const uint8_t *mask)
{
	uint8_t hdr[SFS_WS_HEADER_MAX];
	size_t h = sfs_ws_header(hdr, fin, opcode, len, mask);
	if (sfs_buf_reserve(out, h + len) < 0)
		return -ENOMEM;
	sfs_buf_add(out, hdr, h);
	size_t at = out->len;
	if (len)
		sfs_buf_add(out, payload, len);
	if (mask)
		sfs_ws_mask((uint8_t *)out->buf + at, len, mask, 0);
	return 0;
}

/* State: bits 16..17 continuation bytes still needed, 8..15 the lowest and
 * 0..7 the highest value the next one may have (which is how overlongs,
 * surrogates and code points past U+10FFFF are refused at their 2nd byte). */
bool sfs_ws_utf8(uint32_t *state, const uint8_t *s, size_t n)
{
	uint32_t st = *state;
	for (size_t i = 0; i < n; i++) {
		uint8_t c = s[i];
		if (st) {
			if (c < ((st >> 8) & 0xff) || c > (st & 0xff))
				return false;
			uint32_t need = (st >> 16) - 1;
			st = need ? (need << 16) | (0x80 << 8) | 0xbf : 0;
			continue;
		}
		if (c < 0x80)
			continue;
		if (c >= 0xc2 && c <= 0xdf)
			st = (1u << 16) | (0x80 << 8) | 0xbf;
		else if (c == 0xe0)
			st = (2u << 16) | (0xa0 << 8) | 0xbf;
		else if (c == 0xed)
			st = (2u << 16) | (0x80 << 8) | 0x9f;
		else if (c >= 0xe1 && c <= 0xef)
			st = (2u << 16) | (0x80 << 8) | 0xbf;
		else if (c == 0xf0)
			st = (3u << 16) | (0x90 << 8) | 0xbf;
		else if (c >= 0xf1 && c <= 0xf3)
			st = (3u << 16) | (0x80 << 8) | 0xbf;
		else if (c == 0xf4)
			st = (3u << 16) | (0x80 << 8) | 0x8f;
		else
			return false;
	}
	*state = st;
	return true;
}

bool sfs_ws_close_code_ok(int code)
{
	/* 1004-1006 and 1015 are reserved for reporting, never sent; 1012-1014
	 * are registered since (IANA); 3000-4999 are for libraries and apps. */
	return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
	       (code >= 3000 && code <= 4999);
}

static int fail(struct sfs_ws_decoder *d, int close_code, struct sfs_err *err, const char *why)
{
	d->failed = true;
	d->close_code = close_code;
	return sfs_errf(err, close_code == SFS_WS_CLOSE_TOO_BIG ? -EMSGSIZE : -EPROTO,
			"websocket: %s", why);
}

static bool is_control(int opcode)
{
	return opcode & 0x8;
}

/* The header is complete once hdr_len reaches this. */
static size_t header_size(const uint8_t *hdr)
{
	size_t n = 2;
	uint8_t l = hdr[1] & 0x7f;
	if (l == 126)
		n += 2;
	else if (l == 127)
		n += 8;
	if (hdr[1] & 0x80)
		n += 4;
	return n;
}

static int parse_header(struct sfs_ws_decoder *d, struct sfs_err *err)
{
	const uint8_t *h = d->hdr;
	d->fin = h[0] & 0x80;
	d->opcode = h[0] & 0x0f;
	d->masked = h[1] & 0x80;
	if (h[0] & 0x70)
		return fail(d, SFS_WS_CLOSE_PROTOCOL, err,
			    "reserved bits set (no extension agreed)");
	switch (d->opcode) {
	case SFS_WS_CONT:
	case SFS_WS_TEXT:
	case SFS_WS_BINARY:
	case SFS_WS_CLOSE:
	case SFS_WS_PING:
	case SFS_WS_PONG:
		break;
	default:
		return fail(d, SFS_WS_CLOSE_PROTOCOL, err, "unknown opcode");
	}
	if (d->masked != d->server)
		return fail(d, SFS_WS_CLOSE_PROTOCOL, err,
			    d->server ? "a client frame without a mask" : "a masked server frame");
	uint8_t l = h[1] & 0x7f;
	size_t p = 2;
	uint64_t len = l;
	if (l == 126) {
		len = (uint64_t)h[2] << 8 | h[3];
		p = 4;
		if (len < 126)
			return fail(d, SFS_WS_CLOSE_PROTOCOL, err,
				    "length not in its shortest form");
	} else if (l == 127) {
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | h[2 + i];
		p = 10;
		if (len >> 63)
			return fail(d, SFS_WS_CLOSE_PROTOCOL, err, "length with its top bit set");
		if (len <= 0xffff)
			return fail(d, SFS_WS_CLOSE_PROTOCOL, err,
				    "length not in its shortest form");
	}
	if (d->masked)
		memcpy(d->mask, h + p, 4);
	d->frame_len = len;
	d->frame_done = 0;
	if (is_control(d->opcode)) {
		if (!d->fin)
			return fail(d, SFS_WS_CLOSE_PROTOCOL, err, "a fragmented control frame");
		if (len > sizeof d->ctl)
			return fail(d, SFS_WS_CLOSE_PROTOCOL, err,
				    "a control frame over 125 bytes");
		return 0;
	}
	if (d->opcode == SFS_WS_CONT && !d->msg_opcode)
		return fail(d, SFS_WS_CLOSE_PROTOCOL, err, "a continuation with no message begun");
	if (d->opcode != SFS_WS_CONT && d->msg_opcode)
		return fail(d, SFS_WS_CLOSE_PROTOCOL, err, "a new message inside a fragmented one");
	size_t max = d->max_message ? d->max_message : WS_DEFAULT_MAX;
	if (len > max || d->msg.len + len > max)
		return fail(d, SFS_WS_CLOSE_TOO_BIG, err, "message larger than the limit");
	if (d->opcode != SFS_WS_CONT) {
		d->msg_opcode = d->opcode;
		d->utf8_state = 0;
		sfs_buf_reset(&d->msg);
	}
	if (sfs_buf_reserve(&d->msg, (size_t)len) < 0)
		return sfs_errf(err, -ENOMEM, "websocket: out of memory");
	return 0;
}

static int deliver_control(struct sfs_ws_decoder *d,
			   int (*on_msg)(const struct sfs_ws_msg *m, void *arg), void *arg,
			   struct sfs_err *err)
{
	struct sfs_ws_msg m = {.opcode = d->opcode, .data = d->ctl, .len = (size_t)d->frame_len};
	if (d->opcode == SFS_WS_CLOSE) {
		m.code = SFS_WS_CLOSE_NO_STATUS;
		if (m.len == 1)
			return fail(d, SFS_WS_CLOSE_PROTOCOL, err, "a close frame of one byte");
		if (m.len >= 2) {
			m.code = d->ctl[0] << 8 | d->ctl[1];
			if (!sfs_ws_close_code_ok(m.code))
				return fail(d, SFS_WS_CLOSE_PROTOCOL, err,
					    "a close code no endpoint may send");
			uint32_t st = 0;
			if (!sfs_ws_utf8(&st, d->ctl + 2, m.len - 2) || st)
				return fail(d, SFS_WS_CLOSE_BAD_DATA, err,
					    "a close reason that is not UTF-8");
			m.data += 2;
			m.len -= 2;
		}
	}
	return on_msg(&m, arg);
}

static int deliver_data(struct sfs_ws_decoder *d,
			int (*on_msg)(const struct sfs_ws_msg *m, void *arg), void *arg,
			struct sfs_err *err)
{
	if (!d->fin)
		return 0;
	if (d->msg_opcode == SFS_WS_TEXT && d->utf8_state)
		return fail(d, SFS_WS_CLOSE_BAD_DATA, err, "text that ends mid-character");
	struct sfs_ws_msg m = {.opcode = d->msg_opcode,
			       .data =
				   d->msg.buf ? (const uint8_t *)d->msg.buf : (const uint8_t *)"",
			       .len = d->msg.len};
	d->msg_opcode = 0;
	int rc = on_msg(&m, arg);
	sfs_buf_reset(&d->msg);
	return rc;
}

int sfs_ws_feed(struct sfs_ws_decoder *d, const void *data, size_t n,
		int (*on_msg)(const struct sfs_ws_msg *m, void *arg), void *arg,
		struct sfs_err *err)
{
	const uint8_t *p = data;
	if (d->failed)
		return sfs_errf(err, -EPROTO, "websocket: the connection already failed");
	while (n > 0) {
		if (!d->in_payload) {
			size_t want = d->hdr_len < 2 ? 2 : header_size(d->hdr);
			size_t take = want - d->hdr_len < n ? want - d->hdr_len : n;
			memcpy(d->hdr + d->hdr_len, p, take);
			d->hdr_len += take;
			p += take;
			n -= take;
			if (d->hdr_len < 2 || d->hdr_len < header_size(d->hdr))
				continue;
			int rc = parse_header(d, err);
			if (rc < 0)
				return rc;
			d->in_payload = true;
		}
		uint64_t left = d->frame_len - d->frame_done;
		size_t take = left < n ? (size_t)left : n;
		if (take) {
			uint8_t *dst;
			if (is_control(d->opcode)) {
				dst = d->ctl + d->frame_done;
				memcpy(dst, p, take);
			} else {
				dst = (uint8_t *)d->msg.buf + d->msg.len;
				sfs_buf_add(&d->msg, p, take); /* reserved in parse_header */
			}
			if (d->masked)
				sfs_ws_mask(dst, take, d->mask, d->frame_done);
			if (!is_control(d->opcode) && d->msg_opcode == SFS_WS_TEXT &&
			    !sfs_ws_utf8(&d->utf8_state, dst, take))
				return fail(d, SFS_WS_CLOSE_BAD_DATA, err,
					    "text that is not UTF-8");
			d->frame_done += take;
			p += take;
			n -= take;
		}
		if (d->frame_done < d->frame_len)
			continue;
		d->in_payload = false;
		d->hdr_len = 0;
		int rc = is_control(d->opcode) ? deliver_control(d, on_msg, arg, err)
					       : deliver_data(d, on_msg, arg, err);
		if (rc)
			return rc;
	}
	return 0;
}

void sfs_ws_decoder_free(struct sfs_ws_decoder *d)
{
	sfs_buf_free(&d->msg);
}
