/* posix_spawn attributes of a child that owes the daemon nothing. */
#ifndef SFS_SPAWN_ATTR_H
#define SFS_SPAWN_ATTR_H

#include <spawn.h>

/*
 * Initialises attr for a child with no blocked signal and every signal at
 * its default, whichever daemon thread spawns it (libfuse ignores SIGPIPE;
 * a daemon started from a script may ignore INT and QUIT), plus flags
 * (POSIX_SPAWN_SETSID, or POSIX_SPAWN_SETPGROUP for a group of its own).
 * 0, or a positive errno with attr destroyed.
 */
int sfs_spawn_attr_clean(posix_spawnattr_t *attr, short flags);

/* File actions for a child whose stdin and stdout are /dev/null and whose
 * stderr is errfd (/dev/null when -1): 0 or a positive errno. */
int sfs_spawn_stdio_null(posix_spawn_file_actions_t *fa, int errfd);

/*
 * Runs a host tool (argv[0] looked up in the system's sbin and bin
 * directories only) to its end, as a child with a clean mask, stdin and
 * stdout on /dev/null, stderr on errfd (or /dev/null when -1), no other
 * descriptor, and an environment of PATH and LC_ALL=C only: none of the
 * daemon's credentials.  0 when it exits 0, else a negative errno (-EIO
 * for a non-zero exit).
 */
int sfs_spawn_tool(char *const argv[], int errfd);

#endif
