/*
 * The copy-on-write base kit: a sandbox workspace that is a writable view of
 * a host directory (`new NAME base=HOSTDIR [hide=PATTERN,…]`, SPEC §9) which
 * is never modified.  Kernel overlayfs when it can be mounted (the upper
 * layer and the merged view live in STATE/sandboxes/KEY/cow/), else a copy
 * of the base (reflinked where the filesystem can).  No FUSE and no sandbox
 * records here: local and docker call it from their create, resume and
 * destroy, and ctl reads the diff (snapshots/base/diff) from it.
 */
#ifndef SFS_COW_H
#define SFS_COW_H

#include "../err.h"

#include <stdbool.h>
#include <stddef.h>

/* ---- hide patterns (hide.c, pure) ---------------------------------------
 * A subset of gitignore: `name` and `*.pem` match a name at any depth,
 * a pattern with a slash (`/build`, `docs/README`) is anchored at the base's
 * root, a trailing `/` matches directories only, `**` matches any number of
 * directories (`**` + `/x`, `x/` + `**`, `a/` + `**` + `/b`); `*`, `?` and
 * `[a-z]`, `[!x]` classes do not cross a `/`; `\` escapes.  Negation (`!`)
 * is refused, as are empty patterns and `.`/`..` components. */
struct sfs_cow_hide;

/* Parses a comma-separated list; *out is NULL for an empty list.  nocase
 * (hide.case=insensitive): ASCII letters match either case, so `.env`
 * also hides `.ENV` (on a case-insensitive filesystem, or made by a tool
 * that changes case); other bytes, UTF-8 letters included, match exactly. */
int sfs_cow_hide_parse(const char *list, bool nocase, struct sfs_cow_hide **out,
		       struct sfs_err *err);
/* hide.case=VALUE: "sensitive" (also NULL, the default) or "insensitive"
 * into *nocase; -EINVAL for anything else. */
int sfs_cow_hide_case(const char *value, bool *nocase, struct sfs_err *err);
/* Whether relpath (no leading slash; "a/b/c") is hidden by a pattern that
 * names it or one of its parent directories. */
bool sfs_cow_hide_match(const struct sfs_cow_hide *h, const char *relpath, bool is_dir);
void sfs_cow_hide_free(struct sfs_cow_hide *h);
/* One glob against one string, `/` never matched by `*` or `?` (`**` may). */
bool sfs_cow_glob(const char *pat, const char *str);
/* The same with ASCII case folded. */
bool sfs_cow_glob_nocase(const char *pat, const char *str);

/* ---- the layers (layer.c) ----------------------------------------------- */

#define SFS_COW_DIR "cow"

/* Checks base=, hide= and hide.case= before anything is made: base an
 * absolute path of an existing directory, outside the mount and the state
 * directory. */
int sfs_cow_check(const char *base, const char *hide, const char *hide_case, struct sfs_err *err);
/* Makes STATEDIR/cow (upper, work, merged, base.json), puts the hide
 * whiteouts in upper and mounts the merged view; merged (PATH_MAX bytes)
 * gets its path.  On failure nothing is left. */
int sfs_cow_create(const char *statedir, const char *base, const char *hide, const char *hide_case,
		   char *merged, struct sfs_err *err);
/* After a restart: the merged view mounted again unless it still is (a
 * daemon that died, or one that stopped, leaves it mounted for the runs
 * that live on); merged gets its path.  -ENOENT when statedir has no cow. */
int sfs_cow_resume(const char *statedir, char *merged, struct sfs_err *err);
/* Unmounts the merged view and removes STATEDIR/cow; the base is untouched.
 * 0 when there is none. */
int sfs_cow_remove(const char *statedir, struct sfs_err *err);
/* Whether statedir holds a base workspace. */
bool sfs_cow_present(const char *statedir);
/* "overlay" or "copy" (-o cow.mode), and the base of statedir's workspace. */
int sfs_cow_describe(const char *statedir, char *base, size_t baselen, char *mode, size_t modelen,
		     struct sfs_err *err);

/* ---- what changed (diff.c) ------------------------------------------------
 * For snapshots/base/diff (ctl/cowbase.c hands it to the snapshots' diff
 * writer): the changed files of statedir's workspace against its base
 * (relative, sorted, never a hidden one; *paths malloc'd, each path
 * malloc'd), found from the upper layer (overlay: never reading an
 * unchanged base file) or by comparing the copy with the base (size, mtime
 * and mode first); *basefd an O_RDONLY fd of the base (the caller closes).
 * -ENOENT when statedir holds no base workspace. */
int sfs_cow_changed_paths(const char *statedir, int *basefd, char ***paths, size_t *n,
			  struct sfs_err *err);

#endif
