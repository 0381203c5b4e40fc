#include "audit.h"
#include "ino.h"

#include "../ctl/audit.h"
#include "../ctl/tree.h"

#include <stdio.h>
#include <string.h>

static bool on;
static __thread bool armed;
static __thread int replied;

void fs_audit_init(void)
{
	on = audit_enabled();
}

void fs_audit_note_reply(int err)
{
	if (armed)
		replied = err;
}

/* "workspace/DIR/NAME" of name in directory ino (or of ino), and its
 * sandbox, taken (tree_put by the caller when *put). */
static struct sfs_sandbox *where(fuse_ino_t ino, const char *name, char *path, size_t len,
				 bool *put)
{
	struct sfs_sandbox *sb = NULL;
	char p[4096];
	*put = false;
	if (SFS_INO_KIND(ino) == SFS_K_WS) {
		unsigned serial;
		if (ws_where(ino, &serial, p, sizeof(p)) == 0 && (sb = tree_get_serial(serial)))
			*put = true;
	} else if (SFS_INO_KIND(ino) == SFS_K_RWS) {
		if (rws_where(ino, &sb, p, sizeof(p)) != 0)
			sb = NULL;
	}
	if (sb)
		snprintf(path, len, "%s%s%s", p, name ? "/" : "", name ? name : "");
	return sb;
}

void fs_audit_begin(struct fs_audit *a, fuse_req_t req, fuse_ino_t ino, const char *name,
		    const char *op)
{
	a->sb = NULL;
	a->detail[0] = '\0';
	if (!on)
		return;
	a->op = op;
	a->sb = where(ino, name, a->path, sizeof(a->path), &a->put);
	if (!a->sb)
		return;
	audit_set_caller(fuse_req_ctx(req)->uid);
	replied = 0;
	armed = true;
}

void fs_audit_to(struct fs_audit *a, fuse_ino_t ino, const char *name)
{
	if (!a->sb)
		return;
	char p[4200];
	bool put;
	struct sfs_sandbox *sb = where(ino, name, p, sizeof(p), &put);
	char w[4200];
	audit_word(sb ? p : "?", w, sizeof(w));
	snprintf(a->detail, sizeof(a->detail), "-> %s", w);
	if (put)
		tree_put(sb);
}

void fs_audit_detail(struct fs_audit *a, const char *text)
{
	if (a->sb)
		snprintf(a->detail, sizeof(a->detail), "%s", text);
}

void fs_audit_end(struct fs_audit *a)
{
	if (!a->sb)
		return;
	armed = false;
	audit_line(a->sb, a->op, a->path, replied, a->detail[0] ? a->detail : NULL);
	if (a->put)
		tree_put(a->sb);
	a->sb = NULL;
}
