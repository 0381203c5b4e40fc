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

/* DIR/NAME (or DIR when name is NULL) into out, cut at len. */
static const char *join(char *out, size_t len, const char *dir, const char *name)
{
	if (!name)
		return dir;
	size_t d = strnlen(dir, len - 1), n = strlen(name);
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
	*a = (struct fs_audit){.on = on, .ino = ino, .name = name, .op = op};
	if (!on)
		return;
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

void fs_audit_end(struct fs_audit *a)
{
	if (!a->on)
		return;
	armed = false;
	char dir[4096], path[4200], to_dir[4096], to[4200];
	bool put, put_to = false;
	struct sfs_sandbox *sb = where(a->ino, dir, sizeof(dir), &put);
	if (!sb)
		return; /* its sandbox is gone, or the layer forgot the node */
	const char *p = join(path, sizeof(path), dir, a->name);
	if (a->to_name) {
		/* an editor's save renames within one directory: found once */
		struct sfs_sandbox *tsb = sb;
		const char *td = dir;
		if (a->to_ino != a->ino) {
			tsb = where(a->to_ino, to_dir, sizeof(to_dir), &put_to);
			td = to_dir;
		}
		const char *t = tsb ? join(to, sizeof(to), td, a->to_name) : "?";
		audit_change(sb, a->op, p, replied, t);
		if (put_to)
			tree_put(tsb);
	} else {
		audit_line(sb, a->op, p, replied, a->detail);
	}
	if (put)
		tree_put(sb);
}
