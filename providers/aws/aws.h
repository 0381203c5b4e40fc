/*
 * The aws provider (issue 16; docs/aws.md): a sandbox is the S3 prefix
 * s3://BUCKET/PREFIX/NAME/ through the remote workspace layer; runs (ECS
 * tasks) are not written yet.  This header is the pure part: the
 * credential/region/endpoint chain from env and the ~/.aws files, and the
 * signed headers of one request.
 */
#ifndef SFS_AWS_H
#define SFS_AWS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../err.h"
#include "../options.h"

#define AWS_DEFAULT_REGION "us-east-1"

extern const struct sfs_opt sfs_aws_options[];

/* ---- config.c: the standard chain, as far as it is env and files ---------- */

struct aws_config {
	char *access_key, *secret_key, *session_token; /* NULL when none found */
	char *region;
	char *profile;
	/* where the keys came from: "environment", "credentials file PATH [NAME]",
	 * "config file PATH [profile NAME]"; "" when none */
	char *creds_source;
	/* endpoint bases without a trailing '/' (default AWS hosts when not
	 * overridden) and whether S3 is path-style */
	char *s3_endpoint, *ecs_endpoint, *logs_endpoint, *codebuild_endpoint;
	bool s3_path_style;
};

/*
 * Fills c from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN, AWS_PROFILE, AWS_REGION, AWS_DEFAULT_REGION,
 * AWS_SHARED_CREDENTIALS_FILE, AWS_CONFIG_FILE, AWS_ENDPOINT_URL[_S3|_ECS|
 * _CLOUDWATCH_LOGS]) and the two files; region_opt (aws.region) and
 * addressing_opt (aws.s3_addressing: auto|path|virtual) may be NULL.  Missing
 * keys are not an error here (aws_config_missing names them); a profile
 * named by AWS_PROFILE that neither file has is -ENOENT.  The secret and
 * the token are registered with the redactor.
 */
int aws_config_load(struct aws_config *c, const char *region_opt, const char *addressing_opt,
		    struct sfs_err *err);
void aws_config_free(struct aws_config *c);
/* "" when c can sign requests, else what is missing, for status and errors. */
const char *aws_config_missing(const struct aws_config *c);

/* The value of key in [section] of an INI text (~/.aws style: '#'/';'
 * comments, "k = v", indented lines below an empty "parent =" are
 * "parent.k"), malloc'd; NULL when absent. */
char *aws_ini_get(const char *text, const char *section, const char *key);

/* ---- sign.c: the headers of one signed request ----------------------------- */

#define AWS_MAX_HDRS 24

struct aws_signed {
	char *lines[AWS_MAX_HDRS];	    /* "Name: value", owned */
	const char *list[AWS_MAX_HDRS + 1]; /* the same, NULL-terminated: sfs_http_req.headers */
	size_t n;
};

/*
 * Signs method + url (absolute, path already percent-encoded as
 * sfs_sigv4_uri_encode does) for service at time now: adds Host,
 * X-Amz-Date, X-Amz-Security-Token (when a session token is set, signed),
 * for S3 X-Amz-Content-Sha256 (payload_hash, or the body's hash when it is
 * NULL; UNSIGNED-PAYLOAD for a streamed body), then Authorization.  extra
 * ("Name: value", NULL-terminated, may be NULL) are sent and signed.
 */
int aws_sign(const struct aws_config *c, const char *service, const char *method, const char *url,
	     const char *const *extra, const char *payload_hash, const void *body, size_t len,
	     time_t now, struct aws_signed *out, struct sfs_err *err);
void aws_signed_free(struct aws_signed *s);

/* ---- s3.c: the S3 calls, path-style or virtual-host ----------------------- */

struct sfs_buf;

/* One S3 request on key (NULL: the bucket itself) with query (NULL: none,
 * already encoded), extra headers ("Name: value", NULL-terminated) signed;
 * body in memory (hashed) or none.  With sink_fd >= 0 a 2xx body goes into
 * that file.  A non-2xx answer becomes an errno with S3's Code and Message
 * ("aws: s3 GET KEY: NoSuchBucket: ..."); *status gets the HTTP status and
 * *hdr (may be NULL) the value of capture ("ETag", ...) when given. */
struct aws_s3_call {
	const char *method, *key, *query;
	const char *const *headers;
	const void *body;
	size_t body_len;
	int sink_fd;
	const char *capture;
	bool retry_unsafe; /* a POST that may be repeated */
};
int aws_s3(const struct aws_config *c, const char *bucket, const struct aws_s3_call *call,
	   long *status, struct sfs_buf *resp_body, char **hdr, struct sfs_err *err);

/* The URL of key (NULL: the bucket) with query (encoded, may be NULL):
 * path-style or virtual-host as c says, the key percent-encoded. */
int aws_s3_url(const struct aws_config *c, const char *bucket, const char *key, const char *query,
	       struct sfs_buf *url);

/* ListObjectsV2 results, from S3's XML. */
struct aws_s3_obj {
	char *key;
	int64_t size;
	int64_t mtime; /* LastModified, unix seconds */
};
struct aws_s3_list {
	struct aws_s3_obj *objs;
	size_t nobjs;
	char **prefixes;
	size_t nprefixes;
	char *next_token; /* NextContinuationToken when truncated, else NULL */
};
/* Parses one ListBucketResult page, appending to l.  0 or -EPROTO/-ENOMEM. */
int aws_s3_parse_list(const char *xml, size_t len, struct aws_s3_list *l);
void aws_s3_list_free(struct aws_s3_list *l);
/* Every object under prefix (delimiter "/" when delim, so sub-prefixes
 * come as prefixes), all pages; max 0 = no limit. */
int aws_s3_list(const struct aws_config *c, const char *bucket, const char *prefix, bool delim,
		size_t max, struct aws_s3_list *l, struct sfs_err *err);
/* The text of <tag> in xml (entities decoded), malloc'd, or NULL. */
char *aws_xml_text(const char *xml, size_t len, const char *tag);

struct sfs_sandbox;

/* Where a run's task has the workspace: sb's (fixed when it was made), else
 * aws.workdir (sb may be NULL). */
const char *aws_workdir(const struct sfs_sandbox *sb);

/* ---- json.c: ECS and CloudWatch Logs (awsJson1.1) ------------------------ */

#include <jansson.h>

/* POST target ("RunTask", "GetLogEvents") of service "ecs" or "logs" with
 * body; *out (may be NULL) gets the answer.  ThrottlingException is retried
 * with backoff; an error is "aws: ecs RunTask: TYPE: message (HTTP n)" with
 * its errno (AccessDenied/expired/unknown keys -EACCES, *NotFound -ENOENT,
 * still throttled -EAGAIN, bad parameters -EINVAL). */
int aws_json(const struct aws_config *c, const char *service, const char *target, json_t *body,
	     json_t **out, struct sfs_err *err);

/* ---- presign.c: what a run's task gets instead of keys -------------------- */

/* A presigned URL (query-string SigV4, UNSIGNED-PAYLOAD) for method on key,
 * valid for expires seconds from now; *out malloc'd. */
int aws_presign(const struct aws_config *c, const char *method, const char *bucket, const char *key,
		long expires, time_t now, char **out, struct sfs_err *err);

/* The form fields of a browser POST upload allowed for any key starting with
 * the prefix, with x-amz-meta-mode and x-amz-meta-mtime, until now+expires. */
struct aws_post {
	char *url; /* the bucket's URL */
	char date[17];
	char credential[512];
	char *policy; /* base64 */
	char signature[65];
};
int aws_post_policy(const struct aws_config *c, const char *bucket, const char *prefix,
		    long expires, time_t now, struct aws_post *p, struct sfs_err *err);
void aws_post_free(struct aws_post *p);

/* ---- job.c: the script a run's task runs --------------------------------- */

struct aws_job {
	const char *workdir, *rundir; /* in the container */
	const char *root;	      /* the workspace prefix (ends in '/') */
	const struct aws_post *post;  /* uploads under root */
	const char *token;	      /* session token of the presigned URLs, or NULL */
	const char *manifest;	      /* aws_job_manifest_add lines */
	const char *wrapper;	      /* the journal wrapper as one sh command line */
	int parallel;		      /* transfers at once in a sync (aws.sync_parallel) */
};
/* One object of the workspace for the task: a file (GET url) or a directory
 * marker, its DELETE url, its path under root.  -EINVAL for a path the
 * manifest cannot carry (a newline) or that leaves the workspace (an empty,
 * "." or ".." segment), -ENOMEM. */
int aws_job_manifest_add(struct sfs_buf *m, bool dir, const char *get_url, const char *del_url,
			 const char *path);
int aws_job_script(const struct aws_job *j, struct sfs_buf *out, struct sfs_err *err);

/* ---- runs.c: ECS tasks and their CloudWatch Logs journal ------------------ */

struct sfs_run;
int aws_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int aws_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
ssize_t aws_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			 size_t max, struct sfs_err *err);
int aws_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		 struct sfs_err *err);
json_t *aws_state_save(const struct sfs_sandbox *sb);
int aws_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err);
void aws_state_free(struct sfs_sandbox *sb);
/* The job settings new gave (cluster= task_definition= subnets= ...). */
int aws_state_set_job(struct sfs_sandbox *sb, const char *key, const char *value);
/* "BUCKET", "P/.sandboxfs/NAME/": where a sandbox keeps its runs' scripts
 * and snapshots, beside (not inside) its workspace prefix. */
int aws_meta_prefix(const char *root, char *out, size_t len);

/* ---- snapshots.c: server-side copies under .sandboxfs/NAME/snapshots/ID/ -- */

int aws_snapshot(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err);
int aws_restore(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err);
int aws_snapshot_delete(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err);
int aws_fork(struct sfs_sandbox *src, struct sfs_sandbox *dst, const char *from,
	     struct sfs_err *err);

/* ---- files.c: the workspace prefix ---------------------------------------- */

#include <sys/types.h>

/* Above this a write is a multipart upload, in parts of AWS_MULTIPART_PART. */
#define AWS_MULTIPART_MIN (8L << 20)
#define AWS_MULTIPART_PART (8L << 20)

struct sfs_sandbox;
struct sfs_rstat;
struct sfs_rdirent;

/* One op's view of a sandbox: its bucket, its root prefix (ends in '/'),
 * the configuration; credentials missing is -EACCES naming them. */
struct aws_ws {
	char bucket[256];
	char root[1024];
	struct aws_config cfg;
};
int aws_ws_open(struct sfs_sandbox *sb, struct aws_ws *w, struct sfs_err *err);
void aws_ws_close(struct aws_ws *w);
int aws_put_marker(struct aws_ws *w, const char *path, mode_t mode, struct sfs_err *err);

int aws_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st,
		struct sfs_err *err);
int aws_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
		struct sfs_err *err);
int aws_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err);
int aws_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode,
		 struct sfs_err *err);
int aws_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int aws_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err);
int aws_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err);
int aws_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);

#endif
