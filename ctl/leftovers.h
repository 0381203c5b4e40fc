/*
 * What a daemon killed mid-write leaves in the state directory, and nothing
 * else would ever remove: temporary copies of the registry
 * (registry.json.tmp.TID), half-cloned git mirrors (git/mirrors/.tmp-*),
 * and libgit2's temporary objects in the snapshot store
 * (git/store/objects/[??/]tmp_object_git2_*).  Swept at start, when the
 * state directory's lock says no other daemon can be writing them.
 */
#ifndef SFS_CTL_LEFTOVERS_H
#define SFS_CTL_LEFTOVERS_H

/* Removes them; returns how many went (each one logged). */
int leftovers_sweep(const char *statedir);

#endif
