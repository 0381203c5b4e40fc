/* The tar reader: a push parser over ustar, GNU and pax archives. */
#include "tar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ST_HEADER, ST_META, ST_DATA, ST_PAD, ST_DONE };

void sfs_tar_init(struct sfs_tar_reader *r, const struct sfs_tar_ops *ops, void *ctx)
{
	memset(r, 0, sizeof(*r));
	r->ops = ops;
	r->ctx = ctx;
	r->state = ST_HEADER;
}

void sfs_tar_free(struct sfs_tar_reader *r)
{
	sfs_buf_free(&r->meta);
	sfs_buf_free(&r->long_name);
	sfs_buf_free(&r->long_link);
	sfs_buf_free(&r->pax_path);
	sfs_buf_free(&r->pax_link);
	sfs_buf_free(&r->name);
	sfs_buf_free(&r->link);
}

static uint64_t padding(uint64_t size)
{
	return (SFS_TAR_BLOCK - size % SFS_TAR_BLOCK) % SFS_TAR_BLOCK;
}

/* A numeric field: octal digits (leading spaces, ended by NUL or space), or
 * GNU base-256 (first byte 0x80; 0xff, a negative number, is refused). */
static bool number(const unsigned char *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;
	if (p[0] == 0x80) {
		for (size_t i = 1; i < n; i++) {
			if (v >> 55)
				return false; /* would pass 63 bits */
			v = v << 8 | p[i];
		}
		*out = v;
		return true;
	}
	if (p[0] & 0x80)
		return false;
	size_t i = 0;
	while (i < n && p[i] == ' ')
		i++;
	for (; i < n && p[i] && p[i] != ' '; i++) {
		if (p[i] < '0' || p[i] > '7' || v >> 60)
			return false;
		v = v * 8 + (uint64_t)(p[i] - '0');
	}
	for (; i < n; i++) /* only terminators may follow */
		if (p[i] && p[i] != ' ')
			return false;
	*out = v;
	return true;
}

static bool checksum_ok(const unsigned char *h)
{
	uint64_t want;
	if (!number(h + 148, 8, &want))
		return false;
	/* the field itself counts as spaces; old tars summed signed chars */
	long usum = 0, ssum = 0;
	for (int i = 0; i < SFS_TAR_BLOCK; i++) {
		unsigned char c = i >= 148 && i < 156 ? ' ' : h[i];
		usum += c;
		ssum += (signed char)c;
	}
	return (uint64_t)usum == want || (ssum >= 0 && (uint64_t)ssum == want);
}

static bool all_zero(const unsigned char *h)
{
	for (int i = 0; i < SFS_TAR_BLOCK; i++)
		if (h[i])
			return false;
	return true;
}

/* Strips leading and trailing '/' and refuses ".." components.  In place. */
static int clean_path(struct sfs_buf *b, bool allow_dotdot)
{
	if (!b->buf && sfs_buf_adds(b, ""))
		return -ENOMEM;
	if (memchr(b->buf, '\0', b->len))
		return -EINVAL;
	size_t start = 0;
	while (start < b->len && b->buf[start] == '/')
		start++;
	size_t end = b->len;
	while (end > start && b->buf[end - 1] == '/')
		end--;
	memmove(b->buf, b->buf + start, end - start);
	b->len = end - start;
	b->buf[b->len] = '\0';
	if (!allow_dotdot) {
		for (const char *p = b->buf; *p;) {
			size_t n = strcspn(p, "/");
			if (n == 2 && p[0] == '.' && p[1] == '.')
				return -EINVAL;
			p += n;
			while (*p == '/')
				p++;
		}
	}
	if (!b->len)
		return sfs_buf_adds(b, ".");
	return 0;
}

/* A field of up to n bytes, NUL-terminated only when shorter. */
static int add_field(struct sfs_buf *b, const unsigned char *p, size_t n)
{
	return sfs_buf_add(b, p, strnlen((const char *)p, n));
}

static int fail(struct sfs_tar_reader *r, struct sfs_err *err, int code, const char *what)
{
	r->state = ST_DONE;
	return sfs_errf(err, code, "tar: %s at byte %llu", what, (unsigned long long)r->hdr_off);
}

/* A callback's answer: 0 go on, 1 stopped, or its error. */
static int callback_rc(struct sfs_tar_reader *r, int cb, struct sfs_err *err)
{
	if (cb < 0) {
		r->state = ST_DONE;
		return sfs_errf(err, cb, "tar: \"%.200s\": %s", r->name.buf, strerror(-cb));
	}
	if (cb == SFS_TAR_STOP) {
		r->state = ST_DONE;
		r->stopped = true;
		return 1;
	}
	return 0;
}

/* One pax record list ("LEN key=value\n"...). */
static int parse_pax(struct sfs_tar_reader *r, bool global)
{
	const char *p = r->meta.buf ? r->meta.buf : "";
	size_t left = r->meta.len;
	while (left) {
		size_t len = 0, i = 0;
		while (i < left && p[i] >= '0' && p[i] <= '9') {
			if (len > SFS_TAR_META_MAX)
				return -EINVAL;
			len = len * 10 + (size_t)(p[i] - '0');
			i++;
		}
		if (!i || i >= left || p[i] != ' ' || len <= i + 1 || len > left ||
		    p[len - 1] != '\n')
			return -EINVAL;
		const char *kv = p + i + 1, *rec_end = p + len - 1;
		const char *eq = memchr(kv, '=', (size_t)(rec_end - kv));
		if (!eq || eq == kv || memchr(kv, '\0', (size_t)(eq - kv)))
			return -EINVAL;
		size_t klen = (size_t)(eq - kv), vlen = (size_t)(rec_end - eq - 1);
		const char *v = eq + 1;
		if (!global) {
			if (klen == 4 && !memcmp(kv, "path", 4)) {
				sfs_buf_reset(&r->pax_path);
				if (sfs_buf_add(&r->pax_path, v, vlen))
					return -ENOMEM;
				r->pax_has_path = true;
			} else if (klen == 8 && !memcmp(kv, "linkpath", 8)) {
				sfs_buf_reset(&r->pax_link);
				if (sfs_buf_add(&r->pax_link, v, vlen))
					return -ENOMEM;
				r->pax_has_link = true;
			} else if (klen == 4 && !memcmp(kv, "size", 4)) {
				uint64_t s = 0;
				if (!vlen || vlen > 19)
					return -EINVAL;
				for (size_t k = 0; k < vlen; k++) {
					if (v[k] < '0' || v[k] > '9')
						return -EINVAL;
					s = s * 10 + (uint64_t)(v[k] - '0');
				}
				if (s > INT64_MAX)
					return -EINVAL;
				r->pax_size = s;
				r->pax_has_size = true;
			}
		}
		p += len;
		left -= len;
	}
	return 0;
}

/* The header in r->hdr is complete. */
static int on_header(struct sfs_tar_reader *r, struct sfs_err *err)
{
	const unsigned char *h = r->hdr;
	if (all_zero(h)) {
		r->state = ST_DONE; /* the end (a second zero block is not needed) */
		return 1;
	}
	if (!checksum_ok(h))
		return fail(r, err, -EIO, "bad header checksum");
	uint64_t size, mode, uid, gid, mtime;
	if (!number(h + 124, 12, &size) || !number(h + 100, 8, &mode) ||
	    !number(h + 108, 8, &uid) || !number(h + 116, 8, &gid) || !number(h + 136, 12, &mtime))
		return fail(r, err, -EIO, "bad number in a header");
	if (size > INT64_MAX)
		return fail(r, err, -EIO, "entry size out of range");
	char type = (char)h[156];
	if (type == 'L' || type == 'K' || type == 'x' || type == 'g') {
		if (size > SFS_TAR_META_MAX)
			return fail(r, err, -EIO, "oversized extended header");
		r->meta_type = type;
		sfs_buf_reset(&r->meta);
		r->left = size;
		r->pad = padding(size);
		r->state = ST_META;
		return 0;
	}
	if (type == '\0' || type == '7')
		type = '0';
	/* the name: pax path, else GNU long name, else ustar prefix/name */
	sfs_buf_reset(&r->name);
	sfs_buf_reset(&r->link);
	int e = 0;
	if (r->pax_has_path) {
		e = sfs_buf_add(&r->name, r->pax_path.buf ? r->pax_path.buf : "", r->pax_path.len);
	} else if (r->has_long_name) {
		e = add_field(&r->name, (const unsigned char *)r->long_name.buf, r->long_name.len);
	} else {
		bool posix = !memcmp(h + 257, "ustar\0", 6);
		if (posix && h[345]) {
			e = add_field(&r->name, h + 345, 155);
			if (!e)
				e = sfs_buf_addc(&r->name, '/');
		}
		if (!e)
			e = add_field(&r->name, h, 100);
	}
	if (!e) {
		if (r->pax_has_link)
			e = sfs_buf_add(&r->link, r->pax_link.buf ? r->pax_link.buf : "",
					r->pax_link.len);
		else if (r->has_long_link)
			e = add_field(&r->link, (const unsigned char *)r->long_link.buf,
				      r->long_link.len);
		else
			e = add_field(&r->link, h + 157, 100);
	}
	if (!e && !r->link.buf)
		e = sfs_buf_adds(&r->link, "");
	if (e)
		return fail(r, err, -ENOMEM, "out of memory");
	if (r->pax_has_size)
		size = r->pax_size;
	r->pax_has_path = r->pax_has_link = r->pax_has_size = false;
	r->has_long_name = r->has_long_link = false;
	int c = clean_path(&r->name, false);
	if (!c && type == '1')
		c = clean_path(&r->link, false);
	else if (!c && memchr(r->link.buf, '\0', r->link.len))
		c = -EINVAL;
	if (c == -ENOMEM)
		return fail(r, err, -ENOMEM, "out of memory");
	if (c) {
		r->state = ST_DONE;
		return sfs_errf(err, -EINVAL, "tar: unsafe name \"%.200s\" at byte %llu",
				r->name.buf, (unsigned long long)r->hdr_off);
	}
	/* links, devices, fifos and directories carry no data, whatever the
	 * size field says (pax allows a size on them, GNU tar ignores it) */
	if (type == '1' || type == '2' || type == '3' || type == '4' || type == '5' || type == '6')
		size = 0;
	if (type == '0' && r->ops->max_size && size > r->ops->max_size) {
		r->state = ST_DONE;
		return sfs_errf(err, -EFBIG, "tar: \"%.200s\" is too large (%llu bytes)",
				r->name.buf, (unsigned long long)size);
	}
	r->cur = (struct sfs_tar_entry){.name = r->name.buf,
					.linkname = r->link.buf,
					.type = type,
					.mode = (unsigned)(mode & 07777),
					.size = size,
					.mtime = (int64_t)(mtime > INT64_MAX ? INT64_MAX : mtime),
					.uid = uid,
					.gid = gid,
					.offset = r->hdr_off};
	int cb = r->ops->entry ? r->ops->entry(r->ctx, &r->cur) : SFS_TAR_SKIP;
	int rc = callback_rc(r, cb, err);
	if (rc)
		return rc;
	r->deliver = cb != SFS_TAR_SKIP;
	r->left = size;
	r->pad = padding(size);
	r->state = ST_DATA;
	return 0;
}

/* The entry's data is all there (or skipped). */
static int entry_done(struct sfs_tar_reader *r, struct sfs_err *err)
{
	r->state = ST_PAD;
	if (!r->deliver || !r->ops->end)
		return 0;
	return callback_rc(r, r->ops->end(r->ctx, &r->cur), err);
}

static int meta_done(struct sfs_tar_reader *r, struct sfs_err *err)
{
	r->state = ST_PAD;
	struct sfs_buf *dst = NULL;
	if (r->meta_type == 'L') {
		dst = &r->long_name;
		r->has_long_name = true;
	} else if (r->meta_type == 'K') {
		dst = &r->long_link;
		r->has_long_link = true;
	}
	if (dst) {
		sfs_buf_reset(dst);
		if (sfs_buf_add(dst, r->meta.buf ? r->meta.buf : "", r->meta.len))
			return fail(r, err, -ENOMEM, "out of memory");
		return 0;
	}
	int e = parse_pax(r, r->meta_type == 'g');
	if (e == -ENOMEM)
		return fail(r, err, -ENOMEM, "out of memory");
	if (e)
		return fail(r, err, -EIO, "malformed pax header");
	return 0;
}

int sfs_tar_feed(struct sfs_tar_reader *r, const void *buf, size_t len, struct sfs_err *err)
{
	const unsigned char *p = buf;
	while (r->state != ST_DONE) {
		int rc = 0;
		switch (r->state) {
		case ST_HEADER: {
			if (!len)
				return 0;
			size_t take = SFS_TAR_BLOCK - r->hlen;
			if (take > len)
				take = len;
			memcpy(r->hdr + r->hlen, p, take);
			r->hlen += take;
			p += take;
			len -= take;
			r->pos += take;
			if (r->hlen < SFS_TAR_BLOCK)
				return 0;
			r->hlen = 0;
			r->hdr_off = r->pos - SFS_TAR_BLOCK;
			rc = on_header(r, err);
			break;
		}
		case ST_META:
		case ST_DATA: {
			if (!r->left) {
				rc = r->state == ST_META ? meta_done(r, err) : entry_done(r, err);
				break;
			}
			if (!len)
				return 0;
			size_t take = r->left < len ? (size_t)r->left : len;
			if (r->state == ST_META) {
				if (sfs_buf_add(&r->meta, p, take))
					return fail(r, err, -ENOMEM, "out of memory");
			} else if (r->deliver && r->ops->data) {
				int rc =
				    callback_rc(r, r->ops->data(r->ctx, &r->cur, p, take), err);
				if (rc)
					return rc;
			}
			r->left -= take;
			p += take;
			len -= take;
			r->pos += take;
			break;
		}
		case ST_PAD: {
			if (!r->pad) {
				r->state = ST_HEADER;
				break;
			}
			if (!len)
				return 0;
			size_t take = r->pad < len ? (size_t)r->pad : len;
			r->pad -= take;
			p += take;
			len -= take;
			r->pos += take;
			break;
		}
		}
		if (rc)
			return rc;
	}
	return 1;
}

int sfs_tar_finish(struct sfs_tar_reader *r, struct sfs_err *err)
{
	if (r->state == ST_DONE)
		return 0;
	/* ended on a header boundary with nothing pending: accepted */
	if (r->state == ST_HEADER && r->hlen == 0 && !r->has_long_name && !r->has_long_link &&
	    !r->pax_has_path && !r->pax_has_link && !r->pax_has_size)
		return 0;
	r->state = ST_DONE;
	return sfs_errf(err, -EIO, "tar: the archive is truncated at byte %llu",
			(unsigned long long)r->pos);
}

int sfs_tar_walk(const void *buf, size_t len, const struct sfs_tar_ops *ops, void *ctx,
		 struct sfs_err *err)
{
	struct sfs_tar_reader r;
	sfs_tar_init(&r, ops, ctx);
	int rc = sfs_tar_feed(&r, buf, len, err);
	if (rc == 0)
		rc = sfs_tar_finish(&r, err);
	else if (rc == 1)
		rc = r.stopped ? 1 : 0;
	sfs_tar_free(&r);
	return rc;
}

/* ---- writing --------------------------------------------------------------- */

/* A 12-byte numeric field: 11 octal digits, or GNU's base-256 (a leading
 * 0x80, the value big-endian) for a value of 8 GiB or more, never cut. */
static void put_num12(unsigned char *f, uint64_t v)
{
	if (v < 077777777777ULL + 1) {
		char t[24];
		snprintf(t, sizeof(t), "%011llo", (unsigned long long)v);
		memcpy(f, t, 12); /* 11 digits and the NUL */
		return;
	}
	f[0] = 0x80;
	for (int i = 11; i >= 1; i--, v >>= 8)
		f[i] = (unsigned char)(v & 0xff);
}

void sfs_tar_header(unsigned char h[SFS_TAR_BLOCK], const char *name, char type, uint64_t size,
		    unsigned mode, int64_t mtime)
{
	memset(h, 0, SFS_TAR_BLOCK);
	snprintf((char *)h, 100, "%s", name); /* may be cut: a long name entry precedes it */
	snprintf((char *)h + 100, 8, "%07o", mode & 07777);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	put_num12(h + 124, size);
	put_num12(h + 136, (uint64_t)(mtime < 0 ? 0 : mtime));
	memset(h + 148, ' ', 8);
	h[156] = (unsigned char)type;
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	snprintf((char *)h + 265, 32, "root");
	snprintf((char *)h + 297, 32, "root");
	unsigned sum = 0;
	for (int i = 0; i < SFS_TAR_BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

long sfs_tar_long_name(unsigned char *out, size_t cap, const char *name)
{
	size_t n = strlen(name);
	if (n < 100)
		return 0;
	size_t blocks = 1 + (n + 1 + SFS_TAR_BLOCK - 1) / SFS_TAR_BLOCK;
	if (blocks * SFS_TAR_BLOCK > cap)
		return -ENAMETOOLONG;
	sfs_tar_header(out, "././@LongLink", 'L', n + 1, 0644, 0);
	memset(out + SFS_TAR_BLOCK, 0, (blocks - 1) * SFS_TAR_BLOCK);
	memcpy(out + SFS_TAR_BLOCK, name, n);
	return (long)(blocks * SFS_TAR_BLOCK);
}
