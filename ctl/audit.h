/*
 * SANDBOX/audit (SPEC §13): one line per ctl command, run start and end, and
 * mutating workspace operation made through the mount:
 *
 *   TIME UID OP PATH RESULT [DETAIL]
 *   2026-11-30T22:14:03.123Z 1000 create src/a.c 0
 *   2026-11-30T22:14:04.002Z 1000 ctl ctl 0 exec make
 *   2026-11-30T22:14:04.010Z 1000 run.start runs/3 0 make
 *   2026-11-30T22:14:09.441Z - run.end runs/3 0 exited 2
 *
 * TIME is UTC with milliseconds, UID the caller's ("-": the daemon itself),
 * PATH relative to the sandbox (workspace paths below workspace/, bytes
 * other than printable ASCII and UTF-8 shown \xNN, a blank \x20), RESULT 0
 * or the errno's name.  DETAIL (a command line, a run's status) is
 * redacted like every log line.
 *
 * The cost stays off the caller: a line is formatted and appended to the
 * sandbox's buffer under a lock held for a memcpy; one thread writes the
 * buffers to STATE/sandboxes/KEY/audit every 100 ms (or sooner when one
 * grows past 64 KiB), without fsync.  At `audit.max_size` the file becomes
 * audit.1 (the one before is dropped) and a new one starts.  The mount's
 * SANDBOX/audit is read through the journal engine (a plain journal), so a
 * read at the end waits for more, like a run's journal that never ends.
 */
#ifndef SFS_CTL_AUDIT_H
#define SFS_CTL_AUDIT_H

#include "../providers/provider.h"
#include "../providers/strbuf.h"

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>

/* "-o audit=false" turns the whole thing off: no file, no SANDBOX/audit. */
bool audit_enabled(void);

/* Gives sb its writer and the plain journal its readers follow (from
 * reserve and the registry load; a second call does nothing). */
int audit_start(struct sfs_sandbox *sb);
/* Writes what is buffered and writes nothing more: sb's state dir is about
 * to be removed (forget, destroy), and a later write would recreate the
 * file in it and keep the directory from going. */
void audit_close(struct sfs_sandbox *sb);
/* Writes what is buffered and releases the writer (sandbox_free). */
void audit_free(struct sfs_sandbox *sb);
/* The run SANDBOX/audit is read through, or NULL when sb has no audit. */
struct sfs_run *audit_run(struct sfs_sandbox *sb);

/* The caller of the FUSE request this thread serves (fs/ops.c sets it
 * before a ctl write or a workspace operation); -1: the daemon itself. */
void audit_set_caller(uid_t uid);
uid_t audit_caller(void);

/* Appends one line to sb's audit.  path may be NULL ("-"), detail NULL; err
 * is 0 or a negative or positive errno. */
void audit_line(struct sfs_sandbox *sb, const char *op, const char *path, int err,
		const char *detail);
/* The same for a change with a destination (rename, link): its DETAIL is
 * "-> TO", TO shown like PATH. */
void audit_change(struct sfs_sandbox *sb, const char *op, const char *path, int err,
		  const char *to);

/* The text of a line (ctl/audit_line.c), appended to out: at time ts, by
 * uid ((uid_t)-1: the daemon), detail "-> TO" when to is not NULL.  PATH
 * and TO get the registered values hidden, then bytes other than printable
 * ASCII and UTF-8 text as \xNN; DETAIL the whole redactor, escaped, on one
 * line, at most 2047 bytes.  0 or -ENOMEM. */
int audit_format(struct sfs_buf *out, const struct timespec *ts, uid_t uid, const char *op,
		 const char *path, int err, const char *to, const char *detail);

/* The writer thread: started after daemonizing, stopped (everything written)
 * before the records are freed. */
int audit_thread_start(struct sfs_err *err);
void audit_thread_stop(void);

#endif
