/*
 * The FUSE low-level handlers: a thin adapter.  Workspace inodes go to
 * fs/workspace/ (ws_ops); synthetic inodes are resolved through fs/synth.c
 * and their writes go to ctl/, their journal reads to journal/.
 */
#include "fs.h"
#include "audit.h"
#include "remote/remote.h"
#include "snaptree.h"
#include "synth.h"

#include "../ctl/audit.h"
#include "../ctl/commands.h"
#include "../ctl/tree.h"
#include "../journal/journal.h"
#include "../providers/later.h"
#include "../providers/util.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

struct sfs_fs_options sfs_fs_opts = {
    .dir_attr_timeout = 1.0,
    .entry_timeout = 86400.0,
    .runs_mode = 0400,
    .ws = {.attr_timeout = 1.0, .entry_timeout = 1.0, .keep_cache = true},
};
struct fuse_session *sfs_session;

/* The layer serving a workspace inode: host files (ws_ops), remote files
 * (rws_ops), or NULL for a synthetic inode. */
static const struct fuse_lowlevel_ops *layer_of(fuse_ino_t ino)
{
	if (ino == FUSE_ROOT_ID)
		return NULL;
	switch (SFS_INO_KIND(ino)) {
	case SFS_K_WS:
		return &ws_ops;
	case SFS_K_RWS:
		return &rws_ops;
	}
	return NULL;
}

#define IS_WS(ino) (layer_of(ino) != NULL)
/* A node of a snapshot's tree/ (fs/snaptree.c): read-only, a handful of ops. */
#define IS_STREE(ino) (SFS_INO_KIND(ino) == SFS_K_STREE && (ino) != FUSE_ROOT_ID)

/* Delegates to the layer of `ino`, or ENOSYS when it has no handler. */
#define LAYER_CALL(ino, op, req, ...)                                                              \
	do {                                                                                       \
		const struct fuse_lowlevel_ops *layer_ = layer_of(ino);                            \
		if (layer_ && layer_->op)                                                          \
			layer_->op(req, __VA_ARGS__);                                              \
		else                                                                               \
			fuse_reply_err(req, ENOSYS);                                               \
	} while (0)
#define WS_CALL(op, req, ino, ...) LAYER_CALL(ino, op, req, ino, ##__VA_ARGS__)

/* A workspace operation that changes something, with its SANDBOX/audit
 * line: what (op) on which node (ino, or NAME in directory ino), the result
 * the layer replied.  `more` may add the line's detail (fs/audit.h). */
#define AUDITED(req, ino, name, opname, more, call)                                                \
	do {                                                                                       \
		struct fs_audit au_;                                                               \
		fs_audit_begin(&au_, req, ino, name, opname);                                      \
		more;                                                                              \
		fs_audit_call(&au_);                                                               \
		call;                                                                              \
		fs_audit_end(&au_);                                                                \
	} while (0)

/* An open synthetic file. */
struct sfh {
	unsigned kind;
	struct sfs_sandbox *sb;
	struct sfs_run *run;
	pthread_mutex_t mu;
	char *out; /* what reads return: text snapshot, or a ctl write's result */
	size_t outlen, rpos;
	bool out_is_result;
	bool is_ctl;
	struct ctl_file ctl; /* ctl files: the line held across writes */
	uid_t uid;	     /* the opener: release carries no caller (audit) */
	bool nonblock;	     /* O_NONBLOCK: a journal or audit read at the end is EOF */
	bool rotations_seen; /* audit: the file generation it reads (journal.h) */
	unsigned long rotations;
};

/* Synthetic directory handle: the listing as it was at opendir. */
struct sdh {
	struct synth_entry *v;
	size_t n;
	fuse_ino_t self, parent;
};

static struct sfh *sfh_of(struct fuse_file_info *fi)
{
	return (struct sfh *)(uintptr_t)fi->fh;
}

static double attr_timeout_for(mode_t mode)
{
	return S_ISDIR(mode) ? sfs_fs_opts.dir_attr_timeout : 0.0;
}

static void fill_entry(struct fuse_entry_param *e, fuse_ino_t ino, const struct stat *st)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->attr = *st;
	e->attr.st_ino = ino;
	e->attr_timeout = attr_timeout_for(st->st_mode);
	e->entry_timeout = sfs_fs_opts.entry_timeout;
}

static int stat_ino(fuse_ino_t ino, struct stat *st)
{
	if (IS_STREE(ino))
		return stree_stat(ino, st);
	struct synth s;
	int r = synth_resolve(ino, &s);
	if (r)
		return r;
	r = synth_stat(&s, st);
	st->st_ino = ino;
	synth_release(&s);
	return r;
}

static void reply_entry_for(fuse_req_t req, fuse_ino_t ino)
{
	struct stat st;
	int r = stat_ino(ino, &st);
	if (r) {
		fuse_reply_err(req, -r);
		return;
	}
	struct fuse_entry_param e;
	fill_entry(&e, ino, &st);
	fuse_reply_entry(req, &e);
}

static void lookup_workspace(fuse_req_t req, struct synth *dir)
{
	struct sfs_err err = {0};
	int fd = -1;
	char *root = NULL;
	int r = tree_workspace_root(dir->sb, &fd, &root, &err);
	if (r == -EREMOTE) {
		rws_lookup_root(req, dir->serial);
		return;
	}
	if (r) {
		char name[64];
		sfs_log(SFS_LOG_WARN, "%s: workspace: %s", sfs_sb_copy_name(dir->sb, name),
			err.msg);
		fuse_reply_err(req, r == -EOPNOTSUPP ? ENOENT : -r);
		return;
	}
	ws_lookup_root(req, dir->serial, fd, !dir->sb->provider->host_fs, root);
	free(root);
}

static void sfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (IS_WS(parent)) {
		WS_CALL(lookup, req, parent, name);
		return;
	}
	if (IS_STREE(parent)) {
		stree_lookup(req, parent, name);
		return;
	}
	struct synth dir;
	int r = synth_resolve(parent, &dir);
	if (r) {
		fuse_reply_err(req, -r);
		return;
	}
	struct synth_entry *v = NULL;
	size_t n = 0;
	r = synth_list(&dir, &v, &n);
	if (r) {
		synth_release(&dir);
		fuse_reply_err(req, -r);
		return;
	}
	size_t i;
	for (i = 0; i < n && strcmp(v[i].name, name) != 0; i++)
		;
	if (i == n)
		fuse_reply_err(req, ENOENT);
	else if (v[i].ino == 0)
		lookup_workspace(req, &dir);
	else
		reply_entry_for(req, v[i].ino);
	free(v);
	synth_release(&dir);
}

static void sfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	if (IS_WS(ino) && layer_of(ino)->forget) {
		layer_of(ino)->forget(req, ino, nlookup);
		return;
	}
	fuse_reply_none(req); /* synthetic inodes keep no lookup counts */
}

static void sfs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	size_t nws = 0;
	for (size_t i = 0; i < count; i++)
		if (layer_of(forgets[i].ino) == &rws_ops)
			rws_forget_one(forgets[i].ino, forgets[i].nlookup);
		else if (SFS_INO_KIND(forgets[i].ino) == SFS_K_WS)
			forgets[nws++] = forgets[i];
	if (nws && ws_ops.forget_multi)
		ws_ops.forget_multi(req, nws, forgets);
	else
		fuse_reply_none(req);
}

static void sfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (IS_WS(ino)) {
		WS_CALL(getattr, req, ino, fi);
		return;
	}
	struct stat st;
	int r = stat_ino(ino, &st);
	unsigned kind = SFS_INO_KIND(ino);
	if (r == -ENOENT && (kind == SFS_K_SB_CTL || kind == SFS_K_RUN_CTL)) {
		/* a ctl opened before its sandbox went (forget, destroy) is
		 * still read for the error its verbs now get; readers fstat
		 * first (cat), as they may an unlinked file */
		struct synth s = {.kind = kind};
		r = synth_stat(&s, &st);
		st.st_ino = ino;
	}
	if (r)
		fuse_reply_err(req, -r);
	else
		fuse_reply_attr(req, &st, attr_timeout_for(st.st_mode));
}

static void sfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			struct fuse_file_info *fi)
{
	if (IS_WS(ino)) {
		char what[128];
		snprintf(what, sizeof(what), "%s%s%s%s%s",
			 to_set & FUSE_SET_ATTR_SIZE ? " size" : "",
			 to_set & FUSE_SET_ATTR_MODE ? " mode" : "",
			 to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID) ? " owner" : "",
			 to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_ATIME_NOW) ? " atime" : "",
			 to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW) ? " mtime" : ""); /* message: may be cut */
		AUDITED(req, ino, NULL, "setattr", fs_audit_detail(&au_, what + (what[0] == ' ')),
			WS_CALL(setattr, req, ino, attr, to_set, fi));
		return;
	}
	struct stat st;
	int r = stat_ino(ino, &st);
	if (r || IS_STREE(ino)) {
		fuse_reply_err(req, r ? -r : EROFS);
		return;
	}
	/* `echo cmd > ctl` truncates first: accept size 0 (and touch) on
	 * writable files, refuse everything else */
	int allowed = FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
		      FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME;
	if ((to_set & ~allowed) || ((to_set & FUSE_SET_ATTR_SIZE) && attr->st_size != 0) ||
	    ((to_set & FUSE_SET_ATTR_SIZE) && !(st.st_mode & 0200))) {
		fuse_reply_err(req, EPERM);
		return;
	}
	fuse_reply_attr(req, &st, 0.0);
}

static void sfs_readlink(fuse_req_t req, fuse_ino_t ino)
{
	if (IS_WS(ino)) {
		WS_CALL(readlink, req, ino);
		return;
	}
	if (IS_STREE(ino)) {
		stree_readlink(req, ino);
		return;
	}
	struct synth s;
	int r = synth_resolve(ino, &s);
	if (r) {
		fuse_reply_err(req, -r);
		return;
	}
	if (s.kind != SFS_K_SB_JOURNAL) {
		synth_release(&s);
		fuse_reply_err(req, EINVAL);
		return;
	}
	char target[64];
	snprintf(target, sizeof(target), "runs/%d/journal", tree_nruns(s.sb));
	synth_release(&s);
	fuse_reply_readlink(req, target);
}

static void sfs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	if (IS_WS(parent)) {
		AUDITED(req, parent, name, "mkdir", , WS_CALL(mkdir, req, parent, name, mode));
		return;
	}
	if (parent != FUSE_ROOT_ID) {
		fuse_reply_err(req, EPERM);
		return;
	}
	struct sfs_err err = {0};
	int r = tree_create(name, NULL, &err);
	if (r) {
		sfs_log(SFS_LOG_WARN, "mkdir %s: %s", name, err.msg);
		fuse_reply_err(req, -r);
		return;
	}
	struct sfs_sandbox *sb = tree_get(name);
	if (!sb) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fuse_ino_t ino = SFS_INO_MAKE(SFS_K_SB, sb->serial, 0);
	tree_put(sb);
	reply_entry_for(req, ino);
}

static void sfs_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (IS_WS(parent)) {
		AUDITED(req, parent, name, "rmdir", , WS_CALL(rmdir, req, parent, name));
		return;
	}
	struct sfs_err err = {0};
	int r = -EPERM;
	if (parent == FUSE_ROOT_ID) {
		if (strcmp(name, "ctl") == 0 || strcmp(name, "providers") == 0)
			r = -EPERM;
		else
			r = tree_rmdir(name, &err);
	} else if (SFS_INO_KIND(parent) == SFS_K_SB_SNAPSHOTS) {
		struct synth s;
		r = synth_resolve(parent, &s);
		if (!r) {
			r = tree_snapshot_delete(s.sb, name, &err);
			synth_release(&s);
		}
	}
	if (r && err.msg[0])
		sfs_log(SFS_LOG_WARN, "rmdir %s: %s", name, err.msg);
	fuse_reply_err(req, -r);
}

static void sfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (IS_WS(parent))
		AUDITED(req, parent, name, "unlink", , WS_CALL(unlink, req, parent, name));
	else
		fuse_reply_err(req, EPERM);
}

static void sfs_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, unsigned int flags)
{
	if (IS_WS(parent) && layer_of(parent) == layer_of(newparent)) {
		AUDITED(req, parent, name, "rename", fs_audit_to(&au_, newparent, newname),
			WS_CALL(rename, req, parent, name, newparent, newname, flags));
		return;
	}
	if (IS_WS(parent) && IS_WS(newparent)) {
		/* two sandboxes' workspaces: mv copies, as across filesystems */
		fuse_reply_err(req, EXDEV);
		return;
	}
	if (IS_WS(parent) || IS_WS(newparent)) {
		/* the tree's own nodes never move into or out of a workspace.
		 * EXDEV would make mv(1) copy a sandbox into a workspace and then
		 * empty the original's workspace, deleting what it could */
		fuse_reply_err(req, EPERM);
		return;
	}
	if (parent != FUSE_ROOT_ID || newparent != FUSE_ROOT_ID) {
		fuse_reply_err(req, EPERM);
		return;
	}
	if (strcmp(name, "ctl") == 0 || strcmp(name, "providers") == 0) {
		/* the tree's own entries exist, they just do not move */
		fuse_reply_err(req, EPERM);
		return;
	}
	if (flags & ~RENAME_NOREPLACE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	struct sfs_err err = {0};
	int r = tree_rename(name, newname, &err);
	if (r)
		sfs_log(SFS_LOG_WARN, "mv %s %s: %s", name, newname, err.msg);
	fuse_reply_err(req, -r);
}

static void sfs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	if (IS_WS(parent))
		AUDITED(req, parent, name, "mknod", ,
			WS_CALL(mknod, req, parent, name, mode, rdev));
	else
		fuse_reply_err(req, EPERM);
}

static void sfs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	if (IS_WS(parent))
		AUDITED(req, parent, name, "symlink", fs_audit_detail(&au_, link),
			LAYER_CALL(parent, symlink, req, link, parent, name));
	else
		fuse_reply_err(req, EPERM);
}

static void sfs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	if (IS_WS(ino) && layer_of(ino) == layer_of(newparent))
		AUDITED(req, ino, NULL, "link", fs_audit_to(&au_, newparent, newname),
			WS_CALL(link, req, ino, newparent, newname));
	else
		fuse_reply_err(req, IS_WS(ino) || IS_WS(newparent) ? EXDEV : EPERM);
}

static void sfs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	if (IS_WS(parent))
		AUDITED(req, parent, name, "create", ,
			WS_CALL(create, req, parent, name, mode, fi));
	else
		fuse_reply_err(req, EACCES);
}

/* ---- open/read/write of synthetic files ------------------------------- */

/* A file of a snapshot's tree/: its bytes read once, served from memory. */
static void stree_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	struct sfh *h = calloc(1, sizeof(*h));
	int r = h ? stree_read_all(ino, &h->out, &h->outlen) : -ENOMEM;
	if (r) {
		free(h);
		fuse_reply_err(req, -r);
		return;
	}
	h->kind = SFS_K_STREE;
	pthread_mutex_init(&h->mu, NULL);
	fi->keep_cache = 1; /* a snapshot never changes */
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		pthread_mutex_destroy(&h->mu);
		free(h->out);
		free(h);
	}
}

static void sfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (IS_WS(ino) && ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))) {
		/* opened to change it: one line per open, not per write */
		AUDITED(req, ino, NULL, "open",
			fs_audit_detail(&au_, fi->flags & O_TRUNC ? "write trunc" : "write"),
			WS_CALL(open, req, ino, fi));
		return;
	}
	if (IS_WS(ino)) {
		WS_CALL(open, req, ino, fi);
		return;
	}
	if (IS_STREE(ino)) {
		stree_open(req, ino, fi);
		return;
	}
	struct synth s;
	int r = synth_resolve(ino, &s);
	if (r) {
		fuse_reply_err(req, -r);
		return;
	}
	struct stat st;
	synth_stat(&s, &st);
	int acc = fi->flags & O_ACCMODE;
	if (S_ISDIR(st.st_mode))
		r = -EISDIR;
	else if ((acc != O_RDONLY && !(st.st_mode & 0200)) ||
		 (acc != O_WRONLY && !(st.st_mode & 0400)))
		r = -EACCES;
	struct sfh *h = r ? NULL : calloc(1, sizeof(*h));
	if (!r && !h)
		r = -ENOMEM;
	if (!r) {
		h->kind = s.kind;
		h->sb = s.sb;
		h->run = s.run;
		h->uid = fuse_req_ctx(req)->uid;
		h->nonblock = (fi->flags & O_NONBLOCK) != 0;
		pthread_mutex_init(&h->mu, NULL);
		switch (s.kind) {
		case SFS_K_MOUNT_CTL:
		case SFS_K_SB_CTL:
		case SFS_K_RUN_CTL:
			h->is_ctl = true;
			ctl_file_init(&h->ctl,
				      s.kind == SFS_K_MOUNT_CTL ? CTL_FILE_MOUNT
				      : s.kind == SFS_K_SB_CTL	? CTL_FILE_SANDBOX
								: CTL_FILE_RUN,
				      s.sb, s.run);
			fi->nonseekable = 1;
			break;
		case SFS_K_RUN_STDIN:
			/* results are read back on the same fd, not at offsets */
			fi->nonseekable = 1;
			break;
		case SFS_K_RUN_JOURNAL:
		case SFS_K_RUN_WAIT:
		case SFS_K_SB_AUDIT:
			break;
		default:
			r = synth_text(&s, &h->out, &h->outlen);
		}
	}
	synth_release(&s); /* sandboxes are never freed while mounted */
	if (r) {
		if (h) {
			if (h->is_ctl)
				ctl_file_close(&h->ctl);
			pthread_mutex_destroy(&h->mu);
		}
		free(h);
		fuse_reply_err(req, -r);
		return;
	}
	fi->direct_io = 1; /* sizes of synthetic files change under the reader */
	fi->fh = (uintptr_t)h;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		if (h->is_ctl)
			ctl_file_close(&h->ctl);
		pthread_mutex_destroy(&h->mu);
		free(h->out);
		free(h);
	}
}

static void on_interrupt(fuse_req_t req, void *data)
{
	(void)data;
	journal_interrupt(req);
}

/* Answers a journal or wait read now if it can; 1 when it parked. */
static int journal_read_or_park(fuse_req_t req, struct sfh *h, size_t size, off_t off)
{
	enum journal_wait_kind kind =
	    h->kind == SFS_K_RUN_WAIT ? JOURNAL_WAIT_END : JOURNAL_WAIT_BYTES;
	if (h->kind == SFS_K_SB_AUDIT) {
		/* a reader of a rotated-away audit ends there, wherever it was */
		pthread_mutex_lock(&h->mu);
		unsigned long g = journal_file_generation(h->run);
		bool stale = h->rotations_seen && h->rotations != g;
		h->rotations = g;
		h->rotations_seen = true;
		pthread_mutex_unlock(&h->mu);
		if (stale) {
			fuse_reply_buf(req, NULL, 0);
			return 0;
		}
	}
	for (int tries = 0; tries < 2; tries++) {
		if (kind == JOURNAL_WAIT_BYTES) {
			char *buf = malloc(size ? size : 1);
			if (!buf) {
				fuse_reply_err(req, ENOMEM);
				return 0;
			}
			bool eof = false;
			ssize_t n = journal_read(h->run, off, buf, size, &eof);
			if (n > 0 || eof || n < 0) {
				if (n < 0)
					fuse_reply_err(req, (int)-n);
				else
					fuse_reply_buf(req, buf, (size_t)n);
				free(buf);
				return 0;
			}
			free(buf);
		} else if (!journal_run_active(h->run)) {
			char st[64], line[80];
			journal_status_text(h->run, st, sizeof(st));
			int len = snprintf(line, sizeof(line), "%s\n", st);
			if (off >= len)
				fuse_reply_buf(req, NULL, 0);
			else
				fuse_reply_buf(req, line + off,
					       (size_t)len - (size_t)off < size
						   ? (size_t)len - (size_t)off
						   : size);
			return 0;
		}
		if (h->nonblock && kind == JOURNAL_WAIT_BYTES) {
			/* what is there, without waiting: `dd iflag=nonblock` of an
			 * audit that never ends (EAGAIN would make cat fail) */
			fuse_reply_buf(req, NULL, 0);
			return 0;
		}
		int p = journal_park(h->sb, h->run, req, off, size, kind);
		if (p < 0) {
			fuse_reply_err(req, -p);
			return 0;
		}
		if (p == 0) {
			fuse_req_interrupt_func(req, on_interrupt, NULL);
			journal_arm(req);
			return 1;
		}
		/* became ready between our read and the park: read again */
	}
	fuse_reply_err(req, EAGAIN);
	return 0;
}

static void sfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	if (IS_WS(ino)) {
		WS_CALL(read, req, ino, size, off, fi);
		return;
	}
	struct sfh *h = sfh_of(fi);
	if (h->kind == SFS_K_RUN_JOURNAL || h->kind == SFS_K_RUN_WAIT ||
	    h->kind == SFS_K_SB_AUDIT) {
		journal_read_or_park(req, h, size, off);
		return;
	}
	pthread_mutex_lock(&h->mu);
	bool is_ctl =
	    h->kind == SFS_K_MOUNT_CTL || h->kind == SFS_K_SB_CTL || h->kind == SFS_K_RUN_CTL;
	if (is_ctl && !h->out) {
		h->out = h->kind == SFS_K_MOUNT_CTL ? ctl_mount_read_text()
			 : h->kind == SFS_K_SB_CTL  ? ctl_sandbox_read_text(h->sb)
						    : ctl_run_read_text(h->sb, h->run);
		h->outlen = h->out ? strlen(h->out) : 0;
		h->rpos = 0;
	}
	size_t pos = is_ctl ? h->rpos : (size_t)off;
	size_t n = 0;
	if (h->out && pos < h->outlen)
		n = h->outlen - pos < size ? h->outlen - pos : size;
	if (is_ctl)
		h->rpos += n;
	/* reply only after unlocking: once the reply is out, the reader may
	 * close the file and release() free h on another worker */
	char *copy = n ? malloc(n) : NULL;
	if (copy)
		memcpy(copy, h->out + pos, n);
	pthread_mutex_unlock(&h->mu);
	if (n && !copy)
		fuse_reply_err(req, ENOMEM);
	else
		fuse_reply_buf(req, copy, n);
	free(copy);
}

static void synth_write(fuse_req_t req, struct sfh *h, const char *buf, size_t len)
{
	char *result = NULL;
	int r;
	switch (h->kind) {
	case SFS_K_MOUNT_CTL:
	case SFS_K_SB_CTL:
	case SFS_K_RUN_CTL:
		audit_set_caller(fuse_req_ctx(req)->uid);
		r = ctl_file_write(&h->ctl, buf, len, &result);
		/* forget/destroy queued their names' invalidation: see it sent
		 * (the kernel holds no directory lock for a write) */
		if (h->kind != SFS_K_RUN_CTL)
			notify_wait_entries(1000);
		break;
	case SFS_K_RUN_STDIN: {
		struct sfs_err err = {0};
		r = tree_stdin_write(h->sb, h->run, buf, len, &err);
		char name[64];
		if (r)
			sfs_log(SFS_LOG_WARN, "%s run %d stdin: %s", sfs_sb_copy_name(h->sb, name),
				h->run->n, err.msg);
		break;
	}
	default:
		r = -EBADF;
	}
	pthread_mutex_lock(&h->mu);
	if (result) {
		free(h->out);
		h->out = result;
		h->outlen = strlen(result);
		h->rpos = 0;
		h->out_is_result = true;
	}
	pthread_mutex_unlock(&h->mu);
	if (r)
		fuse_reply_err(req, -r);
	else
		fuse_reply_write(req, len);
}

static void sfs_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			  struct fuse_file_info *fi)
{
	if (IS_WS(ino)) {
		WS_CALL(write_buf, req, ino, in, off, fi);
		return;
	}
	size_t len = fuse_buf_size(in);
	char *buf = malloc(len + 1);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct fuse_bufvec dst = FUSE_BUFVEC_INIT(len);
	dst.buf[0].mem = buf;
	ssize_t got = fuse_buf_copy(&dst, in, 0);
	if (got < 0) {
		free(buf);
		fuse_reply_err(req, (int)-got);
		return;
	}
	buf[got] = '\0';
	synth_write(req, sfh_of(fi), buf, (size_t)got);
	free(buf);
}

static void sfs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (IS_WS(ino))
		WS_CALL(flush, req, ino, fi);
	else
		fuse_reply_err(req, 0);
}

static void sfs_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (IS_WS(ino)) {
		WS_CALL(release, req, ino, fi);
		return;
	}
	struct sfh *h = sfh_of(fi);
	if (h) {
		if (h->is_ctl) {
			audit_set_caller(h->uid);
			ctl_file_close(&h->ctl); /* may run a line left without its newline */
		}
		pthread_mutex_destroy(&h->mu);
		free(h->out);
		free(h);
	}
	fuse_reply_err(req, 0);
}

static void sfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	if (IS_WS(ino))
		WS_CALL(fsync, req, ino, datasync, fi);
	else
		fuse_reply_err(req, 0);
}

/* ---- directories ------------------------------------------------------ */

static void sfs_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (IS_WS(ino)) {
		WS_CALL(opendir, req, ino, fi);
		return;
	}
	if (IS_STREE(ino)) {
		stree_opendir(req, ino, fi);
		return;
	}
	struct synth s;
	int r = synth_resolve(ino, &s);
	if (r) {
		fuse_reply_err(req, -r);
		return;
	}
	struct sdh *d = calloc(1, sizeof(*d));
	if (!d) {
		synth_release(&s);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	r = synth_list(&s, &d->v, &d->n);
	synth_release(&s);
	if (r) {
		free(d);
		fuse_reply_err(req, -r);
		return;
	}
	d->self = ino;
	fi->fh = (uintptr_t)d;
	if (fuse_reply_open(req, fi) == -ENOENT) {
		free(d->v);
		free(d);
	}
}

void sfs_reply_dir(fuse_req_t req, size_t size, off_t off, size_t n, fuse_ino_t self,
		   fuse_ino_t parent, bool plus, sfs_dirent_fn entry, void *ctx)
{
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	/* offsets: 1 = ".", 2 = "..", 3.. = entries */
	for (off_t i = off; i < (off_t)n + 2; i++) {
		struct fuse_entry_param e;
		memset(&e, 0, sizeof(e));
		const char *name = i == 0 ? "." : "..";
		if (i < 2) {
			e.attr.st_ino = i == 0 ? self : parent;
			e.attr.st_mode = S_IFDIR;
		} else {
			name = entry(ctx, (size_t)i - 2, plus, &e);
		}
		size_t ent =
		    plus ? fuse_add_direntry_plus(req, buf + used, size - used, name, &e, i + 1)
			 : fuse_add_direntry(req, buf + used, size - used, name, &e.attr, i + 1);
		if (ent > size - used)
			break;
		used += ent;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static const char *synth_dirent(void *ctx, size_t i, bool plus, struct fuse_entry_param *e)
{
	struct synth_entry *se = &((struct sdh *)ctx)->v[i];
	e->attr.st_mode = se->mode;
	e->attr.st_ino = se->ino ? se->ino : SFS_INO_MAKE(SFS_K_WS, 0, 1);
	struct stat st;
	/* ino 0 in a readdirplus entry means "no attributes": the workspace
	 * root is looked up separately */
	if (plus && se->ino && stat_ino(se->ino, &st) == 0)
		fill_entry(e, se->ino, &st);
	return se->name;
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi, bool plus)
{
	struct sdh *d = (struct sdh *)(uintptr_t)fi->fh;
	sfs_reply_dir(req, size, off, d->n, d->self, FUSE_ROOT_ID, plus, synth_dirent, d);
}

static void sfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	if (IS_WS(ino))
		WS_CALL(readdir, req, ino, size, off, fi);
	else if (IS_STREE(ino))
		stree_readdir(req, ino, size, off, fi, false);
	else
		readdir_common(req, ino, size, off, fi, false);
}

static void sfs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			    struct fuse_file_info *fi)
{
	if (IS_WS(ino)) {
		if (layer_of(ino)->readdirplus)
			layer_of(ino)->readdirplus(req, ino, size, off, fi);
		else
			WS_CALL(readdir, req, ino, size, off, fi);
	} else if (IS_STREE(ino)) {
		stree_readdir(req, ino, size, off, fi, true);
	} else {
		readdir_common(req, ino, size, off, fi, true);
	}
}

static void sfs_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (IS_WS(ino)) {
		WS_CALL(releasedir, req, ino, fi);
		return;
	}
	if (IS_STREE(ino)) {
		stree_releasedir(req, fi);
		return;
	}
	struct sdh *d = (struct sdh *)(uintptr_t)fi->fh;
	if (d) {
		free(d->v);
		free(d);
	}
	fuse_reply_err(req, 0);
}

static void sfs_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	if (IS_WS(ino))
		WS_CALL(fsyncdir, req, ino, datasync, fi);
	else
		fuse_reply_err(req, 0);
}

static void sfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	if (IS_WS(ino)) {
		WS_CALL(statfs, req, ino);
		return;
	}
	struct statvfs sv = {.f_bsize = 4096, .f_frsize = 4096, .f_namemax = 255};
	fuse_reply_statfs(req, &sv);
}

/* ---- the rest: workspace only ------------------------------------------ */

static void sfs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	if (IS_WS(ino))
		AUDITED(req, ino, NULL, "setxattr", fs_audit_detail(&au_, name),
			WS_CALL(setxattr, req, ino, name, value, size, flags));
	else
		fuse_reply_err(req, ENOTSUP);
}

static void sfs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	if (IS_WS(ino))
		WS_CALL(getxattr, req, ino, name, size);
	else
		fuse_reply_err(req, ENODATA);
}

static void sfs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	if (IS_WS(ino))
		WS_CALL(listxattr, req, ino, size);
	else if (size == 0)
		fuse_reply_xattr(req, 0);
	else
		fuse_reply_buf(req, NULL, 0);
}

static void sfs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	if (IS_WS(ino))
		AUDITED(req, ino, NULL, "removexattr", fs_audit_detail(&au_, name),
			WS_CALL(removexattr, req, ino, name));
	else
		fuse_reply_err(req, ENOTSUP);
}

static void sfs_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	if (IS_WS(ino))
		WS_CALL(flock, req, ino, fi, op);
	else
		fuse_reply_err(req, EOPNOTSUPP);
}

/* ENOSYS would switch these off for the whole connection, workspace
 * included, so synthetic files answer EOPNOTSUPP/EINVAL instead. */
static void sfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			  struct fuse_file_info *fi)
{
	if (IS_WS(ino))
		AUDITED(req, ino, NULL, "fallocate", ,
			WS_CALL(fallocate, req, ino, mode, offset, length, fi));
	else
		fuse_reply_err(req, EOPNOTSUPP);
}

static void sfs_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
				struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
				struct fuse_file_info *fi_out, size_t len, int flags)
{
	if (IS_WS(ino_in) && layer_of(ino_in) == layer_of(ino_out))
		AUDITED(req, ino_out, NULL, "copy_file_range", ,
			WS_CALL(copy_file_range, req, ino_in, off_in, fi_in, ino_out, off_out,
				fi_out, len, flags));
	else
		fuse_reply_err(req, EXDEV);
}

static void sfs_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		      struct fuse_file_info *fi)
{
	if (IS_WS(ino))
		WS_CALL(lseek, req, ino, off, whence, fi);
	else
		fuse_reply_err(req, EINVAL);
}

static void sfs_init(void *userdata, struct fuse_conn_info *conn)
{
	ws_conn_init(conn);
}

const struct fuse_lowlevel_ops sfs_ops = {
    .init = sfs_init,
    .lookup = sfs_lookup,
    .forget = sfs_forget,
    .forget_multi = sfs_forget_multi,
    .getattr = sfs_getattr,
    .setattr = sfs_setattr,
    .readlink = sfs_readlink,
    .mknod = sfs_mknod,
    .mkdir = sfs_mkdir,
    .unlink = sfs_unlink,
    .rmdir = sfs_rmdir,
    .symlink = sfs_symlink,
    .rename = sfs_rename,
    .link = sfs_link,
    .open = sfs_open,
    .read = sfs_read,
    .write_buf = sfs_write_buf,
    .flush = sfs_flush,
    .release = sfs_release,
    .fsync = sfs_fsync,
    .opendir = sfs_opendir,
    .readdir = sfs_readdir,
    .readdirplus = sfs_readdirplus,
    .releasedir = sfs_releasedir,
    .fsyncdir = sfs_fsyncdir,
    .statfs = sfs_statfs,
    .setxattr = sfs_setxattr,
    .getxattr = sfs_getxattr,
    .listxattr = sfs_listxattr,
    .removexattr = sfs_removexattr,
    .create = sfs_create,
    .flock = sfs_flock,
    .fallocate = sfs_fallocate,
    .copy_file_range = sfs_copy_file_range,
    .lseek = sfs_lseek,
};

/* ---- hooks from the layers below -------------------------------------- */

static void deliver(struct journal_waiter *w, int err)
{
	fuse_req_t req = w->req;
	if (err == JOURNAL_EOF) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (err) {
		fuse_reply_err(req, -err);
		return;
	}
	struct sfh h = {.kind = w->kind == JOURNAL_WAIT_END ? SFS_K_RUN_WAIT : SFS_K_RUN_JOURNAL,
			.sb = w->sb,
			.run = w->run};
	/* ready by construction, so this answers rather than parks again */
	journal_read_or_park(req, &h, w->size, w->off);
}

static void run_changed(struct sfs_sandbox *sb, struct sfs_run *run)
{
	/* a run changes files behind the kernel's back */
	notify_ws_sandbox(sb->serial);
	rws_invalidate_sandbox(sb->serial);
	/* and may have moved directories: the audit's kept directory paths
	 * go now, before the run's wait readers are answered, not when the
	 * watcher reads the move (after a burst has gathered, a few ms later) */
	ws_where_moved();
}

static void run_ended(struct sfs_sandbox *sb, struct sfs_run *run)
{
	run_changed(sb, run);
	/* The run's `wait` readers are answered after this (journal.c): what
	 * the kernel holds of a remote workspace is dropped by then, so a read
	 * right after `wait` sees what the run left.  (A local workspace has
	 * the watcher for that; its drop here is a safety net and stays queued.) */
	if (sb->provider->ops->fs_stat)
		notify_wait_all(1000);
	if (run->n < 1)
		return; /* SANDBOX/audit's own plain journal */
	char st[64], path[32];
	journal_status_text(run, st, sizeof(st));
	snprintf(path, sizeof(path), "runs/%d", run->n);
	audit_line(sb, "run.end", path, 0, st);
}

static void sandbox_reset(struct sfs_sandbox *sb)
{
	ws_sandbox_reset(sb->serial);
	rws_invalidate_sandbox(sb->serial);
	notify_inval_entry(SFS_INO_MAKE(SFS_K_SB, sb->serial, 0), "workspace");
}

static void sandbox_gone(struct sfs_sandbox *sb)
{
	ws_sandbox_gone(sb->serial);
	rws_sandbox_gone(sb->serial);
	notify_inval_entry(FUSE_ROOT_ID, sb->name);
}

int sfs_fs_start(struct sfs_err *err)
{
	fs_audit_init();
	tree_run_started_hook = run_changed;
	tree_sandbox_gone_hook = sandbox_gone;
	tree_sandbox_reset_hook = sandbox_reset;
	int r = notify_start();
	if (r) {
		fs_audit_stop();
		return sfs_errf(err, r, "notify thread: %s", strerror(-r));
	}
	ws_start(); /* without inotify the workspace just keeps short TTLs */
	struct journal_hooks hooks = {.deliver = deliver, .run_ended = run_ended};
	r = journal_engine_start(&hooks, err);
	if (r) {
		ws_stop();
		notify_stop();
		fs_audit_stop();
		return r;
	}
	r = audit_thread_start(err);
	if (!r) {
		r = sfs_later_start(err);
		if (r)
			audit_thread_stop();
	}
	if (r) {
		journal_engine_stop();
		ws_stop();
		notify_stop();
		fs_audit_stop();
	}
	return r;
}

void sfs_fs_stop(void)
{
	sfs_later_stop();
	tree_drain(); /* destroys an rmdir left going end before the engine stops */
	journal_engine_stop();
	audit_thread_stop(); /* after the last run.end line */
	fs_audit_stop();
	ws_stop();
	notify_stop();
}
