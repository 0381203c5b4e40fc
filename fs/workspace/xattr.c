/* Extended attribute handlers. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "fs/workspace/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

/*
 * xattrs go through the /proc path of the node's O_PATH fd.  Resolving it
 * jumps to the exact inode and stops there, a symlink included: the link
 * itself, never its target (the path walk does not follow a trailing
 * symlink reached by a /proc magic link jump; virtiofsd relies on the same).
 * So symlinks take trusted.* and security.* as on the host; user.*, which
 * Linux refuses on symlinks, is refused by the kernel on the mount's inode
 * before it gets here.
 */
void ws_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
		 int flags)
{
	char path[WS_PROC_PATH_MAX];
	struct ws_node *n = ws_get(req, ino);
	int err = 0;

	if (!n)
		return;
	ws_proc_path(path, n->fd);
	ws_self_begin(n);
	if (setxattr(path, name, value, size, flags) == -1)
		err = errno;
	ws_self_end(n, n->fd, NULL);
	ws_put(n);
	ws_reply_err(req, err);
}

void ws_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	char path[WS_PROC_PATH_MAX];
	struct ws_node *n = ws_get(req, ino);
	int err = 0;

	if (!n)
		return;
	ws_proc_path(path, n->fd);
	ws_self_begin(n);
	if (removexattr(path, name) == -1)
		err = errno;
	ws_self_end(n, n->fd, NULL);
	ws_put(n);
	ws_reply_err(req, err);
}

/* getxattr (name != NULL) and listxattr share the size-probe protocol. */
static void ws_xattr_read(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	char path[WS_PROC_PATH_MAX];
	struct ws_node *n = ws_get(req, ino);
	char *value = NULL;
	ssize_t len = 0;
	int err = 0;

	if (!n)
		return;
	if (size) {
		value = malloc(size);
		if (!value) {
			err = ENOMEM;
			goto out;
		}
	}
	ws_proc_path(path, n->fd);
	len = name ? getxattr(path, name, value, size) : listxattr(path, value, size);
	if (len == -1)
		err = errno;
	/* The kernel asks for the ACL of every inode it checks (POSIX ACLs are
	 * on): on a host filesystem without ACLs, that is "no ACL", not an
	 * error that would fail the permission check. */
	if (err == EOPNOTSUPP && name && strncmp(name, "system.posix_acl_", 17) == 0)
		err = ENODATA;
out:
	ws_put(n);
	if (err)
		ws_reply_err(req, err);
	else if (size)
		fuse_reply_buf(req, value, (size_t)len);
	else
		fuse_reply_xattr(req, (size_t)len);
	free(value);
}

void ws_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	ws_xattr_read(req, ino, name, size);
}

void ws_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	ws_xattr_read(req, ino, NULL, size);
}
