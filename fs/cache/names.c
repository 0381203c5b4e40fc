/* The remote cache's namespace changes: create, mknod, mkdir, symlink,
 * unlink/rmdir and rename, each made remotely at once (a created file: at
 * its first write-back) and then mirrored in the node table and the
 * parent's listing. */
#include "internal.h"

#include "../../providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The path of name inside dir, after checking the name. */
static int child_path(struct rc_ref *dir, const char *name, char **path)
{
	*path = NULL;
	if (strlen(name) > 255)
		return -ENAMETOOLONG;
	if (!rc_name_ok(name))
		return -EINVAL;
	pthread_mutex_lock(&R.mu);
	*path = rc_join_path(dir->n->path, name);
	pthread_mutex_unlock(&R.mu);
	return *path ? 0 : -ENOMEM;
}

/* After a successful create/mkdir/symlink: the parent's listing and a node. */
static int created(struct rc_ref *dir, const char *path, const char *name,
		   const struct sfs_rstat *st, struct rc_entry *e)
{
	pthread_mutex_lock(&R.mu);
	rc_mutated_locked(dir->n->rs, path);
	rc_dir_update_locked(dir->n, name, st);
	pthread_mutex_unlock(&R.mu);
	return rc_entry_for(dir->n->rs, path, st, rc_now(), RC_ASKED_NOW, RC_GEN_NOW, e);
}

/* Gives the new node e->id the cache file cfd (made as tmpl) and a handle. */
static int adopt_new_file(struct rc_entry *e, int cfd, const char *tmpl, int64_t mtime, int flags,
			  struct rc_file **f)
{
	pthread_mutex_lock(&R.mu);
	struct rc_node *n = rc_find_id_locked(e->id); /* alive: e holds a lookup */
	n->pins++;
	pthread_mutex_unlock(&R.mu);
	pthread_mutex_lock(&n->io);
	pthread_mutex_lock(&R.mu);
	if (n->cfd >= 0)
		close(n->cfd);
	n->cfd = cfd;
	/* the cache file takes the node's name */
	char final[4200];
	rc_cache_file_name(n, "", final, sizeof(final));
	if (rename(tmpl, final) < 0)
		sfs_log(SFS_LOG_WARN, "workspace cache: %s: %s", final, strerror(errno));
	pthread_mutex_unlock(&R.mu);
	n->cvalid = true;
	n->csize = 0;
	n->cmtime = mtime;
	pthread_mutex_lock(&R.mu);
	n->dirty = true;
	n->wseq++;
	rc_set_unborn_locked(n, true);
	pthread_mutex_unlock(&R.mu);
	pthread_mutex_unlock(&n->io);
	int r = rc_file_new(n, flags, f);
	rc_node_put(n);
	return r;
}

int rc_create(struct rc_ref *dir, const char *name, mode_t mode, int flags, struct rc_entry *e,
	      struct rc_file **f)
{
	struct rc_node *d = dir->n;
	char *path;
	*f = NULL;
	memset(e, 0, sizeof(*e));
	int r = child_path(dir, name, &path);
	int cfd = -1;
	char tmpl[4200];
	if (!r && !rc_cachedir(d->rs, dir->sb))
		r = -ENOMEM;
	if (!r) {
		cfd = sfs_pathf(tmpl, sizeof(tmpl), "%s/new-XXXXXX", d->rs->cachedir) < 0
			  ? (errno = ENAMETOOLONG, -1)
			  : mkostemp(tmpl, O_CLOEXEC);
		if (cfd < 0)
			r = -errno;
	}
	if (!r && (flags & O_EXCL)) {
		/* a fresh listing answers; otherwise ask */
		pthread_mutex_lock(&R.mu);
		bool known = rc_dir_fresh_locked(d, rc_now());
		bool exists = known && rc_dir_find_locked(d, name);
		struct rc_node *c = rc_find_path_locked(d->serial, path);
		if (c && c->unborn)
			exists = known = true;
		pthread_mutex_unlock(&R.mu);
		struct sfs_rstat old;
		if (!known && rc_p_stat(d->rs, dir->sb, path, &old) == 0) {
			exists = true;
			rc_rstat_free(&old);
		}
		if (exists)
			r = -EEXIST;
	}
	/* Not created remotely yet: the first write-back (close, fsync, or a
	 * call that needs the file there: rename, chmod, unlink) makes it with
	 * its contents, one call instead of an empty upload and then the
	 * contents (git's index.lock: create, write, close, rename).  Until
	 * then it is in the listings here (attrs.c) but not in the sandbox,
	 * like unsaved data. */
	struct sfs_rstat st = {.mode = S_IFREG | (mode & 07777), .mtime = time(NULL)};
	if (!r)
		r = created(dir, path, name, &st, e);
	if (!r) {
		r = adopt_new_file(e, cfd, tmpl, st.mtime, flags, f);
		cfd = -1;
		if (r) {
			rc_forget(e->id, 1);
			rc_entry_free(e);
		}
	}
	if (cfd >= 0) {
		close(cfd);
		unlink(tmpl);
	}
	free(path);
	return r;
}

int rc_mknod(struct rc_ref *dir, const char *name, mode_t mode, struct rc_entry *e)
{
	memset(e, 0, sizeof(*e));
	if (!S_ISREG(mode))
		return -EPERM;
	char *path;
	int r = child_path(dir, name, &path);
	int fd = -1;
	if (!r) {
		/* an empty file's contents to send */
		FILE *tmp = tmpfile();
		fd = tmp ? fcntl(fileno(tmp), F_DUPFD_CLOEXEC, 0) : -1;
		if (tmp)
			fclose(tmp);
		if (fd < 0)
			r = -errno;
	}
	if (!r)
		r = RC_CALL(dir->n->rs, dir->sb, "create", path, fs_write, path, fd, mode & 07777);
	if (fd >= 0)
		close(fd);
	struct sfs_rstat st = {.mode = S_IFREG | (mode & 07777), .mtime = time(NULL)};
	if (!r)
		r = created(dir, path, name, &st, e);
	free(path);
	return r;
}

int rc_mkdir(struct rc_ref *dir, const char *name, mode_t mode, struct rc_entry *e)
{
	memset(e, 0, sizeof(*e));
	char *path;
	int r = child_path(dir, name, &path);
	if (!r)
		r = RC_CALL(dir->n->rs, dir->sb, "mkdir", path, fs_mkdir, path, mode & 07777);
	struct sfs_rstat st = {.mode = S_IFDIR | (mode & 07777), .mtime = time(NULL)};
	if (!r)
		r = created(dir, path, name, &st, e);
	free(path);
	return r;
}

int rc_symlink(struct rc_ref *dir, const char *name, const char *target, struct rc_entry *e)
{
	memset(e, 0, sizeof(*e));
	char *path;
	int r = child_path(dir, name, &path);
	if (!r)
		r = RC_CALL(dir->n->rs, dir->sb, "symlink", path, fs_symlink, target, path);
	struct sfs_rstat st = {.mode = S_IFLNK | 0777,
			       .size = (off_t)strlen(target),
			       .mtime = time(NULL),
			       .link = (char *)target};
	if (!r)
		r = created(dir, path, name, &st, e);
	free(path);
	return r;
}

/* A path no longer names its node (unlinked, or replaced by a rename). */
static void detach_path_locked(uint32_t serial, const char *path)
{
	struct rc_node *n = rc_find_path_locked(serial, path);
	if (!n)
		return;
	rc_unhash_path_locked(n);
	n->unlinked = true;
	rc_maybe_free_locked(n);
}

int rc_remove(struct rc_ref *dir, const char *name, bool is_dir)
{
	struct rc_node *d = dir->n;
	char *path;
	int r = child_path(dir, name, &path);
	if (!r && is_dir) {
		/* a known non-empty listing answers without a round trip */
		pthread_mutex_lock(&R.mu);
		struct rc_node *c = rc_find_path_locked(d->serial, path);
		if (c && rc_dir_fresh_locked(c, rc_now()) && c->nents > 0)
			r = -ENOTEMPTY;
		if (!r && rc_unborn_below_locked(d->rs, path))
			r = -ENOTEMPTY;
		pthread_mutex_unlock(&R.mu);
	}
	/* A file's io is held across its removal: a write-back of it in
	 * flight (another process's close) lands first, and none starts after
	 * (the node is unlinked by then), so the file never comes back. */
	struct rc_node *c = NULL;
	if (!r && !is_dir) {
		pthread_mutex_lock(&R.mu);
		c = rc_find_path_locked(d->serial, path);
		if (c)
			c->pins++;
		pthread_mutex_unlock(&R.mu);
		if (c)
			pthread_mutex_lock(&c->io);
	}
	if (c) {
		/* a file created here and not yet saved: nothing to remove
		 * remotely (the unlink of an open temporary file) */
		pthread_mutex_lock(&R.mu);
		bool gone_here = c->unborn && !c->unlinked;
		if (gone_here) {
			c->dirty = false;
			rc_set_unborn_locked(c, false);
			rc_mutated_locked(d->rs, path);
			rc_dir_update_locked(d, name, NULL);
			detach_path_locked(d->serial, path);
		}
		pthread_mutex_unlock(&R.mu);
		if (gone_here) {
			pthread_mutex_unlock(&c->io);
			rc_node_put(c);
			free(path);
			return 0;
		}
	}
	if (!r)
		r = RC_CALL(d->rs, dir->sb, is_dir ? "rmdir" : "unlink", path, fs_remove, path,
			    is_dir);
	if (!r) {
		pthread_mutex_lock(&R.mu);
		rc_mutated_locked(d->rs, path);
		rc_dir_update_locked(d, name, NULL);
		detach_path_locked(d->serial, path);
		pthread_mutex_unlock(&R.mu);
	}
	if (c) {
		pthread_mutex_unlock(&c->io);
		rc_node_put(c);
	}
	free(path);
	return r;
}

/* Moves every node at `from` or below it to `to`. */
static void repath_locked(uint32_t serial, const char *from, const char *to)
{
	size_t fl = strlen(from);
	struct rc_node *moved = NULL;
	for (size_t b = 0; b < RC_NBUCKETS; b++) {
		for (struct rc_node *n = R.by_id[b]; n; n = n->id_next) {
			if (n->serial != serial || n->unlinked)
				continue;
			if (strncmp(n->path, from, fl) || (n->path[fl] && n->path[fl] != '/'))
				continue;
			char *np;
			if (asprintf(&np, "%s%s", to, n->path + fl) < 0) {
				/* cannot follow it: make it unreachable rather than wrong */
				rc_unhash_path_locked(n);
				n->unlinked = true;
				continue;
			}
			rc_unhash_path_locked(n);
			free(n->path);
			n->path = np;
			/* a file not on the remote yet keeps its own attributes */
			if (!n->unborn)
				n->attr_ok = false;
			/* rehash after the walk: path buckets are not the id buckets */
			n->path_next = moved;
			moved = n;
		}
	}
	while (moved) {
		struct rc_node *n = moved;
		moved = n->path_next;
		rc_hash_path_locked(n);
	}
}

int rc_rename(struct rc_ref *dir, const char *name, struct rc_ref *newdir, const char *newname,
	      bool noreplace)
{
	struct rc_node *d = dir->n, *nd = newdir->n;
	char *from, *to = NULL;
	int r = child_path(dir, name, &from);
	if (!r)
		r = child_path(newdir, newname, &to);
	if (!r && nd->serial != d->serial)
		r = -EXDEV;
	struct sfs_rstat st = {0};
	if (!r && noreplace) {
		/* a fresh listing of the target's directory answers (mv asks
		 * with RENAME_NOREPLACE first); otherwise ask */
		pthread_mutex_lock(&R.mu);
		bool known = rc_dir_fresh_locked(nd, rc_now());
		bool exists = known && rc_dir_find_locked(nd, newname);
		pthread_mutex_unlock(&R.mu);
		if (!known && rc_p_stat(d->rs, dir->sb, to, &st) == 0)
			exists = true;
		rc_rstat_free(&st);
		if (exists)
			r = -EEXIST;
	}
	/* Hold the moving file's io so no write-back goes to the old path, and
	 * the replaced file's so none of it lands over the moved one after
	 * the rename (its write-back in flight lands first; later ones find it
	 * unlinked).  Two of them are taken in id order: renames a->b and b->a
	 * at once must not wait for each other. */
	pthread_mutex_lock(&R.mu);
	struct rc_node *src = r ? NULL : rc_find_path_locked(d->serial, from);
	struct rc_node *dst = r ? NULL : rc_find_path_locked(d->serial, to);
	if (dst == src)
		dst = NULL;
	if (src)
		src->pins++;
	if (dst)
		dst->pins++;
	pthread_mutex_unlock(&R.mu);
	struct rc_node *first = src, *second = dst;
	if (first && second && second->id < first->id) {
		first = dst;
		second = src;
	} else if (!first) {
		first = second;
		second = NULL;
	}
	if (first)
		pthread_mutex_lock(&first->io);
	if (second)
		pthread_mutex_lock(&second->io);
	if (!r && src)
		r = rc_make_born(src, dir->sb);
	/* A directory (or what may be one): the write-backs of files below it
	 * in flight land at their old paths first, and new ones wait for the
	 * paths the move gives them. */
	bool barrier = !r && src && (!src->attr_ok || S_ISDIR(src->st.mode));
	if (barrier) {
		pthread_mutex_lock(&R.mu);
		d->rs->moving++;
		while (d->rs->wb_inflight)
			pthread_cond_wait(&R.wb_cv, &R.mu);
		pthread_mutex_unlock(&R.mu);
	}
	if (!r)
		r = RC_CALL(d->rs, dir->sb, "rename", from, fs_rename, from, to);
	if (!r) {
		pthread_mutex_lock(&R.mu);
		rc_mutated_locked(d->rs, from);
		rc_mutated_locked(d->rs, to);
		struct rent *e = rc_dir_find_locked(d, name);
		bool have = e && rc_rstat_copy(&st, &e->st) == 0;
		rc_dir_update_locked(d, name, NULL);
		if (have)
			rc_dir_update_locked(nd, newname, &st);
		else
			rc_drop_dir_locked(nd);
		detach_path_locked(d->serial, to);
		repath_locked(d->serial, from, to);
		pthread_mutex_unlock(&R.mu);
		rc_rstat_free(&st);
	}
	if (barrier) {
		pthread_mutex_lock(&R.mu);
		if (--d->rs->moving == 0)
			pthread_cond_broadcast(&R.wb_cv);
		pthread_mutex_unlock(&R.mu);
	}
	if (second)
		pthread_mutex_unlock(&second->io);
	if (first)
		pthread_mutex_unlock(&first->io);
	if (src)
		rc_node_put(src);
	if (dst)
		rc_node_put(dst);
	free(from);
	free(to);
	return r;
}
