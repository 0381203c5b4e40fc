/*
 * A host directory into the store, fd-based and never following a symlink:
 * one tree per directory, one blob per file (read only when the stat cache
 * does not vouch for it), symlinks as links, empty directories as git's
 * empty tree.
 */
#include "internal.h"

#include "../../providers/options.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

int rec_map(int dirfd, const char *name, void **data, size_t *len, struct stat *st)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	struct stat now;
	if (fstat(fd, &now) < 0 || !S_ISREG(now.st_mode)) {
		close(fd);
		return -EAGAIN; /* replaced by something else meanwhile */
	}
	*len = (size_t)now.st_size;
	/* a run's `truncate -s 100G` would be mapped, hashed and (for a diff)
	 * held in memory whole: refused, the size left in *len for the message */
	if ((double)now.st_size > sfs_opt_get_double("snapshot.max_file_size")) {
		close(fd);
		return -EFBIG;
	}
	*data = *len ? mmap(NULL, *len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
	int e = errno;
	close(fd);
	if (*data == MAP_FAILED)
		return -e;
	if (st)
		*st = now;
	return 0;
}

void rec_unmap(void *data, size_t len)
{
	if (data)
		munmap(data, len);
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
	void *data;
	size_t len;
	int e = rec_map(dirfd, name, &data, &len, &now);
	if (e == -EAGAIN)
		return sfs_errf(r->err, e, "snapshot: %s changed while it was read", rel);
	if (e == -EFBIG)
		return sfs_errf(r->err, e,
				"snapshot: %s is %zu bytes, above snapshot.max_file_size (%.0f); "
				"a mount with -o snapshot.max_file_size=BYTES takes it",
				rel, len, sfs_opt_get_double("snapshot.max_file_size"));
	if (e)
		return sys_err(r, -e, "read", rel);
	int rc = git_odb_write(out, r->odb, data ? data : "", len, GIT_OBJECT_BLOB);
	rec_unmap(data, len);
	if (rc < 0)
		return st_error(r->err, rc, "snapshot: writing a blob");
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
		int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return sys_err(r, errno, "open", rel);
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
