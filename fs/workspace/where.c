/* fs/workspace/where.c: which sandbox a workspace node belongs to and its
 * path below the workspace root, for SANDBOX/audit lines (fs/audit.c). */
#include "internal.h"
#include "fs/audit.h"
#include "fs/ino.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The host path of each sandbox's workspace root, read once (a leaf lock). */
static pthread_mutex_t roots_mu = PTHREAD_MUTEX_INITIALIZER;
static struct root {
	uint32_t serial;
	char *path;
} * roots;
static size_t nroots;

static ssize_t fd_path(int fd, char *buf, size_t len)
{
	char proc[WS_PROC_PATH_MAX];
	ws_proc_path(proc, fd);
	ssize_t n = readlink(proc, buf, len - 1);
	if (n < 0 || (size_t)n >= len - 1)
		return -1;
	buf[n] = '\0';
	return n;
}

/* Copies the cached root of serial into buf; false when not cached yet. */
static bool cached_root(uint32_t serial, char *buf, size_t len)
{
	bool found = false;
	pthread_mutex_lock(&roots_mu);
	for (size_t i = 0; i < nroots && !found; i++)
		if (roots[i].serial == serial) {
			snprintf(buf, len, "%s", roots[i].path);
			found = true;
		}
	pthread_mutex_unlock(&roots_mu);
	return found;
}

static void cache_root(uint32_t serial, const char *path)
{
	char *copy = strdup(path);
	pthread_mutex_lock(&roots_mu);
	struct root *grown = copy ? realloc(roots, (nroots + 1) * sizeof(*grown)) : NULL;
	if (grown) {
		roots = grown;
		roots[nroots++] = (struct root){serial, copy};
		copy = NULL;
	}
	pthread_mutex_unlock(&roots_mu);
	free(copy);
}

int ws_where(fuse_ino_t ino, unsigned *serial, char *path, size_t len)
{
	char host[4096], root[4096];
	struct ws_node *n, *r = NULL;
	pthread_mutex_lock(&ws.lock);
	n = ws_find_id_locked(SFS_INO_WS_ID(ino));
	if (!n || n->gone || n->fd < 0) {
		pthread_mutex_unlock(&ws.lock);
		return -ENOENT;
	}
	n->users++;
	*serial = n->serial;
	bool have_root = cached_root(n->serial, root, sizeof(root));
	if (!have_root) {
		struct ws_sandbox_info *info = ws_sandbox_info_locked(n->serial);
		r = info ? ws_find_key_locked(n->serial, info->root_dev, info->root_ino) : NULL;
		if (r && (r->gone || r->fd < 0))
			r = NULL;
		if (r)
			r->users++;
	}
	pthread_mutex_unlock(&ws.lock);
	int err = fd_path(n->fd, host, sizeof(host)) < 0 ? -ENAMETOOLONG : 0;
	if (!have_root && r && fd_path(r->fd, root, sizeof(root)) >= 0) {
		cache_root(*serial, root);
		have_root = true;
	}
	if (r)
		ws_put(r);
	ws_put(n);
	if (err)
		return err;
	size_t rl = have_root ? strlen(root) : 0;
	if (have_root && !strcmp(host, root))
		snprintf(path, len, "workspace");
	else if (have_root && !strncmp(host, root, rl) && host[rl] == '/')
		snprintf(path, len, "workspace%s", host + rl);
	else /* renamed away meanwhile: the host's name says where it went */
		snprintf(path, len, "%s", host);
	return 0;
}
