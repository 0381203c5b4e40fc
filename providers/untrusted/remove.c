/*
 * Removal of a name in a tree a sandbox shaped (see untrusted_remove in
 * tree.h), rm -rf by fds: each directory is opened beneath its parent's
 * fd, emptied with unlinkat on its own fd, then removed from its parent's.
 * A path joined from names (nftw, rm) would follow a symlink planted on
 * the way; a name here is one component of a directory already open.
 */
#include "tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A directory being emptied; name is its name in the one below it on the
 * stack (NULL for the first, whose parent is the caller's). */
struct rm_frame {
	DIR *d;
	char *name;
	bool removed;	 /* an entry went during this pass over it */
	unsigned passes; /* over it, from the start */
};

/* Empties the directory open as fd (which it closes), whatever depth. */
static int empty_dir(int fd)
{
	size_t depth = 0, cap = 16;
	struct rm_frame *st = malloc(cap * sizeof(*st));
	if (!st) {
		close(fd);
		return -ENOMEM;
	}
	st[0] = (struct rm_frame){.d = fdopendir(fd)};
	if (!st[0].d) {
		int e = errno;
		close(fd);
		free(st);
		return -e;
	}
	depth = 1;
	int r = 0;
	while (!r && depth) {
		struct rm_frame *f = &st[depth - 1];
		errno = 0;
		struct dirent *e = readdir(f->d);
		if (!e && errno) {
			r = -errno;
			break;
		}
		if (!e && f->removed && ++f->passes < 4) {
			/* a filesystem may skip an entry when another goes
			 * during readdir: once more, until a pass removes
			 * nothing (a few times: something adding names as
			 * fast as they go must not keep the daemon here) */
			f->removed = false;
			rewinddir(f->d);
			continue;
		}
		if (!e) {
			closedir(f->d);
			depth--;
			if (depth && unlinkat(dirfd(st[depth - 1].d), f->name, AT_REMOVEDIR) < 0 &&
			    errno != ENOENT)
				r = -errno;
			if (depth)
				st[depth - 1].removed = true;
			free(f->name);
			continue;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dirfd(f->d), e->d_name, 0) == 0) {
			f->removed = true;
			continue;
		}
		if (errno == ENOENT)
			continue; /* gone meanwhile */
		if (errno != EISDIR) {
			r = -errno;
			break;
		}
		/* a directory: emptied first, by its own fd */
		if (depth >= UNTRUSTED_DEPTH_MAX) {
			r = -ENAMETOOLONG;
			break;
		}
		if (depth == cap) {
			struct rm_frame *s = realloc(st, cap * 2 * sizeof(*s));
			if (!s) {
				r = -ENOMEM;
				break;
			}
			st = s;
			cap *= 2;
			f = &st[depth - 1];
		}
		int sub = untrusted_open_dir(dirfd(f->d), e->d_name);
		if (sub == -ENOENT)
			continue; /* gone meanwhile */
		if (sub < 0) {
			r = sub;
			break;
		}
		struct rm_frame n = {.name = strdup(e->d_name)};
		n.d = n.name ? fdopendir(sub) : NULL;
		if (!n.d) {
			r = n.name ? -errno : -ENOMEM;
			close(sub);
			free(n.name);
			break;
		}
		st[depth++] = n;
	}
	while (depth) {
		closedir(st[--depth].d);
		free(st[depth].name);
	}
	free(st);
	return r;
}

int untrusted_remove(int rootfd, const char *rel)
{
	if (!rel || !*rel)
		return -EINVAL;
	const char *slash = strrchr(rel, '/');
	const char *base = slash ? slash + 1 : rel;
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return -EINVAL;
	char *parent = slash ? strndup(rel, (size_t)(slash - rel)) : NULL;
	if (slash && !parent)
		return -ENOMEM;
	int dir = untrusted_open(rootfd, parent ? parent : "", O_PATH | O_DIRECTORY);
	free(parent);
	if (dir < 0)
		return dir == -ENOENT ? 0 : dir;
	int r = 0;
	if (unlinkat(dir, base, 0) < 0 && errno != ENOENT) {
		if (errno != EISDIR) {
			r = -errno;
		} else {
			int fd = untrusted_open_dir(dir, base);
			r = fd == -ENOENT ? 0 : fd < 0 ? fd : empty_dir(fd);
			if (!r && unlinkat(dir, base, AT_REMOVEDIR) < 0 && errno != ENOENT)
				r = -errno;
		}
	}
	close(dir);
	return r;
}
