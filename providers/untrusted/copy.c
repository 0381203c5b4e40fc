/*
 * A copy of a sandbox's tree (see untrusted_copy_tree in tree.h): what a
 * local fork makes of its source's workspace while runs in the source may
 * still be changing it.  One walk by fds, an explicit stack of directories
 * (no recursion: the tree's depth is the sandbox's to choose), each entry
 * opened O_PATH beneath the directory being read and its type taken on
 * that fd.  The destination is a fresh directory of the daemon's: created
 * with mkdirat/openat(O_EXCL)/symlinkat on the one component, relative to
 * the directory fds of the copy, never through a joined path.
 */
#include "tree.h"

#include "../strbuf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/xattr.h>
#include <unistd.h>

/* One pread/pwrite when neither a reflink nor copy_file_range works. */
#define CHUNK ((size_t)256 * 1024)

/* A directory being copied: read from src, its copy open as dst. */
struct frame {
	DIR *src;
	int dst;
	struct stat st; /* the source directory's, set on dst when it is left */
	size_t pathlen; /* the walk's path up to this directory's name */
};

/* A file with more than one link, copied once: where its copy is. */
struct link_entry {
	dev_t dev;
	ino_t ino;
	char *rel; /* beneath the destination root; NULL: a free slot */
};

struct copy {
	int dstroot;
	struct frame *stack;
	size_t depth, cap;
	struct sfs_buf path; /* of the entry being copied, from the root */
	struct link_entry *links;
	size_t nlinks, linkcap; /* linkcap: a power of two, or 0 */
	char *buf;		/* the pread/pwrite chunk, made when first needed */
	bool too_deep;		/* the walk stopped at UNTRUSTED_DEPTH_MAX */
	struct untrusted_copy_stats *stats;
};

/* ---- hard links: an open-addressing table of (dev, ino) -> rel ---- */

static size_t link_slot(const struct copy *c, dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)ino * 0x9E3779B97F4A7C15ull) ^ (uint64_t)dev;
	size_t i = (size_t)(h ^ (h >> 29)) & (c->linkcap - 1);
	while (c->links[i].rel && (c->links[i].dev != dev || c->links[i].ino != ino))
		i = (i + 1) & (c->linkcap - 1);
	return i;
}

static const char *link_find(const struct copy *c, dev_t dev, ino_t ino)
{
	return c->linkcap ? c->links[link_slot(c, dev, ino)].rel : NULL;
}

/* Records where (dev, ino) was copied to: the path being copied. */
static int link_add(struct copy *c, dev_t dev, ino_t ino)
{
	if ((c->nlinks + 1) * 2 > c->linkcap) {
		/* half full at most: probes stay short */
		size_t cap = c->linkcap ? c->linkcap * 2 : 64;
		struct link_entry *old = c->links;
		size_t oldcap = c->linkcap;
		c->links = calloc(cap, sizeof(*c->links));
		if (!c->links) {
			c->links = old;
			return -ENOMEM;
		}
		c->linkcap = cap;
		for (size_t i = 0; i < oldcap; i++)
			if (old[i].rel)
				c->links[link_slot(c, old[i].dev, old[i].ino)] = old[i];
		free(old);
	}
	size_t i = link_slot(c, dev, ino);
	if (c->links[i].rel)
		return 0; /* copied again (no link could be made): the first stays */
	char *rel = strdup(c->path.buf);
	if (!rel)
		return -ENOMEM;
	c->links[i] = (struct link_entry){.dev = dev, .ino = ino, .rel = rel};
	c->nlinks++;
	return 0;
}

/* Another name in dir for the copy made of the same source file: linkat on
 * the copy's fd (found again beneath the destination root, which no one
 * else writes to yet).  Non-zero when it cannot be done (AT_EMPTY_PATH
 * needs CAP_DAC_READ_SEARCH, the path may exceed PATH_MAX, the copy's
 * filesystem may refuse another link): the file is then copied again. */
static int link_again(struct copy *c, const char *rel, int dir, const char *name)
{
	int fd = untrusted_open(c->dstroot, rel, O_PATH);
	if (fd < 0)
		return fd;
	struct stat st;
	int r = fstat(fd, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0 : -EAGAIN;
	if (!r && linkat(fd, "", dir, name, AT_EMPTY_PATH) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* ---- metadata ---- */

/* One POSIX ACL (an extended attribute the kernel checks) from src to dst;
 * none there, or a filesystem without ACLs, is not an error.  Other
 * extended attributes (security.capability among them) are never copied. */
static int copy_acl(int src, int dst, const char *name)
{
	char small[512];
	char *val = small;
	ssize_t n = fgetxattr(src, name, small, sizeof(small));
	if (n < 0 && errno == ERANGE) {
		n = fgetxattr(src, name, NULL, 0);
		val = n > 0 ? malloc((size_t)n) : NULL;
		if (n > 0 && !val)
			return -ENOMEM;
		if (val)
			n = fgetxattr(src, name, val, (size_t)n);
	}
	int r = 0;
	if (n < 0)
		r = errno == ENODATA || errno == EOPNOTSUPP ? 0 : -errno;
	else if (n > 0 && fsetxattr(dst, name, val, (size_t)n, 0) < 0)
		r = errno == EOPNOTSUPP ? 0 : -errno;
	if (val != small)
		free(val);
	return r;
}

/* The source's owner, mode (never 06000), ACLs and times on the copy open
 * as dst (a file or a directory the copy made), through dst itself.
 * Owner first: a chown may clear mode bits.  Times last: the rest would
 * not change them, but a directory's contents would, so a directory gets
 * this when it is left. */
static int set_meta(int src, int dst, const struct stat *st)
{
	/* not root: the copy stays the daemon's user's, as cp -a left it */
	if (fchown(dst, st->st_uid, st->st_gid) < 0 && errno != EPERM)
		return -errno;
	if (fchmod(dst, untrusted_perm(st->st_mode)) < 0)
		return -errno;
	int r = copy_acl(src, dst, "system.posix_acl_access");
	if (!r && S_ISDIR(st->st_mode))
		r = copy_acl(src, dst, "system.posix_acl_default");
	struct timespec t[2] = {st->st_atim, st->st_mtim};
	if (!r && futimens(dst, t) < 0)
		r = -errno;
	return r;
}

/* ---- bytes ---- */

/* Copies [off, off + len) of in to the same offsets of out; *done is how
 * many bytes were copied, fewer than len when in ended first (it was
 * truncated meanwhile). */
static int copy_range(struct copy *c, int in, int out, off_t off, off_t len, off_t *done)
{
	static const off_t step = (off_t)1 << 30;
	*done = 0;
	bool plain = c->buf != NULL; /* copy_file_range failed before: don't ask again */
	while (!plain && *done < len) {
		off_t a = off + *done, b = a;
		size_t want = (size_t)(len - *done < step ? len - *done : step);
		ssize_t n = copy_file_range(in, &a, out, &b, want, 0);
		if (n == 0)
			return 0; /* the end of in: shorter than its fstat said */
		if (n > 0) {
			*done += n;
			continue;
		}
		if (errno == EINTR)
			continue;
		/* another filesystem, or one that cannot: read and write */
		if (errno != EXDEV && errno != EINVAL && errno != EOPNOTSUPP && errno != ENOSYS)
			return -errno;
		c->buf = malloc(CHUNK);
		if (!c->buf)
			return -ENOMEM;
		plain = true;
	}
	while (*done < len) {
		size_t want = (size_t)(len - *done) < CHUNK ? (size_t)(len - *done) : CHUNK;
		ssize_t n = pread(in, c->buf, want, off + *done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : 0;
		for (ssize_t w = 0; w < n;) {
			ssize_t k = pwrite(out, c->buf + w, (size_t)(n - w), off + *done + w);
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0)
				return -errno;
			w += k;
		}
		*done += n;
	}
	return 0;
}

/*
 * The bytes of the regular file in (size bytes when it was opened) into the
 * empty out.  A reflink first (the filesystem shares the blocks); else the
 * data between holes (SEEK_DATA/SEEK_HOLE), so a sparse file stays sparse
 * and a huge one of holes costs nothing.  Bytes appended after the open are
 * not copied (a run appending forever cannot keep the fork going); a file
 * truncated meanwhile is copied as far as it goes, never read past its end
 * (pread and copy_file_range just return 0 there; no mmap, no SIGBUS).
 */
static int copy_bytes(struct copy *c, int in, int out, off_t size)
{
	if (size > 0 && ioctl(out, FICLONE, in) == 0) {
		struct stat st;
		if (fstat(out, &st) < 0)
			return -errno;
		c->stats->bytes += (uint64_t)st.st_size;
		return 0;
	}
	off_t off = 0, end = 0; /* end: how far the copy's bytes go */
	bool shrunk = false;
	while (off < size && !shrunk) {
		off_t data = lseek(in, off, SEEK_DATA), hole;
		if (data < 0 && errno == ENXIO)
			break; /* holes to the end, or the end came sooner */
		if (data < 0 && errno != EINVAL && errno != EOPNOTSUPP)
			return -errno;
		if (data < 0) {
			data = off; /* no SEEK_DATA here: all of it is data */
			hole = size;
		} else {
			hole = lseek(in, data, SEEK_HOLE);
			if (hole < 0 || hole > size)
				hole = size;
		}
		if (data >= size)
			break;
		off_t done;
		int r = copy_range(c, in, out, data, hole - data, &done);
		if (r)
			return r;
		c->stats->bytes += (uint64_t)done;
		end = data + done;
		shrunk = done < hole - data;
		off = hole;
	}
	if (!shrunk) {
		/* a hole at the end, or the end came sooner: how long in is now,
		 * never more than size, never less than what was copied */
		struct stat now;
		if (fstat(in, &now) < 0)
			return -errno;
		off_t want = now.st_size < size ? now.st_size : size;
		end = want > end ? want : end;
	}
	return ftruncate(out, end) < 0 ? -errno : 0;
}

/* ---- the walk ---- */

/* The regular file name in dir (open O_PATH as pathfd) for reading.
 * Through /proc/self/fd: the very inode whose type was checked on pathfd,
 * not whatever the name holds by now (a FIFO swapped in is not opened).
 * Without /proc, by its name beneath dir, checked again.  O_NONBLOCK
 * either way: a write lease the sandbox holds on the file then makes the
 * open -EAGAIN (left out, counted as changed) instead of a 45 s wait. */
static int open_for_read(int pathfd, int dir, const char *name, struct stat *st)
{
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", pathfd);
	int fd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		return -errno;
	if (fd < 0)
		return untrusted_open_file(dir, name, st);
	int r = fstat(fd, st) < 0 ? -errno : S_ISREG(st->st_mode) ? 0 : -EAGAIN;
	if (r) {
		close(fd);
		return r;
	}
	return fd;
}

static int copy_file(struct copy *c, int pathfd, const struct stat *pst, struct frame *f,
		     const char *name)
{
	int dir = dirfd(f->src);
	if (pst->st_nlink > 1) {
		const char *first = link_find(c, pst->st_dev, pst->st_ino);
		if (first && link_again(c, first, f->dst, name) == 0) {
			c->stats->links++;
			return 0;
		}
	}
	struct stat st;
	int in = open_for_read(pathfd, dir, name, &st);
	if (in == -EAGAIN || in == -ENOENT) {
		c->stats->changed++; /* replaced or removed since it was listed */
		return 0;
	}
	if (in < 0)
		return in;
	int out = openat(f->dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int r = out < 0 ? -errno : copy_bytes(c, in, out, st.st_size);
	if (!r)
		r = set_meta(in, out, &st);
	if (!r && st.st_nlink > 1)
		r = link_add(c, st.st_dev, st.st_ino);
	if (!r)
		c->stats->files++;
	if (out >= 0)
		close(out);
	close(in);
	return r;
}

static int copy_symlink(struct copy *c, int pathfd, const struct stat *st, struct frame *f,
			const char *name)
{
	/* on the heap: PATH_MAX bytes is much for a worker's stack */
	char *target = malloc(PATH_MAX);
	if (!target)
		return -ENOMEM;
	/* the link's own text, read through its O_PATH fd: never followed */
	ssize_t n = readlinkat(pathfd, "", target, PATH_MAX);
	int r = 0;
	if (n < 0)
		r = -errno;
	else if ((size_t)n >= PATH_MAX)
		r = -ENAMETOOLONG; /* no room for the NUL: longer than a link can be */
	else
		target[(size_t)n] = '\0';
	if (!r && symlinkat(target, f->dst, name) < 0)
		r = -errno;
	free(target);
	struct timespec t[2] = {st->st_atim, st->st_mtim};
	if (!r && fchownat(f->dst, name, st->st_uid, st->st_gid, AT_SYMLINK_NOFOLLOW) < 0 &&
	    errno != EPERM)
		r = -errno;
	if (!r && utimensat(f->dst, name, t, AT_SYMLINK_NOFOLLOW) < 0)
		r = -errno;
	if (!r)
		c->stats->symlinks++;
	return r;
}

/* Opens the directory name of the directory on top of the stack, and
 * makes its copy, and pushes them: the walk goes on inside it.  Opened
 * O_DIRECTORY beneath its parent: whatever was swapped in for it since it
 * was looked at is refused before it is opened. */
static int enter_dir(struct copy *c, const char *name, size_t pathlen)
{
	if (c->depth >= UNTRUSTED_DEPTH_MAX) {
		c->too_deep = true;
		return -ENAMETOOLONG;
	}
	if (c->depth == c->cap) {
		size_t cap = c->cap * 2;
		struct frame *s = realloc(c->stack, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		c->stack = s;
		c->cap = cap;
	}
	int dir = dirfd(c->stack[c->depth - 1].src), dst = c->stack[c->depth - 1].dst;
	int in = untrusted_open_dir(dir, name);
	if (in == -ENOENT || in == -ENOTDIR || in == -ELOOP) {
		c->stats->changed++;
		return 0;
	}
	if (in == -EXDEV) {
		c->stats->mounts++; /* a mount made on it meanwhile */
		return 0;
	}
	if (in < 0)
		return in;
	struct frame n = {.pathlen = pathlen, .dst = -1};
	int r = fstat(in, &n.st) < 0 ? -errno : 0;
	/* its own mode when it is left: until then the daemon's to fill */
	if (!r && mkdirat(dst, name, 0700) < 0)
		r = -errno;
	if (!r && (n.dst = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		r = -errno;
	if (!r && !(n.src = fdopendir(in)))
		r = -errno;
	if (r) {
		close(in);
		if (n.dst >= 0)
			close(n.dst);
		return r;
	}
	c->stack[c->depth++] = n;
	c->stats->dirs++;
	return 0;
}

/* One entry of the directory on top of the stack; c->path names it. */
static int copy_entry(struct copy *c, const char *name, size_t pathlen)
{
	struct frame *f = &c->stack[c->depth - 1];
	int pathfd = untrusted_open(dirfd(f->src), name, O_PATH);
	if (pathfd == -ENOENT) {
		c->stats->changed++;
		return 0;
	}
	if (pathfd == -EXDEV) {
		c->stats->mounts++; /* not entered: another filesystem's files */
		return 0;
	}
	if (pathfd < 0)
		return pathfd;
	struct stat st;
	int r = fstat(pathfd, &st) < 0 ? -errno : 0;
	if (r)
		;
	else if (S_ISREG(st.st_mode))
		r = copy_file(c, pathfd, &st, f, name);
	else if (S_ISLNK(st.st_mode))
		r = copy_symlink(c, pathfd, &st, f, name);
	else if (S_ISDIR(st.st_mode))
		r = enter_dir(c, name, pathlen); /* f moves if the stack grows */
	else
		c->stats->special++; /* FIFO, socket, device: never opened */
	close(pathfd);
	/* the same name listed twice (renames while the directory was read):
	 * the first copy stands */
	if (r == -EEXIST) {
		c->stats->changed++;
		r = 0;
	}
	return r;
}

/* The directory on top of the stack is done: its metadata, then popped. */
static int leave_dir(struct copy *c)
{
	struct frame *f = &c->stack[--c->depth];
	int r = set_meta(dirfd(f->src), f->dst, &f->st);
	closedir(f->src);
	close(f->dst);
	if (r)
		return r; /* c->path still names it */
	c->path.len = f->pathlen;
	if (c->path.buf)
		c->path.buf[c->path.len] = '\0';
	return 0;
}

static int walk(struct copy *c)
{
	while (c->depth) {
		struct frame *f = &c->stack[c->depth - 1];
		errno = 0;
		struct dirent *e = readdir(f->src);
		if (!e) {
			if (errno)
				return -errno;
			int r = leave_dir(c);
			if (r)
				return r;
			continue;
		}
		const char *name = e->d_name;
		if (!strcmp(name, ".") || !strcmp(name, ".."))
			continue;
		size_t pathlen = c->path.len;
		if (strlen(name) > NAME_MAX)
			return -ENAMETOOLONG; /* no filesystem gives one; never passed on */
		int r = (pathlen ? sfs_buf_addc(&c->path, '/') : 0) ?: sfs_buf_adds(&c->path, name);
		if (r)
			return r;
		size_t depth = c->depth;
		r = copy_entry(c, name, pathlen);
		if (r)
			return r; /* c->path names the entry */
		if (c->depth == depth) {
			/* not entered: the next name replaces this one */
			c->path.len = pathlen;
			c->path.buf[pathlen] = '\0';
		}
	}
	return 0;
}

int untrusted_copy_tree(int srcroot, int dstroot, struct untrusted_copy_stats *stats,
			struct sfs_err *err)
{
	struct untrusted_copy_stats ignored;
	struct copy c = {.dstroot = dstroot, .stats = stats ? stats : &ignored};
	*c.stats = (struct untrusted_copy_stats){0};
	c.cap = 16;
	c.stack = malloc(c.cap * sizeof(*c.stack));
	if (!c.stack)
		return sfs_errf(err, -ENOMEM, "copying: out of memory");
	/* the root: its metadata goes to dstroot when it is left, as cp -a
	 * SRC/. DST did */
	struct frame root = {.dst = -1};
	int in = untrusted_open_dir(srcroot, "");
	int r = in < 0 ? in : fstat(in, &root.st) < 0 ? -errno : 0;
	if (!r && (root.dst = untrusted_open_dir(dstroot, "")) < 0)
		r = root.dst;
	if (!r && !(root.src = fdopendir(in)))
		r = -errno;
	if (r) {
		if (in >= 0)
			close(in);
		if (root.dst >= 0)
			close(root.dst);
		free(c.stack);
		return sfs_errf(err, r, "copying: the workspace: %s", strerror(-r));
	}
	c.stack[c.depth++] = root;
	r = walk(&c);
	if (r) {
		char where[512];
		sfs_escape_text(c.path.buf ? c.path.buf : ".", c.path.buf ? c.path.len : 1, where,
				sizeof(where));
		if (c.too_deep)
			sfs_errf(err, r, "copying %s: more than %d directories deep", where,
				 UNTRUSTED_DEPTH_MAX);
		else
			sfs_errf(err, r, "copying %s: %s", where, strerror(-r));
	}
	while (c.depth) {
		struct frame *f = &c.stack[--c.depth];
		closedir(f->src);
		close(f->dst);
	}
	free(c.stack);
	for (size_t i = 0; i < c.linkcap; i++)
		free(c.links[i].rel);
	free(c.links);
	free(c.buf);
	sfs_buf_free(&c.path);
	return r;
}
