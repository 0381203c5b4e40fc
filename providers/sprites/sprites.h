/*
 * The Sprites provider (provider-apis.md §3) over the HTTP kit and its
 * WebSocket client.
 *
 * A sandbox is a sprite; sb->id is its name (sprites are addressed by name),
 * sb->workspace its $HOME.  There is no start/stop: sprites sleep when idle
 * and wake on any call.  Commands run over the exec WebSocket (one
 * stream-id byte before each binary message's payload: 0 stdin, 1 stdout,
 * 2 stderr, 3 exit, 4 stdin EOF).  A run is one exec session running the
 * shell kit's journal wrapper, kept alive after its socket closes
 * (max_run_after_disconnect), so output and status outlive the daemon's
 * connection; stdin is written by attaching to that session.  Files go
 * through the fs/ routes, snapshots are checkpoints, network= is the
 * network policy route, and port 8080 is the sprite's URL.
 */
#ifndef SFS_SPRITES_H
#define SFS_SPRITES_H

#include "../http/http.h"
#include "../http/ws.h"
#include "../options.h"
#include "../provider.h"

#define SP_DEFAULT_API "https://api.sprites.dev"

/* ---- api.c ---------------------------------------------------------------- */

/* The token ($SPRITES_TOKEN, $SPRITE_TOKEN or sprites.token), or NULL. */
const char *sp_token(void);
/* A JSON call: path below the API base ("/v1/sprites/NAME"). */
int sp_api(const char *method, const char *path, json_t *body, json_t **out, long *status,
	   struct sfs_err *err);
/* The same with the request spelled out (raw bodies, sinks); url and auth
 * are filled in here; resp is the kit's. */
int sp_api_req(const char *path, struct sfs_http_req *req, struct sfs_http_resp *resp,
	       struct sfs_err *err);
/* An NDJSON call (checkpoint, restore, kill): every line to on_value; an
 * {"type":"error"} line fails with its text. */
int sp_api_ndjson(const char *method, const char *path, json_t *body,
		  int (*on_value)(json_t *v, void *arg), void *arg, struct sfs_err *err);
/* "/v1/sprites/NAME" + rest (rest may hold a query) into buf: 0, or
 * -ENAMETOOLONG when it does not fit (never cut). */
int sp_path(char *buf, size_t len, const char *name, const char *rest)
    __attribute__((warn_unused_result));

/* ---- exec.c --------------------------------------------------------------- */

struct sp_exec {
	const char *const *argv; /* the command, argv[0] first (NULL-terminated) */
	const char *dir;	 /* working directory, or NULL */
	bool stdin_open;	 /* stdin=true */
	const char *keep;	 /* max_run_after_disconnect, or NULL (the default) */
	long session;		 /* attach to this session instead (argv unused), or 0 */
};
/* Opens an exec WebSocket; *session gets the session id from session_info
 * (0 when none came). */
int sp_exec_open(struct sfs_sandbox *sb, const struct sp_exec *e, struct sfs_ws **ws, long *session,
		 struct sfs_err *err);
/* The session id of a text message that is session_info, else 0. */
long sp_session_info(const uint8_t *d, size_t len);
/* Runs a command to its end: stdout to *out (may be NULL), its exit code. */
int sp_exec_capture(struct sfs_sandbox *sb, const char *const *argv, long timeout_ms, int *exit,
		    char **out, size_t *outlen, struct sfs_err *err);
/* The kill route for a session (NDJSON progress up to "complete"); 0 also
 * when it had ended (410) or is unknown (404). */
int sp_kill_session(struct sfs_sandbox *sb, long session, const char *signal, const char *timeout,
		    struct sfs_err *err);

/* ---- runs.c --------------------------------------------------------------- */

int sp_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int sp_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
ssize_t sp_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err);
int sp_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		struct sfs_err *err);
int sp_stdin_write(struct sfs_sandbox *sb, struct sfs_run *run, const void *buf, size_t len,
		   struct sfs_err *err);
int sp_stdin_close(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int sp_journal_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		      void **follower, struct sfs_err *err);
void sp_journal_unfollow(struct sfs_sandbox *sb, void *follower);

/* ---- files.c -------------------------------------------------------------- */

int sp_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err);
int sp_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
	       struct sfs_err *err);
int sp_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err);
int sp_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err);
int sp_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int sp_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err);
int sp_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err);
int sp_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		    int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		    void *arg, struct sfs_err *err);
int sp_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int sp_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err);
int sp_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		  struct sfs_err *err);

/* options.c */
extern const struct sfs_opt sfs_sprites_options[];

#endif
