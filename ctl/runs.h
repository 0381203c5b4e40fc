/*
 * Private to ctl/: a sandbox's runs on disk, STATE/sandboxes/KEY/runs/N/.
 *
 * A run's number is reserved by creating its directory, exclusively, before
 * anything else happens; the directory then gets `cmd`, and only then is the
 * command started.  So a number is never handed out twice, even across a
 * kill -9 of the daemon: every numbered directory is a run, and a daemon
 * that starts finds all of them, half-made ones included (adopted: listed,
 * their journals kept, killable while their wrapper lives; a run that never
 * got going shows `lost`).
 */
#ifndef SFS_CTL_RUNS_H
#define SFS_CTL_RUNS_H

#include "../providers/provider.h"

#include <stdbool.h>

/* At startup: every runs/N of sb, 1 up to the highest N found, becomes a run
 * (a missing or empty directory too, shown `lost`), and its journal is
 * attached. */
void runs_load(struct sfs_sandbox *sb);

/*
 * Reserves the next run number of sb by creating runs/N exclusively
 * (callers hold sb->op_mutex).  A directory already there (left by another
 * daemon) is adopted as a run and the next number tried.  *out gets a new
 * record (n, dir, cmd, started) not yet in sb->runs.
 */
int runs_reserve(struct sfs_sandbox *sb, const char *cmd, struct sfs_run **out,
		 struct sfs_err *err);

/*
 * Makes runs/.next, a run directory ahead of its run, with an empty
 * `.cmd.tmp` and what the provider's run_prepare_dir adds, unless one is
 * there (callers hold sb->op_mutex).  runs_reserve renames it to the next
 * number (exclusively: renameat2 RENAME_NOREPLACE) instead of creating the
 * directory and its files then: each is an inode allocation, and ext4
 * without a journal searches past every inode freed in the last minutes for
 * each one.  Best effort: without it (none made yet, a file system without
 * RENAME_NOREPLACE, a failure) the number's directory is made as before.
 * The scan of runs/ skips it (not a number); a forget does not count it.
 * Whether it made one (false: one was there, or it could not).
 */
bool runs_make_spare(struct sfs_sandbox *sb);
/* Whether a name in runs/ is that spare, or runs/.next.d where it is made
 * (or .next.new, where a daemon of an earlier version made it). */
bool runs_is_spare(const char *name);

#endif
