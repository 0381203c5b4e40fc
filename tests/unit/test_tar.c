/* The tar reader against archives built here: ustar, GNU long names, pax,
 * and hostile ones (bad checksums, truncation, huge sizes, "..", bad pax
 * records), whole in memory and fed a byte at a time. */
#include "check.h"

#include "providers/tar.h"

#include <errno.h>
#include <stdlib.h>

/* ---- building archives ---------------------------------------------------- */

static unsigned char ar[64 * 1024];
static size_t arlen;

static void add_block(const unsigned char *b)
{
	memcpy(ar + arlen, b, SFS_TAR_BLOCK);
	arlen += SFS_TAR_BLOCK;
}

static void add_data(const void *data, size_t n)
{
	memset(ar + arlen, 0, (n + SFS_TAR_BLOCK - 1) / SFS_TAR_BLOCK * SFS_TAR_BLOCK);
	memcpy(ar + arlen, data, n);
	arlen += (n + SFS_TAR_BLOCK - 1) / SFS_TAR_BLOCK * SFS_TAR_BLOCK;
}

static void add_entry(const char *name, char type, const char *data)
{
	unsigned char h[SFS_TAR_BLOCK];
	size_t n = data ? strlen(data) : 0;
	sfs_tar_header(h, name, type, n, 0644, 1700000000);
	add_block(h);
	if (n)
		add_data(data, n);
}

static void add_end(void)
{
	memset(ar + arlen, 0, 2 * SFS_TAR_BLOCK);
	arlen += 2 * SFS_TAR_BLOCK;
}

/* Recomputes the checksum of the header at off after an edit. */
static void resum(size_t off)
{
	unsigned char *h = ar + off;
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < SFS_TAR_BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
}

static void add_pax_n(const char *records, size_t n)
{
	unsigned char h[SFS_TAR_BLOCK];
	sfs_tar_header(h, "PaxHeaders/x", 'x', n, 0644, 0);
	add_block(h);
	add_data(records, n);
}

static void add_pax(const char *records)
{
	add_pax_n(records, strlen(records));
}

/* One well-formed record "LEN key=value\n" (value of vlen bytes) into out. */
static size_t rec(char *out, const char *key, const char *value, size_t vlen)
{
	size_t body = strlen(key) + vlen + 3, len = body + 1;
	while (len != body + (size_t)snprintf(NULL, 0, "%zu", len))
		len = body + (size_t)snprintf(NULL, 0, "%zu", len);
	int n = sprintf(out, "%zu %s=", len, key);
	memcpy(out + n, value, vlen);
	out[n + vlen] = '\n';
	return len;
}

/* ---- collecting what the reader says -------------------------------------- */

struct seen {
	char names[16][300];
	char links[16][300];
	char types[16];
	char data[16][600];
	int n, ends;
	int stop_at; /* entry index to answer STOP, or -1 */
};

static int on_entry(void *ctx, const struct sfs_tar_entry *e)
{
	struct seen *s = ctx;
	if (s->n >= 16)
		return -E2BIG;
	snprintf(s->names[s->n], sizeof(s->names[0]), "%s", e->name);
	snprintf(s->links[s->n], sizeof(s->links[0]), "%s", e->linkname);
	s->types[s->n] = e->type;
	s->data[s->n][0] = 0;
	return s->n++ == s->stop_at ? SFS_TAR_STOP : 0;
}

static int on_data(void *ctx, const struct sfs_tar_entry *e, const void *p, size_t n)
{
	struct seen *s = ctx;
	strncat(s->data[s->n - 1], p, n);
	return 0;
}

static int on_end(void *ctx, const struct sfs_tar_entry *e)
{
	((struct seen *)ctx)->ends++;
	return 0;
}

static const struct sfs_tar_ops ops = {.entry = on_entry, .data = on_data, .end = on_end};

/* Walks ar whole and fed one byte at a time: both must agree. */
static int walk(struct seen *s, const struct sfs_tar_ops *o, struct sfs_err *err)
{
	memset(s, 0, sizeof(*s));
	s->stop_at = -1;
	int whole = sfs_tar_walk(ar, arlen, o, s, err);
	struct seen s2 = {.stop_at = -1};
	struct sfs_tar_reader r;
	sfs_tar_init(&r, o, &s2);
	int rc = 0;
	for (size_t i = 0; i < arlen && rc == 0; i++)
		rc = sfs_tar_feed(&r, ar + i, 1, NULL);
	if (rc == 0)
		rc = sfs_tar_finish(&r, NULL);
	else if (rc == 1)
		rc = r.stopped;
	sfs_tar_free(&r);
	CHECK_INT(rc, whole);
	CHECK_INT(s2.n, s->n);
	for (int i = 0; i < s->n && i < s2.n; i++) {
		CHECK_STREQ(s2.names[i], s->names[i]);
		CHECK_STREQ(s2.data[i], s->data[i]);
	}
	return whole;
}

/* ---- cases ---------------------------------------------------------------- */

static void test_plain(void)
{
	arlen = 0;
	add_entry("dir/", '5', NULL);
	add_entry("dir/a.txt", '0', "hello\n");
	add_entry("dir/link", '2', NULL);
	memcpy(ar + arlen - SFS_TAR_BLOCK + 157, "../up/target", 12); /* symlinks may point up */
	resum(arlen - SFS_TAR_BLOCK);
	add_entry("/abs/empty", '\0', NULL);
	add_end();
	struct seen s;
	struct sfs_err err = {0};
	CHECK_INT(walk(&s, &ops, &err), 0);
	CHECK_INT(s.n, 4);
	CHECK_STREQ(s.names[0], "dir");
	CHECK_INT(s.types[0], '5');
	CHECK_STREQ(s.names[1], "dir/a.txt");
	CHECK_STREQ(s.data[1], "hello\n");
	CHECK_STREQ(s.links[2], "../up/target");
	CHECK_INT(s.types[2], '2');
	CHECK_STREQ(s.names[3], "abs/empty"); /* leading '/' dropped */
	CHECK_INT(s.types[3], '0');
	CHECK_INT(s.ends, 4);
	/* no end blocks: accepted at a header boundary */
	arlen -= 2 * SFS_TAR_BLOCK;
	CHECK_INT(walk(&s, &ops, &err), 0);
	CHECK_INT(s.n, 4);
	/* an empty archive */
	arlen = 0;
	CHECK_INT(walk(&s, &ops, &err), 0);
	CHECK_INT(s.n, 0);
}

static void test_stop_and_skip(void)
{
	arlen = 0;
	add_entry("one", '0', "1");
	add_entry("two", '0', "2");
	add_end();
	struct seen s = {0};
	s.stop_at = 0;
	CHECK_INT(sfs_tar_walk(ar, arlen, &ops, &s, NULL), 1);
	CHECK_INT(s.n, 1);
	/* no data callback: data is skipped */
	struct sfs_tar_ops names_only = {.entry = on_entry};
	CHECK_INT(walk(&s, &names_only, NULL), 0);
	CHECK_INT(s.n, 2);
	CHECK_STREQ(s.data[1], "");
}

static void test_long_names(void)
{
	char name[400], link[400];
	memset(name, 'n', 300);
	memcpy(name + 290, "/file.txt", 10);
	memset(link, 'l', 250);
	link[250] = 0;
	arlen = 0;
	unsigned char buf[4 * SFS_TAR_BLOCK];
	long n = sfs_tar_long_name(buf, sizeof(buf), name);
	CHECK(n == 2 * SFS_TAR_BLOCK);
	memcpy(ar + arlen, buf, (size_t)n);
	arlen += (size_t)n;
	add_entry(name, '0', "long");
	/* a GNU 'K' long link name for a symlink */
	unsigned char h[SFS_TAR_BLOCK];
	sfs_tar_header(h, "././@LongLink", 'K', strlen(link) + 1, 0644, 0);
	add_block(h);
	add_data(link, strlen(link) + 1);
	add_entry("sym", '2', NULL);
	/* ustar prefix + name */
	add_entry("base.txt", '0', "p");
	memcpy(ar + arlen - 2 * SFS_TAR_BLOCK + 345, "some/prefix", 11);
	resum(arlen - 2 * SFS_TAR_BLOCK);
	add_end();
	struct seen s;
	CHECK_INT(walk(&s, &ops, NULL), 0);
	CHECK_INT(s.n, 3);
	CHECK_STREQ(s.names[0], name);
	CHECK_STREQ(s.data[0], "long");
	CHECK_STREQ(s.names[1], "sym");
	CHECK_STREQ(s.links[1], link);
	CHECK_STREQ(s.names[2], "some/prefix/base.txt");
	/* short names need no long-name entry */
	CHECK_INT(sfs_tar_long_name(buf, sizeof(buf), "short"), 0);
	CHECK_INT(sfs_tar_long_name(buf, SFS_TAR_BLOCK, name), -ENAMETOOLONG);
}

static void test_pax(void)
{
	arlen = 0;
	char recs[256];
	size_t n = rec(recs, "path", "pax/name/is/longer", 18);
	n += rec(recs + n, "linkpath", "target", 6);
	n += rec(recs + n, "mtime", "1.2345678", 9);
	add_pax_n(recs, n);
	add_entry("short", '2', NULL);
	/* a pax size overrides the header's */
	add_pax("10 size=3\n");
	add_entry("sized", '0', NULL);
	memcpy(ar + arlen, "abc", 3);
	memset(ar + arlen + 3, 0, SFS_TAR_BLOCK - 3);
	arlen += SFS_TAR_BLOCK;
	/* global headers are read and skipped */
	unsigned char h[SFS_TAR_BLOCK];
	sfs_tar_header(h, "global", 'g', 16, 0644, 0);
	add_block(h);
	add_data("16 path=ignored\n", 16);
	add_entry("after", '0', "x");
	add_end();
	struct seen s;
	struct sfs_err err = {0};
	CHECK_INT(walk(&s, &ops, &err), 0);
	CHECK_INT(s.n, 3);
	CHECK_STREQ(s.names[0], "pax/name/is/longer");
	CHECK_STREQ(s.links[0], "target");
	CHECK_STREQ(s.names[1], "sized");
	CHECK_STREQ(s.data[1], "abc");
	CHECK_STREQ(s.names[2], "after");
}

static void test_bad_checksum(void)
{
	arlen = 0;
	add_entry("a", '0', "data");
	add_end();
	ar[0] = 'b'; /* not re-summed */
	struct seen s;
	struct sfs_err err = {0};
	CHECK_INT(walk(&s, &ops, &err), -EIO);
	CHECK(strstr(err.msg, "checksum") != NULL);
	CHECK_INT(s.n, 0);
	/* garbage in the checksum field itself */
	arlen = 0;
	add_entry("a", '0', "data");
	memcpy(ar + 148, "zzzzzzz", 7);
	CHECK_INT(walk(&s, &ops, &err), -EIO);
}

static void test_truncated(void)
{
	arlen = 0;
	add_entry("a", '0', "0123456789");
	add_end();
	size_t whole = arlen;
	struct seen s;
	struct sfs_err err = {0};
	size_t cuts[] = {100, SFS_TAR_BLOCK + 5, SFS_TAR_BLOCK + 10, SFS_TAR_BLOCK + 300};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		arlen = cuts[i];
		err.msg[0] = 0;
		CHECK_INT(walk(&s, &ops, &err), -EIO);
		CHECK(strstr(err.msg, "truncated") != NULL);
	}
	/* a long name with nothing after it */
	arlen = 0;
	char name[200];
	memset(name, 'x', 150);
	name[150] = 0;
	unsigned char buf[4 * SFS_TAR_BLOCK];
	long n = sfs_tar_long_name(buf, sizeof(buf), name);
	memcpy(ar, buf, (size_t)n);
	arlen = (size_t)n;
	CHECK_INT(walk(&s, &ops, &err), -EIO);
	/* a header cut short */
	arlen = 0;
	add_entry("a", '0', NULL);
	arlen = SFS_TAR_BLOCK - 1;
	CHECK_INT(walk(&s, &ops, &err), -EIO);
	CHECK(whole > 0);
}

static void test_huge_sizes(void)
{
	/* an octal size of 8 GiB over a short archive: truncated, nothing allocated */
	arlen = 0;
	add_entry("big", '0', NULL);
	memcpy(ar + 124, "77777777777", 11);
	resum(0);
	add_end();
	struct seen s;
	struct sfs_err err = {0};
	CHECK_INT(walk(&s, &ops, &err), -EIO);
	/* over the caller's limit */
	struct sfs_tar_ops limited = ops;
	limited.max_size = 1 << 20;
	memset(&s, 0, sizeof(s));
	CHECK_INT(sfs_tar_walk(ar, arlen, &limited, &s, &err), -EFBIG);
	CHECK_INT(s.n, 0);
	/* base-256 sizes past 63 bits, and negative ones */
	arlen = 0;
	add_entry("b256", '0', NULL);
	memset(ar + 124, 0xff, 12);
	resum(0);
	add_end();
	CHECK_INT(walk(&s, &ops, &err), -EIO);
	ar[124] = 0x80;
	memset(ar + 125, 0xff, 11);
	resum(0);
	CHECK_INT(walk(&s, &ops, &err), -EIO);
	/* a small base-256 size is fine */
	memset(ar + 124, 0, 12);
	ar[124] = 0x80;
	ar[135] = 3;
	resum(0);
	memcpy(ar + SFS_TAR_BLOCK, "xyz", 3);
	memset(ar + SFS_TAR_BLOCK + 3, 0, SFS_TAR_BLOCK - 3);
	memset(ar + 2 * SFS_TAR_BLOCK, 0, 2 * SFS_TAR_BLOCK);
	arlen = 4 * SFS_TAR_BLOCK;
	CHECK_INT(walk(&s, &ops, &err), 0);
	CHECK_STREQ(s.data[0], "xyz");
	/* an extended header past the in-memory limit */
	arlen = 0;
	unsigned char h[SFS_TAR_BLOCK];
	sfs_tar_header(h, "PaxHeaders/x", 'x', (uint64_t)SFS_TAR_META_MAX + 1, 0644, 0);
	add_block(h);
	CHECK_INT(walk(&s, &ops, &err), -EIO);
	CHECK(strstr(err.msg, "oversized") != NULL);
}

static void test_dotdot(void)
{
	const char *bad[] = {"../etc/passwd", "a/../../b", "a/..", "..", "/../x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		arlen = 0;
		add_entry("ok", '0', "fine");
		add_entry(bad[i], '0', "evil");
		add_end();
		struct seen s;
		struct sfs_err err = {0};
		CHECK_INT(walk(&s, &ops, &err), -EINVAL);
		CHECK(strstr(err.msg, "unsafe name") != NULL);
		CHECK_INT(s.n, 1); /* the good entry before it was seen, the bad one never */
	}
	/* names that merely contain dots are fine */
	arlen = 0;
	add_entry("a/..b/c..", '0', "x");
	add_entry("./d", '0', "y");
	add_end();
	struct seen s;
	CHECK_INT(walk(&s, &ops, NULL), 0);
	CHECK_STREQ(s.names[0], "a/..b/c..");
	CHECK_STREQ(s.names[1], "./d");
	/* a pax path and a hard-link target are checked too */
	arlen = 0;
	char recs[64];
	add_pax_n(recs, rec(recs, "path", "x/../../evil", 12));
	add_entry("innocent", '0', NULL);
	add_end();
	CHECK_INT(walk(&s, &ops, NULL), -EINVAL);
	CHECK_INT(s.n, 0);
	arlen = 0;
	add_entry("hard", '1', NULL);
	memcpy(ar + 157, "../outside", 10);
	resum(0);
	add_end();
	CHECK_INT(walk(&s, &ops, NULL), -EINVAL);
	/* a pax path with a NUL inside */
	arlen = 0;
	add_pax_n(recs, rec(recs, "path", "a\0b/c", 5));
	add_entry("z", '0', NULL);
	add_end();
	CHECK(walk(&s, &ops, NULL) < 0);
}

static void test_bad_pax(void)
{
	const char *bad[] = {
	    "99 path=x\n",		      /* longer than the header */
	    "5 path=abc\n",		      /* shorter than its own prefix */
	    "11 path=abc",		      /* no newline */
	    "x path=abc\n",		      /* no length */
	    "10 pathabc\n",		      /* no '=' */
	    "12 size=-10\n",		      /* not a size */
	    "30 size=99999999999999999999\n", /* past 63 bits */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		arlen = 0;
		add_pax(bad[i]);
		add_entry("f", '0', NULL);
		add_end();
		struct seen s;
		struct sfs_err err = {0};
		CHECK_INT(walk(&s, &ops, &err), -EIO);
		CHECK(strstr(err.msg, "pax") != NULL);
	}
}

static int refuse(void *ctx, const struct sfs_tar_entry *e, const void *p, size_t n)
{
	return -ENOSPC;
}

static void test_callback_error(void)
{
	arlen = 0;
	add_entry("f", '0', "data");
	add_end();
	struct sfs_tar_ops o = {.entry = on_entry, .data = refuse};
	struct seen s = {.stop_at = -1};
	struct sfs_err err = {0};
	CHECK_INT(sfs_tar_walk(ar, arlen, &o, &s, &err), -ENOSPC);
	CHECK(strstr(err.msg, "\"f\"") != NULL);
}

CHECK_MAIN(CHECK_CASE(test_plain), CHECK_CASE(test_stop_and_skip), CHECK_CASE(test_long_names),
	   CHECK_CASE(test_pax), CHECK_CASE(test_bad_checksum), CHECK_CASE(test_truncated),
	   CHECK_CASE(test_huge_sizes), CHECK_CASE(test_dotdot), CHECK_CASE(test_bad_pax),
	   CHECK_CASE(test_callback_error))
