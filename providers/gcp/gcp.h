/*
 * The gcp provider (issue 16), first layer: OAuth access tokens for the
 * Google APIs.  A service-account JSON key (GOOGLE_APPLICATION_CREDENTIALS)
 * gives an RS256-signed JWT that is exchanged at the key's token_uri
 * (RFC 7523 bearer grant); or, with no key file, the metadata server
 * (GCE_METADATA_HOST or gcp.metadata_url) hands out the token.  Tokens are
 * cached until shortly before they expire.  FUSE-free: part of sfs_core.
 * Options are passed in by the caller (this file reads no configuration).
 */
#ifndef SFS_GCP_H
#define SFS_GCP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "../err.h"
#include "../options.h"

#define GCP_TOKEN_AUD "https://oauth2.googleapis.com/token"
#define GCP_SCOPE_CLOUD "https://www.googleapis.com/auth/cloud-platform"
/* a JWT lives this long (Google's maximum) */
#define GCP_JWT_LIFETIME 3600
/* a token counts as stale this long before it expires (google-auth: 3 min 45 s) */
#define GCP_TOKEN_EARLY 225

extern const struct sfs_opt sfs_gcp_options[];

/* ---- the service-account key ------------------------------------------------ */

struct gcp_key {
	char *client_email, *private_key_id, *token_uri, *project_id; /* project_id may be NULL */
	void *pkey;						      /* EVP_PKEY * */
};

/* Parses a key file's text; origin names it in messages (never the key
 * material).  -EINVAL naming the missing field, a type other than
 * service_account, or a private_key that is not an RSA PEM. */
int gcp_key_parse(const char *text, const char *origin, struct gcp_key *k, struct sfs_err *err);
/* Reads and parses the file at path (-ENOENT/-EACCES when unreadable). */
int gcp_key_load(const char *path, struct gcp_key *k, struct sfs_err *err);
void gcp_key_free(struct gcp_key *k);

/* The signed assertion header.claims.signature (base64url, no padding) with
 * iss = client_email, the scope, aud, iat = now, exp = now + 1 h; malloc'd. */
int gcp_jwt_build(const struct gcp_key *k, const char *scope, const char *aud, time_t now,
		  char **out, struct sfs_err *err);

/* ---- the token source with its cache ---------------------------------------- */

struct gcp_auth {
	pthread_mutex_t lock; /* held across a refresh: one exchange at a time */
	bool have_key;
	struct gcp_key key;
	char *token_url;    /* where the JWT is exchanged (gcp.oauth_url, else token_uri) */
	char *metadata_url; /* metadata server root, e.g. http://127.0.0.1:8080; NULL: none */
	char *scope;
	char *token;	       /* the cached access token, NULL: none */
	time_t stale_at;       /* when to fetch a new one */
	unsigned long fetches; /* tokens obtained so far (tests) */
	time_t (*now)(void);   /* the cache's clock; tests replace it (a JWT's iat
				* is always the wall clock: the server checks it) */
};

/*
 * Chooses the source: the key file at key_path (GOOGLE_APPLICATION_CREDENTIALS
 * when NULL), else the metadata server at metadata_url (when NULL:
 * http://$GCE_METADATA_HOST).  token_url (gcp.oauth_url, may be NULL)
 * overrides the key's token_uri.  -ENOENT naming both when there is neither;
 * a bad key file is its own error.  Fetches nothing yet.
 */
int gcp_auth_init(struct gcp_auth *a, const char *key_path, const char *token_url,
		  const char *metadata_url, struct sfs_err *err);
/* A valid access token (malloc'd), from the cache or freshly fetched.
 * Thread-safe.  Errors name the endpoint and Google's error, never the key
 * or the assertion; the token is registered with the redactor. */
int gcp_auth_token(struct gcp_auth *a, char **out, struct sfs_err *err);
/* Drops the cached token (after a 401 from an API). */
void gcp_auth_invalidate(struct gcp_auth *a);
void gcp_auth_free(struct gcp_auth *a);
/* When a token fetched at now with expires_in seconds counts as stale:
 * GCP_TOKEN_EARLY before expiry, or halfway for short-lived tokens. */
time_t gcp_token_stale_at(time_t now, long expires_in);

/* ---- api.c: the process's session and one authenticated call ------------- */

#include <jansson.h>
#include <sys/types.h>

/* The token source of this process (one per daemon: the credentials come
 * from its environment), made on first use; -ENOENT etc. as gcp_auth_init. */
int gcp_session(struct gcp_auth **out, struct sfs_err *err);
/* Frees it (at unmount). */
void gcp_session_shutdown(void);

/* API roots without a trailing '/', malloc'd: gcp.storage_url, else
 * STORAGE_EMULATOR_HOST (host:port or a URL), else storage.googleapis.com;
 * gcp.run_url / CLOUDSDK_API_ENDPOINT_OVERRIDES_RUN; gcp.logging_url /
 * CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING. */
char *gcp_storage_url(void);
char *gcp_run_url(void);
char *gcp_logging_url(void);

struct gcp_call {
	const char *method, *url;
	const char *const *headers; /* NULL-terminated "Name: value", or NULL */
	json_t *json;		    /* body as JSON (borrowed), or */
	const void *body;	    /* a raw body */
	size_t body_len;
	const char *content_type;
	int sink_fd;	      /* >= 0: a 2xx body goes into this file (offset 0) */
	const char *capture;  /* a response header whose value goes to *hdr */
	bool retry_unsafe;    /* repeating this POST is harmless */
	bool ok_308;	      /* 308 is an answer (a resumable upload's "go on") */
	const char *what;     /* for messages: "gcs GET gs://b/o" */
	unsigned long *calls; /* counted per attempt, or NULL */
};
/*
 * One call with the session's bearer token (a 401 drops the cached token
 * and the call is made once more with a fresh one); 429/5xx are retried
 * by the HTTP kit (Retry-After honoured).  A non-2xx answer becomes
 * "gcp: WHAT: HTTP n STATUS: message (hint)" with its errno; *status (may
 * be NULL) gets the status, *out (may be NULL) the JSON body of a 2xx,
 * *hdr (may be NULL) the captured header.
 */
int gcp_call(const struct gcp_call *c, long *status, json_t **out, char **hdr, struct sfs_err *err);
/* A proto3/GCS int64 (a string of digits, or a number); -1 when neither. */
long long gcp_int64(json_t *v);
/* RFC 3339 "2026-12-01T01:02:03.456Z" as unix seconds; 0 when unreadable. */
int64_t gcp_time(const char *s);

/* ---- gcs.c: the Cloud Storage JSON API -------------------------------- */

/* Above this a write goes up as a resumable upload in GCS_CHUNK pieces
 * (a multiple of 256 KiB, as GCS requires of every chunk but the last). */
#define GCS_RESUMABLE_MIN (8L << 20)
#define GCS_CHUNK (8L << 20)
/* Object metadata keys: the ones gsutil/gcloud `--preserve-posix` use, so
 * other tools read the same modes and times (mode: octal permission bits,
 * mtime: unix seconds). */
#define GCS_META_MODE "goog-reserved-posix-mode"
#define GCS_META_MTIME "goog-reserved-file-mtime"

/* A symlink is an empty object whose metadata holds its target, as
 * gcsfuse (Cloud Run's Cloud Storage volumes) writes and reads them. */
#define GCS_META_SYMLINK "gcsfuse_symlink_target"

struct gcs_obj {
	char *name;
	int64_t size;
	int64_t mtime; /* the metadata's mtime, else "updated" */
	unsigned mode; /* permission bits from the metadata; 0 when none */
	char *link;    /* a symlink's target, else NULL */
};
struct gcs_list {
	struct gcs_obj *objs;
	size_t nobjs;
	char **prefixes;
	size_t nprefixes;
};
void gcs_list_free(struct gcs_list *l);
/* Parses one objects.list page (items, prefixes), appending to l; the
 * next page's token (malloc'd) goes to *next, NULL on the last page. */
int gcs_parse_list(json_t *o, struct gcs_list *l, char **next);
/* Every object under prefix (with delim, "/"-delimited: sub-prefixes come
 * as prefixes), all pages; max 0 = no limit. */
int gcs_list(const char *bucket, const char *prefix, bool delim, size_t max, struct gcs_list *l,
	     struct sfs_err *err);
/* One object's metadata: -ENOENT (no message) when absent. */
int gcs_stat(const char *bucket, const char *name, struct gcs_obj *o, struct sfs_err *err);
void gcs_obj_free(struct gcs_obj *o);
/* Its contents into fd. */
int gcs_download(const char *bucket, const char *name, int fd, struct sfs_err *err);
/* Uploads size bytes of fd (offset 0) as name with mode/mtime metadata:
 * multipart up to GCS_RESUMABLE_MIN, resumable above. */
int gcs_upload_fd(const char *bucket, const char *name, int fd, off_t size, unsigned mode,
		  int64_t mtime, struct sfs_err *err);
/* An empty object (a directory marker) with metadata, plus extra's
 * string members (may be NULL). */
int gcs_put_empty(const char *bucket, const char *name, unsigned mode, int64_t mtime, json_t *extra,
		  struct sfs_err *err);
/* An object's custom metadata (a new object, {} when it has none). */
int gcs_metadata(const char *bucket, const char *name, json_t **md, struct sfs_err *err);
/* Server-side copy (rewrite, repeated until done); mode 0 keeps metadata. */
int gcs_rewrite(const char *bucket, const char *src, const char *dst, struct sfs_err *err);
/* PATCH of the mode/mtime metadata. */
int gcs_set_meta(const char *bucket, const char *name, unsigned mode, int64_t mtime,
		 struct sfs_err *err);
/* Delete; an absent object is -ENOENT. */
int gcs_delete(const char *bucket, const char *name, struct sfs_err *err);

/* ---- files.c: the workspace prefix ------------------------------------- */

struct sfs_sandbox;
struct sfs_rstat;
struct sfs_rdirent;

/* A sandbox's bucket and root prefix (ends in '/') from its id "B/ROOT". */
struct gcp_ws {
	char bucket[256];
	char root[1024];
};
int gcp_ws_of(struct sfs_sandbox *sb, struct gcp_ws *w, struct sfs_err *err);

int gcp_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st,
		struct sfs_err *err);
int gcp_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
		struct sfs_err *err);
int gcp_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err);
int gcp_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode,
		 struct sfs_err *err);
int gcp_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int gcp_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err);
int gcp_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err);
int gcp_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int gcp_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		   struct sfs_err *err);
/* Copies every object under from (a prefix ending in '/') to the same
 * names under to; with mirror, then deletes what to has beyond them (all
 * copies before any delete), without, a failed copy takes back the copies
 * made so far.  Used by rename, snapshots and restore. */
int gcp_copy_prefix(const char *bucket, const char *from, const char *to, bool mirror,
		    struct sfs_err *err);
/* Deletes every object under prefix. */
int gcp_delete_prefix(const char *bucket, const char *prefix, struct sfs_err *err);

/* ---- gcp.c: a sandbox's job settings (the registry's pdata) ------------ */

/* What `new` recorded: project, region, cpu, memory (strings, "" when
 * unset); copies into the caller's buffers under the provider's leaf lock. */
struct gcp_settings {
	char project[128], region[64], cpu[16], memory[16];
};
void gcp_settings_of(struct sfs_sandbox *sb, struct gcp_settings *s);

/* ---- runs.c: Cloud Run Jobs executions and Cloud Logging ---------------- */

struct sfs_run;
/* What a run needs that the sandbox lacks ("gcp.project, image"), "" when
 * nothing; into buf. */
const char *gcp_run_missing(struct sfs_sandbox *sb, char *buf, size_t len);
int gcp_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int gcp_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
ssize_t gcp_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			 size_t max, struct sfs_err *err);
int gcp_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		 struct sfs_err *err);
/* The job's name for a sandbox: "sfs-" + its key, lower case. */
void gcp_job_id(struct sfs_sandbox *sb, char *buf, size_t len);
/* Deletes the job made for the sandbox (at destroy); an absent job is fine. */
int gcp_job_delete(struct sfs_sandbox *sb, struct sfs_err *err);
/* `new … source=`: the tar goes up as one object, one execution unpacks it. */
int gcp_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err);
/* Frees the runs' in-memory state (at unmount). */
void gcp_runs_shutdown(void);

/* ---- snap.c: snapshots as server-side copies ---------------------------- */

int gcp_snapshot(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err);
int gcp_restore(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err);
int gcp_snapshot_delete(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err);

#endif
