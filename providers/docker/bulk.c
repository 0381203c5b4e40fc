/*
 * fs_read_many for containers read through the archive API (docker.fs=archive
 * and containers with no host access): one GET /containers/ID/archive of the
 * directory of the first path asked for, its tar streamed, and the files
 * asked for among the directory's own entries handed on as they pass.  The
 * archive holds the directory's whole tree, so the transfer stops once every
 * file asked for has passed, or after DK_BULK_MAX_BYTES (a large
 * subdirectory costs at most that); a file not seen by then, or in another
 * directory, is left out and the cache reads it alone (fs/cache/prefetch.c).
 */
#include "docker.h"
#include "engine.h"

#include "../strbuf.h"
#include "../tar.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define DK_BULK_MAX_BYTES (16u * 1024 * 1024)

struct bulk {
	const char *dir; /* workspace-relative, "" for the root */
	const char *const *paths;
	size_t n, left;
	bool *seen;
	char *prefix;	/* the archive's name of dir, then "/" ("" for ".") */
	bool have_root; /* the first entry (dir itself) passed */
	long cur;	/* paths[cur] is the entry being read, or -1 */
	struct sfs_buf data;
	int (*on_file)(const char *path, const void *data, size_t len, void *arg);
	void *arg;
	int error; /* on_file's, or -ENOMEM */
	uint64_t bytes;
	struct sfs_tar_reader tar;
	struct sfs_err terr;
};

/* The index of the path asked for that is dir's child `name`, or -1. */
static long wanted(struct bulk *b, const char *name)
{
	size_t dl = strlen(b->dir);
	for (size_t i = 0; i < b->n; i++) {
		const char *p = b->paths[i];
		if (b->seen[i] || (dl && (strncmp(p, b->dir, dl) || p[dl] != '/')))
			continue;
		if (!strcmp(p + (dl ? dl + 1 : 0), name))
			return (long)i;
	}
	return -1;
}

static int bulk_entry(void *arg, const struct sfs_tar_entry *e)
{
	struct bulk *b = arg;
	b->cur = -1;
	sfs_buf_reset(&b->data);
	if (!b->have_root) {
		/* the directory itself comes first; its children are below its name */
		b->have_root = true;
		if (e->type != '5')
			return SFS_TAR_STOP;
		if (strcmp(e->name, ".") && asprintf(&b->prefix, "%s/", e->name) < 0) {
			b->error = -ENOMEM;
			return SFS_TAR_STOP;
		}
		return SFS_TAR_SKIP;
	}
	const char *pre = b->prefix ? b->prefix : "";
	size_t pl = strlen(pre);
	if (e->type != '0' || strncmp(e->name, pre, pl) || strchr(e->name + pl, '/'))
		return SFS_TAR_SKIP;
	b->cur = wanted(b, e->name + pl);
	return b->cur < 0 ? SFS_TAR_SKIP : 0;
}

static int bulk_data(void *arg, const struct sfs_tar_entry *e, const void *p, size_t n)
{
	struct bulk *b = arg;
	if (sfs_buf_add(&b->data, p, n)) {
		b->error = -ENOMEM;
		return SFS_TAR_STOP;
	}
	return 0;
}

static int bulk_end(void *arg, const struct sfs_tar_entry *e)
{
	struct bulk *b = arg;
	if (b->cur < 0)
		return 0;
	b->seen[b->cur] = true;
	b->left--;
	int r = b->on_file(b->paths[b->cur], b->data.buf ? b->data.buf : "", b->data.len, b->arg);
	if (r) {
		b->error = r;
		return SFS_TAR_STOP;
	}
	return b->left ? 0 : SFS_TAR_STOP;
}

static const struct sfs_tar_ops bulk_ops = {
    .entry = bulk_entry, .data = bulk_data, .end = bulk_end};

static bool bulk_sink(void *arg, const char *data, size_t len)
{
	struct bulk *b = arg;
	b->bytes += len;
	return sfs_tar_feed(&b->tar, data, len, &b->terr) == 0 && b->bytes <= DK_BULK_MAX_BYTES;
}

int dk_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		    int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		    void *arg, struct sfs_err *err)
{
	if (!n)
		return 0;
	const char *slash = strrchr(paths[0], '/');
	char *dir = slash ? strndup(paths[0], (size_t)(slash - paths[0])) : strdup("");
	struct bulk b = {.dir = dir,
			 .paths = paths,
			 .n = n,
			 .left = n,
			 .cur = -1,
			 .on_file = on_file,
			 .arg = arg};
	b.seen = calloc(n, sizeof(*b.seen));
	char url[12400];
	int r = !dir || !b.seen ? sfs_errf(err, -ENOMEM, "out of memory")
				: dk_archive_url(sb, dir, url, sizeof(url), err);
	if (!r) {
		sfs_tar_init(&b.tar, &bulk_ops, &b);
		r = dk_stream("GET", url, NULL, bulk_sink, &b, NULL, err);
		sfs_tar_free(&b.tar);
		if (r == -ENOENT)
			r = sfs_errf(err, -ENOENT, "docker: bulk read %s: no such directory",
				     dir[0] ? dir : "/");
		else if (r >= 0)
			r = b.error; /* a cut stream: what passed was whole */
	}
	sfs_buf_free(&b.data);
	free(b.prefix);
	free(b.seen);
	free(dir);
	return r < 0 ? r : 0;
}
