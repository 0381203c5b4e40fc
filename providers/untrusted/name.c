/*
 * The check of names from a sandbox's or a provider's listing (name.h).  A
 * listing is untrusted: a name "../../etc/x" joined into a host path (the
 * remote snapshot mirror) or a remote one would reach outside the tree, a
 * name with '/' would make two components of one, "." and ".." are the
 * kernel's, and a name longer than NAME_MAX cannot be created here.
 */
#include "name.h"

#include "../err.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

bool sfs_name_ok(const char *name, size_t len)
{
	if (!name || !len || len > NAME_MAX)
		return false;
	if (name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')))
		return false;
	return !memchr(name, '/', len) && !memchr(name, '\0', len);
}

bool sfs_name_ok_str(const char *name)
{
	return name && sfs_name_ok(name, strnlen(name, NAME_MAX + 1));
}

bool sfs_rel_path_ok(const char *rel)
{
	if (!rel || !*rel || strnlen(rel, PATH_MAX) >= PATH_MAX)
		return false;
	for (const char *p = rel;;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (!sfs_name_ok(p, n))
			return false;
		if (!slash)
			return true;
		p = slash + 1;
	}
}

/* in[0..len) into out (cap >= 8): printable ASCII ('/' too) as it is, any
 * other byte, '"' and backslash as \xNN (a newline cannot start a fake log
 * line); cut with "..." where out is full. */
static void escape_into(char *out, size_t cap, const char *in, size_t len)
{
	size_t o = 0;
	for (size_t i = 0; in && i < len; i++) {
		unsigned char c = (unsigned char)in[i];
		if (o + 8 > cap) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, 5, "\\x%02x", c);
	}
	out[o] = '\0';
}

void sfs_name_drop(struct sfs_name_drops *d, const char *name, size_t len)
{
	if (d && !d->n++)
		escape_into(d->first, sizeof(d->first), name, len);
}

void sfs_name_drops_log(const struct sfs_name_drops *d, const char *provider, const char *sandbox,
			const char *dir)
{
	if (!d || !d->n)
		return;
	char where[256];
	escape_into(where, sizeof(where), dir && *dir ? dir : "/", dir && *dir ? strlen(dir) : 1);
	sfs_log(SFS_LOG_WARN,
		"%s: %s: the listing of %s leaves out %zu name(s) that cannot be file names "
		"(empty, ., .., '/', NUL or over 255 bytes), the first \"%s\"",
		provider, sandbox ? sandbox : "?", where, d->n, d->first);
}
