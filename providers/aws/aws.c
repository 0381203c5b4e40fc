/*
 * The aws provider: lifecycle, status and the op table.  A sandbox is the
 * prefix s3://BUCKET/PREFIX/NAME/ (sb->id "BUCKET/PREFIX/NAME/"), its
 * workspace served by files.c through the remote workspace layer; runs
 * are ECS tasks with a CloudWatch Logs journal (runs.c).
 */
#include "aws.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../provider.h"
#include "state.h"
#include "../strbuf.h"
#include "../util.h"

static const char create_keys[] = "provider bucket prefix image cpu memory cluster task_definition "
				  "subnets security_groups runner project";

static bool known_option(const char *k)
{
	return sfs_word_in(create_keys, k);
}

/* A bucket name as S3 allows it (3-63 of a-z 0-9 . -); refusing others
 * early keeps them out of URLs and ids. */
static bool bucket_ok(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 63)
		return false;
	for (const char *c = b; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '.' ||
		      *c == '-'))
			return false;
	return true;
}

static bool positive_int(const char *v)
{
	char *end;
	long n = strtol(v, &end, 10);
	return *v && !*end && n > 0 && n <= 1 << 20;
}

/* A job setting: an option of new other than provider, bucket, prefix and
 * image, kept in the sandbox's state and in its settings.json. */
static bool job_key(const char *k)
{
	return known_option(k) && strcmp(k, "provider") && strcmp(k, "bucket") &&
	       strcmp(k, "prefix") && strcmp(k, "image");
}

/* What is wrong with job setting k's value v, NULL when nothing: new's
 * check of its option, and a resume's of the settings.json beside the
 * prefix (whatever the bucket holds), so a resume takes what new takes. */
static const char *job_setting_problem(const char *k, const char *v)
{
	if (!strcmp(k, "runner") && strcmp(v, "ecs") && strcmp(v, "codebuild"))
		return "expected ecs or codebuild";
	if ((!strcmp(k, "cpu") || !strcmp(k, "memory")) && !positive_int(v))
		return "expected a positive number (cpu units, memory MiB)";
	return NULL;
}

/* The job settings new gave, in PREFIX/.sandboxfs/NAME/settings.json beside
 * the workspace (put at create, read at a resume by id), so a sandbox
 * resumed elsewhere runs where it ran. */
static int settings_key(const struct aws_ws *w, struct sfs_buf *key, struct sfs_err *err)
{
	char meta[1100];
	if (aws_meta_prefix(w->root, meta, sizeof(meta)) ||
	    sfs_buf_printf(key, "%ssettings.json", meta))
		return sfs_errf(err, -ENAMETOOLONG, "aws: prefix too long");
	return 0;
}

static int settings_put(struct sfs_sandbox *sb, struct aws_ws *w, struct sfs_err *err)
{
	struct sfs_buf key = {0};
	int rc = settings_key(w, &key, err);
	json_t *o = rc ? NULL : aws_state_save(sb);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (o && !text)
		rc = sfs_errf(err, -ENOMEM, "out of memory");
	if (text) {
		struct aws_s3_call call = {.method = "PUT",
					   .key = key.buf,
					   .body = text,
					   .body_len = strlen(text),
					   .sink_fd = -1};
		rc = aws_s3(&w->cfg, w->bucket, &call, NULL, NULL, NULL, err);
	}
	free(text);
	sfs_buf_free(&key);
	return rc;
}

/* Whether the settings.json o (read from s3://w/key) holds only what new
 * writes: {"job": {SETTING: "VALUE", ...}}, each setting one new takes
 * with a value its check passes; EINVAL naming the first that is not. */
static int settings_check(json_t *o, const struct aws_ws *w, const char *key, struct sfs_err *err)
{
	json_t *job = json_object_get(o, "job");
	if (!json_is_object(o) || (job && !json_is_object(job)))
		return sfs_errf(err, -EINVAL,
				"aws: resume: s3://%s/%s is not the job settings new writes "
				"({\"job\": {...}})",
				w->bucket, key);
	const char *k;
	json_t *v;
	char shown_k[200], shown_v[200];
	json_object_foreach(job, k, v)
	{
		sfs_escape_line(k, 48, shown_k, sizeof(shown_k));
		if (!job_key(k))
			return sfs_errf(err, -EINVAL,
					"aws: resume: s3://%s/%s has a setting new does not take "
					"(\"%s\")",
					w->bucket, key, shown_k);
		if (!json_is_string(v))
			return sfs_errf(err, -EINVAL,
					"aws: resume: s3://%s/%s has a %s that is not a string",
					w->bucket, key, shown_k);
		const char *why = job_setting_problem(k, json_string_value(v));
		if (why)
			return sfs_errf(
			    err, -EINVAL, "aws: resume: s3://%s/%s has a bad %s (\"%s\"): %s",
			    w->bucket, key, shown_k,
			    sfs_escape_line(json_string_value(v), 48, shown_v, sizeof(shown_v)),
			    why);
	}
	return 0;
}

/* A resume's read of settings.json into the sandbox's state.  *refused:
 * what the bucket holds is not what new writes (the resume fails); any
 * other error is only that it cannot be read. */
static int settings_get(struct sfs_sandbox *sb, struct aws_ws *w, bool *refused,
			struct sfs_err *err)
{
	*refused = false;
	struct sfs_buf key = {0}, body = {0};
	int rc = settings_key(w, &key, err);
	struct aws_s3_call call = {.method = "GET", .key = key.buf, .sink_fd = -1};
	if (!rc)
		rc = aws_s3(&w->cfg, w->bucket, &call, NULL, &body, NULL, err);
	if (rc == -ENOENT)
		rc = 0; /* none were given */
	else if (!rc) {
		json_t *o = json_loadb(body.buf ? body.buf : "", body.len, 0, NULL);
		rc = settings_check(o, w, key.buf, err);
		*refused = rc != 0;
		if (!rc)
			rc = aws_state_load(sb, o, err);
		json_decref(o);
	}
	sfs_buf_free(&key);
	sfs_buf_free(&body);
	return rc;
}

static int aws_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	const char *bucket = sfs_opt_get("aws.bucket"), *prefix = sfs_opt_get("aws.prefix");
	const char *image = NULL;
	for (size_t i = 0; opts && i < opts->n; i++) {
		const char *k = opts->v[i].key, *v = opts->v[i].val;
		if (!known_option(k))
			return sfs_errf(err, -EINVAL, "aws: unknown option \"%s\" (known: %s)", k,
					create_keys);
		const char *why = job_key(k) ? job_setting_problem(k, v) : NULL;
		if (why)
			return sfs_errf(err, -EINVAL, "aws: %s=%s: %s", k, v, why);
		if (!strcmp(k, "bucket"))
			bucket = v;
		else if (!strcmp(k, "prefix"))
			prefix = v;
		else if (!strcmp(k, "image"))
			image = v;
	}
	/* the job settings: kept for exec, which names what is still missing */
	for (size_t i = 0; opts && i < opts->n; i++) {
		const char *k = opts->v[i].key;
		if (job_key(k) && aws_state_set_job(sb, k, opts->v[i].val))
			return sfs_errf(err, -ENOMEM, "out of memory");
	}
	if (!bucket || !*bucket)
		return sfs_errf(err, -EINVAL, "aws: no bucket: give bucket= or set aws.bucket");
	if (!bucket_ok(bucket))
		return sfs_errf(err, -EINVAL,
				"aws: bucket=%s: expected 3-63 characters of a-z 0-9 . -", bucket);
	/* PREFIX/NAME/ without leading, doubled or trailing slashes */
	struct sfs_buf id = {0};
	int rc = sfs_buf_printf(&id, "%s/", bucket);
	for (const char *p = prefix ? prefix : ""; !rc && *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && !strncmp(p, "..", 2))
			rc = sfs_errf(err, -EINVAL, "aws: prefix=%s: no '..' segments", prefix);
		else if (n && !(n == 1 && *p == '.'))
			rc = sfs_buf_printf(&id, "%.*s/", (int)n, p);
		p += n + (p[n] == '/');
	}
	if (!rc && sfs_buf_printf(&id, "%s/", sb->name))
		rc = sfs_errf(err, -ENOMEM, "out of memory");
	if (rc) {
		sfs_buf_free(&id);
		return rc;
	}
	/* the workspace is where a run's task has it (the prefix is the id) */
	rc = sfs_sb_publish(sb, id.buf, image ? image : "none", aws_workdir(NULL), err);
	sfs_buf_free(&id);
	if (rc)
		return rc;
	/* the root's marker: proves bucket and keys work before `new` returns */
	struct aws_ws w;
	rc = aws_ws_open(sb, &w, err);
	if (!rc) {
		rc = aws_put_marker(&w, "", 0755, err);
		if (!rc)
			rc = settings_put(sb, &w, err);
		aws_ws_close(&w);
	}
	return rc;
}

const char *aws_workdir(const struct sfs_sandbox *sb)
{
	if (sb && sb->workspace && sb->workspace[0] == '/')
		return sb->workspace;
	const char *w = sfs_opt_get("aws.workdir");
	return w && w[0] == '/' ? w : "/workspace";
}

static int aws_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	/* the id is typed in: its bucket as new would take it (with
	 * virtual-host addressing it becomes part of a host name) */
	const char *id = sb->id ? sb->id : "", *slash = strchr(id, '/');
	char bucket[64] = "";
	size_t n = slash ? (size_t)(slash - id) : 0;
	if (n < sizeof(bucket)) {
		memcpy(bucket, id, n);
		bucket[n] = '\0';
	}
	if (!bucket_ok(bucket))
		return sfs_errf(
		    err, -EINVAL,
		    "aws: resume: id=%s: the bucket is not 3-63 characters of a-z 0-9 . -", id);
	struct sfs_rstat st;
	int rc = aws_fs_stat(sb, "", &st, err);
	/* resumed by id, or made when the workspace showed the s3:// URL */
	if (!rc && (!sb->workspace || sb->workspace[0] != '/'))
		rc = sfs_sb_publish(sb, NULL, NULL, aws_workdir(NULL), err);
	pthread_mutex_lock(&aws_state_mu);
	struct aws_state *s = sb->priv;
	bool have = s && s->job.n;
	pthread_mutex_unlock(&aws_state_mu);
	if (!rc && !have) {
		struct aws_ws w;
		rc = aws_ws_open(sb, &w, err);
		if (!rc) {
			/* a policy that allows the prefix but not .sandboxfs/ must
			 * not cost the workspace: runs then use the aws.* options;
			 * settings new would refuse refuse the resume */
			struct sfs_err e = {0};
			bool refused;
			int sr = settings_get(sb, &w, &refused, &e);
			if (refused)
				rc = sfs_errf(err, sr, "%s", e.msg);
			else if (sr)
				sfs_log(SFS_LOG_WARN,
					"%s: the job settings beside the prefix cannot "
					"be read: %s",
					sb->name, e.msg);
			aws_ws_close(&w);
		}
	}
	return rc;
}

/* Every object under the prefix goes (a sandbox owns its prefix), and its
 * runs' scripts and snapshots beside it. */
static int aws_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return 0;
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	char meta[1100];
	const char *prefixes[] = {w.root,
				  aws_meta_prefix(w.root, meta, sizeof(meta)) ? NULL : meta};
	for (size_t p = 0; !rc && p < 2 && prefixes[p]; p++) {
		struct aws_s3_list l = {0};
		rc = aws_s3_list(&w.cfg, w.bucket, prefixes[p], false, 0, &l, err);
		if (rc == -ENOENT)
			rc = 0; /* the bucket is gone: so is the sandbox */
		for (size_t i = 0; !rc && i < l.nobjs; i++) {
			struct aws_s3_call call = {
			    .method = "DELETE", .key = l.objs[i].key, .sink_fd = -1};
			rc = aws_s3(&w.cfg, w.bucket, &call, NULL, NULL, NULL, err);
		}
		aws_s3_list_free(&l);
	}
	aws_ws_close(&w);
	return rc;
}

static bool aws_configured(char *why, size_t len)
{
	struct aws_config c;
	struct sfs_err err = {0};
	if (aws_config_load(&c, sfs_opt_get("aws.region"), sfs_opt_get("aws.s3_addressing"),
			    &err)) {
		snprintf(why, len, "%s", err.msg); /* message: may be cut */
		return false;
	}
	const char *miss = aws_config_missing(&c);
	const char *bucket = sfs_opt_get("aws.bucket");
	bool ok = !*miss;
	const char *runner = sfs_opt_get("aws.runner"),
		   *project = sfs_opt_get("aws.codebuild_project");
	bool cb = runner && !strcmp(runner, "codebuild");
	if (!ok)
		snprintf(why, len, "no %s", miss); /* message: may be cut */
	else if (cb)
		snprintf(
		    why, len, /* message: may be cut */
		    "ready: S3 at %s (%s-style, region %s, keys from %s)%s; runs: CodeBuild at "
		    "%s%s",
		    c.s3_endpoint, c.s3_path_style ? "path" : "virtual-host", c.region,
		    c.creds_source, bucket && *bucket ? "" : "; no aws.bucket: new needs bucket=",
		    c.codebuild_endpoint,
		    project && *project ? "" : " (no aws.codebuild_project: exec needs project=)");
	else
		snprintf(
		    why, len,
		    "ready: S3 at %s (%s-style, region %s, keys from %s)%s; runs: ECS at %s%s",
		    c.s3_endpoint, c.s3_path_style ? "path" : "virtual-host", c.region,
		    c.creds_source,
		    bucket && *bucket ? "" : "; no aws.bucket: new needs bucket=", c.ecs_endpoint,
		    sfs_opt_get("aws.cluster") && *sfs_opt_get("aws.cluster")
			? ""
			: " (no aws.cluster: exec needs cluster=)"); /* message: may be cut */
	aws_config_free(&c);
	return ok;
}

static const struct sfs_provider_ops aws_ops = {
    .create = aws_create,
    .resume = aws_resume,
    .destroy = aws_destroy,
    .run_start = aws_run_start,
    .run_refresh = aws_run_refresh,
    .journal_read = aws_journal_read,
    .run_kill = aws_run_kill,
    .state_save = aws_state_save,
    .state_load = aws_state_load,
    .state_free = aws_state_free,
    .snapshot = aws_snapshot,
    .restore = aws_restore,
    .snapshot_delete = aws_snapshot_delete,
    .fork = aws_fork,
    .fs_stat = aws_fs_stat,
    .fs_list = aws_fs_list,
    .fs_read = aws_fs_read,
    .fs_write = aws_fs_write,
    .fs_mkdir = aws_fs_mkdir,
    .fs_remove = aws_fs_remove,
    .fs_rename = aws_fs_rename,
    .fs_chmod = aws_fs_chmod,
    .configured = aws_configured,
};

static const char *const aws_credential_env[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
						 "AWS_SESSION_TOKEN", NULL};

const struct sfs_provider sfs_provider_aws = {
    .name = "aws",
    /* a run is one ECS task: no processes outlive it, no stdin, the
     * journal is polled from CloudWatch Logs; snapshots and fork are
     * server-side copies of the prefix (docs/aws.md) */
    .caps =
	{
	    [SFS_CAP_FS] = true,
	    [SFS_CAP_EXEC] = true,
	    [SFS_CAP_ENV] = true,
	    [SFS_CAP_KILLABLE] = true,
	    [SFS_CAP_SNAPSHOTS] = true,
	    [SFS_CAP_DURABLE_FS] = true,
	    [SFS_CAP_FORK] = true,
	},
    .host_fs = false,
    .credential_env = aws_credential_env,
    .ops = &aws_ops,
    .options = sfs_aws_options,
};
