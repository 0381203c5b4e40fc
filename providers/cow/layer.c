/*
 * Base workspaces on disk: STATE/sandboxes/KEY/cow/ holds base.json (the
 * base, the hide list, the mode), upper/ and work/ (overlayfs's layers) and
 * merged/, the view runs see as their cwd and workspace/ serves.  With
 * overlayfs, hidden base files are whiteouts put in upper before the mount
 * (a 0/0 character device: the name is absent in the merged view, and a
 * directory made there later is opaque); without it (cow.mode=copy, or a
 * mount that fails), merged/ is a copy of the base minus the hidden files,
 * reflinked where the filesystem can (then blocks are shared until first
 * written), with modes, owners and times kept so the diff can skip
 * unchanged files by size and mtime.
 */
#include "cow.h"

#include "../untrusted/tree.h"
#include "walk.h"

#include "../config.h"
#include "../options.h"
#include "../provider.h"
#include "../util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define OVERLAYFS_MAGIC_NR 0x794c7630

static void cow_path(const char *statedir, const char *leaf, char *buf)
{
	/* "" (no file) when it does not fit: the state dir's length is
	 * bounded (SFS_STATEDIR_MAX), so never */
	if (sfs_pathf(buf, PATH_MAX, "%s/" SFS_COW_DIR "%s%s", statedir, leaf ? "/" : "",
		      leaf ? leaf : "") < 0)
		sfs_log(SFS_LOG_ERR, "base workspace: %s: path too long", statedir);
}

bool sfs_cow_present(const char *statedir)
{
	char p[PATH_MAX];
	cow_path(statedir, "base.json", p);
	return access(p, F_OK) == 0;
}

/* path is dir or below it (both real paths). */
static bool path_within(const char *path, const char *dir)
{
	size_t l = strlen(dir);
	while (l > 1 && dir[l - 1] == '/')
		l--;
	return strncmp(path, dir, l) == 0 && (path[l] == '/' || path[l] == '\0' || l == 1);
}

int sfs_cow_check(const char *base, const char *hide, const char *hide_case, struct sfs_err *err)
{
	if (!base)
		return hide || hide_case
			   ? sfs_errf(err, -EINVAL,
				      "new: %s needs base=", hide ? "hide=" : "hide.case=")
			   : 0;
	bool nocase;
	int r = sfs_cow_hide_case(hide_case, &nocase, err);
	if (r)
		return r;
	if (base[0] != '/')
		return sfs_errf(err, -EINVAL, "new: base=%s: expected an absolute path", base);
	char real[PATH_MAX];
	if (!realpath(base, real))
		return sfs_errf(err, -errno, "new: base=%s: %s", base, strerror(errno));
	struct stat st;
	if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode))
		return sfs_errf(err, -ENOTDIR, "new: base=%s is not a directory", base);
	char other[PATH_MAX];
	if (sfs_mount_dir && path_within(real, sfs_mount_dir)) /* resolved at startup */
		return sfs_errf(err, -EINVAL, "new: base=%s is inside the sandboxfs mount %s", base,
				sfs_mount_dir);
	if (sfs_state_dir && realpath(sfs_state_dir, other) &&
	    (path_within(real, other) || path_within(other, real)))
		return sfs_errf(err, -EINVAL,
				"new: base=%s %s the state directory %s (a layer cannot hold "
				"another)",
				base, path_within(real, other) ? "is inside" : "contains", other);
	struct sfs_cow_hide *h;
	r = sfs_cow_hide_parse(hide, nocase, &h, err);
	sfs_cow_hide_free(h);
	return r;
}

/* ---- metadata ------------------------------------------------------------ */

struct cow_meta {
	char base[PATH_MAX];
	char *hide;  /* NULL: none */
	bool nocase; /* hide.case=insensitive */
	bool overlay;
};

static int meta_load(const char *statedir, struct cow_meta *m, struct sfs_err *err)
{
	char p[PATH_MAX];
	cow_path(statedir, "base.json", p);
	json_error_t je;
	json_t *j = json_load_file(p, 0, &je);
	if (!j)
		return sfs_errf(err, access(p, F_OK) == 0 ? -EIO : -ENOENT,
				"base workspace: %s: %s", p, je.text);
	const char *base = json_string_value(json_object_get(j, "base"));
	const char *hide = json_string_value(json_object_get(j, "hide"));
	const char *mode = json_string_value(json_object_get(j, "mode"));
	int r = 0;
	if (!base || !mode)
		r = sfs_errf(err, -EIO, "base workspace: %s: no base or mode", p);
	else {
		if (sfs_pathf(m->base, sizeof(m->base), "%s", base) < 0)
			r = sfs_errf(err, -ENAMETOOLONG, "base workspace: %s: base too long", p);
		m->overlay = strcmp(mode, "overlay") == 0;
		m->hide = hide ? strdup(hide) : NULL;
		if (hide && !m->hide)
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	json_decref(j);
	return r;
}

static int meta_save(const char *statedir, const struct cow_meta *m, struct sfs_err *err)
{
	json_t *j =
	    json_pack("{s:s, s:s?, s:s?, s:s}", "base", m->base, "hide", m->hide, "hide_case",
		      m->nocase ? "insensitive" : NULL, "mode", m->overlay ? "overlay" : "copy");
	char *text = j ? json_dumps(j, JSON_INDENT(1)) : NULL;
	json_decref(j);
	if (!text)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char p[PATH_MAX];
	cow_path(statedir, "base.json", p);
	int r = sfs_write_file_atomic(p, text, strlen(text), err);
	free(text);
	return r;
}

int sfs_cow_describe(const char *statedir, char *base, size_t baselen, char *mode, size_t modelen,
		     struct sfs_err *err)
{
	struct cow_meta m = {0};
	int r = meta_load(statedir, &m, err);
	if (r)
		return r;
	snprintf(base, baselen, "%s", m.base); /* message: may be cut (a status line) */
	snprintf(mode, modelen, "%s", m.overlay ? "overlay" : "copy"); /* message: may be cut */
	free(m.hide);
	return 0;
}

/* ---- overlay mounts ------------------------------------------------------ */

/* An overlay mounted at merged: overlayfs there, on a device other than its
 * parent's (the state dir may itself be on an overlayfs). */
static bool is_overlay_mount(const char *merged)
{
	struct statfs sf;
	struct stat st, parent;
	char up[PATH_MAX + 4];
	if (sfs_pathf(up, sizeof(up), "%s/..", merged) < 0)
		return false;
	return statfs(merged, &sf) == 0 && (unsigned long)sf.f_type == OVERLAYFS_MAGIC_NR &&
	       stat(merged, &st) == 0 && stat(up, &parent) == 0 && st.st_dev != parent.st_dev;
}

/* overlayfs options split on ',' and lowerdir on ':': both escaped with '\' */
static int escape_opt(const char *in, char *out, size_t len)
{
	size_t n = 0;
	for (; *in; in++) {
		if (strchr(",:\\", *in)) {
			if (n + 1 >= len)
				return -ENAMETOOLONG;
			out[n++] = '\\';
		}
		if (n + 1 >= len)
			return -ENAMETOOLONG;
		out[n++] = *in;
	}
	out[n] = '\0';
	return 0;
}

static int mount_overlay(const char *statedir, const char *base, struct sfs_err *err)
{
	char upper[PATH_MAX], work[PATH_MAX], merged[PATH_MAX];
	cow_path(statedir, "upper", upper);
	cow_path(statedir, "work", work);
	cow_path(statedir, "merged", merged);
	char el[PATH_MAX * 2], eu[PATH_MAX * 2], ew[PATH_MAX * 2], opts[PATH_MAX * 6 + 64];
	if (escape_opt(base, el, sizeof(el)) || escape_opt(upper, eu, sizeof(eu)) ||
	    escape_opt(work, ew, sizeof(ew)))
		return sfs_errf(err, -ENAMETOOLONG, "base workspace: path too long");
	/* mount(2) reads one page of options and cuts the rest silently: a
	 * workdir cut there names another directory */
	if (sfs_pathf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", el, eu, ew) < 0 ||
	    strlen(opts) >= 4096)
		return sfs_errf(err, -ENAMETOOLONG,
				"base workspace: the overlay's options are too long (base and "
				"state paths: 4095 bytes in all)");
	if (mount("overlay", merged, "overlay", MS_NOSUID | MS_NODEV, opts) < 0)
		return sfs_errf(err, -errno, "base workspace: mounting overlayfs on %s: %s", merged,
				strerror(errno));
	return 0;
}

static int unmount_overlay(const char *merged, struct sfs_err *err)
{
	/* detached at once; runs still inside (killed before this) let go later */
	for (int i = 0; i < 8 && is_overlay_mount(merged); i++)
		if (umount2(merged, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
			return sfs_errf(err, -errno, "base workspace: unmounting %s: %s", merged,
					strerror(errno));
	return 0;
}

/* ---- building upper / the copy ------------------------------------------- */

struct build {
	const struct sfs_cow_hide *hide;
	int upperfd; /* overlay: whiteouts go here */
	int copyfd;  /* copy: the copy goes here */
	struct sfs_err *err;
};

/* Makes dir rel (and its parents) in the tree at rootfd with the base's
 * mode and owner, so overlayfs merges it with the base's directory. */
static int mkdirs_like(int rootfd, int basefd, const char *rel, struct sfs_err *err)
{
	char path[PATH_MAX];
	if (sfs_pathf(path, sizeof(path), "%s", rel) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "base workspace: %s: path too long", rel);
	for (char *s = path;; s++) {
		if (*s && *s != '/')
			continue;
		char c = *s;
		*s = '\0';
		struct stat st;
		if (fstatat(basefd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return sfs_errf(err, -errno, "base workspace: %s: %s", path,
					strerror(errno));
		if (mkdirat(rootfd, path, 0700) == 0) {
			/* owner and mode through the directory opened, not the name:
			 * upper is the sandbox's layer */
			int fd = untrusted_open(rootfd, path, O_PATH | O_DIRECTORY);
			int r = fd < 0 ? fd : untrusted_fchown(fd, st.st_uid, st.st_gid);
			if (!r)
				r = untrusted_fchmod(fd, st.st_mode);
			if (fd >= 0)
				close(fd);
			if (r)
				return sfs_errf(err, r, "base workspace: %s: %s", path,
						strerror(-r));
		} else if (errno != EEXIST) {
			return sfs_errf(err, -errno, "base workspace: mkdir %s: %s", path,
					strerror(errno));
		}
		*s = c;
		if (!c)
			return 0;
	}
}

static int whiteout(struct build *b, int basefd, const char *rel)
{
	const char *slash = strrchr(rel, '/');
	if (slash) {
		char parent[PATH_MAX];
		if (sfs_pathf(parent, sizeof(parent), "%.*s", (int)(slash - rel), rel) < 0)
			return sfs_errf(b->err, -ENAMETOOLONG, "base workspace: %s: path too long",
					rel);
		int r = mkdirs_like(b->upperfd, basefd, parent, b->err);
		if (r)
			return r;
	}
	if (mknodat(b->upperfd, rel, S_IFCHR | 0000, makedev(0, 0)) < 0 && errno != EEXIST)
		return sfs_errf(b->err, -errno, "base workspace: hiding %s: %s", rel,
				strerror(errno));
	return 0;
}

static int copy_data(int in, int out)
{
	if (ioctl(out, FICLONE, in) == 0)
		return 0; /* shared blocks: copied on first write by the filesystem */
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n == 0)
			return 0;
		if (n > 0)
			continue;
		if (errno == EINTR)
			continue;
		if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS)
			return -errno;
		break;
	}
	char buf[65536];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : 0;
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(out, buf + off, (size_t)(n - off));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -errno;
			off += w;
		}
	}
}

static int keep_meta(int fd, const char *rel, const struct stat *st)
{
	struct timespec ts[2] = {st->st_atim, st->st_mtim};
	if (fchownat(fd, rel, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0 && errno != EPERM)
		return -errno;
	/* never set-user-ID or set-group-ID out of a base, which may be
	 * another sandbox's workspace */
	if (!S_ISLNK(st->st_mode) && fchmodat(fd, rel, untrusted_perm(st->st_mode), 0) < 0)
		return -errno;
	return utimensat(fd, rel, ts, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int copy_one(struct build *b, int basefd, const char *rel, const struct stat *st)
{
	int r = 0;
	if (S_ISREG(st->st_mode)) {
		/* beneath the base, no symlink, O_NONBLOCK: still a regular file */
		struct stat now;
		int in = untrusted_open_file(basefd, rel, &now);
		int out =
		    in < 0 ? -1
			   : openat(b->copyfd, rel, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		r = in < 0 ? in : out < 0 ? -errno : copy_data(in, out);
		if (in >= 0)
			close(in);
		if (out >= 0)
			close(out);
	} else if (S_ISLNK(st->st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(basefd, rel, target, sizeof(target) - 1);
		if (n >= 0)
			target[n] = '\0';
		r = n < 0 || symlinkat(target, b->copyfd, rel) < 0 ? -errno : 0;
	} else if (S_ISFIFO(st->st_mode)) {
		r = mkfifoat(b->copyfd, rel, 0600) < 0 ? -errno : 0;
	} else if (S_ISDIR(st->st_mode)) {
		r = mkdirat(b->copyfd, rel, 0700) < 0 ? -errno : 0;
	} else {
		return 0; /* devices and sockets are not copied */
	}
	if (!r && !S_ISDIR(st->st_mode))
		r = keep_meta(b->copyfd, rel, st);
	if (r)
		return sfs_errf(b->err, r, "base workspace: copying %s: %s", rel, strerror(-r));
	return 0;
}

static int build_visit(void *arg, int basefd, const char *rel, const struct stat *st)
{
	struct build *b = arg;
	bool dir = S_ISDIR(st->st_mode);
	if (sfs_cow_hide_match(b->hide, rel, dir)) {
		if (b->upperfd >= 0)
			return whiteout(b, basefd, rel) ?: SFS_COW_WALK_SKIP;
		return SFS_COW_WALK_SKIP;
	}
	return b->copyfd >= 0 ? copy_one(b, basefd, rel, st) : 0;
}

/* A directory's times and mode are set after its contents (they change it). */
static int build_leave(void *arg, int basefd, const char *rel, const struct stat *st)
{
	struct build *b = arg;
	if (b->copyfd < 0)
		return 0;
	int r = keep_meta(b->copyfd, rel, st);
	return r ? sfs_errf(b->err, r, "base workspace: %s: %s", rel, strerror(-r)) : 0;
}

static int build_tree(const char *base, const struct sfs_cow_hide *hide, const char *upper,
		      const char *copy, struct sfs_err *err)
{
	struct build b = {.hide = hide, .upperfd = -1, .copyfd = -1, .err = err};
	int r = 0;
	if (upper && (b.upperfd = open(upper, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = -errno;
	if (copy && (b.copyfd = open(copy, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = -errno;
	if (r)
		r = sfs_errf(err, r, "base workspace: %s", strerror(-r));
	/* with overlayfs and no patterns there is nothing to walk */
	else if (hide || copy)
		r = sfs_cow_walk(base, b.copyfd >= 0, build_visit, build_leave, &b, err);
	if (b.upperfd >= 0)
		close(b.upperfd);
	if (b.copyfd >= 0)
		close(b.copyfd);
	return r;
}

/* The merged root (overlay) takes upper's owner and mode: the base's. */
static int root_like(const char *base, const char *dir, struct sfs_err *err)
{
	struct stat st;
	if (stat(base, &st) < 0 || chown(dir, st.st_uid, st.st_gid) < 0 ||
	    chmod(dir, untrusted_perm(st.st_mode)) < 0)
		return sfs_errf(err, -errno, "base workspace: %s: %s", dir, strerror(errno));
	return 0;
}

int sfs_cow_create(const char *statedir, const char *base, const char *hide, const char *hide_case,
		   char *merged, struct sfs_err *err)
{
	struct cow_meta m = {0};
	if (!realpath(base, m.base))
		return sfs_errf(err, -errno, "new: base=%s: %s", base, strerror(errno));
	m.hide = (char *)(hide && *hide ? hide : NULL);
	struct sfs_cow_hide *h = NULL;
	int r = sfs_cow_hide_case(hide_case, &m.nocase, err);
	if (!r)
		r = sfs_cow_hide_parse(hide, m.nocase, &h, err);
	if (r)
		return r;
	char dir[PATH_MAX], upper[PATH_MAX], work[PATH_MAX];
	cow_path(statedir, NULL, dir);
	cow_path(statedir, "upper", upper);
	cow_path(statedir, "work", work);
	cow_path(statedir, "merged", merged);
	sfs_rm_rf(dir);
	r = sfs_mkdir_p(upper, 0755);
	if (!r)
		r = sfs_mkdir_p(work, 0700);
	if (!r)
		r = sfs_mkdir_p(merged, 0755);
	if (r) {
		r = sfs_errf(err, r, "base workspace: mkdir %s: %s", dir, strerror(-r));
		goto out;
	}
	const char *mode = sfs_opt_get("cow.mode");
	m.overlay = strcmp(mode, "copy") != 0;
	if (m.overlay) {
		/* an upper layer the kernel cannot use (no whiteouts there, no
		 * overlayfs, no privilege) is found here: the copy instead */
		struct sfs_err oerr = {0};
		int o = root_like(m.base, upper, &oerr);
		if (!o)
			o = build_tree(m.base, h, upper, NULL, &oerr);
		if (!o)
			o = mount_overlay(statedir, m.base, &oerr);
		if (o) {
			sfs_log(SFS_LOG_WARN, "%s; copying the base instead", oerr.msg);
			m.overlay = false;
			sfs_rm_rf(upper);
			sfs_rm_rf(work);
		}
	}
	if (!r && !m.overlay) {
		r = build_tree(m.base, h, NULL, merged, err);
		if (!r)
			r = root_like(m.base, merged, err);
	}
	if (!r)
		r = meta_save(statedir, &m, err);
out:
	sfs_cow_hide_free(h);
	if (r) {
		struct sfs_err ignored = {0};
		sfs_cow_remove(statedir, &ignored);
	}
	return r;
}

int sfs_cow_resume(const char *statedir, char *merged, struct sfs_err *err)
{
	struct cow_meta m = {0};
	int r = meta_load(statedir, &m, err);
	if (r)
		return r;
	free(m.hide);
	cow_path(statedir, "merged", merged);
	if (!m.overlay || is_overlay_mount(merged))
		return 0; /* still mounted: runs that outlived a daemon keep their view */
	struct stat st;
	if (stat(m.base, &st) < 0 || !S_ISDIR(st.st_mode))
		return sfs_errf(err, -ENOENT, "base workspace: the base %s is gone", m.base);
	return mount_overlay(statedir, m.base, err);
}

int sfs_cow_remove(const char *statedir, struct sfs_err *err)
{
	char dir[PATH_MAX], merged[PATH_MAX];
	cow_path(statedir, NULL, dir);
	cow_path(statedir, "merged", merged);
	int r = unmount_overlay(merged, err);
	if (r)
		return r;
	if (is_overlay_mount(merged))
		return sfs_errf(err, -EBUSY, "base workspace: %s is still mounted", merged);
	/* never crosses into a mount (FTW_MOUNT): the base cannot be reached */
	r = sfs_rm_rf(dir);
	return r ? sfs_errf(err, r, "base workspace: removing %s: %s", dir, strerror(-r)) : 0;
}
