/*
 * A host directory into the store, fd-based and never following a symlink:
 * one tree per directory, one blob per file (read only when the stat cache
 * does not vouch for it), symlinks as links, empty directories as git's
 * empty tree.
 */
#include "internal.h"

#include "../../providers/options.h"
#include "../../providers/untrusted/tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool rec_ignored(const char *name)
{
	return strcmp(name, ".git") == 0;
}

git_filemode_t rec_filemode(const struct stat *st)
{
	if (S_ISREG(st->st_mode))
		return (st->st_mode & S_IXUSR) ? GIT_FILEMODE_BLOB_EXECUTABLE : GIT_FILEMODE_BLOB;
	if (S_ISLNK(st->st_mode))
		return GIT_FILEMODE_LINK;
	if (S_ISDIR(st->st_mode))
		return GIT_FILEMODE_TREE;
	return 0;
}

static int sys_err(struct rec *r, int e, const char *what, const char *rel)
{
	return sfs_errf(r->err, -e, "snapshot: %s %s: %s", what, *rel ? rel : ".", strerror(e));
}

/* rel/name, or name at the root. */
static char *join(const char *rel, const char *name)
{
	char *p;
	if (asprintf(&p, "%s%s%s", rel, *rel ? "/" : "", name) < 0)
		return NULL;
	return p;
}

int rec_open(int dirfd, const char *name, struct stat *st)
{
	int fd = untrusted_open_file(dirfd, name, st);
	if (fd < 0)
		return fd;
	/* a run's `truncate -s 100G` would be hashed and stored whole:
	 * refused, the size left in st for the message */
	if ((double)st->st_size > sfs_opt_get_double("snapshot.max_file_size")) {
		close(fd);
		return -EFBIG;
	}
	return fd;
}

static int stream_chunk(void *ctx, const void *data, size_t len)
{
	git_odb_stream *ws = ctx;
	return git_odb_stream_write(ws, data, len) < 0 ? -EIO : 0;
}

/* The bytes of the regular file open as fd (size bytes) into the store,
 * read with pread: a file truncated meanwhile is -EAGAIN, never a SIGBUS. */
static int store_fd(struct rec *r, int fd, uint64_t size, git_oid *out)
{
	git_odb_stream *ws = NULL;
	int rc = git_odb_open_wstream(&ws, r->odb, (git_object_size_t)size, GIT_OBJECT_BLOB);
	if (rc < 0)
		return st_error(r->err, rc, "snapshot: writing a blob");
	int e = untrusted_read_each(fd, size, stream_chunk, ws);
	if (!e && (rc = git_odb_stream_finalize_write(out, ws)) < 0)
		e = -EIO;
	git_odb_stream_free(ws);
	return e;
}

int rec_blob(struct rec *r, int dirfd, const char *name, const char *rel, const struct stat *st,
	     git_oid *out)
{
	if (S_ISLNK(st->st_mode)) {
		char target[4096];
		ssize_t n = readlinkat(dirfd, name, target, sizeof(target));
		if (n < 0)
			return sys_err(r, errno, "readlink", rel);
		int rc = git_odb_write(out, r->odb, target, (size_t)n, GIT_OBJECT_BLOB);
		return rc < 0 ? st_error(r->err, rc, "snapshot: writing a blob") : 0;
	}
	if (r->cache && scache_hit(r->cache, rel, st, out))
		return 0;
	struct stat now;
	int fd = rec_open(dirfd, name, &now);
	if (fd == -EAGAIN)
		return sfs_errf(r->err, fd, "snapshot: %s changed while it was read", rel);
	if (fd == -EFBIG)
		return sfs_errf(r->err, fd,
				"snapshot: %s is %llu bytes, above snapshot.max_file_size (%.0f); "
				"a mount with -o snapshot.max_file_size=BYTES takes it",
				rel, (unsigned long long)now.st_size,
				sfs_opt_get_double("snapshot.max_file_size"));
	if (fd < 0)
		return sys_err(r, -fd, "read", rel);
	int e = store_fd(r, fd, (uint64_t)now.st_size, out);
	close(fd);
	if (e == -EAGAIN)
		return sfs_errf(r->err, e, "snapshot: %s changed while it was read", rel);
	if (e == -EIO)
		return st_error(r->err, -1, "snapshot: writing a blob");
	if (e)
		return sys_err(r, -e, "read", rel);
	r->st.hashed++;
	if (r->cache && scache_note(r->cache, rel, &now, out))
		return sfs_errf(r->err, -ENOMEM, "out of memory");
	return 0;
}

static int note_mode(struct rec *r, const char *rel, const struct stat *st, git_filemode_t fm)
{
	mode_t perm = st->st_mode & 07777;
	if (fm == GIT_FILEMODE_LINK || perm == st_implied_perm(fm))
		return 0;
	int rc = sfs_buf_printf(&r->modes, "%o %s", (unsigned)perm, rel);
	if (!rc)
		rc = sfs_buf_addc(&r->modes, '\0');
	return rc ? sfs_errf(r->err, -ENOMEM, "out of memory") : 0;
}

/* One entry of a directory into the builder. */
static int rec_entry(struct rec *r, git_treebuilder *b, int dirfd, const char *name,
		     const char *rel)
{
	struct stat st;
	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : sys_err(r, errno, "stat", rel); /* gone meanwhile */
	git_filemode_t fm = rec_filemode(&st);
	if (!fm) {
		r->st.skipped++;
		return 0;
	}
	git_oid oid;
	int rc;
	if (fm == GIT_FILEMODE_TREE) {
		int fd = untrusted_open_dir(dirfd, name);
		if (fd < 0)
			return sys_err(r, -fd, "open", rel);
		rc = rec_tree(r, fd, rel, &oid);
		close(fd);
	} else {
		rc = rec_blob(r, dirfd, name, rel, &st, &oid);
		if (!rc) {
			r->st.files++;
			r->st.bytes += (uint64_t)st.st_size;
		}
	}
	if (!rc)
		rc = note_mode(r, rel, &st, fm);
	if (rc)
		return rc;
	int gr = git_treebuilder_insert(NULL, b, name, &oid, fm);
	if (gr < 0) {
		/* a name git refuses in a tree (".GIT", "..."): left out, counted */
		sfs_log(SFS_LOG_WARN, "snapshot: %s left out: %s", rel,
			git_error_last() ? git_error_last()->message : "refused");
		r->st.skipped++;
	}
	return 0;
}

int rec_tree(struct rec *r, int dirfd, const char *rel, git_oid *out)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return sys_err(r, e, "open", rel);
	}
	git_treebuilder *b = NULL;
	int rc = git_treebuilder_new(&b, r->repo, NULL);
	if (rc < 0) {
		closedir(d);
		return st_error(r->err, rc, "snapshot: a tree");
	}
	struct dirent *e;
	int ret = 0;
	while (!ret && (errno = 0, e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
		    rec_ignored(e->d_name))
			continue;
		char *path = join(rel, e->d_name);
		ret = path ? rec_entry(r, b, dirfd, e->d_name, path)
			   : sfs_errf(r->err, -ENOMEM, "out of memory");
		free(path);
	}
	if (!ret && errno)
		ret = sys_err(r, errno, "read", rel);
	if (!ret && (rc = git_treebuilder_write(out, b)) < 0)
		ret = st_error(r->err, rc, "snapshot: writing a tree");
	git_treebuilder_free(b);
	closedir(d);
	return ret;
}
