/*
 * The changes made through the mount, by path.  Every create, write-back,
 * chmod, remove and rename bumps the sandbox's write counter (wctr) and is
 * remembered here, so what was fetched meanwhile is judged by what it could
 * have missed, not by "anything changed": a listing of .git/info fetched
 * while git uploaded .git/index.lock is still a true listing of .git/info,
 * and a prefetched .git/info/exclude is still that file.  What a change
 * touches: its path, everything below it (a renamed or removed directory),
 * and its parent's listing.  Runs are not here: their start and end bump
 * the generation, which drops everything.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* a is b or a directory above it */
static bool at_or_above(const char *a, const char *b)
{
	if (!a[0])
		return true; /* the root */
	size_t n = strlen(a);
	return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

/* the parent of path is dir */
static bool parent_is(const char *path, const char *dir)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	return strlen(dir) == n && strncmp(path, dir, n) == 0;
}

void rc_mutated_locked(struct rsb *rs, const char *path)
{
	rs->wctr++;
	size_t slot = (size_t)(rs->wctr % RC_MLOG);
	free(rs->mlog[slot]);
	/* without memory for it, the log cannot vouch for this counter value:
	 * a NULL slot in range counts as touching everything */
	rs->mlog[slot] = path ? strdup(path) : NULL;
	rc_prefetch_drop_path_locked(rs, path);
}

/* calls touches(logged path, arg) for each change after since; true when
 * one touches, or when the log cannot tell */
static bool touched_since(struct rsb *rs, uint64_t since,
			  bool (*touches)(const char *, const char *), const char *arg)
{
	if (rs->wctr == since)
		return false;
	if (rs->wctr - since > RC_MLOG || rs->wctr < since)
		return true;
	for (uint64_t w = since + 1; w <= rs->wctr; w++) {
		const char *m = rs->mlog[w % RC_MLOG];
		if (!m || touches(m, arg))
			return true;
	}
	return false;
}

static bool touches_dir(const char *m, const char *dir)
{
	return at_or_above(m, dir) || parent_is(m, dir);
}

static bool touches_file(const char *m, const char *path)
{
	return at_or_above(m, path);
}

bool rc_dir_touched_since_locked(struct rsb *rs, uint64_t since, const char *dir)
{
	return touched_since(rs, since, touches_dir, dir);
}

bool rc_file_touched_since_locked(struct rsb *rs, uint64_t since, const char *path)
{
	return touched_since(rs, since, touches_file, path);
}

void rc_mlog_free_locked(struct rsb *rs)
{
	for (size_t i = 0; i < RC_MLOG; i++) {
		free(rs->mlog[i]);
		rs->mlog[i] = NULL;
	}
}
