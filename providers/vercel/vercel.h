/*
 * The Vercel Sandbox provider (provider-apis.md §2) over the HTTP kit, on
 * the v2 API: a named sandbox owns a sequence of sessions (VM runs), and
 * exec, files and snapshots go to the current session.
 *
 * sb->id is the sandbox's name (v2 routes key by it); its private state
 * (sb->priv, saved as pdata.session) the current session's id.  Runs are
 * detached commands (`wait` false) under the shell kit's journal wrapper,
 * journals are polled with the kit's bounded read through a waited command
 * (NDJSON), so output survives the daemon.  The command API's kill signals
 * the command it started, which is the wrapper, not the run's process group
 * (the wrapper setsid's it): killableProcesses is false and `cancel`
 * destroys the sandbox.  Files: reads and writes through the file routes
 * (writes and source trees as one gzip'd tar), everything else through the
 * kit's file scripts (the API has no list, stat, rename, delete or chmod).
 */
#ifndef SFS_VERCEL_H
#define SFS_VERCEL_H

#include "../http/http.h"
#include "../options.h"
#include "../provider.h"

#define VC_DEFAULT_API "https://api.vercel.com"

/* ---- api.c ---------------------------------------------------------------- */

/* Who we are to the API: a token and the team and project it acts in. */
struct vc_creds {
	const char *token; /* VERCEL_TOKEN or VERCEL_OIDC_TOKEN (registered as a secret) */
	char team[128];
	char project[128];
};
/* The credentials from the environment or config; fills err naming the
 * variable that is missing (or the OIDC token that cannot be read). */
int vc_creds(struct vc_creds *c, struct sfs_err *err);
/* The team and project claims (owner_id, project_id) of an OIDC token: its
 * payload base64url-decoded, no signature check.  0 or -EINVAL. */
int vc_oidc_claims(const char *jwt, char *team, size_t tlen, char *project, size_t plen);

/* A call below the API base.  query (may be NULL) is appended after
 * teamId (and projectId when project); req->url, auth, what and the
 * timeout are filled in here. */
int vc_req(const char *path, const char *query, bool project, struct sfs_http_req *req,
	   struct sfs_http_resp *resp, struct sfs_err *err);
/* The same for a JSON call: a non-2xx answer is an error with the API's
 * message; *out (may be NULL) gets the answer. */
int vc_call(const char *method, const char *path, const char *query, bool project, json_t *body,
	    json_t **out, struct sfs_err *err);
/* "/v2/sandboxes/sessions/SID" + suffix for sb's current session. */
int vc_session_path(struct sfs_sandbox *sb, const char *suffix, char *buf, size_t len,
		    struct sfs_err *err);
/* Records the answer of a create/get/fork ({sandbox, session}): the
 * sandbox's name as sb->id, its session (private), its cwd as the workspace. */
int vc_adopt(struct sfs_sandbox *sb, json_t *answer, struct sfs_err *err);

json_t *vc_state_save(const struct sfs_sandbox *sb);
int vc_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err);
void vc_state_free(struct sfs_sandbox *sb);

/* A command of the shell kit run to its end in sb's session (wait: true):
 * *out (may be NULL) gets its stdout (len in *outlen when not NULL), *exit
 * its exit status; stderr lands in err's message when it fails.  With b64,
 * stdout travels base64-framed (binary and non-UTF-8 bytes survive). */
struct sfs_sh_cmd;
int vc_exec_cmd(struct sfs_sandbox *sb, const struct sfs_sh_cmd *cmd, bool b64, long timeout_ms,
		int *exit, char **out, size_t *outlen, struct sfs_err *err);
/* workspace + "/" + rel, malloc'd. */
char *vc_abs_path(struct sfs_sandbox *sb, const char *rel);

/* ---- files.c -------------------------------------------------------------- */

int vc_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err);
int vc_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
	       struct sfs_err *err);
int vc_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err);
/* Many files in one waited command (a tar of them, base64-framed). */
int vc_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		    int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		    void *arg, struct sfs_err *err);
int vc_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err);
int vc_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err);
int vc_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int vc_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err);
int vc_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err);
int vc_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int vc_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		  struct sfs_err *err);

/* The kit's file scripts and run polls through waited commands (sh/fsops.c). */
struct sfs_sh_exec;
extern const struct sfs_sh_exec vc_sh;

/* ---- runs.c --------------------------------------------------------------- */

int vc_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int vc_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
ssize_t vc_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err);

/* options.c: the -o vercel.KEY rows (providers/options.h). */
extern const struct sfs_opt sfs_vercel_options[];

#endif
