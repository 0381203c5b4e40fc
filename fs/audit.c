#include "audit.h"
#include "ino.h"

#include "../ctl/audit.h"
#include "../ctl/tree.h"
#include "../providers/redact.h"

#include <stdio.h>
#include <stdlib.h>
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
	char path[4200], to[4200], w[4200], detail[4300];
	bool put, put_to = false;
	struct sfs_sandbox *sb = where(a->ino, a->name, path, sizeof(path), &put);
	if (!sb)
		return; /* its sandbox is gone, or the layer forgot the node */
	const char *d = a->detail;
	if (a->to_name) {
		struct sfs_sandbox *tsb = where(a->to_ino, a->to_name, to, sizeof(to), &put_to);
		/* redacted before audit_word escapes it (see audit_line) */
		char *rto = sfs_redact_values_dup(tsb ? to : "?");
		audit_word(rto ? rto : "?", w, sizeof(w));
		free(rto);
		snprintf(detail, sizeof(detail), "-> %s", w);
		d = detail;
		if (put_to)
			tree_put(tsb);
	}
	audit_line(sb, a->op, path, replied, d);
	if (put)
		tree_put(sb);
}
