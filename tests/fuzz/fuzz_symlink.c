/*
 * libFuzzer harness: SPEC §5 symlink rewriting (fs/symlink_rewrite.c).  The
 * first byte is the link's depth below the workspace root (or unknown), the
 * second how long the root is; the rest is the root path and the target.
 * The property checked is the security one: what readlink shows either
 * starts with the "outside" prefix or is a relative path that, followed from
 * the link's directory, never climbs above the workspace root; after the
 * prefix, no ".." climbs above the prefix.
 */
#include "fs/symlink_rewrite.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Walks a relative path from `depth` levels below the root; false when any
 * prefix of it would stand above the root. */
static int stays_inside(const char *rel, int depth)
{
	int level = depth;
	const char *p = rel;
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n == 2 && p[0] == '.' && p[1] == '.')
			level--;
		else if (n > 0 && !(n == 1 && p[0] == '.'))
			level++;
		if (level < 0)
			return 0;
		p += n;
		if (*p == '/')
			p++;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	int depth = data[0] == 0xff ? -1 : data[0] % 40;
	size_t rootlen = data[1] % 64;
	const char *rest = (const char *)data + 2;
	size_t n = size - 2;
	if (memchr(rest, '\0', n))
		return 0; /* a link target is a C string */
	if (rootlen > n)
		rootlen = n;
	char *root = strndup(rest, rootlen);
	char *target = strndup(rest + rootlen, n - rootlen);
	if (!root || !target)
		goto out;
	char out[8192];
	int len = sfs_symlink_rewrite(target, root, depth, out, sizeof(out));
	if (len >= 0) {
		if ((size_t)len != strlen(out))
			abort();
		size_t plen = strlen(SFS_SYMLINK_OUTSIDE_PREFIX);
		int outside = strncmp(out, SFS_SYMLINK_OUTSIDE_PREFIX, plen) == 0 &&
			      (out[plen] == '/' || out[plen] == '\0');
		/* outside: what follows the prefix never climbs above it, not
		 * even for a tool that resolves ".." lexically */
		if (outside && !stays_inside(out + plen + (out[plen] == '/'), 0))
			abort();
		if (!outside) {
			if (out[0] == '/')
				abort(); /* an absolute path that is not the prefix: a host path */
			/* unknown depth: only targets without ".." may stay relative */
			if (!stays_inside(out, depth < 0 ? 0 : depth))
				abort();
		}
	}
out:
	free(root);
	free(target);
	return 0;
}
