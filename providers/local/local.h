/* The local provider: a sandbox is a host directory plus the process groups started in it. */
#ifndef SFS_LOCAL_H
#define SFS_LOCAL_H

#include "../options.h"

/* argv[1] that makes the sandboxfs binary act as the run wrapper. */
#define SFS_LOCAL_WRAP_ARG "__local-run-wrapper"

/* The run wrapper: argv = exe ARG RUNDIR CWD READY_FD CMD.  Single-threaded
 * after exec; returns the process exit status. */
int sfs_local_wrapper_main(int argc, char **argv);

/* options.c: the -o local.KEY rows (providers/options.h). */
extern const struct sfs_opt sfs_local_options[];

#endif
