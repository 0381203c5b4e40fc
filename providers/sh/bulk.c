/*
 * Bulk reads (provider.h fs_read_many) through the shell: one command tars
 * the regular files asked for (a missing one, a symlink or a directory is
 * left out) to stdout, and the host walks the archive with the one tar
 * reader.  For providers whose exec carries stdout's bytes back (vercel
 * base64-framed, e2b as they are).
 */
#include "sh.h"

#include "../strbuf.h"
#include "../tar.h"
#include "../untrusted/name.h"

#include <errno.h>
#include <stdlib.h>

/* tar of the files that can be read; the names stay as asked (cd ROOT) */
static const char bulk_script[] = "cd -- \"$1\" || exit 2; shift; "
				  "for f; do [ -f \"$f\" ] && [ ! -L \"$f\" ] && set -- \"$@\" "
				  "\"$f\"; shift; done; "
				  "[ $# -eq 0 ] && exit 0; tar -cf - -- \"$@\" 2>/dev/null; exit 0";

int sfs_sh_bulk_read(struct sfs_sh_cmd *c, const char *root, const char *const *paths, size_t n,
		     struct sfs_err *err)
{
	const char **args = calloc(n + 2, sizeof(*args));
	if (!args)
		return sfs_errf(err, -ENOMEM, "out of memory");
	args[0] = root;
	for (size_t i = 0; i < n; i++)
		args[i + 1] = paths[i];
	int r = sfs_sh_script(c, bulk_script, "sandboxfs-bulk", args, err);
	free(args);
	return r;
}

struct bulk {
	int (*on_file)(const char *path, const void *data, size_t len, void *arg);
	void *arg;
	struct sfs_buf data; /* the current entry's bytes */
};

static int bulk_entry(void *ctx, const struct sfs_tar_entry *e)
{
	struct bulk *b = ctx;
	sfs_buf_reset(&b->data);
	/* a regular file under a path of checked names only: the archive is
	 * the sandbox's, and its names may be joined into paths */
	return e->type == '0' && sfs_rel_path_ok(e->name) ? 0 : SFS_TAR_SKIP;
}

static int bulk_data(void *ctx, const struct sfs_tar_entry *e, const void *p, size_t n)
{
	(void)e;
	return sfs_buf_add(&((struct bulk *)ctx)->data, p, n) ? -ENOMEM : 0;
}

static int bulk_end(void *ctx, const struct sfs_tar_entry *e)
{
	struct bulk *b = ctx;
	return b->on_file(e->name, b->data.buf ? b->data.buf : "", b->data.len, b->arg);
}

static const struct sfs_tar_ops bulk_ops = {
    .entry = bulk_entry, .data = bulk_data, .end = bulk_end};

int sfs_sh_bulk_each(const void *tar, size_t len,
		     int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		     void *arg, struct sfs_err *err)
{
	if (!len)
		return 0; /* none of the files could be read */
	struct bulk b = {.on_file = on_file, .arg = arg};
	int r = sfs_tar_walk(tar, len, &bulk_ops, &b, err);
	sfs_buf_free(&b.data);
	return r > 0 ? 0 : r;
}
