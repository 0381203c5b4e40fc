#include "audit.h"
#include "ino.h"

#include "../ctl/audit.h"
#include "../ctl/tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool on;
static __thread bool armed;
static __thread int replied;

void fs_audit_init(void)
{
	on = audit_enabled();
	if (on)
		ws_where_start();
}

void fs_audit_stop(void)
{
	ws_where_stop();
}

void fs_audit_note_reply(int err)
{
	if (armed)
		replied = err;
}

/* The path of node ino ("workspace/a/b") into path and its sandbox, taken
 * (tree_put by the caller when *put); NULL when either is gone. */
static struct sfs_sandbox *where(fuse_ino_t ino, char *path, size_t len, bool *put)
{
	struct sfs_sandbox *sb = NULL;
	*put = false;
	if (SFS_INO_KIND(ino) == SFS_K_WS) {
		unsigned serial;
		if (ws_where(ino, &serial, path, len) == 0 && (sb = tree_get_serial(serial)))
			*put = true;
	} else if (SFS_INO_KIND(ino) == SFS_K_RWS) {
		if (rws_where(ino, &sb, path, len) != 0)
			sb = NULL;
	}
	return sb;
}

/* DIR/NAME (or DIR when name is NULL) into out, cut at len; dir is one of
 * struct fs_audit's buffers, so no longer than it. */
static const char *join(char *out, size_t len, const char *dir, const char *name)
{
	if (!name)
		return dir;
	size_t dmax = sizeof(((struct fs_audit *)0)->dir) - 1;
	size_t d = strnlen(dir, len - 1 < dmax ? len - 1 : dmax), n = strlen(name);
	memcpy(out, dir, d);
	if (d + 1 < len)
		out[d++] = '/';
	if (n > len - 1 - d)
		n = len - 1 - d;
	memcpy(out + d, name, n);
	out[d + n] = '\0';
	return out;
}

void fs_audit_begin(struct fs_audit *a, fuse_req_t req, fuse_ino_t ino, const char *name,
		    const char *op)
{
	/* field by field: the path buffers are written before they are read */
	a->on = on;
	a->ino = ino;
	a->name = name;
	a->op = op;
	a->to_ino = 0;
	a->to_name = NULL;
	a->detail = NULL;
	a->moves = a->resolved = false;
	if (!on)
		return;
	a->moves = !strcmp(op, "rename") || !strcmp(op, "rmdir");
	audit_set_caller(fuse_req_ctx(req)->uid);
	replied = 0;
	armed = true;
}

void fs_audit_to(struct fs_audit *a, fuse_ino_t ino, const char *name)
{
	a->to_ino = ino;
	a->to_name = name;
}

void fs_audit_detail(struct fs_audit *a, const char *text)
{
	a->detail = text;
}

/* The sandbox and directory paths of a's line (a->dir, a->to_dir). */
static void resolve(struct fs_audit *a)
{
	a->resolved = true;
	a->put_to = false;
	a->tsb = NULL;
	a->sb = where(a->ino, a->dir, sizeof(a->dir), &a->put);
	if (!a->sb || !a->to_name)
		return;
	if (a->to_ino == a->ino) {
		/* an editor's save renames within one directory: found once */
		a->tsb = a->sb;
		memcpy(a->to_dir, a->dir, strlen(a->dir) + 1);
	} else {
		a->tsb = where(a->to_ino, a->to_dir, sizeof(a->to_dir), &a->put_to);
	}
}

void fs_audit_call(struct fs_audit *a)
{
	if (!a->on || !a->moves)
		return;
	/* a rename or rmdir moves or removes what is in these directories,
	 * never the directories themselves: their paths now are their paths
	 * after it */
	resolve(a);
	ws_where_moves_begin();
}

void fs_audit_end(struct fs_audit *a)
{
	if (!a->on)
		return;
	armed = false;
	if (a->moves)
		ws_where_moves_end();
	if (!a->resolved)
		resolve(a);
	if (!a->sb) {
		if (a->put_to)
			tree_put(a->tsb);
		return; /* its sandbox is gone, or the layer forgot the node */
	}
	char path[4200], to[4200];
	const char *p = join(path, sizeof(path), a->dir, a->name);
	if (a->to_name) {
		const char *t = a->tsb ? join(to, sizeof(to), a->to_dir, a->to_name) : "?";
		audit_change(a->sb, a->op, p, replied, t);
	} else {
		audit_line(a->sb, a->op, p, replied, a->detail);
	}
	if (a->put_to)
		tree_put(a->tsb);
	if (a->put)
		tree_put(a->sb);
}
