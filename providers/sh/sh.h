/*
 * The in-sandbox shell kit: the POSIX sh scripts sandboxfs runs inside a
 * sandbox (journal wrapper, group kill, bounded read, follow, status), one
 * copy for every provider that has no host access to the sandbox's
 * processes.  busybox sh is enough (sh, setsid, env, kill, tail, head, cat,
 * mkdir, mv, rm, sleep, base64).
 *
 * A script is data (text with positional parameters $1..$n); the functions
 * below build the exact command that runs it, with the caller's values as
 * parameters, never spliced into the script:
 *   argv form    {"/bin/sh", "-c", SCRIPT, NAME, ARG1, ...}  for transports
 *                that take argv (docker exec, e2b, vercel, sprites);
 *   string form  sh -c 'SCRIPT' NAME 'ARG1' ...  (single-quoted) for
 *                transports that take one command line (daytona).
 * A value with a NUL byte cannot cross either and is rejected (-EINVAL).
 *
 * A run's directory holds, like the local wrapper's:
 *   journal   the command's stdout and stderr, merged, appended
 *   cmd       the command line (written by the prep script)
 *   pid       the command's pid, which is also its process group (setsid)
 *   wpid      the wrapper's pid
 *   status    "exit N" or "signal N", written atomically (temp + mv) when
 *             the command ends
 *   follow.T  the pid of a journal follower (tail -f), while it lives
 * Temporary files are dot files in the same directory (.status.tmp ...).
 * A run directory that is not absolute is taken below ${TMPDIR:-/tmp} in
 * the sandbox (so runs stay out of the workspace without knowing its TMPDIR).
 *
 * A provider's runs, in short (daytona/runs.c and docker/run.c do this):
 *	run_start      sfs_sh_wrapper(&c, &(struct sfs_sh_run){dir, ws, cmd, env})
 *	               -> c.argv to an argv transport, detached, or
 *	               sfs_sh_cmd_string(&c, &line) to a one-string transport
 *	run_refresh    sfs_sh_status -> sfs_sh_parse_status ("running", "lost"...)
 *	journal_read   sfs_sh_read (base64 where stderr shares the output)
 *	run_kill       sfs_sh_kill -> sfs_sh_kill_answer
 *	journal_follow sfs_sh_follow / sfs_sh_unfollow (an attached transport)
 * and sfs_sh_cmd_free(&c) after each.
 */
#ifndef SFS_SH_H
#define SFS_SH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../err.h"
#include "../kv.h"

/* A command ready to run: argv[0..argc-1] and a NULL, every string owned. */
struct sfs_sh_cmd {
	char **argv;
	size_t argc;
};
void sfs_sh_cmd_free(struct sfs_sh_cmd *c);

/* The string form of c: each argument single-quoted for sh, joined by
 * spaces (the leading "/bin/sh" is kept: it names the shell).  malloc'd. */
int sfs_sh_cmd_string(const struct sfs_sh_cmd *c, char **out, struct sfs_err *err);

/* Any script of the caller's own: sh -c SCRIPT NAME ARGS... (args is
 * NULL-terminated, may be NULL). */
int sfs_sh_script(struct sfs_sh_cmd *c, const char *script, const char *name,
		  const char *const *args, struct sfs_err *err);

/* s single-quoted for sh, appended to b: 'it'\''s'.  -EINVAL when s holds
 * a NUL byte, -ENOMEM. */
struct sfs_buf;
int sfs_sh_quote(struct sfs_buf *b, const char *s, size_t len);

/* ---- the scripts ---------------------------------------------------------- */

/* A clean run directory (rm -rf, mkdir -p) with an empty journal and cmd.
 * cmd_len 0 means strlen(cmd). */
int sfs_sh_prep(struct sfs_sh_cmd *c, const char *rundir, const char *cmd, size_t cmd_len,
		struct sfs_err *err);

struct sfs_sh_run {
	const char *dir;	      /* the run directory */
	const char *workspace;	      /* the command's working directory */
	const char *cmd;	      /* the command line, run with sh -c */
	size_t cmd_len;		      /* 0: strlen(cmd) */
	const struct sfs_kvlist *env; /* exported to the command, or NULL */
	bool keep_stdin;	      /* false: the command's stdin is /dev/null */
};
/*
 * The journal wrapper.  Run it detached (it returns when the command ends).
 * It records its pid, enters the workspace (or records "exit 126" with a
 * line in the journal), starts the command as a session and process group
 * of its own (setsid, when the sandbox has it) with stdout and stderr
 * appended to the journal, and records its end: a status of 129..192 as
 * "signal N" (Linux signals are 1..64; a shell cannot tell `exit 130` from
 * SIGINT, so neither can the wrapper), anything else as "exit N".  Then it
 * stops the run's journal followers.  Environment names must not hold '='
 * or start with '-' (-EINVAL).
 */
int sfs_sh_wrapper(struct sfs_sh_cmd *c, const struct sfs_sh_run *run, struct sfs_err *err);

/* Signals the run's process group (or its pid, without setsid); with
 * escalate, KILLs what is left after grace_ms and checks the group is gone.
 * Prints one word, see sfs_sh_kill_answer. */
int sfs_sh_kill(struct sfs_sh_cmd *c, const char *rundir, int sig, bool escalate, int grace_ms,
		struct sfs_err *err);
/* The kill script's answer as 0 or a negative errno with a message about
 * run n: ok -> 0, gone/no-pid -> -ESRCH, survived -> -EIO. */
int sfs_sh_kill_answer(const char *out, int n, struct sfs_err *err);

/* Follows the journal from byte offset `from` (tail -f): first prints its
 * pid on stderr and in RUNDIR/follow.TOKEN (token: letters, digits, '-' and
 * '_'); ends at once when the run has ended. */
int sfs_sh_follow(struct sfs_sh_cmd *c, const char *rundir, off_t from, const char *token,
		  struct sfs_err *err);
/* Stops a follower: pid (0: the one in the token file), only while its token
 * file is there (the wrapper removes it when it stopped the follower, so a
 * reused pid is never signalled). */
int sfs_sh_unfollow(struct sfs_sh_cmd *c, const char *rundir, int pid, const char *token,
		    struct sfs_err *err);
/* Every follower under runsdir (RUNSDIR/x/follow.*): kill them (same
 * sandbox life) or only forget them (their pids belong to an earlier life). */
int sfs_sh_forget_followers(struct sfs_sh_cmd *c, const char *runsdir, bool kill,
			    struct sfs_err *err);

/* At most max bytes of file from byte offset off.  Exit status 3 when the
 * file does not exist.  With base64 the bytes come after a "sfs-b64:" frame
 * marker, base64-encoded (for transports that fold stderr into stdout or
 * carry text only): decode with sfs_sh_read_decode. */
int sfs_sh_read(struct sfs_sh_cmd *c, const char *file, off_t off, size_t max, bool base64,
		struct sfs_err *err);
/* The bytes of a base64 read's output, at most max into buf; the count or
 * -EIO (no frame, bad base64). */
long sfs_sh_read_decode(const char *out, void *buf, size_t max);

/* One line: the status file's text, "running", "lost" (the wrapper is gone
 * without a status) or "none" (no run directory yet). */
int sfs_sh_status(struct sfs_sh_cmd *c, const char *rundir, struct sfs_err *err);
/* "yes" while the wrapper's pid is alive, else "no". */
int sfs_sh_alive(struct sfs_sh_cmd *c, const char *rundir, struct sfs_err *err);
/* A status text ("exit N", "signal N"): true and *signal, *code when it is
 * one. */
bool sfs_sh_parse_status(const char *text, bool *signal, int *code);

/* The status script's output (its last line: anything before it is stray
 * stderr) applied to run: exited/killed with the code, running, or lost
 * ("none" counts as running for the first minute: the wrapper may not have
 * made its directory yet).  -EPROTO naming `what` for anything else. */
struct sfs_run;
int sfs_sh_status_apply(const char *out, struct sfs_run *run, const char *what,
			struct sfs_err *err);

/* cmd with its stdout kept in a temporary file, then printed base64-framed
 * ("sfs-b64:" + base64), exiting with cmd's status: for transports that
 * carry text only.  sfs_sh_b64_unframe turns such output back into its
 * bytes, in place (NUL-terminated); their count, -EIO or -ENOMEM. */
struct sfs_buf;
int sfs_sh_b64(struct sfs_sh_cmd *c, const struct sfs_sh_cmd *cmd, struct sfs_err *err);
long sfs_sh_b64_unframe(struct sfs_buf *b);

/* ---- file ops through a provider's exec (fsops.c) ------------------------ */

/* How a provider runs a kit command to its end. */
struct sfs_sandbox;
struct sfs_rstat;
struct sfs_rdirent;
struct sfs_sh_exec {
	const char *what; /* message prefix: "vercel" */
	/* c in sb within timeout_ms (0: the provider's default): *exit its
	 * status, *out (when out is not NULL) its stdout (*outlen), byte for
	 * byte with `bytes` (a transport that carries text frames it: sfs_sh_b64);
	 * a failing command's stderr in err's message */
	int (*run)(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, bool bytes, long timeout_ms,
		   int *exit, char **out, size_t *outlen, struct sfs_err *err);
	/* workspace + "/" + rel, malloc'd; NULL where only the run functions
	 * (sfs_sh_xrun_*, sfs_sh_xjournal_read) use x */
	char *(*abs_path)(struct sfs_sandbox *sb, const char *rel);
	/* stdout comes back apart from stderr, byte for byte: journal reads
	 * need no base64 */
	bool raw_stdout;
};
/* The provider ops of the same names (provider.h), paths relative to the
 * workspace, each one script in one call; a script's failure is its errno
 * with "WHAT: OP PATH: stderr". */
int sfs_sh_xfs_stat(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *path,
		    struct sfs_rstat *st, struct sfs_err *err);
int sfs_sh_xfs_list(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *path,
		    struct sfs_rdirent **ents, size_t *n, struct sfs_err *err);
int sfs_sh_xfs_chmod(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *path,
		     mode_t mode, struct sfs_err *err);
int sfs_sh_xfs_mkdir(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *path,
		     mode_t mode, struct sfs_err *err);
int sfs_sh_xfs_remove(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *path,
		      bool dir, struct sfs_err *err);
int sfs_sh_xfs_rename(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *from,
		      const char *to, struct sfs_err *err);
int sfs_sh_xfs_symlink(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *target,
		       const char *path, struct sfs_err *err);

/* A run's status (sfs_sh_status, then sfs_sh_status_apply), a bounded
 * journal read (sfs_sh_read, base64-framed unless x->raw_stdout; 0 when
 * there is no journal yet) and a kill (sfs_sh_kill, then
 * sfs_sh_kill_answer) through x, each one call within timeout_ms. */
int sfs_sh_xrun_refresh(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, struct sfs_run *run,
			long timeout_ms, struct sfs_err *err);
ssize_t sfs_sh_xjournal_read(const struct sfs_sh_exec *x, struct sfs_sandbox *sb,
			     struct sfs_run *run, off_t off, void *buf, size_t max, long timeout_ms,
			     struct sfs_err *err);
int sfs_sh_xrun_kill(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, struct sfs_run *run,
		     int sig, bool escalate, int grace_ms, long timeout_ms, struct sfs_err *err);
/* Run n's directory as the kit's scripts take it, relative (they put it
 * below ${TMPDIR:-/tmp} in the sandbox): "sandboxfs-runs/KEY-N". */
void sfs_sh_run_dir(const struct sfs_sandbox *sb, const struct sfs_run *run, char *buf, size_t len);

/* fs_read_many: the bulk tar below through x, one call. */
int sfs_sh_xread_many(const struct sfs_sh_exec *x, struct sfs_sandbox *sb, const char *const *paths,
		      size_t n,
		      int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		      void *arg, struct sfs_err *err);

/* ---- bulk reads (bulk.c) -------------------------------------------------- */

/* tar -cf - of those of paths (relative to root) that are regular files, to
 * stdout; exit 2 when root cannot be entered. */
int sfs_sh_bulk_read(struct sfs_sh_cmd *c, const char *root, const char *const *paths, size_t n,
		     struct sfs_err *err);
/* Each regular file of the bulk read's output (len 0: none could be read)
 * to on_file, its path as asked; 0, on_file's error, or the tar reader's. */
int sfs_sh_bulk_each(const void *tar, size_t len,
		     int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		     void *arg, struct sfs_err *err);

/* mkdir -p path. */
int sfs_sh_mkdir(struct sfs_sh_cmd *c, const char *path, struct sfs_err *err);

/* A container's main process: stays up, ends at once on TERM, and reaps
 * orphans (its `wait`), so a killed process group really goes away. */
extern const char sfs_sh_keepalive[];

/* ---- file operations over exec (fs.c) ------------------------------------- */

/*
 * Scripts for the fs_* ops of providers whose API has no route for them.
 * $1 is an absolute path in the sandbox, $2 the second one (rename's new
 * path, mkdir's and chmod's octal mode, symlink's target).  A failure exits
 * with an errno (2 ENOENT, 17 EEXIST, 20 ENOTDIR, 21 EISDIR, 39 ENOTEMPTY,
 * 5 EIO): sfs_sh_fs_errno turns it into a negative one.  Build them with
 * sfs_sh_script.
 */
extern const char sfs_sh_fs_list[];	/* output: sfs_sh_list_parse */
extern const char sfs_sh_fs_stat[];	/* output: sfs_sh_stat_parse */
extern const char sfs_sh_fs_readlink[]; /* output: the target and a newline */
extern const char sfs_sh_fs_mkdir[];
extern const char sfs_sh_fs_rmdir[];
extern const char sfs_sh_fs_unlink[];
extern const char sfs_sh_fs_rename[];
extern const char sfs_sh_fs_chmod[];
extern const char sfs_sh_fs_symlink[];
int sfs_sh_fs_errno(int code);

/* A list script's output: the entries with their attributes (and symlink
 * targets).  A name that cannot be a file name here (untrusted/name.h) is
 * left out and counted in drops (may be NULL).  -EAGAIN when it is
 * inconsistent (the directory changed while it was read), -ENOMEM. */
struct sfs_rdirent;
struct sfs_rstat;
struct sfs_name_drops;
int sfs_sh_list_parse(const char *buf, size_t len, struct sfs_rdirent **ents, size_t *n,
		      struct sfs_name_drops *drops);
/* A stat script's output; st->link is malloc'd for a symlink. */
int sfs_sh_stat_parse(const char *buf, size_t len, struct sfs_rstat *st);

#endif
