/*
 * The gcp provider (docs/gcp.md): a sandbox is the Cloud Storage prefix
 * gs://BUCKET/PREFIX/NAME/ (sb->id "BUCKET/PREFIX/NAME/") served by files.c
 * through the remote workspace layer, plus the job settings its runs need
 * (project, region, image, cpu, memory), kept in the registry's pdata.
 * Runs are Cloud Run Jobs executions (runs.c), snapshots server-side
 * copies (snap.c).  This file: lifecycle, status and the op table.
 */
#include "gcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../provider.h"
#include "../strbuf.h"
#include "../util.h"

static const char create_keys[] = "provider bucket prefix image cpu memory project region";

/* the job settings on the root's marker object */
#define META_IMAGE "sandboxfs-image"
#define META_PROJECT "sandboxfs-project"
#define META_REGION "sandboxfs-region"
#define META_CPU "sandboxfs-cpu"
#define META_MEMORY "sandboxfs-memory"

/* guards every sandbox's priv (a json object of its settings): a leaf */
static pthread_mutex_t settings_mu = PTHREAD_MUTEX_INITIALIZER;

static bool known_option(const char *k)
{
	return sfs_word_in(create_keys, k);
}

/* A bucket name as Cloud Storage allows it (3-222 of a-z 0-9 . - _,
 * starting and ending with a letter or digit); others stay out of URLs. */
static bool bucket_ok(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 222)
		return false;
	for (const char *c = b; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '.' ||
		      *c == '-' || *c == '_'))
			return false;
	return b[0] != '.' && b[0] != '-' && b[0] != '_' && b[n - 1] != '.' && b[n - 1] != '-' &&
	       b[n - 1] != '_';
}

/* Cloud Run's values: cpu 1, 2, 4, 8 (or millicores "1000m"); memory a
 * number with Mi or Gi ("512Mi", "2Gi"). */
static bool cpu_ok(const char *v)
{
	char *end;
	long n = strtol(v, &end, 10);
	return *v && strlen(v) < sizeof(((struct gcp_settings *)0)->cpu) && n > 0 && n <= 8000 &&
	       (!*end || !strcmp(end, "m"));
}

static bool memory_ok(const char *v)
{
	char *end;
	long n = strtol(v, &end, 10);
	return *v && strlen(v) < sizeof(((struct gcp_settings *)0)->memory) && n > 0 &&
	       n <= 65536 && (!strcmp(end, "Mi") || !strcmp(end, "Gi"));
}

/* A project id or a region: lower-case letters, digits and '-'. */
static bool name_ok(const char *v)
{
	size_t n = strlen(v);
	if (!n || n > 63)
		return false;
	for (const char *c = v; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-'))
			return false;
	return true;
}

/* The job settings as new takes them (options) and the root's marker keeps
 * them (metadata, which a resume by id reads back): one table, so a resume
 * accepts exactly what new does.  The marker is whatever the bucket holds,
 * and project and region become path segments of every Cloud Run URL.
 * empty_ok: new takes an empty value (region: gcp.region's default is
 * empty; image: the sandbox then has none); the marker holds "" for every
 * setting new was not given. */
struct setting_rule {
	const char *key;  /* new's option, and the key in the registry's settings */
	const char *meta; /* the marker's metadata key */
	bool (*ok)(const char *v);
	bool empty_ok;
	const char *expected;
};

static const struct setting_rule setting_rules[] = {
    {"cpu", META_CPU, cpu_ok, false, "Cloud Run's cpu (1, 2, 4, 8 or millicores like 1000m)"},
    {"memory", META_MEMORY, memory_ok, false, "a size like 512Mi or 2Gi"},
    {"project", META_PROJECT, name_ok, false, "a project id (a-z 0-9 -)"},
    {"region", META_REGION, name_ok, true, "a region like us-central1"},
    {"image", META_IMAGE, sfs_image_ref_ok, true,
     "an image reference (letters, digits and . _ / : @ -, under 256 bytes)"},
};
#define NRULES (sizeof(setting_rules) / sizeof(*setting_rules))

/* new's check of option key's value v (NULL: not given) */
static int check_option(const char *key, const char *v, struct sfs_err *err)
{
	for (size_t i = 0; i < NRULES; i++) {
		const struct setting_rule *r = &setting_rules[i];
		if (strcmp(r->key, key) || !v || (!*v && r->empty_ok) || r->ok(v))
			continue;
		return sfs_errf(err, -EINVAL, "gcp: %s=%s: expected %s", key, v, r->expected);
	}
	return 0;
}

/* The settings the marker w carries (metadata md), each checked as new
 * checks its option, into *settings (the registry's json); *image is the
 * marker's image, "" when none (it points into md).  EINVAL naming the
 * first bad one: nothing is taken from a marker that has one. */
static int marker_settings(json_t *md, const struct gcp_ws *w, json_t **settings,
			   const char **image, struct sfs_err *err)
{
	*image = "";
	*settings = json_object();
	if (!*settings)
		return sfs_errf(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < NRULES; i++) {
		const struct setting_rule *r = &setting_rules[i];
		json_t *j = json_object_get(md, r->meta);
		const char *v = j ? json_string_value(j) : "";
		char buf[200];
		int rc = 0;
		if (!v)
			rc = sfs_errf(err, -EINVAL,
				      "gcp: resume: the marker gs://%s/%s has a %s (metadata %s) "
				      "that is not a string",
				      w->bucket, w->root, r->key, r->meta);
		else if (*v && !r->ok(v))
			rc = sfs_errf(err, -EINVAL,
				      "gcp: resume: the marker gs://%s/%s has a bad %s (metadata "
				      "%s=\"%s\"): expected %s",
				      w->bucket, w->root, r->key, r->meta,
				      sfs_escape_line(v, 48, buf, sizeof(buf)), r->expected);
		else if (!strcmp(r->key, "image"))
			*image = v;
		else if (json_object_set_new(*settings, r->key, json_string(v)))
			rc = sfs_errf(err, -ENOMEM, "out of memory");
		if (rc) {
			json_decref(*settings);
			*settings = NULL;
			return rc;
		}
	}
	return 0;
}

/* gcp.project, else GOOGLE_CLOUD_PROJECT / GCLOUD_PROJECT, else the key
 * file's project_id (ADC's order, §7.2). */
static const char *default_project(char *buf, size_t len)
{
	const char *v = sfs_opt_get("gcp.project");
	if (!v || !*v)
		v = getenv("GOOGLE_CLOUD_PROJECT");
	if (!v || !*v)
		v = getenv("GCLOUD_PROJECT");
	if (v && *v)
		return v;
	struct gcp_auth *a;
	struct sfs_err e = {0};
	if (!gcp_session(&a, &e) && a->have_key && a->key.project_id &&
	    !sfs_pathf(buf, len, "%s", a->key.project_id))
		return buf; /* a project id too long is none */
	return NULL;
}

void gcp_settings_of(struct sfs_sandbox *sb, struct gcp_settings *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&settings_mu);
	json_t *o = sb->priv;
	const char *v;
	if ((v = json_string_value(json_object_get(o, "project"))))
		if (sfs_pathf(s->project, sizeof(s->project), "%s", v) < 0)
			*s->project = 0; /* new refuses what does not fit */
	if ((v = json_string_value(json_object_get(o, "region"))))
		if (sfs_pathf(s->region, sizeof(s->region), "%s", v) < 0)
			*s->region = 0; /* new refuses what does not fit */
	if ((v = json_string_value(json_object_get(o, "cpu"))))
		if (sfs_pathf(s->cpu, sizeof(s->cpu), "%s", v) < 0)
			*s->cpu = 0; /* new refuses what does not fit */
	if ((v = json_string_value(json_object_get(o, "memory"))))
		if (sfs_pathf(s->memory, sizeof(s->memory), "%s", v) < 0)
			*s->memory = 0; /* new refuses what does not fit */
	pthread_mutex_unlock(&settings_mu);
}

static json_t *gcp_state_save(const struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&settings_mu);
	json_t *o = sb->priv ? json_deep_copy(sb->priv) : NULL;
	pthread_mutex_unlock(&settings_mu);
	return o;
}

static void set_settings(struct sfs_sandbox *sb, json_t *o)
{
	pthread_mutex_lock(&settings_mu);
	json_t *old = sb->priv;
	sb->priv = o;
	pthread_mutex_unlock(&settings_mu);
	json_decref(old);
}

static int gcp_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err)
{
	if (!json_is_object(saved))
		return 0;
	json_t *o = json_deep_copy(saved);
	if (!o)
		return sfs_errf(err, -ENOMEM, "out of memory");
	set_settings(sb, o);
	return 0;
}

static void gcp_state_free(struct sfs_sandbox *sb)
{
	set_settings(sb, NULL);
}

static int gcp_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	const char *bucket = sfs_opt_get("gcp.bucket"), *prefix = sfs_opt_get("gcp.prefix");
	const char *region = sfs_opt_get("gcp.region"), *image = NULL;
	const char *project = NULL, *cpu = NULL, *memory = NULL;
	char pbuf[128];
	for (size_t i = 0; opts && i < opts->n; i++) {
		const char *k = opts->v[i].key, *v = opts->v[i].val;
		if (!known_option(k))
			return sfs_errf(err, -EINVAL, "gcp: unknown option \"%s\" (known: %s)", k,
					create_keys);
		if (!strcmp(k, "bucket"))
			bucket = v;
		else if (!strcmp(k, "prefix"))
			prefix = v;
		else if (!strcmp(k, "image"))
			image = v;
		else if (!strcmp(k, "project"))
			project = v;
		else if (!strcmp(k, "region"))
			region = v;
		else if (!strcmp(k, "cpu"))
			cpu = v;
		else if (!strcmp(k, "memory"))
			memory = v;
	}
	int rc = check_option("cpu", cpu, err);
	if (!rc)
		rc = check_option("memory", memory, err);
	if (!rc)
		rc = check_option("project", project, err);
	if (!rc)
		rc = check_option("region", region, err);
	if (!rc)
		rc = check_option("image", image, err);
	if (rc)
		return rc;
	if (!bucket || !*bucket)
		return sfs_errf(err, -EINVAL, "gcp: no bucket: give bucket= or set gcp.bucket");
	if (!bucket_ok(bucket))
		return sfs_errf(err, -EINVAL,
				"gcp: bucket=%s: expected 3-222 characters of a-z 0-9 . - _",
				bucket);
	if (!project)
		project = default_project(pbuf, sizeof(pbuf));
	/* PREFIX/NAME/ without leading, doubled or trailing slashes */
	struct sfs_buf id = {0}, ws = {0};
	rc = sfs_buf_printf(&id, "%s/", bucket) ? -ENOMEM : 0;
	for (const char *p = prefix ? prefix : ""; !rc && *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && !strncmp(p, "..", 2))
			rc = sfs_errf(err, -EINVAL, "gcp: prefix=%s: no '..' segments", prefix);
		else if (n && !(n == 1 && *p == '.') && sfs_buf_printf(&id, "%.*s/", (int)n, p))
			rc = -ENOMEM;
		p += n + (p[n] == '/');
	}
	/* the workspace is where runs see it: the job mounts the prefix there */
	if (!rc && (sfs_buf_printf(&id, "%s/", sb->name) || sfs_buf_adds(&ws, "/workspace")))
		rc = -ENOMEM;
	json_t *settings = rc ? NULL
			      : json_pack("{s:s, s:s, s:s, s:s}", "project", project ? project : "",
					  "region", region ? region : "", "cpu", cpu ? cpu : "",
					  "memory", memory ? memory : "");
	if (!rc && !settings)
		rc = -ENOMEM;
	if (rc == -ENOMEM)
		sfs_errf(err, rc, "out of memory");
	if (!rc)
		rc = sfs_sb_publish(sb, id.buf, image ? image : "none", ws.buf, err);
	sfs_buf_free(&id);
	sfs_buf_free(&ws);
	if (rc) {
		json_decref(settings);
		return rc;
	}
	/* the root's marker proves the bucket and the credentials now, and
	 * carries the job settings, so `resume id=` finds them again */
	json_t *extra =
	    json_pack("{s:s, s:s, s:s, s:s, s:s}", META_IMAGE, image ? image : "none", META_PROJECT,
		      project ? project : "", META_REGION, region ? region : "", META_CPU,
		      cpu ? cpu : "", META_MEMORY, memory ? memory : "");
	set_settings(sb, settings);
	struct gcp_ws w;
	rc = extra ? gcp_ws_of(sb, &w, err) : sfs_errf(err, -ENOMEM, "out of memory");
	if (!rc)
		rc = gcs_put_empty(w.bucket, w.root, 0755, time(NULL), extra, err);
	json_decref(extra);
	return rc;
}

/* After a restart the registry has the settings; `resume id=` of a sandbox
 * this daemon never knew reads them from the root's marker, checked as new
 * checks its options before any of them is kept. */
static int gcp_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	struct gcp_ws w;
	int rc = gcp_ws_of(sb, &w, err);
	if (rc)
		return rc;
	/* the id is typed in: the bucket as new would take it */
	if (!bucket_ok(w.bucket))
		return sfs_errf(err, -EINVAL,
				"gcp: resume: id=%s: the bucket is not 3-222 characters of "
				"a-z 0-9 . - _",
				sb->id);
	struct sfs_rstat st;
	rc = gcp_fs_stat(sb, "", &st, err);
	pthread_mutex_lock(&settings_mu);
	bool known = sb->priv != NULL;
	pthread_mutex_unlock(&settings_mu);
	if (rc || known)
		return rc;
	json_t *md = NULL;
	if ((rc = gcs_metadata(w.bucket, w.root, &md, err))) {
		if (rc == -ENOENT)
			rc = sfs_errf(err, -ENOENT,
				      "gcp: no sandbox at gs://%s/%s (no marker object)", w.bucket,
				      w.root);
		return rc;
	}
	json_t *settings;
	const char *image;
	rc = marker_settings(md, &w, &settings, &image, err);
	if (!rc && *image)
		rc = sfs_sb_publish(sb, NULL, image, "/workspace", err);
	json_decref(md); /* image pointed into it */
	if (rc)
		json_decref(settings);
	else
		set_settings(sb, settings);
	return rc;
}

/* Between runs nothing runs: stop only makes exec refuse until start. */
static int gcp_stop_start(struct sfs_sandbox *sb, struct sfs_err *err)
{
	(void)sb;
	(void)err;
	return 0;
}

/* Every object under the prefix goes (a sandbox owns its prefix), and its
 * job when it made one. */
static int gcp_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return 0;
	struct gcp_ws w;
	int rc = gcp_ws_of(sb, &w, err);
	if (!rc)
		rc = gcp_delete_prefix(w.bucket, w.root, err);
	if (rc == -ENOENT)
		rc = 0; /* the bucket is gone: so is the sandbox */
	if (!rc)
		rc = gcp_job_delete(sb, err);
	return rc;
}

static void gcp_status_lines(const struct sfs_sandbox *sb, char *buf, size_t len)
{
	char missing[200];
	gcp_run_missing((struct sfs_sandbox *)sb, missing, sizeof(missing));
	snprintf(buf, len, "objects gs://%s\n%s%s%s", sb->id ? sb->id : "",
		 *missing ? "runs need " : "", missing,
		 *missing ? "\n" : ""); /* message: may be cut */
}

/* Local checks only (no network on a status read): the key file parses,
 * or a metadata server is named; gcp.bucket is set. */
static bool gcp_configured(char *why, size_t len)
{
	struct gcp_auth *a;
	struct sfs_err err = {0};
	const char *bucket = sfs_opt_get("gcp.bucket");
	bool have_bucket = bucket && *bucket;
	if (gcp_session(&a, &err)) {
		snprintf(why, len, "%s%s", err.msg + (strncmp(err.msg, "gcp: ", 5) ? 0 : 5),
			 have_bucket ? "" : "; no gcp.bucket"); /* message: may be cut */
		return false;
	}
	/* worded so the redactor's key-looking words ("key", "token",
	 * "credentials") never precede the email or the URL */
	char src[300], pbuf[128];
	if (a->have_key)
		snprintf(src, sizeof(src),
			 "authenticates as %s, a service-account JWT exchanged at %s",
			 a->key.client_email, a->token_url); /* message: may be cut */
	else
		snprintf(src, sizeof(src), "authenticates through the metadata server at %s",
			 a->metadata_url); /* message: may be cut */
	const char *project = default_project(pbuf, sizeof(pbuf));
	const char *region = sfs_opt_get("gcp.region");
	char *storage = gcp_storage_url();
	/* usable without gcp.bucket: new takes bucket= */
	snprintf(why, len, "%s; %s%s at %s; runs: %s%s%s%s", src,
		 have_bucket ? "bucket " : "no gcp.bucket (new needs bucket=)",
		 have_bucket ? bucket : "", storage ? storage : "?",
		 project ? "project " : "no gcp.project", project ? project : "",
		 region && *region ? ", region " : ", no gcp.region",
		 region && *region ? region : ""); /* message: may be cut */
	free(storage);
	return true;
}

static void gcp_shutdown(void)
{
	gcp_runs_shutdown();
	gcp_session_shutdown();
}

static const struct sfs_provider_ops gcp_ops = {
    .create = gcp_create,
    .resume = gcp_resume,
    .destroy = gcp_destroy,
    .run_start = gcp_run_start,
    .run_refresh = gcp_run_refresh,
    .journal_read = gcp_journal_read,
    .run_kill = gcp_run_kill,
    .fs_stat = gcp_fs_stat,
    .fs_list = gcp_fs_list,
    .fs_read = gcp_fs_read,
    .fs_write = gcp_fs_write,
    .fs_mkdir = gcp_fs_mkdir,
    .fs_remove = gcp_fs_remove,
    .fs_rename = gcp_fs_rename,
    .fs_chmod = gcp_fs_chmod,
    .fs_symlink = gcp_fs_symlink,
    .fs_put_tree = gcp_fs_put_tree,
    .snapshot = gcp_snapshot,
    .restore = gcp_restore,
    .snapshot_delete = gcp_snapshot_delete,
    .stop = gcp_stop_start,
    .start = gcp_stop_start,
    .shutdown = gcp_shutdown,
    .state_save = gcp_state_save,
    .state_load = gcp_state_load,
    .state_free = gcp_state_free,
    .status_lines = gcp_status_lines,
    .configured = gcp_configured,
};

static const char *const gcp_credential_env[] = {"GOOGLE_APPLICATION_CREDENTIALS", NULL};

const struct sfs_provider sfs_provider_gcp = {
    .name = "gcp",
    .caps =
	{
	    [SFS_CAP_FS] = true,
	    [SFS_CAP_EXEC] = true,
	    [SFS_CAP_ENV] = true,
	    /* a run is a batch job: no process outlives it, no stdin */
	    [SFS_CAP_BACKGROUND] = false,
	    [SFS_CAP_WRITABLE_STDIN] = false,
	    /* executions:cancel, observed by tests/bats/gcp.bats */
	    [SFS_CAP_KILLABLE] = true,
	    [SFS_CAP_SNAPSHOTS] = true,
	    [SFS_CAP_DURABLE_FS] = true,
	},
    .host_fs = false,
    .credential_env = gcp_credential_env,
    .ops = &gcp_ops,
    .options = sfs_gcp_options,
};
