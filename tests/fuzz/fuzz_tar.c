/*
 * libFuzzer harness: the one tar reader (providers/tar.c), which reads
 * archives that come from inside sandboxes.  The first byte chooses how the
 * archive is cut into pieces for the push parser; the same archive is also
 * walked whole.  Properties: no entry name is empty, absolute or has a ".."
 * component; an entry's data adds up to its size; and the entries, the bytes
 * and the verdict are the same however the archive is cut.
 */
#include "providers/tar.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct seen {
	unsigned long entries, hash;
	uint64_t got; /* data bytes of the current entry */
};

/* Hashes bytes without marking where a call ended: data arrives in
 * pieces that depend on the cuts. */
static void mix_bytes(struct seen *s, const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		s->hash = s->hash * 1099511628211ul ^ c[i];
}

static void mix(struct seen *s, const void *p, size_t n)
{
	mix_bytes(s, p, n);
	s->hash = s->hash * 1099511628211ul ^ 0x100;
}

static int has_dotdot(const char *name)
{
	for (const char *p = name; *p;) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return 1;
		p += n;
		while (*p == '/')
			p++;
	}
	return 0;
}

static int on_entry(void *ctx, const struct sfs_tar_entry *e)
{
	struct seen *s = ctx;
	if (!e->name || !e->name[0] || e->name[0] == '/' || has_dotdot(e->name))
		abort();
	if (e->linkname && e->type == '1' && (e->linkname[0] == '/' || has_dotdot(e->linkname)))
		abort(); /* a hard link may not reach outside the archive's tree */
	s->entries++;
	s->got = 0;
	mix(s, e->name, strlen(e->name));
	mix(s, &e->size, sizeof(e->size));
	return 0;
}

static int on_data(void *ctx, const struct sfs_tar_entry *e, const void *p, size_t n)
{
	struct seen *s = ctx;
	s->got += n;
	if (s->got > e->size)
		abort();
	mix_bytes(s, p, n);
	return 0;
}

static int on_end(void *ctx, const struct sfs_tar_entry *e)
{
	struct seen *s = ctx;
	if (s->got != e->size)
		abort(); /* every byte of an entry delivered, no more */
	mix(s, "", 0);
	return 0;
}

static const struct sfs_tar_ops ops = {
    .entry = on_entry, .data = on_data, .end = on_end, .max_size = 1u << 24};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = 1 + data[0] % 700; /* pieces straddle 512-byte blocks */
	const uint8_t *tar = data + 1;
	size_t n = size - 1;

	struct seen whole = {0};
	struct sfs_err err = {0};
	int rw = sfs_tar_walk(tar, n, &ops, &whole, &err);

	struct seen cut = {0};
	struct sfs_tar_reader r;
	sfs_tar_init(&r, &ops, &cut);
	int rc = 0;
	for (size_t o = 0; o < n && rc == 0;) {
		size_t k = step < n - o ? step : n - o;
		rc = sfs_tar_feed(&r, tar + o, k, &err);
		o += k;
	}
	if (rc == 0)
		rc = sfs_tar_finish(&r, &err);
	sfs_tar_free(&r);
	if ((rw < 0) != (rc < 0) || whole.entries != cut.entries ||
	    (rw >= 0 && whole.hash != cut.hash))
		abort();
	return 0;
}
