/*
 * The E2B provider (provider-apis.md §5) over the HTTP kit.
 *
 * A sandbox is an E2B sandbox; sb->id is its sandboxID, its private state
 * (sb->priv, saved as pdata) the domain and envd access token its create
 * answer gave.  The control plane is plain JSON (X-API-Key); the data plane,
 * envd, speaks Connect-RPC: unary JSON calls (filesystem.Filesystem, most of
 * process.Process) and server-streaming envelopes (process.Process/Start,
 * decoded by providers/http/connect.c).  Runs are the shell kit's journal
 * wrapper started through Start (the stream is read to the start event and
 * dropped; the wrapper goes on); journals, statuses and kills are the kit's
 * scripts run through Start and read to their end.  Files go through envd's
 * /files (bytes) and filesystem.Filesystem (metadata; ListDir gives the
 * attributes of a whole directory in one call).
 */
#ifndef SFS_E2B_H
#define SFS_E2B_H

#include "../http/http.h"
#include "../options.h"
#include "../provider.h"

#define E2B_DEFAULT_DOMAIN "e2b.app"
#define E2B_ENVD_PORT 49983

/* ---- api.c ---------------------------------------------------------------- */

/* The API key, or NULL. */
const char *e2b_api_key(void);
/* A control-plane call: path below the API base ("/sandboxes/ID"). */
int e2b_api(const char *method, const char *path, json_t *body, json_t **out, long *status,
	    struct sfs_err *err);
/* A unary envd Connect call ("filesystem.Filesystem/Stat"). */
int e2b_rpc(struct sfs_sandbox *sb, const char *method, json_t *body, json_t **out,
	    struct sfs_err *err);
/* An envd HTTP request below its base ("/files?path=..."): url, headers and
 * auth filled in here. */
int e2b_envd_req(struct sfs_sandbox *sb, const char *path, struct sfs_http_req *req,
		 struct sfs_http_resp *resp, struct sfs_err *err);

/* The events of a process stream (Start or Connect). */
struct e2b_events {
	/* each returns 0 to go on, >0 to drop the stream quietly, <0 an error */
	int (*on_start)(long pid, void *arg);
	int (*on_data)(int fd, const char *data, size_t len, void *arg); /* 1 stdout, 2 stderr */
	int (*on_end)(int code, bool exited, const char *status, void *arg);
	void *arg;
	const int *stop; /* read atomically: once set, the stream is dropped */
};
/* POSTs process.Process/METHOD (Start or Connect) with body as the one
 * request envelope and delivers the events; 0 once the stream ended (its
 * end-of-stream error, if any, is the error) or a handler dropped it. */
int e2b_stream(struct sfs_sandbox *sb, const char *method, json_t *body, long timeout_ms,
	       const struct e2b_events *ev, struct sfs_err *err);

/* The Start request for a shell kit command (argv), run in the user's home:
 * envs (taken over; NULL: none) its environment, stdin_open whether envd
 * keeps a pipe to its stdin.  NULL on ENOMEM. */
struct sfs_sh_cmd;
json_t *e2b_start_body(const struct sfs_sh_cmd *cmd, json_t *envs, bool stdin_open);
/* Runs a shell kit command to its end: *exit its status, *out (may be NULL)
 * its stdout (*out_len its length: it may hold any bytes). */
struct sfs_sh_cmd;
int e2b_exec_cmd(struct sfs_sandbox *sb, const struct sfs_sh_cmd *cmd, long timeout_ms, int *exit,
		 char **out, size_t *out_len, struct sfs_err *err);
/* sh -c SCRIPT sandboxfs ARGS... (args NULL-terminated, may be NULL). */
int e2b_exec(struct sfs_sandbox *sb, const char *script, const char *const *args, int *exit,
	     char **out, struct sfs_err *err);

/* Records a Sandbox answer: sandboxID (published), domain and envd access
 * token (private). */
int e2b_adopt(struct sfs_sandbox *sb, json_t *o, struct sfs_err *err);
/* Fills sb->workspace with the user's home (where Start runs by default). */
int e2b_fetch_workdir(struct sfs_sandbox *sb, struct sfs_err *err);
/* workspace + "/" + rel, malloc'd (a copy: callable without op_mutex). */
char *e2b_abs_path(struct sfs_sandbox *sb, const char *rel);
/* The shell kit's run scripts and bulk read through envd's process Start
 * (runs.c). */
struct sfs_sh_exec;
extern const struct sfs_sh_exec e2b_sh;
/* Seconds a sandbox lives without a call that extends it (config). */
long e2b_sandbox_timeout(void);

json_t *e2b_state_save(const struct sfs_sandbox *sb);
int e2b_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err);
void e2b_state_free(struct sfs_sandbox *sb);
/* Moves src's private state into dst and frees what dst had. */
void e2b_state_take(struct sfs_sandbox *dst, struct sfs_sandbox *src);

/* ---- files.c -------------------------------------------------------------- */

int e2b_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st,
		struct sfs_err *err);
int e2b_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
		struct sfs_err *err);
int e2b_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err);
int e2b_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		     int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		     void *arg, struct sfs_err *err);
int e2b_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode,
		 struct sfs_err *err);
int e2b_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err);
int e2b_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int e2b_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err);
int e2b_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err);
int e2b_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int e2b_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		   struct sfs_err *err);
/* An EntryInfo object to attributes; *st->link is malloc'd. */
int e2b_entry_from_json(json_t *o, struct sfs_rstat *st);

/* ---- runs.c --------------------------------------------------------------- */

int e2b_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int e2b_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
ssize_t e2b_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			 size_t max, struct sfs_err *err);
int e2b_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		 struct sfs_err *err);
int e2b_stdin_write(struct sfs_sandbox *sb, struct sfs_run *run, const void *buf, size_t len,
		    struct sfs_err *err);
int e2b_stdin_close(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);

/* ---- follow.c ------------------------------------------------------------- */

int e2b_journal_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		       void **follower, struct sfs_err *err);
void e2b_journal_unfollow(struct sfs_sandbox *sb, void *follower);

/* options.c: the -o e2b.KEY rows. */
extern const struct sfs_opt sfs_e2b_options[];

#endif
