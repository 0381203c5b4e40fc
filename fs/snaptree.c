/* snapshots/ID/tree/ (see snaptree.h). */
#include "snaptree.h"
#include "ino.h"

#include "../ctl/tree.h"
#include "../fs/snapshots/pmap.h"
#include "../fs/snapshots/snapshots.h"
#include "../providers/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct stnode {
	uint32_t sb_serial, snap_serial;
	char *path; /* "" for tree/ itself */
};

/* The table: nodes[id - 1]; by "SB/SNAP/PATH" in index.  A leaf lock. */
static pthread_mutex_t st_mu = PTHREAD_MUTEX_INITIALIZER;
static struct stnode *nodes;
static size_t nnodes, capnodes;
static struct pmap index_;

static fuse_ino_t intern(uint32_t sbs, uint32_t snaps, const char *path)
{
	char *key;
	if (asprintf(&key, "%u/%u/%s", sbs, snaps, path) < 0)
		return 0;
	fuse_ino_t ino = 0;
	uint64_t id;
	pthread_mutex_lock(&st_mu);
	if (pmap_get(&index_, key, &id)) {
		ino = SFS_INO_STREE(id);
	} else {
		if (nnodes == capnodes) {
			size_t cap = capnodes ? capnodes * 2 : 64;
			struct stnode *g = realloc(nodes, cap * sizeof(*g));
			if (g) {
				nodes = g;
				capnodes = cap;
			}
		}
		char *p = nnodes < capnodes ? strdup(path) : NULL;
		if (p && pmap_put(&index_, key, nnodes + 1) == 0) {
			nodes[nnodes++] = (struct stnode){sbs, snaps, p};
			ino = SFS_INO_STREE(nnodes);
		} else {
			free(p);
		}
	}
	pthread_mutex_unlock(&st_mu);
	free(key);
	return ino;
}

fuse_ino_t stree_root_ino(uint32_t sb_serial, uint32_t snap_serial)
{
	return intern(sb_serial, snap_serial, "");
}

/* What an inode names, now: its node, the snapshot's commit and time. */
struct stref {
	uint32_t sb_serial, snap_serial;
	char path[4096];
	char commit[41];
	int64_t created;
};

static int resolve(fuse_ino_t ino, struct stref *r)
{
	uint64_t id = SFS_INO_WS_ID(ino);
	pthread_mutex_lock(&st_mu);
	bool ok = id >= 1 && id <= nnodes;
	if (ok) {
		r->sb_serial = nodes[id - 1].sb_serial;
		r->snap_serial = nodes[id - 1].snap_serial;
		ok = sfs_pathf(r->path, sizeof(r->path), "%s", nodes[id - 1].path) == 0;
	}
	pthread_mutex_unlock(&st_mu);
	if (!ok)
		return -ENOENT;
	struct sfs_sandbox *sb = tree_get_serial(r->sb_serial);
	if (!sb)
		return -ENOENT;
	ok = false;
	pthread_mutex_lock(&sfs_records_mu);
	for (size_t i = 0; i < sb->nsnapshots && !ok; i++) {
		struct sfs_snapshot *s = &sb->snapshots[i];
		if (s->serial != r->snap_serial || !s->commit)
			continue;
		ok = sfs_pathf(r->commit, sizeof(r->commit), "%s", s->commit) == 0;
		r->created = s->created;
	}
	pthread_mutex_unlock(&sfs_records_mu);
	tree_put(sb);
	return ok ? 0 : -ENOENT;
}

static void fill_stat(struct stat *st, fuse_ino_t ino, const struct snap_node *n,
		      const struct stref *r)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	/* read-only and the mount owner's only: the recorded bits came from
	 * the sandbox (a set-user-ID root file on a suid mount), and the
	 * workspace's owners, groups and ACLs are not kept in a snapshot, so
	 * no one but the owner may read what they guarded */
	st->st_mode = (n->mode & S_IFMT) | (n->mode & 0500);
	if (S_ISLNK(n->mode))
		st->st_mode = n->mode;
	st->st_nlink = S_ISDIR(n->mode) ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_size = (off_t)n->size;
	st->st_blksize = 4096;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_atime = st->st_mtime = st->st_ctime = (time_t)r->created;
}

int stree_stat(fuse_ino_t ino, struct stat *st)
{
	struct stref r;
	struct snap_node n;
	int e = resolve(ino, &r);
	if (!e)
		e = snap_lookup(r.commit, r.path, &n);
	if (!e)
		fill_stat(st, ino, &n, &r);
	return e;
}

static void reply_entry(fuse_req_t req, fuse_ino_t ino, const struct snap_node *n,
			const struct stref *r)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	fill_stat(&e.attr, ino, n, r);
	/* a snapshot never changes: long timeouts, like the tree's names */
	e.attr_timeout = sfs_fs_opts.entry_timeout;
	e.entry_timeout = sfs_fs_opts.entry_timeout;
	fuse_reply_entry(req, &e);
}

static char *child_path(const char *dir, const char *name)
{
	char *p;
	return asprintf(&p, "%s%s%s", dir, *dir ? "/" : "", name) < 0 ? NULL : p;
}

void stree_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stref r;
	int e = resolve(parent, &r);
	if (e) {
		fuse_reply_err(req, -e);
		return;
	}
	char *p = child_path(r.path, name);
	struct snap_node n;
	e = p ? snap_lookup(r.commit, p, &n) : -ENOMEM;
	fuse_ino_t ino = e ? 0 : intern(r.sb_serial, r.snap_serial, p);
	if (!e && !ino)
		e = -ENOMEM;
	if (e)
		fuse_reply_err(req, -e);
	else
		reply_entry(req, ino, &n, &r);
	free(p);
}

static int node_data(fuse_ino_t ino, mode_t want, char **data, size_t *len)
{
	struct stref r;
	struct snap_node n;
	int e = resolve(ino, &r);
	if (!e)
		e = snap_lookup(r.commit, r.path, &n);
	if (!e && (n.mode & S_IFMT) != want)
		e = want == S_IFLNK ? -EINVAL : -EISDIR;
	return e ? e : snap_blob(n.oid, data, len);
}

void stree_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char *data = NULL;
	size_t len;
	int e = node_data(ino, S_IFLNK, &data, &len);
	char *t = e ? NULL : realloc(data, len + 1);
	if (!e && !t)
		e = -ENOMEM;
	if (e) {
		free(data);
		fuse_reply_err(req, -e);
		return;
	}
	t[len] = '\0';
	fuse_reply_readlink(req, t);
	free(t);
}

int stree_read_all(fuse_ino_t ino, char **data, size_t *len)
{
	return node_data(ino, S_IFREG, data, len);
}

struct stdir {
	struct snap_dirent *v;
	fuse_ino_t *inos;
	size_t n;
	fuse_ino_t self;
	struct stref ref;
};

void stree_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stdir *d = calloc(1, sizeof(*d));
	int e = d ? resolve(ino, &d->ref) : -ENOMEM;
	if (!e)
		e = snap_list(d->ref.commit, d->ref.path, &d->v, &d->n);
	if (!e && !(d->inos = calloc(d->n ? d->n : 1, sizeof(*d->inos))))
		e = -ENOMEM;
	for (size_t i = 0; !e && i < d->n; i++) {
		char *p = child_path(d->ref.path, d->v[i].name);
		d->inos[i] = p ? intern(d->ref.sb_serial, d->ref.snap_serial, p) : 0;
		free(p);
		if (!d->inos[i])
			e = -ENOMEM;
	}
	if (e) {
		if (d) {
			snap_dirents_free(d->v, d->n);
			free(d->inos);
			free(d);
		}
		fuse_reply_err(req, -e);
		return;
	}
	d->self = ino;
	fi->fh = (uintptr_t)d;
	fi->keep_cache = 1;
	fi->cache_readdir = 1;
	if (fuse_reply_open(req, fi) == -ENOENT)
		stree_releasedir(NULL, fi);
}

static const char *stree_dirent(void *ctx, size_t i, bool plus, struct fuse_entry_param *e)
{
	struct stdir *d = ctx;
	fill_stat(&e->attr, d->inos[i], &d->v[i].node, &d->ref);
	if (plus) { /* readdirplus hands out a lookup: only for the children */
		e->ino = d->inos[i];
		e->attr_timeout = e->entry_timeout = sfs_fs_opts.entry_timeout;
	}
	return d->v[i].name;
}

void stree_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi, bool plus)
{
	struct stdir *d = (struct stdir *)(uintptr_t)fi->fh;
	sfs_reply_dir(req, size, off, d->n, d->self, d->self, plus, stree_dirent, d);
}

void stree_releasedir(fuse_req_t req, struct fuse_file_info *fi)
{
	struct stdir *d = (struct stdir *)(uintptr_t)fi->fh;
	if (d) {
		snap_dirents_free(d->v, d->n);
		free(d->inos);
		free(d);
	}
	if (req)
		fuse_reply_err(req, 0);
}
