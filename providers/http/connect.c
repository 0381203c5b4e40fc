/*
 * Connect protocol envelopes (connectrpc.com/docs/protocol, streaming RPCs):
 * each message is a flag byte, a 4-byte big-endian length and that many bytes
 * of JSON.  Flag bit 0x02 marks the end-of-stream message ({} or
 * {"error":{"code","message"}}); bit 0x01 (compressed) is refused, since
 * no compression is asked for.  The decoder is incremental: a network cuts
 * a response anywhere, so a header or a message may span any number of feeds.
 */
#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define FLAG_COMPRESSED 0x01

int sfs_connect_feed(struct sfs_connect_dec *d, const void *data, size_t n)
{
	const unsigned char *p = data;
	while (n) {
		if (d->ended)
			return -EPROTO; /* bytes after the end-of-stream message */
		if (d->hlen < 5) {
			size_t k = 5 - d->hlen < n ? 5 - d->hlen : n;
			memcpy(d->hdr + d->hlen, p, k);
			d->hlen += k;
			p += k;
			n -= k;
			if (d->hlen < 5)
				break;
			d->need = (uint32_t)d->hdr[1] << 24 | (uint32_t)d->hdr[2] << 16 |
				  (uint32_t)d->hdr[3] << 8 | d->hdr[4];
			size_t max = d->max ? d->max : SFS_CONNECT_MAX_DEFAULT;
			if (d->hdr[0] & FLAG_COMPRESSED)
				return -EPROTO;
			if (d->need > max)
				return -EMSGSIZE;
			sfs_buf_reset(&d->msg);
			if (sfs_buf_reserve(&d->msg, d->need))
				return -ENOMEM;
		}
		size_t k = d->need - d->msg.len < n ? d->need - d->msg.len : n;
		if (k && sfs_buf_add(&d->msg, p, k))
			return -ENOMEM;
		p += k;
		n -= k;
		if (d->msg.len < d->need)
			break;
		/* a whole message: hand it over, then start the next header */
		unsigned flags = d->hdr[0];
		d->hlen = 0;
		if (flags & SFS_CONNECT_END)
			d->ended = true;
		int r = d->on_msg(flags, d->msg.buf ? d->msg.buf : "", d->msg.len, d->arg);
		if (r)
			return r;
	}
	return 0;
}

int sfs_connect_finish(const struct sfs_connect_dec *d)
{
	return d->ended && d->hlen == 0 ? 0 : -EPROTO;
}

void sfs_connect_dec_free(struct sfs_connect_dec *d)
{
	sfs_buf_free(&d->msg);
}

int sfs_connect_envelope(struct sfs_buf *out, unsigned flags, const char *json, size_t len)
{
	if (len > UINT32_MAX)
		return -EMSGSIZE;
	unsigned char hdr[5] = {(unsigned char)flags, (unsigned char)(len >> 24),
				(unsigned char)(len >> 16), (unsigned char)(len >> 8),
				(unsigned char)len};
	if (sfs_buf_add(out, hdr, sizeof(hdr)) || sfs_buf_add(out, json, len))
		return -ENOMEM;
	return 0;
}

int sfs_connect_code_errno(const char *code)
{
	static const struct {
		const char *code;
		int err;
	} map[] = {
	    {"canceled", ECANCELED},
	    {"invalid_argument", EINVAL},
	    {"deadline_exceeded", ETIMEDOUT},
	    {"not_found", ENOENT},
	    {"already_exists", EEXIST},
	    {"permission_denied", EACCES},
	    {"resource_exhausted", ENOSPC},
	    {"failed_precondition", EBUSY},
	    {"aborted", EAGAIN},
	    {"out_of_range", ERANGE},
	    {"unimplemented", EOPNOTSUPP},
	    {"unavailable", EAGAIN},
	    {"unauthenticated", EACCES},
	    {"data_loss", EIO},
	};
	for (size_t i = 0; code && i < sizeof(map) / sizeof(map[0]); i++)
		if (!strcmp(code, map[i].code))
			return -map[i].err;
	return -EIO;
}

int sfs_connect_error(json_t *o, const char *what, struct sfs_err *err)
{
	json_t *e = json_object_get(o, "error");
	if (!e)
		e = o; /* a unary error body is the error object itself */
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *msg = json_string_value(json_object_get(e, "message"));
	if (!code && !msg)
		return 0;
	return sfs_errf(err, sfs_connect_code_errno(code), "%s: %s (%s)", what,
			msg ? msg : "no message", code ? code : "unknown");
}
