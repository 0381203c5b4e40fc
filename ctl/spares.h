/*
 * The thread that makes each sandbox's next run directory
 * ahead (runs/.next, ctl/runs.h) a moment after an exec.
 */
#ifndef SFS_CTL_SPARES_H
#define SFS_CTL_SPARES_H

#include "../providers/provider.h"

/* Started and stopped with the file system's threads (fs/ops.c), after
 * daemonizing. */
int spares_start(struct sfs_err *err);
/* After an exec on sb: its spare, made SPARE_DELAY_MS later (once however
 * many execs ask meanwhile).  Nothing when the thread is not running. */
void spares_request(struct sfs_sandbox *sb);
/* Joins the thread; spares not made yet are not made. */
void spares_stop(void);

#endif
