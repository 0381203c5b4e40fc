/* The remote cache's file contents: cache files, fetch on open, write-back
 * on flush/fsync/close, and truncation. */
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

int rc_open_cache_file(struct rc_node *n, struct sfs_sandbox *sb)
{
	if (n->cfd >= 0)
		return 0;
	if (!rc_cachedir(n->rs, sb))
		return -ENOMEM;
	char name[4200];
	rc_cache_file_name(n, "", name, sizeof(name));
	int fd = open(name, O_RDWR | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	pthread_mutex_lock(&R.mu);
	n->cfd = fd;
	pthread_mutex_unlock(&R.mu);
	return 0;
}

/* Records (or clears) that n has data the remote does not: ID.pending names
 * the remote path, for a later daemon (rc_recover_sandbox). */
void rc_mark_pending(struct rc_node *n, bool pending, const char *path)
{
	char name[4200];
	rc_cache_file_name(n, ".pending", name, sizeof(name));
	if (!pending) {
		unlink(name);
		return;
	}
	char text[4200];
	int len = snprintf(text, sizeof(text), "%s\n", path);
	sfs_write_file_atomic(name, text, (size_t)len, NULL);
}

/* Fetches n's contents into its cache file; io held. */
int rc_fetch(struct rc_node *n, struct sfs_sandbox *sb, const char *path,
	     const struct sfs_rstat *st)
{
	int r = rc_open_cache_file(n, sb);
	if (r)
		return r;
	if (ftruncate(n->cfd, 0) < 0)
		return -errno;
	n->cvalid = false;
	/* a copy fetched in bulk with a sibling, else a bulk call for this
	 * one and its small siblings, else this one alone */
	r = rc_prefetch_take(n->rs, path, st, n->cfd);
	if (r == 0)
		r = rc_prefetch_fill(n->rs, sb, path, st, n->cfd);
	if (r == 0) {
		if (ftruncate(n->cfd, 0) < 0)
			return -errno;
		r = RC_CALL(n->rs, sb, "read", path, fs_read, path, n->cfd);
	} else if (r == 1) {
		r = 0;
	}
	if (r)
		return r;
	struct stat cst;
	if (fstat(n->cfd, &cst) < 0)
		return -errno;
	n->cvalid = true;
	n->csize = cst.st_size;
	n->cmtime = st->mtime;
	return 0;
}

void rc_set_dirty(struct rc_node *n, bool dirty)
{
	pthread_mutex_lock(&R.mu);
	n->dirty = dirty;
	if (dirty)
		n->wseq++;
	pthread_mutex_unlock(&R.mu);
}

void rc_set_unborn_locked(struct rc_node *n, bool unborn)
{
	if (n->unborn == unborn)
		return;
	n->unborn = unborn;
	if (unborn)
		n->rs->unborn++;
	else
		n->rs->unborn--;
}

/* After a write-back: the remote holds what the cache file holds.  The
 * attributes are set here, not asked for (a stat per save, and git's index
 * write is create, save, rename): the size is ours, the mtime this host's
 * clock, as for a create.  The cache file counts as current for that mtime,
 * so an open while these attributes last keeps it; once a listing or stat
 * brings the remote's own mtime, the next open fetches the file again.
 * io held. */
static void learn_saved(struct rc_node *n, off_t size)
{
	int64_t mtime = (int64_t)time(NULL);
	n->cvalid = true;
	n->csize = size;
	n->cmtime = mtime;
	pthread_mutex_lock(&R.mu);
	struct sfs_rstat st = {
	    .mode = n->attr_ok ? n->st.mode : S_IFREG | 0644, .size = size, .mtime = mtime};
	rc_set_local_attr_locked(n, &st);
	pthread_mutex_unlock(&R.mu);
}

/* A write-back's call returned: a directory rename waiting for it may go. */
static void wb_landed_locked(struct rsb *rs)
{
	if (--rs->wb_inflight == 0 && rs->moving)
		pthread_cond_broadcast(&R.wb_cv);
}

/* Writes n's cache file back; io held.  0, or -EIO with the data kept and
 * a retry scheduled. */
int rc_write_back(struct rc_node *n, struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&R.mu);
	while (n->rs->moving) /* a directory above may be moving: its new path */
		pthread_cond_wait(&R.wb_cv, &R.mu);
	bool dirty = n->dirty, unlinked = n->unlinked;
	uint64_t seq = n->wseq;
	char *path = strdup(n->path);
	mode_t mode = n->attr_ok ? (n->st.mode & 07777) : 0644;
	bool skip = !dirty || unlinked || n->cfd < 0;
	if (!skip && path)
		n->rs->wb_inflight++;
	pthread_mutex_unlock(&R.mu);
	if (skip) {
		if (unlinked && dirty) {
			rc_set_dirty(n, false); /* the file is gone: nothing to save it to */
			pthread_mutex_lock(&R.mu);
			rc_set_unborn_locked(n, false);
			pthread_mutex_unlock(&R.mu);
		}
		free(path);
		return 0;
	}
	if (!path)
		return -ENOMEM;
	int r = RC_CALL(n->rs, sb, "write back", path, fs_write, path, n->cfd, mode ? mode : 0644);
	if (r) {
		rc_mark_pending(n, true, path);
		pthread_mutex_lock(&R.mu);
		wb_landed_locked(n->rs);
		n->failed = true;
		n->retry_at = rc_now() + R.opt.retry_interval;
		pthread_mutex_unlock(&R.mu);
		pthread_cond_signal(&R.cv);
		char nm[64];
		sfs_log(SFS_LOG_WARN, "%s: workspace: %s not saved yet (kept in %s, retrying)",
			sfs_sb_copy_name(sb, nm), path,
			n->rs->cachedir ? n->rs->cachedir : "the cache");
		free(path);
		return -EIO;
	}
	struct stat cst;
	off_t size = fstat(n->cfd, &cst) == 0 ? cst.st_size : 0;
	pthread_mutex_lock(&R.mu);
	wb_landed_locked(n->rs);
	if (n->wseq == seq) /* else written to meanwhile: stays dirty */
		n->dirty = false;
	rc_set_unborn_locked(n, false);
	bool was_failed = n->failed;
	n->failed = false;
	rc_mutated_locked(n->rs, path);
	pthread_mutex_unlock(&R.mu);
	rc_mark_pending(n, false, path);
	char nm[64];
	if (was_failed)
		sfs_log(SFS_LOG_INFO, "%s: workspace: %s saved after a retry",
			sfs_sb_copy_name(sb, nm), path);
	learn_saved(n, size);
	free(path);
	return 0;
}

/* A file created here goes to the remote now (before a call that needs it
 * there: chmod, rename, unlink); io held. */
int rc_make_born(struct rc_node *n, struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&R.mu);
	bool unborn = n->unborn;
	pthread_mutex_unlock(&R.mu);
	return unborn ? rc_write_back(n, sb) : 0;
}

/* ---- open files --------------------------------------------------------- */

/* A handle on n, counted as open and pinned. */
int rc_file_new(struct rc_node *n, int flags, struct rc_file **f)
{
	*f = malloc(sizeof(**f));
	if (!*f)
		return -ENOMEM;
	(*f)->n = n;
	(*f)->writable = (flags & O_ACCMODE) != O_RDONLY;
	pthread_mutex_lock(&R.mu);
	n->nopen++;
	n->pins++;
	pthread_mutex_unlock(&R.mu);
	return 0;
}

int rc_open(struct rc_ref *ref, int flags, struct rc_file **f, bool *keep_cache)
{
	struct rc_node *n = ref->n;
	struct sfs_sandbox *sb = ref->sb;
	*f = NULL;
	*keep_cache = false;
	pthread_mutex_lock(&n->io);
	int r = 0;
	struct sfs_rstat st = {0};
	char *path = rc_node_path(n);
	if (!path) {
		r = -ENOMEM;
	} else if ((flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY) {
		/* nothing to fetch: the contents are about to go */
		r = rc_open_cache_file(n, sb);
		if (!r && ftruncate(n->cfd, 0) < 0)
			r = -errno;
		if (!r)
			rc_set_dirty(n, true);
	} else if (n->dirty && n->cfd >= 0) {
		*keep_cache = true; /* unsaved local data wins over the remote copy */
	} else {
		r = rc_node_attr(n, sb, &st);
		if (!r && S_ISDIR(st.mode))
			r = -EISDIR;
		else if (!r && !S_ISREG(st.mode))
			r = -EINVAL;
		else if (!r && n->cfd >= 0 && n->cvalid && n->csize == st.size &&
			 n->cmtime == st.mtime)
			*keep_cache = true;
		else if (!r)
			r = rc_fetch(n, sb, path, &st);
	}
	if (!r)
		r = rc_file_new(n, flags, f);
	pthread_mutex_unlock(&n->io);
	rc_rstat_free(&st);
	free(path);
	return r;
}

int rc_file_fd(const struct rc_file *f)
{
	return f->n->cfd;
}

void rc_file_written(struct rc_file *f)
{
	rc_set_dirty(f->n, true);
}

static int flush_node(struct rc_node *n)
{
	struct sfs_sandbox *sb = rc_sandbox_of(n);
	if (!sb)
		return 0;
	pthread_mutex_lock(&n->io);
	int r = n->dirty ? rc_write_back(n, sb) : 0;
	pthread_mutex_unlock(&n->io);
	rc_sandbox_put(sb);
	return r;
}

int rc_flush(struct rc_file *f)
{
	/* a reader's close never fails for someone else's unsaved data; a
	 * file created here (by any handle) is made remotely at its close */
	pthread_mutex_lock(&R.mu);
	bool unborn = f->n->unborn;
	pthread_mutex_unlock(&R.mu);
	return f->writable || unborn ? flush_node(f->n) : 0;
}

int rc_fsync(struct rc_file *f)
{
	return flush_node(f->n);
}

void rc_release(struct rc_file *f)
{
	struct rc_node *n = f->n;
	free(f);
	pthread_mutex_lock(&R.mu);
	n->nopen--;
	n->pins--;
	bool dirty = n->dirty;
	rc_maybe_free_locked(n);
	pthread_mutex_unlock(&R.mu);
	if (dirty)
		pthread_cond_signal(&R.cv); /* the retry thread takes it from here */
}

/* ---- setattr ------------------------------------------------------------ */

static int truncate_node(struct rc_node *n, struct sfs_sandbox *sb, const char *path,
			 const struct sfs_rstat *st, off_t size)
{
	if (!S_ISREG(st->mode))
		return S_ISDIR(st->mode) ? -EISDIR : -EINVAL;
	pthread_mutex_lock(&n->io);
	int r = 0;
	if (!n->dirty && !(n->cvalid && n->csize == st->size && n->cmtime == st->mtime))
		r = size == 0 ? rc_open_cache_file(n, sb) : rc_fetch(n, sb, path, st);
	if (!r && ftruncate(n->cfd, size) < 0)
		r = -errno;
	if (!r) {
		rc_set_dirty(n, true);
		pthread_mutex_lock(&R.mu);
		bool open = n->nopen > 0;
		pthread_mutex_unlock(&R.mu);
		/* truncate(1) on a closed file is saved now; an open one on close */
		if (!open)
			r = rc_write_back(n, sb);
	}
	pthread_mutex_unlock(&n->io);
	return r;
}

int rc_setattr(struct rc_ref *ref, const struct rc_setattr *sa, struct sfs_rstat *st)
{
	struct rc_node *n = ref->n;
	struct sfs_sandbox *sb = ref->sb;
	memset(st, 0, sizeof(*st));
	char *path = rc_node_path(n);
	if (!path)
		return -ENOMEM;
	int r = rc_node_attr(n, sb, st);
	if (!r && sa->set_mode) {
		pthread_mutex_lock(&n->io);
		r = rc_make_born(n, sb);
		pthread_mutex_unlock(&n->io);
	}
	if (!r && sa->set_mode) {
		r = RC_CALL(n->rs, sb, "chmod", path, fs_chmod, path, sa->mode & 07777);
		if (!r) {
			st->mode = (st->mode & S_IFMT) | (sa->mode & 07777);
			pthread_mutex_lock(&R.mu);
			rc_mutated_locked(n->rs, path);
			rc_set_local_attr_locked(n, st);
			pthread_mutex_unlock(&R.mu);
		}
	}
	if (!r && sa->set_size) {
		r = truncate_node(n, sb, path, st, sa->size);
		st->size = sa->size;
	}
	/* no remote utimens: the time shows until the cache expires */
	if (!r && sa->set_mtime)
		st->mtime = sa->mtime;
	free(path);
	if (!r)
		rc_present(n, st);
	return r;
}
