/*
 * Runs of a gcp sandbox: Cloud Run Jobs executions (provider-apis-aws-gcp.md
 * §8) with the journal from Cloud Logging entries:list (§10).
 *
 * Each sandbox gets one job, "sfs-" + its key, made at its first run: the
 * sandbox's image with command /bin/sh, working directory /workspace, and
 * the workspace prefix mounted there as a Cloud Storage volume
 * (gcs bucket + mountOptions only-dir=PREFIX), so a run reads and writes
 * the same objects the workspace shows.  `exec CMD` is jobs:run with
 * overrides: args ["-c", "exec 2>&1\nCMD"] and the run's environment.
 * Status comes from executions.get (and the task's exit code), kill is
 * executions:cancel.  The journal is the execution's log lines, fetched by
 * entries:list (filtered by job and execution, from the last timestamp
 * seen, de-duplicated on insertId) into RUNDIR/gcp.log, from which
 * journal_read answers.
 *
 * A run's execution name is in RUNDIR/gcp.execution (so a restarted daemon
 * finds it); the fetch cursor lives in memory, and a restarted daemon
 * fetches the log again from the start.
 */
#include "gcp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../provider.h"
#include "../strbuf.h"
#include "../util.h"

#define WORKSPACE_MOUNT "/workspace"
/* entries:list is a quota'd call (60 a minute is common): a running run's
 * log is asked for at most this often */
#define LOG_POLL_MS 1000
/* Cloud Logging may show a line some seconds after it was written: after
 * the end, fetches go on until one brings nothing new this long after it */
#define LOG_SETTLE_MS 1500

static int oom(struct sfs_err *err)
{
	return sfs_errf(err, -ENOMEM, "out of memory");
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void gcp_job_id(struct sfs_sandbox *sb, char *buf, size_t len)
{
	/* job ids: [a-z][a-z0-9-]{0,62}, not ending in '-' */
	size_t n = (size_t)snprintf(buf, len, "sfs-");
	for (const char *k = sb->key; *k && n + 1 < len && n < 62; k++) {
		char c = *k;
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		buf[n++] = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ? c : '-';
	}
	while (n > 4 && buf[n - 1] == '-')
		n--;
	buf[n] = '\0';
}

/* project and region: the sandbox's own, else the current options */
static void job_place(struct sfs_sandbox *sb, struct gcp_settings *s)
{
	gcp_settings_of(sb, s);
	const char *v;
	/* a value too long leaves the place unset (a run then names what it
	 * lacks), never a cut one nor the next source's */
	if (!*s->project && (v = sfs_opt_get("gcp.project")) && *v &&
	    sfs_pathf(s->project, sizeof(s->project), "%s", v) < 0)
		return;
	if (!*s->project && (v = getenv("GOOGLE_CLOUD_PROJECT")) && *v &&
	    sfs_pathf(s->project, sizeof(s->project), "%s", v) < 0)
		return;
	if (!*s->region && (v = sfs_opt_get("gcp.region")) && *v &&
	    sfs_pathf(s->region, sizeof(s->region), "%s", v) < 0)
		return;
}

const char *gcp_run_missing(struct sfs_sandbox *sb, char *buf, size_t len)
{
	struct gcp_settings s;
	job_place(sb, &s);
	bool image = sb->image && *sb->image && strcmp(sb->image, "none");
	snprintf(buf, len, "%s%s%s%s%s", *s.project ? "" : "gcp.project (or project=)",
		 !*s.project && (!*s.region || !image) ? ", " : "",
		 *s.region ? "" : "gcp.region (or region=)", !*s.region && !image ? ", " : "",
		 image ? "" : "image= (the job's container image)"); /* message: may be cut */
	return buf;
}

/* {run root}/v2/projects/P/locations/L[/jobs/J] */
static char *run_url(const struct gcp_settings *s, const char *job, const char *tail)
{
	char *root = gcp_run_url();
	struct sfs_buf b = {0};
	int rc = !root ||
		 sfs_buf_printf(&b, "%s/v2/projects/%s/locations/%s", root, s->project, s->region);
	if (!rc && job)
		rc = sfs_buf_printf(&b, "/jobs/%s", job);
	if (!rc && tail)
		rc = sfs_buf_adds(&b, tail);
	free(root);
	if (rc) {
		sfs_buf_free(&b);
		return NULL;
	}
	return sfs_buf_take(&b);
}

/* {run root}/v2/NAME (an operation or an execution, full resource name) */
static char *name_url(const char *name, const char *tail)
{
	char *root = gcp_run_url(), *u = NULL;
	if (root && asprintf(&u, "%s/v2/%s%s", root, name, tail ? tail : "") < 0)
		u = NULL;
	free(root);
	return u;
}

static int write_small(const char *dir, const char *file, const char *text, struct sfs_err *err);
static char *read_small(const char *dir, const char *file);

/* Polls an operation until done (a job's creation takes seconds). */
static int wait_operation(json_t *op, const char *what, struct sfs_err *err)
{
	json_t *cur = json_incref(op);
	int rc = 0;
	for (int i = 0; !rc && !json_is_true(json_object_get(cur, "done")); i++) {
		const char *name = json_string_value(json_object_get(cur, "name"));
		if (!name || i > 240) {
			rc = sfs_errf(err, -ETIMEDOUT, "gcp: %s: the operation did not finish",
				      what);
			break;
		}
		usleep(i < 10 ? 200000 : 500000);
		char *url = name_url(name, NULL);
		json_t *next = NULL;
		struct gcp_call c = {.method = "GET", .url = url, .sink_fd = -1, .what = what};
		rc = url ? gcp_call(&c, NULL, &next, NULL, err) : oom(err);
		free(url);
		json_decref(cur);
		cur = next;
	}
	json_t *e = json_object_get(cur, "error");
	if (!rc && e) {
		const char *m = json_string_value(json_object_get(e, "message"));
		rc = sfs_errf(err, -EIO, "gcp: %s: %s", what, m ? m : "the operation failed");
	}
	json_decref(cur);
	return rc;
}

/* The job exists (made now when it did not). */
static int ensure_job(struct sfs_sandbox *sb, const struct gcp_settings *s, const char *job,
		      struct sfs_err *err)
{
	char what[200];
	snprintf(what, sizeof(what), "run jobs.get %s", job); /* message: may be cut */
	char *url = run_url(s, job, NULL);
	if (!url)
		return oom(err);
	long status = 0;
	struct sfs_err e = {0};
	struct gcp_call get = {.method = "GET", .url = url, .sink_fd = -1, .what = what};
	int rc = gcp_call(&get, &status, NULL, NULL, &e);
	free(url);
	if (!rc)
		return write_small(sb->statedir, "gcp.job", job, err);
	if (status != 404) {
		sfs_errf(err, rc, "%s", e.msg);
		return rc;
	}
	struct gcp_ws w;
	if ((rc = gcp_ws_of(sb, &w, err)))
		return rc;
	/* only-dir takes the prefix without its trailing '/' */
	char onlydir[1100];
	if (sfs_pathf(onlydir, sizeof(onlydir), "only-dir=%.*s", (int)strlen(w.root) - 1, w.root) <
	    0)
		return sfs_errf(err, -ENAMETOOLONG, "gcp: workspace prefix too long");
	json_t *limits = json_object();
	if (*s->cpu)
		json_object_set_new(limits, "cpu", json_string(s->cpu));
	if (*s->memory)
		json_object_set_new(limits, "memory", json_string(s->memory));
	json_t *body = json_pack(
	    "{s:{s:{s:[{s:s, s:s, s:[s], s:s, s:{s:o}, s:[{s:s, s:s}]}], s:[{s:s, s:{s:s, s:[s]}}],"
	    " s:i, s:s}}, s:{s:s}}",
	    "template", "template", "containers", "name", "sandbox", "image", sb->image, "command",
	    "/bin/sh", "workingDir", WORKSPACE_MOUNT, "resources", "limits", limits, "volumeMounts",
	    "name", "workspace", "mountPath", WORKSPACE_MOUNT, "volumes", "name", "workspace",
	    "gcs", "bucket", w.bucket, "mountOptions", onlydir, "maxRetries", 0, "timeout",
	    "86400s", "labels", "sandboxfs", "sandbox");
	char tail[160];
	if (sfs_pathf(tail, sizeof(tail), "/jobs?jobId=%s", job) < 0) {
		json_decref(body);
		return sfs_errf(err, -ENAMETOOLONG, "gcp: job name %s too long", job);
	}
	url = run_url(s, NULL, tail);
	snprintf(what, sizeof(what), "run jobs.create %s", job); /* message: may be cut */
	json_t *op = NULL;
	struct gcp_call create = {
	    .method = "POST", .url = url, .json = body, .sink_fd = -1, .what = what};
	rc = url && body ? gcp_call(&create, NULL, &op, NULL, err) : oom(err);
	free(url);
	json_decref(body);
	if (!rc)
		rc = wait_operation(op, what, err);
	json_decref(op);
	if (!rc)
		rc = write_small(sb->statedir, "gcp.job", job, err);
	return rc;
}

/* ---- per-run state, keyed by the run's directory ------------------------ */

struct runstate {
	char *dir;
	char *exec;	       /* full execution name */
	pthread_mutex_t fetch; /* one log fetch at a time */
	char cursor[48];       /* timestamp of the last entry appended */
	struct sfs_buf ids;    /* "\n"-joined insertIds seen at the cursor */
	int64_t last_fetch_ms;
	int64_t ended_ms; /* when the end was seen (0: running) */
	bool final;	  /* every line is in gcp.log */
	struct runstate *next;
};

static pthread_mutex_t runs_mu = PTHREAD_MUTEX_INITIALIZER; /* a leaf */
static struct runstate *runs;

static char *read_small(const char *dir, const char *file)
{
	char path[4200];
	if (sfs_pathf(path, sizeof(path), "%s/%s", dir, file) < 0)
		return NULL;
	char *text = NULL;
	size_t len = 0;
	if (sfs_read_file(path, &text, &len))
		return NULL;
	while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
		text[--len] = '\0';
	return text;
}

static int write_small(const char *dir, const char *file, const char *text, struct sfs_err *err)
{
	char path[4200];
	if (sfs_pathf(path, sizeof(path), "%s/%s", dir, file) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "gcp: %s/%s: path too long", dir, file);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sfs_errf(err, -errno, "gcp: %s: %s", path, strerror(errno));
	size_t n = strlen(text);
	ssize_t w = write(fd, text, n);
	int e = errno;
	close(fd);
	if (w != (ssize_t)n)
		return sfs_errf(err, w < 0 ? -e : -EIO, "gcp: writing %s failed", path);
	return 0;
}

/* The state of the run in dir (made from RUNDIR/gcp.execution when new,
 * its gcp.log emptied: this daemon fetches the log from the start). */
static struct runstate *state_of(const char *dir)
{
	pthread_mutex_lock(&runs_mu);
	struct runstate *r = runs;
	while (r && strcmp(r->dir, dir))
		r = r->next;
	if (!r) {
		char *exec = read_small(dir, "gcp.execution");
		r = exec ? calloc(1, sizeof(*r)) : NULL;
		if (r && !(r->dir = strdup(dir))) {
			free(r);
			r = NULL;
		}
		if (r) {
			r->exec = exec;
			exec = NULL;
			pthread_mutex_init(&r->fetch, NULL);
			char path[4200];
			int fd =
			    sfs_pathf(path, sizeof(path), "%s/gcp.log", dir) < 0
				? -1
				: open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
				       0600);
			if (fd >= 0)
				close(fd);
			r->next = runs;
			runs = r;
		}
		free(exec);
	}
	pthread_mutex_unlock(&runs_mu);
	return r;
}

static bool ended_of(struct runstate *r)
{
	pthread_mutex_lock(&runs_mu);
	bool e = r->ended_ms != 0;
	pthread_mutex_unlock(&runs_mu);
	return e;
}

static void mark_ended(struct runstate *r)
{
	pthread_mutex_lock(&runs_mu);
	if (!r->ended_ms)
		r->ended_ms = now_ms();
	pthread_mutex_unlock(&runs_mu);
}

/* ---- run_start ----------------------------------------------------------- */

/* jobs:run with args ["-c", script] and env (may be NULL); *exec gets the
 * new execution's full name (malloc'd).  Makes the job first if needed. */
static int start_execution(struct sfs_sandbox *sb, const char *script, const struct sfs_kvlist *env,
			   char **exec, struct sfs_err *err)
{
	*exec = NULL;
	struct gcp_settings s;
	job_place(sb, &s);
	char job[80];
	gcp_job_id(sb, job, sizeof(job));
	int rc = ensure_job(sb, &s, job, err);
	if (rc)
		return rc;
	json_t *envs = json_array();
	if (!envs)
		rc = oom(err);
	for (size_t i = 0; !rc && env && i < env->n; i++)
		if (json_array_append_new(envs, json_pack("{s:s, s:s}", "name", env->v[i].key,
							  "value", env->v[i].val)))
			rc = oom(err);
	json_t *body =
	    rc ? NULL
	       : json_pack("{s:{s:[{s:s, s:[s, s], s:O}]}}", "overrides", "containerOverrides",
			   "name", "sandbox", "args", "-c", script, "env", envs);
	json_decref(envs);
	if (!rc && !body)
		rc = oom(err);
	char *url = rc ? NULL : run_url(&s, job, ":run");
	if (!rc && !url)
		rc = oom(err);
	char what[200];
	snprintf(what, sizeof(what), "run jobs.run %s", job); /* message: may be cut */
	json_t *op = NULL;
	/* not retried once the server may have it: a second run would be a
	 * second execution */
	struct gcp_call c = {
	    .method = "POST", .url = url, .json = body, .sink_fd = -1, .what = what};
	if (!rc)
		rc = gcp_call(&c, NULL, &op, NULL, err);
	free(url);
	json_decref(body);
	const char *name =
	    json_string_value(json_object_get(json_object_get(op, "metadata"), "name"));
	if (!rc && !name)
		rc = sfs_errf(err, -EPROTO, "gcp: %s: the operation names no execution", what);
	if (!rc && !(*exec = strdup(name)))
		rc = oom(err);
	json_decref(op);
	return rc;
}

static const char *missing_msg(struct sfs_sandbox *sb, const char *what, char *buf, size_t len)
{
	char missing[200];
	if (!*gcp_run_missing(sb, missing, sizeof(missing)))
		return NULL;
	snprintf(buf, len,
		 "gcp: %s runs a Cloud Run job, which needs %s; the workspace gs://%s works "
		 "without them",
		 what, missing, sb->id ? sb->id : ""); /* message: may be cut */
	return buf;
}

int gcp_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char msg[600];
	if (missing_msg(sb, "exec", msg, sizeof(msg)))
		return sfs_errf(err, -EINVAL, "%s", msg);
	struct sfs_kvlist env = {0};
	int rc = sfs_sb_run_env(sb, &env, err);
	if (rc)
		return rc;
	struct sfs_buf script = {0};
	char *exec = NULL;
	/* stderr joins stdout so the log keeps their order */
	if (sfs_buf_printf(&script, "exec 2>&1\n%s", run->cmd))
		rc = oom(err);
	if (!rc)
		rc = start_execution(sb, script.buf, &env, &exec, err);
	sfs_kv_free(&env);
	sfs_buf_free(&script);
	if (!rc)
		rc = write_small(run->dir, "gcp.execution", exec, err);
	free(exec);
	return rc;
}

/* ---- run_refresh --------------------------------------------------------- */

static long long count_of(json_t *ex, const char *k)
{
	long long n = gcp_int64(json_object_get(ex, k));
	return n < 0 ? 0 : n;
}

/* The task's lastAttemptResult: exit code, or -signal. */
static int task_result(const char *exec, int *code, int *sig, struct sfs_err *err)
{
	char *url = name_url(exec, "/tasks");
	json_t *o = NULL;
	struct gcp_call c = {.method = "GET", .url = url, .sink_fd = -1, .what = "run tasks.list"};
	int rc = url ? gcp_call(&c, NULL, &o, NULL, err) : oom(err);
	free(url);
	json_t *res =
	    json_object_get(json_array_get(json_object_get(o, "tasks"), 0), "lastAttemptResult");
	long long ec = gcp_int64(json_object_get(res, "exitCode"));
	long long ts = gcp_int64(json_object_get(res, "termSignal"));
	*code = ec >= 0 ? (int)ec : 1;
	*sig = ts > 0 ? (int)ts : 0;
	json_decref(o);
	return rc;
}

/* A finished execution's end: cancelled (as killsig), succeeded, or the
 * task's exit code / signal. */
static int execution_result(json_t *ex, const char *exec, int killsig, enum sfs_run_state *state,
			    int *out, struct sfs_err *err)
{
	if (count_of(ex, "cancelledCount") > 0) {
		*state = SFS_RUN_KILLED;
		*out = killsig;
		return 0;
	}
	if (count_of(ex, "succeededCount") > 0) {
		*state = SFS_RUN_EXITED;
		*out = 0;
		return 0;
	}
	int code = 1, sig = 0;
	int rc = task_result(exec, &code, &sig, err);
	/* as the shell kit's wrapper reads a status: 129..192 is a signal (a
	 * container's init reports a signalled command so) */
	if (!sig && code > 128 && code <= 192)
		sig = code - 128;
	*state = sig ? SFS_RUN_KILLED : SFS_RUN_EXITED;
	*out = sig ? sig : code;
	return rc;
}

int gcp_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	(void)sb;
	if (run->state != SFS_RUN_RUNNING)
		return 0;
	struct runstate *r = state_of(run->dir);
	if (!r) {
		run->state = SFS_RUN_LOST; /* started by no execution this daemon can name */
		return 0;
	}
	char *url = name_url(r->exec, NULL);
	json_t *ex = NULL;
	long status = 0;
	struct gcp_call c = {
	    .method = "GET", .url = url, .sink_fd = -1, .what = "run executions.get"};
	int rc = url ? gcp_call(&c, &status, &ex, NULL, err) : oom(err);
	free(url);
	if (rc) {
		if (status == 404) /* deleted (or expired) with its job */
			run->state = SFS_RUN_LOST;
		return status == 404 ? 0 : rc;
	}
	if (json_string_value(json_object_get(ex, "completionTime"))) {
		char *killed = read_small(run->dir, "gcp.killed");
		rc = execution_result(ex, r->exec, killed ? atoi(killed) : 15, &run->state,
				      &run->code, err);
		free(killed);
		if (!rc)
			mark_ended(r);
	}
	json_decref(ex);
	return rc;
}

/* ---- the journal ----------------------------------------------------------- */

/* Appends the text of entries newer than the cursor; *added counts them. */
static int append_entries(struct runstate *r, int fd, json_t *entries, int *added,
			  struct sfs_err *err)
{
	size_t i;
	json_t *e;
	json_array_foreach(entries, i, e)
	{
		const char *ts = json_string_value(json_object_get(e, "timestamp"));
		const char *id = json_string_value(json_object_get(e, "insertId"));
		const char *text = json_string_value(json_object_get(e, "textPayload"));
		if (!text)
			text = json_string_value(
			    json_object_get(json_object_get(e, "jsonPayload"), "message"));
		if (!ts || !id || !text)
			continue;
		if (strlen(ts) >= sizeof(r->cursor))
			continue; /* no timestamp Cloud Logging writes */
		int cmp = strcmp(ts, r->cursor);
		if (cmp < 0)
			continue;
		if (cmp == 0) {
			/* the cursor's own second is asked for again: skip ids seen */
			char needle[300];
			if (sfs_pathf(needle, sizeof(needle), "\n%s\n", id) < 0 ||
			    (r->ids.buf && strstr(r->ids.buf, needle)))
				continue; /* an id too long to check is not shown */
		} else {
			if (sfs_pathf(r->cursor, sizeof(r->cursor), "%s", ts) < 0)
				continue; /* never: its length was checked */
			sfs_buf_reset(&r->ids);
		}
		if ((!r->ids.len && sfs_buf_addc(&r->ids, '\n')) ||
		    sfs_buf_printf(&r->ids, "%s\n", id))
			return oom(err);
		struct sfs_buf line = {0};
		if (sfs_buf_printf(&line, "%s\n", text))
			return oom(err);
		ssize_t w = write(fd, line.buf, line.len);
		sfs_buf_free(&line);
		if (w < 0)
			return sfs_errf(err, -errno, "gcp: journal cache: %s", strerror(errno));
		(*added)++;
	}
	return 0;
}

static int fetch_log(struct sfs_sandbox *sb, struct runstate *r, int *added, struct sfs_err *err)
{
	struct gcp_settings s;
	job_place(sb, &s);
	char job[80], path[4200];
	gcp_job_id(sb, job, sizeof(job));
	const char *short_exec = strrchr(r->exec, '/');
	short_exec = short_exec ? short_exec + 1 : r->exec;
	struct sfs_buf flt = {0};
	int rc =
	    sfs_buf_printf(&flt,
			   "resource.type=\"cloud_run_job\" AND resource.labels.job_name=\"%s\" "
			   "AND labels.\"run.googleapis.com/execution_name\"=\"%s\"",
			   job, short_exec);
	if (!rc && *r->cursor)
		rc = sfs_buf_printf(&flt, " AND timestamp>=\"%s\"", r->cursor);
	char resource[200];
	char *root = gcp_logging_url(), *url = NULL;
	if (rc || !root || asprintf(&url, "%s/v2/entries:list", root) < 0) {
		url = NULL;
		rc = oom(err);
	}
	free(root);
	if (!rc && sfs_pathf(resource, sizeof(resource), "projects/%s", s.project) < 0)
		rc = sfs_errf(err, -ENAMETOOLONG, "gcp: project id too long");
	if (!rc && sfs_pathf(path, sizeof(path), "%s/gcp.log", r->dir) < 0)
		rc = sfs_errf(err, -ENAMETOOLONG, "gcp: %s: path too long", r->dir);
	int fd = rc ? -1 : open(path, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (!rc && fd < 0)
		rc = sfs_errf(err, -errno, "gcp: %s: %s", path, strerror(errno));
	char *token = NULL;
	for (int page = 0; !rc && page < 100; page++) {
		json_t *body =
		    json_pack("{s:[s], s:s, s:s, s:i}", "resourceNames", resource, "filter",
			      flt.buf, "orderBy", "timestamp asc", "pageSize", 1000);
		if (body && token)
			json_object_set_new(body, "pageToken", json_string(token));
		free(token);
		token = NULL;
		json_t *o = NULL;
		/* a read: repeating it is harmless */
		struct gcp_call c = {.method = "POST",
				     .url = url,
				     .json = body,
				     .sink_fd = -1,
				     .retry_unsafe = true,
				     .what = "logging entries:list"};
		rc = body ? gcp_call(&c, NULL, &o, NULL, err) : oom(err);
		json_decref(body);
		if (!rc)
			rc = append_entries(r, fd, json_object_get(o, "entries"), added, err);
		const char *t = json_string_value(json_object_get(o, "nextPageToken"));
		if (!rc && t && *t && !(token = strdup(t)))
			rc = oom(err);
		json_decref(o);
		if (!token)
			break;
	}
	free(token);
	if (fd >= 0)
		close(fd);
	free(url);
	sfs_buf_free(&flt);
	return rc;
}

ssize_t gcp_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			 size_t max, struct sfs_err *err)
{
	struct runstate *r = state_of(run->dir);
	if (!r)
		return 0; /* no execution: an empty journal */
	pthread_mutex_lock(&r->fetch);
	int rc = 0;
	int64_t now = now_ms();
	bool ended = ended_of(r);
	if (!r->final && (ended || now - r->last_fetch_ms >= LOG_POLL_MS)) {
		int added = 0;
		rc = fetch_log(sb, r, &added, err);
		r->last_fetch_ms = now_ms();
		/* every line is in once a fetch made after the end (and the
		 * settling time) brought nothing new */
		if (!rc && ended && !added) {
			pthread_mutex_lock(&runs_mu);
			r->final = now - r->ended_ms >= LOG_SETTLE_MS;
			pthread_mutex_unlock(&runs_mu);
		}
	}
	pthread_mutex_unlock(&r->fetch);
	if (rc)
		return rc;
	char path[4200];
	if (sfs_pathf(path, sizeof(path), "%s/gcp.log", r->dir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "gcp: %s: path too long", r->dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sfs_errf(err, -errno, "gcp: %s: %s", path, strerror(errno));
	ssize_t n;
	do
		n = pread(fd, buf, max, off);
	while (n < 0 && errno == EINTR);
	int e = errno;
	close(fd);
	return n < 0 ? sfs_errf(err, -e, "gcp: journal cache: %s", strerror(e)) : n;
}

/* ---- kill ------------------------------------------------------------------ */

int gcp_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		 struct sfs_err *err)
{
	(void)sb;
	(void)escalate; /* cancel stops the container (SIGTERM, then SIGKILL) */
	struct runstate *r = state_of(run->dir);
	if (!r)
		return sfs_errf(err, -ESRCH, "gcp: run %d has no execution", run->n);
	char sigtext[16];
	snprintf(sigtext, sizeof(sigtext), "%d", sig);
	int rc = write_small(run->dir, "gcp.killed", sigtext, err);
	char *url = rc ? NULL : name_url(r->exec, ":cancel");
	json_t *empty = json_object();
	long status = 0;
	struct gcp_call c = {.method = "POST",
			     .url = url,
			     .json = empty,
			     .sink_fd = -1,
			     .what = "run executions.cancel"};
	if (!rc)
		rc = url && empty ? gcp_call(&c, &status, NULL, NULL, err) : oom(err);
	free(url);
	json_decref(empty);
	if (rc && (status == 400 || status == 412))
		return sfs_errf(err, -ESRCH, "gcp: run %d has already ended", run->n);
	if (rc)
		return rc;
	/* wait (bounded) for the execution to stop, so status says so */
	for (int i = 0; i < 100; i++) {
		struct sfs_run copy = *run;
		struct sfs_err e = {0};
		if (gcp_run_refresh(sb, &copy, &e) || copy.state != SFS_RUN_RUNNING)
			break;
		usleep(100000);
	}
	return 0;
}

void gcp_runs_shutdown(void)
{
	pthread_mutex_lock(&runs_mu);
	struct runstate *r = runs;
	runs = NULL;
	pthread_mutex_unlock(&runs_mu);
	while (r) {
		struct runstate *next = r->next;
		pthread_mutex_destroy(&r->fetch);
		sfs_buf_free(&r->ids);
		free(r->dir);
		free(r->exec);
		free(r);
		r = next;
	}
}

int gcp_job_delete(struct sfs_sandbox *sb, struct sfs_err *err)
{
	/* STATEDIR/gcp.job names the job a run made (or found) */
	char *job = sb->statedir ? read_small(sb->statedir, "gcp.job") : NULL;
	if (!job)
		return 0; /* no run ever made one */
	struct gcp_settings s;
	job_place(sb, &s);
	char *url = run_url(&s, job, NULL);
	free(job);
	if (!url)
		return oom(err);
	long status = 0;
	struct sfs_err e = {0};
	struct gcp_call c = {
	    .method = "DELETE", .url = url, .sink_fd = -1, .what = "run jobs.delete"};
	int rc = gcp_call(&c, &status, NULL, NULL, &e);
	free(url);
	if (rc && status != 404) {
		sfs_errf(err, rc, "%s", e.msg);
		return rc;
	}
	return 0;
}

/* Waits (polling executions.get, up to an hour) for an execution to end. */
static int wait_execution(const char *exec, enum sfs_run_state *state, int *code,
			  struct sfs_err *err)
{
	char *url = name_url(exec, NULL);
	if (!url)
		return oom(err);
	int rc = 0;
	for (int i = 0;; i++) {
		json_t *ex = NULL;
		struct gcp_call c = {
		    .method = "GET", .url = url, .sink_fd = -1, .what = "run executions.get"};
		if ((rc = gcp_call(&c, NULL, &ex, NULL, err)))
			break;
		bool done = json_string_value(json_object_get(ex, "completionTime")) != NULL;
		if (done)
			rc = execution_result(ex, exec, 15, state, code, err);
		json_decref(ex);
		if (done)
			break;
		if (i > 4000) {
			rc = sfs_errf(err, -ETIMEDOUT,
				      "gcp: execution %s did not end within an hour", exec);
			break;
		}
		usleep(i < 10 ? 250000 : 1000000);
	}
	free(url);
	return rc;
}

/*
 * `new … source=` (ctl/source.c): the archive goes up as one object and one
 * execution unpacks it on the workspace volume, whatever the file count.
 */
int gcp_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err)
{
	static const char rel[] = ".sandboxfs-source.tar";
	char msg[600];
	if (missing_msg(sb, "source= (unpacked in a Cloud Run execution)", msg, sizeof(msg)))
		return sfs_errf(err, -EINVAL, "%s", msg);
	int rc = gcp_fs_write(sb, rel, fd, 0600, err);
	if (rc)
		return rc;
	char *exec = NULL;
	enum sfs_run_state state = SFS_RUN_LOST;
	int code = -1;
	rc = start_execution(sb,
			     "exec 2>&1\ntar -xf .sandboxfs-source.tar; s=$?; "
			     "rm -f .sandboxfs-source.tar; exit $s",
			     NULL, &exec, err);
	if (!rc)
		rc = wait_execution(exec, &state, &code, err);
	if (!rc && (state != SFS_RUN_EXITED || code != 0))
		rc = sfs_errf(
		    err, -EIO, "gcp: unpacking the source tree (%lld bytes) in execution %s: %s %d",
		    (long long)size, exec, state == SFS_RUN_EXITED ? "exit" : "signal", code);
	if (rc) {
		struct sfs_err e = {0};
		gcp_fs_remove(sb, rel, false, &e);
	}
	free(exec);
	return rc;
}
