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

#endif
