/*
 * Docker Sandboxes (microVMs) through the `sbx` CLI (anchor notes §5):
 *   create   sbx create --name NAME --clone --quiet shell HOSTREPO
 *   exec     sbx exec [-i] -- NAME ARGV...        (argv, never a shell line)
 *   resume   sbx ls --json, the name looked up
 *   destroy  sbx rm --force NAME
 *   network  sbx policy allow|deny network --sandbox NAME HOST
 * The CLI is spawned with an argv array (posix_spawn, never a shell), in a
 * process group of its own, bounded by a timeout (the group is KILLed and
 * reaped when it runs over); every child is reaped, every pipe closed.
 *
 * Everything inside the VM goes through `sbx exec` of the shell kit's
 * scripts: runs under the journal wrapper, detached (so output survives the
 * daemon), journals polled with the bounded read, kill with the group kill,
 * files with the file scripts, source trees and writes as tar/bytes on the
 * exec's stdin (-i).  sb->id is the sandbox's name.
 */
#ifndef SFS_SBX_H
#define SFS_SBX_H

#include "../options.h"
#include "../provider.h"

#include <stdbool.h>
#include <stddef.h>

/* ---- cli.c ---------------------------------------------------------------- */

/* The CLI's path: config sbx.cli, else `sbx` on PATH; false when neither is
 * an executable file. */
bool sbx_cli_path(char *buf, size_t len);

struct sbx_result {
	int code;     /* the CLI's exit status (or 128+signal) */
	char *out;    /* stdout, NUL-terminated (malloc'd) */
	size_t len;   /* stdout's length */
	char *errtxt; /* stderr, NUL-terminated, trailing blanks trimmed */
};
void sbx_result_free(struct sbx_result *r);

/*
 * Runs the CLI with args (NULL-terminated, after the program name), in
 * (may be NULL) on its stdin, at most timeout_ms.  0 when it ran to its
 * end (whatever its exit status: see r->code); -ENOENT with the CLI
 * missing, -ETIMEDOUT when it ran over (killed), -ENOMEM, -EIO.
 */
int sbx_cli(const char *const *args, const void *in, size_t inlen, long timeout_ms,
	    struct sbx_result *r, struct sfs_err *err);

/* Starts the CLI with args (stdin and stderr /dev/null) without waiting:
 * *outfd reads its stdout (the caller closes it), *pid is also its process
 * group; end it with sbx_cli_reap. */
int sbx_cli_spawn(const char *const *args, pid_t *pid, int *outfd, struct sfs_err *err);
/* Waits up to grace_ms for pid to end, then KILLs its group; reaps it. */
void sbx_cli_reap(pid_t pid, long grace_ms);

/* The CLI's failure as an error: "sbx WHAT: STDERR" (or the exit status). */
int sbx_cli_fail(const struct sbx_result *r, const char *what, struct sfs_err *err);

/* ---- exec.c --------------------------------------------------------------- */

/* The exit status `sbx exec` gives when the CLI itself failed (no such
 * sandbox, not logged in ...), as `docker exec` does. */
#define SBX_EXEC_CLI_FAILED 125

/* A command of the shell kit run to its end in sb (in on its stdin when
 * not NULL): *code its exit status, *out (may be NULL) its stdout.  A
 * failure of the CLI itself is an error with its stderr. */
struct sfs_sh_cmd;
int sbx_exec(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, const void *in, size_t inlen,
	     long timeout_ms, int *code, char **out, size_t *outlen, struct sfs_err *err);
/* The same with sbx.attempts tries while the CLI itself fails with a
 * transient error (the command never ran); sbx_exec_n with attempts 1 for
 * what must not run twice (a run's start). */
int sbx_exec_n(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, const void *in, size_t inlen,
	       long timeout_ms, int attempts, int *code, char **out, size_t *outlen,
	       struct sfs_err *err);
long sbx_timeout_ms(void);
/* workspace + "/" + rel, malloc'd. */
char *sbx_abs_path(struct sfs_sandbox *sb, const char *rel);
/* The shell kit's file ops and run scripts through sbx_exec (files.c). */
struct sfs_sh_exec;
extern const struct sfs_sh_exec sbx_sh;

/* ---- runs.c --------------------------------------------------------------- */

int sbx_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int sbx_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
ssize_t sbx_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			 size_t max, struct sfs_err *err);
int sbx_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		 struct sfs_err *err);

int sbx_journal_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		       void **follower, struct sfs_err *err);
void sbx_journal_unfollow(struct sfs_sandbox *sb, void *follower);

/* ---- files.c -------------------------------------------------------------- */

int sbx_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st,
		struct sfs_err *err);
int sbx_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
		struct sfs_err *err);
int sbx_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err);
int sbx_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		     int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		     void *arg, struct sfs_err *err);
int sbx_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode,
		 struct sfs_err *err);
int sbx_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err);
int sbx_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int sbx_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err);
int sbx_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err);
int sbx_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int sbx_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		   struct sfs_err *err);

/* options.c: the -o sbx.KEY rows. */
extern const struct sfs_opt sfs_sbx_options[];

#endif
