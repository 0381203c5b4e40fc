/*
 * SPEC §5 symlink rewriting for sandboxes whose filesystem is not the
 * host's: a pure function, no FUSE, no I/O (unit-tested in
 * tests/unit/test_symlink.c).
 *
 * A symlink's target means a path in the sandbox.  What readlink shows on
 * the host is:
 *   - a target that stays inside the workspace root: relative, so following
 *     it from the host stays inside the mounted workspace.  A relative target
 *     without ".." after a name is shown verbatim; anything else is shown
 *     normalised ("../" to climb out of the link's directory, then names), so
 *     no ".." ever follows a component that might itself be a symlink;
 *   - any other target (absolute elsewhere, or climbing above the root):
 *     SFS_SYMLINK_OUTSIDE_PREFIX followed by the target as written, which
 *     reaches nothing on the host and still shows the original.  A relative
 *     one comes after the directory it is relative to (the root's path, then
 *     `*` per level below it, e.g. ".../workspace/<*>/../../etc/x"), so even
 *     a tool that resolves ".." lexically stays below the prefix.  A target
 *     that climbs above the sandbox's "/" (where ".." stays put) shows the
 *     absolute path it lands on instead.
 */
#ifndef SFS_SYMLINK_REWRITE_H
#define SFS_SYMLINK_REWRITE_H

#include <stddef.h>

#define SFS_SYMLINK_OUTSIDE_PREFIX "/nonexistent/sandboxfs-outside-workspace"

/*
 * target: the raw link target.  root: the workspace root's absolute path in
 * the sandbox (NULL or "" if unknown: then every absolute target is outside).
 * depth: how many directories below the root the link sits (0: in the root),
 * or -1 if unknown (then only relative targets without ".." stay as they are).
 * Writes a NUL-terminated string to out; returns its length, or
 * -ENAMETOOLONG if it does not fit in outsz.
 */
int sfs_symlink_rewrite(const char *target, const char *root, int depth, char *out, size_t outsz);

#endif
