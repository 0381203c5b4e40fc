/*
 * What an exec need not wait for, done by a thread of its own when asked
 * for, a few milliseconds later (providers/later.c).  Started and stopped
 * with the file system's threads (fs/ops.c), after daemonizing.
 */
#ifndef SFS_LATER_H
#define SFS_LATER_H

#include "err.h"

/* entries waiting at once; past that a flush is made at once and a call
 * not at all */
#define SFS_LATER_MAX 64
/* the latest an exec's flush and spare are made (ctl/tree.c) */
#define SFS_LATER_DELAY_MS 10

int sfs_later_start(struct sfs_err *err);
/* Joins the thread: the flushes still queued are made, the calls dropped. */
void sfs_later_stop(void);
/* fsync and close fd, delay_ms later (before a call due as soon); at once
 * when the thread is not running or its queue is full.  For files whose
 * loss only a power cut could cause: the page cache already carries them
 * across a kill -9. */
void sfs_later_flush(int fd, int delay_ms);
/* fn(arg), delay_ms later, once however often it is asked before it runs
 * (then at the earliest time asked for); not at all when the thread is not
 * running or its queue is full (for work that only saves a later request
 * time).  fn must not block: every later entry waits for it. */
void sfs_later_call(void (*fn)(void *), void *arg, int delay_ms);

#endif
