/*
 * Private to ctl/: what `forget` keeps of a sandbox, and how `resume` finds
 * it again.
 *
 * forget leaves the sandbox alive, so its state dir STATE/sandboxes/KEY
 * stays when it holds something: runs (their journals), the workspace of
 * a local sandbox made by mkdir (it lives there), unsaved remote writes
 * (rcache/ *.pending).  A `forgotten` file in it names the provider and
 * the provider's id; `resume NAME provider=P id=ID` of that same P and ID
 * takes the same KEY again, so the runs come back, numbered as before.  A
 * state dir that holds nothing of that is removed at forget.
 */
#ifndef SFS_CTL_FORGOTTEN_H
#define SFS_CTL_FORGOTTEN_H

#include <stdbool.h>

#include "../providers/provider.h"

/* Writes STATE/sandboxes/KEY/forgotten for sb (durably, temp + rename). */
int forgotten_mark(const struct sfs_sandbox *sb, struct sfs_err *err);

/* Removes the `forgotten` file of a sandbox listed again, and the destroy
 * markers (`destroying`, `destroyed`) that must never apply to a sandbox
 * the user said to leave alive. */
void forgotten_unmark(const struct sfs_sandbox *sb);
void forgotten_clear_destroy_markers(const struct sfs_sandbox *sb);

/* Whether a state dir holds something worth keeping after forget: a run,
 * a `workspace`, an rcache/ *.pending file, or anything not known to be
 * disposable (an audit file alone is not: it goes with the dir). */
bool forgotten_worth_keeping(const char *dir);

/* The KEY of the most recently forgotten sandbox of provider pname and id
 * under statedir/sandboxes, skipping keys listed(key) says are in use;
 * false when there is none. */
bool forgotten_find(const char *statedir, const char *pname, const char *id,
		    bool (*listed)(const char *key), char key[40]);

#endif
