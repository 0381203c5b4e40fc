/*
 * The Cloudflare Sandbox provider (provider-apis.md §4) over the HTTP kit.
 *
 * Cloudflare sandboxes are reachable from outside a Worker only through a
 * Worker that exposes them: the sandbox bridge's routes, served by the
 * Worker in providers/cloudflare/worker (docs/cloudflare.md).  sb->id is the
 * bridge's sandbox id (base32).  Exec is one POST answered with SSE (base64
 * stdout/stderr chunks, then an exit event); runs are the shell kit's
 * journal wrapper started detached by such an exec, journals and statuses
 * polled with the kit's scripts.  The bridge has no kill, so
 * killableProcesses is false and `cancel` destroys the sandbox.  Files are
 * read and written by path through the file routes; list, stat, mkdir,
 * delete, rename, chmod and symlink are the kit's file scripts over exec.
 * Snapshots are the bridge's persist (a tar of the workspace) kept on this
 * host, restored with hydrate; a fork is a new sandbox hydrated from one;
 * tunnels are `expose`.
 */
#ifndef SFS_CLOUDFLARE_H
#define SFS_CLOUDFLARE_H

#include "../http/http.h"
#include "../options.h"
#include "../provider.h"

/* The workspace when the bridge does not name one (the upstream bridge
 * confines files and cwd to it). */
#define CF_WORKSPACE "/workspace"

/* ---- api.c ---------------------------------------------------------------- */

/* The bridge's base URL (malloc'd) and token, from the environment or the
 * config; fills err naming the variable that is missing. */
int cf_creds(char **url, const char **token, struct sfs_err *err);

/* A call to base + path; req->url, auth, what and the timeout are filled in. */
int cf_req(const char *path, struct sfs_http_req *req, struct sfs_http_resp *resp,
	   struct sfs_err *err);
/* A non-2xx answer as an errno with the bridge's message ("error" of its
 * JSON body, redacted by sfs_errf). */
int cf_status_err(const char *what, const char *subject, struct sfs_http_resp *resp,
		  struct sfs_err *err);
/* A JSON call: *out (may be NULL) gets the answer. */
int cf_call(const char *method, const char *path, json_t **out, struct sfs_err *err);
/* "/v1/sandbox/ID" + suffix. */
int cf_path(const char *id, const char *suffix, char *buf, size_t len, struct sfs_err *err);

/* "/v1/sandbox/ID" + suffix for a call on sb from any thread (a copy of
 * sb->id), counted in flight until cf_sb_end.  -ENOENT once sb is being
 * destroyed: the bridge makes a fresh sandbox for any id it is sent, so
 * nothing may reach a destroyed one's id again. */
int cf_sb_begin(struct sfs_sandbox *sb, const char *suffix, char *buf, size_t len,
		struct sfs_err *err);
void cf_sb_end(struct sfs_sandbox *sb);
/* Refuses new calls on sb and waits (at most wait_ms) for those in flight;
 * with undo, takes that back (the DELETE failed). */
int cf_sb_closing(struct sfs_sandbox *sb, bool undo, long wait_ms);
void cf_state_free(struct sfs_sandbox *sb);

/* ---- exec.c --------------------------------------------------------------- */

/*
 * The exec answer's event stream, decoded incrementally (bytes may be split
 * anywhere between reads): stdout and stderr events carry base64 chunks,
 * `exit` {"exit_code": N} ends it, `error` {"error", "code"} fails it.
 */
struct cf_exec_dec {
	struct sfs_sse sse;
	/* Each decoded chunk (stream 1 stdout, 2 stderr); a non-zero return
	 * stops the feed and is returned. */
	int (*on_data)(int stream, const void *data, size_t len, void *arg);
	void *arg;
	int exit;	   /* -1 until the exit event */
	char failure[512]; /* an error event's message */
	bool bad;	   /* an event that could not be read */
};
void cf_exec_dec_init(struct cf_exec_dec *d, int (*on_data)(int, const void *, size_t, void *),
		      void *arg);
/* 0, -EPROTO (bad base64 or JSON, data after the exit), -ENOMEM, or
 * on_data's return. */
int cf_exec_dec_feed(struct cf_exec_dec *d, const void *data, size_t n);
void cf_exec_dec_free(struct cf_exec_dec *d);

/* A command of the shell kit run to its end (one exec): *out (may be NULL)
 * gets its stdout (length in *outlen), *exit its status; a failing
 * command's stderr lands in err's message.  timeout_ms 0: cloudflare.timeout. */
struct sfs_sh_cmd;
int cf_exec_cmd(struct sfs_sandbox *sb, const struct sfs_sh_cmd *cmd, long timeout_ms, int *exit,
		char **out, size_t *outlen, struct sfs_err *err);
/* workspace + "/" + rel, malloc'd. */
char *cf_abs_path(struct sfs_sandbox *sb, const char *rel);

/* ---- files.c -------------------------------------------------------------- */

int cf_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err);
int cf_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
	       struct sfs_err *err);
int cf_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err);
/* Many files in one exec (a tar of them, base64-framed). */
int cf_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		    int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		    void *arg, struct sfs_err *err);
int cf_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err);
int cf_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err);
int cf_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int cf_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err);
int cf_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err);
int cf_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int cf_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		  struct sfs_err *err);
/* The workspace as a tar (persist) into fd, and a tar from fd unpacked at
 * the workspace (hydrate). */
int cf_persist(const char *id, int fd, struct sfs_err *err);
int cf_hydrate(const char *id, int fd, struct sfs_err *err);

/* The kit's file scripts and run polls through exec (sh/fsops.c). */
struct sfs_sh_exec;
extern const struct sfs_sh_exec cf_sh;

/* ---- runs.c --------------------------------------------------------------- */

int cf_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int cf_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
ssize_t cf_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err);

/* options.c: the -o cloudflare.KEY rows (providers/options.h). */
extern const struct sfs_opt sfs_cloudflare_options[];

#endif
