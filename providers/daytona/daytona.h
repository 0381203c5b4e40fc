/*
 * The Daytona provider (provider-apis.md §1) over the HTTP kit.
 *
 * A sandbox is a Daytona sandbox; sb->id is its id, its private state
 * (sb->priv, saved as pdata.toolbox) its toolbox base URL
 * ({toolboxProxyUrl}/{id}), sb->workspace its work dir.
 * Files go through the toolbox file API; runs are detached session
 * commands under a small sh wrapper that writes the journal and status
 * into a directory in the sandbox; the journal is read back in bounded,
 * base64-framed pieces (poll).  Daytona cannot kill one process, so
 * killableProcesses is false and `cancel` destroys the sandbox.
 */
#ifndef SFS_DAYTONA_H
#define SFS_DAYTONA_H

#include "../http/http.h"
#include "../options.h"
#include "../provider.h"

#define DT_DEFAULT_API "https://app.daytona.io/api"

/* ---- api.c ---------------------------------------------------------------- */

/* A control-plane call: path below the API base ("/sandbox/ID"). */
int dt_api(const char *method, const char *path, json_t *body, json_t **out, long *status,
	   struct sfs_err *err);
/* A toolbox call for sb: path below its toolbox URL ("/files?path=..."). */
int dt_toolbox(struct sfs_sandbox *sb, const char *method, const char *path, json_t *body,
	       json_t **out, struct sfs_err *err);
/* The same with the request spelled out (uploads, downloads, timeouts);
 * req->url and auth are filled in here. */
int dt_toolbox_req(struct sfs_sandbox *sb, const char *path, struct sfs_http_req *req,
		   struct sfs_http_resp *resp, struct sfs_err *err);
/* Daytona's private state hooks (provider.h state_save/load/free). */
json_t *dt_state_save(const struct sfs_sandbox *sb);
int dt_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err);
void dt_state_free(struct sfs_sandbox *sb);
/* Moves src's private state into dst (restore: the new sandbox takes the
 * old one's place) and frees what dst had. */
void dt_state_take(struct sfs_sandbox *dst, struct sfs_sandbox *src);
/* Records a sandbox object's id (published) and toolbox URL (private). */
int dt_adopt(struct sfs_sandbox *sb, json_t *sandbox, struct sfs_err *err);
/* Polls the sandbox until its state is `want` (fails on error states). */
int dt_wait_state(struct sfs_sandbox *sb, const char *want, struct sfs_err *err);
/* Fills sb->workspace from the toolbox's work dir. */
int dt_fetch_workdir(struct sfs_sandbox *sb, struct sfs_err *err);
/* The API key, or NULL (and why in `why`). */
const char *dt_api_key(void);

/* A command of the shell kit (providers/sh), sent as one quoted command
 * line; *out (may be NULL) gets the merged output, *exit its status. */
struct sfs_sh_cmd;
int dt_exec_cmd(struct sfs_sandbox *sb, const struct sfs_sh_cmd *cmd, long timeout_ms, int *exit,
		char **out, struct sfs_err *err);
/* sh -c SCRIPT sandboxfs ARGS... (args NULL-terminated, may be NULL): the
 * values travel as positional parameters, never inside the script. */
int dt_exec(struct sfs_sandbox *sb, const char *script, const char *const *args, long timeout_ms,
	    int *exit, char **out, struct sfs_err *err);
/* workspace + "/" + rel, malloc'd and query-escaped when escape. */
char *dt_abs_path(struct sfs_sandbox *sb, const char *rel, bool escape);

/* ---- files.c -------------------------------------------------------------- */

int dt_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err);
int dt_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
	       struct sfs_err *err);
int dt_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err);
/* bulk.c: several files in one call (provider.h fs_read_many). */
int dt_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		    int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		    void *arg, struct sfs_err *err);
int dt_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err);
int dt_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err);
int dt_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int dt_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err);
int dt_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err);
int dt_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int dt_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		  struct sfs_err *err);

/* ---- runs.c --------------------------------------------------------------- */

int dt_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int dt_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
ssize_t dt_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err);

/* A toolbox FileInfo object to attributes (files.c); *st->link is malloc'd. */
int dt_file_info_from_json(json_t *o, struct sfs_rstat *st);

/* options.c: the -o daytona.KEY rows (providers/options.h). */
extern const struct sfs_opt sfs_daytona_options[];

#endif
