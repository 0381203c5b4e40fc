/*
 * The FUSE side of remote workspaces: each handler takes the node with
 * rws_ref (the one preamble), asks the cache (fs/cache/remote_cache.h) and
 * replies.  Nothing here caches or decides; see the cache for that.
 */
#include "remote.h"
#include "../audit.h"

#include "../fs.h"
#include "../ino.h"
#include "../kernel_io.h"
#include "../symlink_rewrite.h"

#include "../../ctl/tree.h"
#include "../../providers/config.h"
#include "../../providers/options.h"
#include "../../providers/provider.h"
#include "../cache/remote_cache.h"
#include "../../providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

static bool raw_links;

/* ---- translation -------------------------------------------------------- */

static void reply_err(fuse_req_t req, int r)
{
	fs_audit_note_reply(r == -ENOSYS || r == -EOPNOTSUPP ? EOPNOTSUPP : -r);
	fuse_reply_err(req, r == -ENOSYS || r == -EOPNOTSUPP ? EOPNOTSUPP : -r);
}

int rws_where(fuse_ino_t ino, struct sfs_sandbox **sb, char *path, size_t len)
{
	struct rc_ref ref;
	int r = SFS_INO_KIND(ino) == SFS_K_RWS ? rc_ref_get(SFS_INO_WS_ID(ino), &ref) : -ENOENT;
	if (r)
		return r;
	char *p = rc_ref_path(&ref);
	*sb = ref.sb; /* records are never freed while mounted */
	r = p ? sfs_pathf(path, len, "workspace%s%s", *p ? "/" : "", p) : -ENOMEM;
	rc_ref_put(&ref);
	free(p);
	return r;
}

/* The cache node behind ino, pinned, with its sandbox; or an error reply
 * (the caller just returns).  Pair with rc_ref_put. */
static bool rws_ref(fuse_req_t req, fuse_ino_t ino, struct rc_ref *ref)
{
	int r = SFS_INO_KIND(ino) == SFS_K_RWS ? rc_ref_get(SFS_INO_WS_ID(ino), ref) : -ENOENT;
	if (r)
		reply_err(req, r);
	return r == 0;
}

/* What readlink shows for a link at `path` (relative to the workspace root
 * `root`, an absolute path inside the sandbox) pointing at `target`. */
static void show_link(const char *root, const char *path, const char *target, char *out, size_t cap)
{
	int depth = 0;
	for (const char *p = path; *p; p++)
		depth += *p == '/';
	if (raw_links ? sfs_pathf(out, cap, "%s", target) < 0
		      : sfs_symlink_rewrite(target, root, depth, out, cap) < 0)
		snprintf(
		    out, cap, "%s",
		    SFS_SYMLINK_OUTSIDE_PREFIX); /* may be cut: never; too long to show safely */
}

/* struct stat of a node; path is needed only for a symlink's shown size. */
static void fill_stat(struct sfs_sandbox *sb, uint64_t id, const char *path,
		      const struct sfs_rstat *rs, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = SFS_INO_RWS(id);
	st->st_mode = rs->mode ? rs->mode : (S_IFREG | 0644);
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_size = rs->size;
	if (S_ISLNK(rs->mode) && rs->link) {
		char shown[8192];
		show_link(sb ? sb->workspace : NULL, path ? path : "", rs->link, shown,
			  sizeof(shown));
		st->st_size = (off_t)strlen(shown);
	}
	st->st_blksize = 4096;
	st->st_blocks = (st->st_size + 511) / 512;
	st->st_atime = st->st_mtime = st->st_ctime = (time_t)rs->mtime;
}

static void fill_entry(struct sfs_sandbox *sb, const struct rc_entry *ce,
		       struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = SFS_INO_RWS(ce->id);
	e->attr_timeout = e->entry_timeout = ce->ttl;
	fill_stat(sb, ce->id, ce->path, &ce->st, &e->attr);
}

/* Replies with ce (counted once as looked up), or with r. */
static void reply_entry(fuse_req_t req, struct sfs_sandbox *sb, struct rc_entry *ce, int r)
{
	if (r) {
		reply_err(req, r);
		return;
	}
	struct fuse_entry_param e;
	fill_entry(sb, ce, &e);
	if (fuse_reply_entry(req, &e) == -ENOENT)
		rc_forget(ce->id, 1); /* interrupted: the kernel never got it */
	rc_entry_free(ce);
}

static void reply_attr(fuse_req_t req, struct rc_ref *ref, struct sfs_rstat *st, double ttl, int r)
{
	if (r) {
		reply_err(req, r);
		return;
	}
	char *path = S_ISLNK(st->mode) ? rc_ref_path(ref) : NULL;
	struct stat out;
	fill_stat(ref->sb, rc_ref_id(ref), path, st, &out);
	free(path);
	fuse_reply_attr(req, &out, ttl);
}

/* ---- lookup, getattr, readlink ------------------------------------------ */

void rws_lookup_root(fuse_req_t req, uint32_t serial)
{
	struct rc_entry ce;
	int r = rc_lookup_root(serial, &ce);
	reply_entry(req, NULL, &ce, r);
}

static void rws_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct rc_ref dir;
	if (!rws_ref(req, parent, &dir))
		return;
	struct rc_entry ce;
	int r = rc_lookup(&dir, name, &ce);
	reply_entry(req, dir.sb, &ce, r);
	rc_ref_put(&dir);
}

void rws_forget_one(fuse_ino_t ino, uint64_t nlookup)
{
	rc_forget(SFS_INO_WS_ID(ino), nlookup);
}

static void rws_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	rws_forget_one(ino, nlookup);
	fuse_reply_none(req);
}

static void rws_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		rws_forget_one(forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void rws_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rc_ref ref;
	if (!rws_ref(req, ino, &ref))
		return;
	struct sfs_rstat st = {0};
	int r = rc_getattr(&ref, &st);
	reply_attr(req, &ref, &st, rc_ref_ttl(&ref), r);
	free(st.link);
	rc_ref_put(&ref);
}

static void rws_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct rc_ref ref;
	if (!rws_ref(req, ino, &ref))
		return;
	char *target = NULL;
	int r = rc_readlink(&ref, &target);
	char *path = r ? NULL : rc_ref_path(&ref);
	if (!r && !path)
		r = -ENOMEM;
	if (!r) {
		char shown[8192];
		show_link(ref.sb->workspace, path, target, shown, sizeof(shown));
		fuse_reply_readlink(req, shown);
	} else {
		reply_err(req, r);
	}
	free(path);
	free(target);
	rc_ref_put(&ref);
}

/* The mode a write or truncate by a caller without CAP_FSETID leaves, which
 * the kernel asks of us under FUSE_HANDLE_KILLPRIV_V2 (fs/kernel_io.c);
 * false (and *mode unchanged) when there is nothing to clear. */
static bool killed_mode(fuse_req_t req, mode_t *mode)
{
	/* remote files are the daemon's group's (rws_attr) */
	mode_t kill = kio_suidgid_to_clear_for(req, *mode, getgid());
	*mode &= ~kill;
	return kill != 0;
}

/* For a write or O_TRUNC open the kernel flagged: clears the bits from the
 * file's attributes as the cache has them (a call only when it has none or
 * the bits are there); 1 if it cleared them, 0, or a negative errno. */
static int rws_kill_suidgid(fuse_req_t req, struct rc_ref *ref)
{
	struct sfs_rstat st = {0};
	int r = rc_getattr(ref, &st);
	free(st.link);
	if (r)
		return r;
	if (!killed_mode(req, &st.mode))
		return 0;
	struct rc_setattr sa = {.set_mode = true, .mode = st.mode & 07777};
	struct sfs_rstat after = {0};
	r = rc_setattr(ref, &sa, &after);
	free(after.link);
	return r ? r : 1;
}

static void rws_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			struct fuse_file_info *fi)
{
	/* files belong to whoever runs the daemon */
	if (((to_set & FUSE_SET_ATTR_UID) && attr->st_uid != getuid()) ||
	    ((to_set & FUSE_SET_ATTR_GID) && attr->st_gid != getgid())) {
		reply_err(req, -EPERM);
		return;
	}
	struct rc_ref ref;
	if (!rws_ref(req, ino, &ref))
		return;
	struct rc_setattr sa = {
	    .set_mode = to_set & FUSE_SET_ATTR_MODE,
	    .mode = attr->st_mode,
	    .set_size = to_set & FUSE_SET_ATTR_SIZE,
	    .size = attr->st_size,
	    .set_mtime = to_set & (FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_MTIME_NOW),
	    .mtime =
		(to_set & FUSE_SET_ATTR_MTIME_NOW) ? (int64_t)time(NULL) : (int64_t)attr->st_mtime,
	};
	struct sfs_rstat st = {0};
	int r = 0;
	/* a truncate by a caller without CAP_FSETID, unless it sets the mode */
	if (!sa.set_mode && kio_kill_suidgid()) {
		r = rc_getattr(&ref, &st);
		free(st.link);
		st = (struct sfs_rstat){.mode = st.mode};
		if (!r && killed_mode(req, &st.mode)) {
			sa.set_mode = true;
			sa.mode = st.mode & 07777;
		}
	}
	if (!r)
		r = rc_setattr(&ref, &sa, &st);
	reply_attr(req, &ref, &st, rc_ref_ttl(&ref), r);
	free(st.link);
	rc_ref_put(&ref);
}

/* ---- contents ----------------------------------------------------------- */

static struct rc_file *file_of(struct fuse_file_info *fi)
{
	return (struct rc_file *)(uintptr_t)fi->fh;
}

static void rws_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rc_ref ref;
	if (!rws_ref(req, ino, &ref))
		return;
	struct rc_file *f;
	bool keep = false;
	int r = rc_open(&ref, fi->flags, &f, &keep);
	if (!r && (fi->flags & O_TRUNC) && kio_kill_suidgid()) {
		int k = rws_kill_suidgid(req, &ref);
		if (k < 0) {
			rc_release(f);
			r = k;
		} else if (k > 0) {
			kio_inval_attr(ino);
		}
	}
	rc_ref_put(&ref);
	if (r) {
		reply_err(req, r);
		return;
	}
	fi->fh = (uintptr_t)f;
	fi->keep_cache = keep;
	if (fuse_reply_open(req, fi) == -ENOENT)
		rc_release(f); /* interrupted: the kernel never got the handle */
}

static void rws_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	struct fuse_bufvec buf = FUSE_BUFVEC_INIT(size);
	buf.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	buf.buf[0].fd = rc_file_fd(file_of(fi));
	buf.buf[0].pos = off;
	fuse_reply_data(req, &buf, FUSE_BUF_SPLICE_MOVE);
}

static void rws_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
			  struct fuse_file_info *fi)
{
	struct rc_file *f = file_of(fi);
	struct fuse_bufvec out = FUSE_BUFVEC_INIT(fuse_buf_size(in));
	out.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	out.buf[0].fd = rc_file_fd(f);
	out.buf[0].pos = off;
	if (kio_kill_suidgid()) {
		struct rc_ref ref;
		if (!rws_ref(req, ino, &ref))
			return;
		int k = rws_kill_suidgid(req, &ref);
		rc_ref_put(&ref);
		if (k < 0) {
			reply_err(req, k);
			return;
		}
		if (k > 0)
			kio_inval_attr(ino);
	}
	ssize_t w = fuse_buf_copy(&out, in, 0);
	if (w < 0) {
		fuse_reply_err(req, (int)-w);
		return;
	}
	rc_file_written(f);
	fuse_reply_write(req, (size_t)w);
}

static void rws_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	reply_err(req, rc_flush(file_of(fi)));
}

static void rws_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	reply_err(req, fi ? rc_fsync(file_of(fi)) : 0);
}

static void rws_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	rc_release(file_of(fi));
	fuse_reply_err(req, 0);
}

static void rws_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		      struct fuse_file_info *fi)
{
	off_t r = lseek(rc_file_fd(file_of(fi)), off, whence);
	if (r < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, r);
}

/* ---- namespace changes -------------------------------------------------- */

/* The creator's umask.  With FUSE_CAP_DONT_MASK (on for the local
 * workspace's POSIX ACLs, and session-wide) the kernel leaves it to us;
 * remote files have no ACLs, so it always applies, and applying it to a mode
 * the kernel already masked changes nothing. */
static mode_t masked(fuse_req_t req, mode_t mode)
{
	return mode & ~(fuse_req_ctx(req)->umask & 0777);
}

static void rws_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		       struct fuse_file_info *fi)
{
	struct rc_ref dir;
	if (!rws_ref(req, parent, &dir))
		return;
	struct rc_entry ce;
	struct rc_file *f;
	int r = rc_create(&dir, name, masked(req, mode), fi->flags, &ce, &f);
	if (r) {
		reply_err(req, r);
	} else {
		struct fuse_entry_param e;
		fill_entry(dir.sb, &ce, &e);
		fi->fh = (uintptr_t)f;
		if (fuse_reply_create(req, &e, fi) == -ENOENT) {
			rc_release(f);
			rc_forget(ce.id, 1);
		}
		rc_entry_free(&ce);
	}
	rc_ref_put(&dir);
}

static void rws_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct rc_ref dir;
	if (!rws_ref(req, parent, &dir))
		return;
	struct rc_entry ce;
	int r = rc_mknod(&dir, name, masked(req, mode), &ce);
	reply_entry(req, dir.sb, &ce, r);
	rc_ref_put(&dir);
}

static void rws_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct rc_ref dir;
	if (!rws_ref(req, parent, &dir))
		return;
	struct rc_entry ce;
	int r = rc_mkdir(&dir, name, masked(req, mode), &ce);
	reply_entry(req, dir.sb, &ce, r);
	rc_ref_put(&dir);
}

static void rws_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct rc_ref dir;
	if (!rws_ref(req, parent, &dir))
		return;
	struct rc_entry ce;
	int r = rc_symlink(&dir, name, link, &ce);
	reply_entry(req, dir.sb, &ce, r);
	rc_ref_put(&dir);
}

static void remove_common(fuse_req_t req, fuse_ino_t parent, const char *name, bool is_dir)
{
	struct rc_ref dir;
	if (!rws_ref(req, parent, &dir))
		return;
	reply_err(req, rc_remove(&dir, name, is_dir));
	rc_ref_put(&dir);
}

static void rws_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_common(req, parent, name, false);
}

static void rws_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_common(req, parent, name, true);
}

static void rws_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		       const char *newname, unsigned int flags)
{
	if (flags & ~RENAME_NOREPLACE) {
		reply_err(req, -EINVAL);
		return;
	}
	struct rc_ref dir, newdir;
	if (!rws_ref(req, parent, &dir))
		return;
	if (rws_ref(req, newparent, &newdir)) {
		reply_err(req, rc_rename(&dir, name, &newdir, newname, flags & RENAME_NOREPLACE));
		rc_ref_put(&newdir);
	}
	rc_ref_put(&dir);
}

static void rws_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	reply_err(req, -EPERM); /* no hard links through the file API */
}

/* ---- directories -------------------------------------------------------- */

static void rws_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct rc_ref dir;
	if (!rws_ref(req, ino, &dir))
		return;
	struct rc_listing *l;
	int r = rc_opendir(&dir, &l);
	rc_ref_put(&dir);
	if (r) {
		reply_err(req, r);
		return;
	}
	fi->fh = (uintptr_t)l;
	fi->cache_readdir = 0;
	if (fuse_reply_open(req, fi) == -ENOENT)
		rc_listing_free(l);
}

/* Adds "." and ".." (i < 2) or listing entry i - 2 to buf; how many bytes
 * it took, or more than room when it did not fit. */
static size_t add_entry(fuse_req_t req, struct rc_ref *dir, const struct rc_listing *l,
			fuse_ino_t ino, off_t i, bool plus, char *buf, size_t room)
{
	struct fuse_entry_param e;
	memset(&e, 0, sizeof(e));
	if (i < 2) {
		/* no lookup is counted for these: ino 0 says so in readdirplus */
		const char *name = i == 0 ? "." : "..";
		e.attr.st_ino = i == 0 ? ino : FUSE_ROOT_ID;
		e.attr.st_mode = S_IFDIR;
		return plus ? fuse_add_direntry_plus(req, buf, room, name, &e, i + 1)
			    : fuse_add_direntry(req, buf, room, name, &e.attr, i + 1);
	}
	const char *name = rc_listing_name(l, (size_t)i - 2);
	if (!plus) {
		e.attr.st_mode = rc_listing_mode(l, (size_t)i - 2);
		e.attr.st_ino = 1; /* plain readdir needs a non-zero placeholder */
		return fuse_add_direntry(req, buf, room, name, &e.attr, i + 1);
	}
	/* fits? measure first: a counted lookup must reach the kernel */
	size_t need = fuse_add_direntry_plus(req, NULL, 0, name, &e, i + 1);
	if (need > room)
		return need;
	struct rc_entry ce;
	if (rc_listing_entry(dir, l, (size_t)i - 2, &ce))
		return room + 1;
	fill_entry(dir->sb, &ce, &e);
	rc_entry_free(&ce);
	return fuse_add_direntry_plus(req, buf, room, name, &e, i + 1);
}

static void readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi, bool plus)
{
	struct rc_listing *l = (struct rc_listing *)(uintptr_t)fi->fh;
	struct rc_ref dir;
	if (!rws_ref(req, ino, &dir))
		return;
	char *buf = malloc(size);
	if (!buf) {
		rc_ref_put(&dir);
		reply_err(req, -ENOMEM);
		return;
	}
	size_t used = 0;
	for (off_t i = off; i < (off_t)rc_listing_count(l) + 2; i++) {
		size_t need = add_entry(req, &dir, l, ino, i, plus, buf + used, size - used);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
	rc_ref_put(&dir);
}

static void rws_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, false);
}

static void rws_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			    struct fuse_file_info *fi)
{
	readdir_common(req, ino, size, off, fi, true);
}

static void rws_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	rc_listing_free((struct rc_listing *)(uintptr_t)fi->fh);
	fuse_reply_err(req, 0);
}

static void rws_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

/* ---- what the file API does not have ------------------------------------ */

static void rws_statfs(fuse_req_t req, fuse_ino_t ino)
{
	/* the API has no statfs: report plenty rather than "full" */
	struct statvfs sv = {.f_bsize = 4096,
			     .f_frsize = 4096,
			     .f_blocks = 1ULL << 28,
			     .f_bfree = 1ULL << 27,
			     .f_bavail = 1ULL << 27,
			     .f_files = 1ULL << 24,
			     .f_ffree = 1ULL << 23,
			     .f_favail = 1ULL << 23,
			     .f_namemax = 255};
	fuse_reply_statfs(req, &sv);
}

/* No extended attributes through the file API; answered here so the kernel
 * never sees ENOSYS (which would switch xattrs off for every workspace). */
static void rws_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	reply_err(req, -ENOTSUP);
}

static void rws_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	reply_err(req, -ENODATA);
}

static void rws_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, 0);
	else
		fuse_reply_buf(req, NULL, 0);
}

static void rws_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	reply_err(req, -ENODATA);
}

static void rws_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op)
{
	reply_err(req, -EOPNOTSUPP);
}

static void rws_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
			  struct fuse_file_info *fi)
{
	reply_err(req, -EOPNOTSUPP);
}

static void rws_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
				struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
				struct fuse_file_info *fi_out, size_t len, int flags)
{
	reply_err(req, -EOPNOTSUPP); /* callers fall back to read + write */
}

const struct fuse_lowlevel_ops rws_ops = {
    .lookup = rws_lookup,
    .forget = rws_forget,
    .forget_multi = rws_forget_multi,
    .getattr = rws_getattr,
    .setattr = rws_setattr,
    .readlink = rws_readlink,
    .mknod = rws_mknod,
    .mkdir = rws_mkdir,
    .unlink = rws_unlink,
    .rmdir = rws_rmdir,
    .symlink = rws_symlink,
    .rename = rws_rename,
    .link = rws_link,
    .open = rws_open,
    .read = rws_read,
    .write_buf = rws_write_buf,
    .flush = rws_flush,
    .release = rws_release,
    .fsync = rws_fsync,
    .opendir = rws_opendir,
    .readdir = rws_readdir,
    .readdirplus = rws_readdirplus,
    .releasedir = rws_releasedir,
    .fsyncdir = rws_fsyncdir,
    .statfs = rws_statfs,
    .setxattr = rws_setxattr,
    .getxattr = rws_getxattr,
    .listxattr = rws_listxattr,
    .removexattr = rws_removexattr,
    .create = rws_create,
    .flock = rws_flock,
    .fallocate = rws_fallocate,
    .copy_file_range = rws_copy_file_range,
    .lseek = rws_lseek,
};

/* ---- the cache's view of the tree, and lifetime ------------------------- */

/* Only sandboxes whose provider has remote file access have a remote cache. */
static struct sfs_sandbox *remote_sandbox_get(uint32_t serial)
{
	struct sfs_sandbox *sb = tree_get_serial(serial);
	if (sb && !sb->provider->ops->fs_stat) {
		tree_put(sb);
		sb = NULL;
	}
	return sb;
}

static void node_stale(uint64_t id)
{
	notify_inval_inode(SFS_INO_RWS(id));
}

void rws_invalidate_sandbox(uint32_t serial)
{
	rc_invalidate_sandbox(serial);
}

void rws_sandbox_gone(uint32_t serial)
{
	rc_sandbox_gone(serial);
}

unsigned long rws_calls(uint32_t serial)
{
	return rc_calls(serial);
}

int rws_init(void)
{
	raw_links = !strcmp(sfs_opt_get("symlinks"), "raw");
	struct rc_options opt = {
	    .ttl = sfs_opt_get_double("remote.attr_timeout"),
	    .busy_ttl = sfs_opt_get_double("remote.attr_timeout_busy"),
	    .retry_interval = sfs_opt_get_double("remote.retry_interval"),
	};
	struct rc_hooks hooks = {
	    .sandbox_get = remote_sandbox_get, .sandbox_put = tree_put, .node_stale = node_stale};
	int r = rc_init(&opt, &hooks);
	if (r)
		return r;
	char(*names)[64] = calloc(4096, sizeof(*names));
	uint32_t *serials = calloc(4096, sizeof(*serials));
	size_t n = names && serials ? tree_list(names, serials, 4096) : 0;
	for (size_t i = 0; i < n; i++) {
		struct sfs_sandbox *sb = remote_sandbox_get(serials[i]);
		if (sb)
			rc_recover_sandbox(sb);
		if (sb)
			tree_put(sb);
	}
	free(names);
	free(serials);
	return 0;
}

int rws_start(void)
{
	return rc_start();
}

void rws_stop(void)
{
	rc_stop();
}

void rws_shutdown(void)
{
	rc_shutdown();
}
