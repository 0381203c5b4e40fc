/* The local provider: a sandbox is a host directory plus the process groups started in it. */
#ifndef SFS_LOCAL_H
#define SFS_LOCAL_H

#include "../options.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* argv[1] that makes the sandboxfs binary act as the run wrapper. */
#define SFS_LOCAL_WRAP_ARG "__local-run-wrapper"

/* The run wrapper: argv = exe ARG RUNDIR CWD READY_FD CMD.  Single-threaded
 * after exec; returns the process exit status. */
int sfs_local_wrapper_main(int argc, char **argv);

/* descendants.c: a run's processes that left its process group.  The
 * wrapper is their subreaper, so all of them descend from it. */
struct sfs_local_proc {
	pid_t pid, ppid;
};
/* Pure: marks (mark[i]) the entries of procs that descend from root (root
 * itself not included); returns how many. */
size_t sfs_local_tree_select(const struct sfs_local_proc *procs, size_t n, pid_t root, bool *mark);
/* The descendants of root now in /proc (zombies too when with_zombies), in
 * *out (free it); -errno. */
int sfs_local_descendants(pid_t root, bool with_zombies, pid_t **out, size_t *n);
/* Sends sig to every live descendant of root, walking /proc until a walk
 * finds none new (a process forked meanwhile is caught); -errno. */
int sfs_local_signal_descendants(pid_t root, int sig);
/* 1 if pid (single-threaded) has a child that is not a zombie, 0 if not,
 * -1 if the kernel cannot tell (no CONFIG_PROC_CHILDREN, pid gone). */
int sfs_local_has_live_children(pid_t pid);
/* wpid if it is the run wrapper of run_dir (checked in /proc, since a pid
 * file outlives its process), else -1. */
pid_t sfs_local_wrapper_pid(const char *run_dir, pid_t wpid);

/* options.c: the -o local.KEY rows (providers/options.h). */
extern const struct sfs_opt sfs_local_options[];

#endif
