/*
 * Runs as ECS Fargate tasks (docs/aws.md "Runs"): run_start puts the task's
 * script (job.c) beside the workspace prefix and starts RunTask with a
 * command that fetches it by a presigned URL; run_refresh reads the task's
 * end from DescribeTasks (exit code of its container); the journal is the
 * task's CloudWatch Logs stream, read with GetLogEvents and its forward
 * token, one event per line; kill is StopTask (TERM, KILL after the task
 * definition's stopTimeout).
 */
#include "aws.h"
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../options.h"
#include "../provider.h"
#include "../sh/sh.h"
#include "../strbuf.h"
#include "../util.h"

#define TASK_RUNDIR "/tmp/sandboxfs-run"

int aws_meta_prefix(const char *root, char *out, size_t len)
{
	/* root "P/NAME/" -> "P/.sandboxfs/NAME/": sandbox names start with a
	 * letter or digit, so no workspace prefix is ever ".sandboxfs" */
	size_t n = strlen(root);
	if (n < 2 || root[n - 1] != '/')
		return -EINVAL;
	size_t start = n - 1;
	while (start > 0 && root[start - 1] != '/')
		start--;
	int w = snprintf(out, len, "%.*s.sandboxfs/%s", (int)start, root, root + start);
	return w < 0 || (size_t)w >= len ? -ENAMETOOLONG : 0;
}

/* A job setting: the sandbox's own (from new), else the option's. */
char *aws_setting(struct sfs_sandbox *sb, const char *key)
{
	char *v = aws_state_job_dup(sb, key);
	if (v)
		return v;
	char opt[64];
	if (sfs_pathf(opt, sizeof(opt), "aws.%s", key) < 0)
		return NULL;
	const char *o = sfs_opt_get(opt);
	return o && *o ? strdup(o) : NULL;
}

/* "a,b" as a JSON array of strings. */
static json_t *csv_array(const char *csv)
{
	json_t *a = json_array();
	for (const char *p = csv ? csv : ""; a && *p;) {
		size_t n = strcspn(p, ",");
		if (n)
			json_array_append_new(a, json_stringn(p, n));
		p += n + (p[n] == ',');
	}
	return a;
}

struct taskdef {
	char *arn, *container, *image, *group, *prefix;
};

static void taskdef_free(struct taskdef *t)
{
	free(t->arn);
	free(t->container);
	free(t->image);
	free(t->group);
	free(t->prefix);
}

static char *jdup(json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));
	return v ? strdup(v) : NULL;
}

/* The task definition's first container and its awslogs stream; with an
 * image= of the sandbox that differs, a revision of the same family with
 * that image is registered (ECS overrides cannot change the image). */
static int describe_taskdef(const struct aws_config *c, const char *td, const char *image,
			    struct taskdef *t, struct sfs_err *err)
{
	memset(t, 0, sizeof(*t));
	json_t *body = json_pack("{s:s}", "taskDefinition", td), *out = NULL;
	int rc = body ? aws_json(c, "ecs", "DescribeTaskDefinition", body, &out, err)
		      : sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(body);
	if (rc)
		return rc;
	json_t *def = json_object_get(out, "taskDefinition");
	json_t *ctr = json_array_get(json_object_get(def, "containerDefinitions"), 0);
	json_t *lc = json_object_get(ctr, "logConfiguration");
	json_t *lo = json_object_get(lc, "options");
	const char *driver = json_string_value(json_object_get(lc, "logDriver"));
	t->arn = jdup(def, "taskDefinitionArn");
	t->container = jdup(ctr, "name");
	t->image = jdup(ctr, "image");
	t->group = jdup(lo, "awslogs-group");
	t->prefix = jdup(lo, "awslogs-stream-prefix");
	if (!t->arn || !t->container)
		rc = sfs_errf(err, -EPROTO, "aws: task definition %s has no container", td);
	else if (!driver || strcmp(driver, "awslogs") || !t->group || !t->prefix)
		rc = sfs_errf(err, -EINVAL,
			      "aws: task definition %s: its container %s needs logConfiguration "
			      "awslogs with awslogs-group and awslogs-stream-prefix (the run's "
			      "journal is that log stream)",
			      td, t->container);
	if (!rc && image && strcmp(image, "none") && t->image && strcmp(image, t->image)) {
		/* a copy of the definition with the image replaced */
		json_t *reg = json_object();
		static const char *const keep[] = {
		    "family",	       "containerDefinitions",	  "taskRoleArn", "executionRoleArn",
		    "networkMode",     "requiresCompatibilities", "cpu",	 "memory",
		    "runtimePlatform", "ephemeralStorage"};
		for (size_t i = 0; reg && i < sizeof(keep) / sizeof(*keep); i++) {
			json_t *v = json_object_get(def, keep[i]);
			if (v)
				json_object_set_new(reg, keep[i], json_deep_copy(v));
		}
		json_t *c0 = json_array_get(json_object_get(reg, "containerDefinitions"), 0);
		json_t *rout = NULL;
		if (!reg || !c0 || json_object_set_new(c0, "image", json_string(image)))
			rc = sfs_errf(err, -ENOMEM, "out of memory");
		else
			rc = aws_json(c, "ecs", "RegisterTaskDefinition", reg, &rout, err);
		json_decref(reg);
		if (!rc) {
			char *arn =
			    jdup(json_object_get(rout, "taskDefinition"), "taskDefinitionArn");
			if (!arn)
				rc = sfs_errf(err, -EPROTO,
					      "aws: RegisterTaskDefinition answered no ARN");
			free(t->arn);
			t->arn = arn;
		}
		json_decref(rout);
	}
	json_decref(out);
	if (rc)
		taskdef_free(t);
	return rc;
}

/* The manifest of the workspace: every object under root with presigned
 * GET and DELETE URLs. */
static int manifest(struct aws_ws *w, long expires, time_t now, struct sfs_buf *m,
		    struct sfs_err *err)
{
	struct aws_s3_list l = {0};
	int rc = aws_s3_list(&w->cfg, w->bucket, w->root, false, 0, &l, err);
	size_t rl = strlen(w->root);
	for (size_t i = 0; !rc && i < l.nobjs; i++) {
		const char *key = l.objs[i].key;
		if (strncmp(key, w->root, rl) || !key[rl])
			continue; /* the root's own marker */
		char *path = strdup(key + rl), *get = NULL, *del = NULL;
		if (!path) {
			rc = sfs_errf(err, -ENOMEM, "out of memory");
			break;
		}
		size_t pl = strlen(path);
		bool dir = path[pl - 1] == '/';
		if (dir)
			path[pl - 1] = 0;
		rc = aws_presign(&w->cfg, "DELETE", w->bucket, key, expires, now, &del, err);
		if (!rc) /* a directory marker's too: its mode */
			rc = aws_presign(&w->cfg, "GET", w->bucket, key, expires, now, &get, err);
		if (!rc && (rc = aws_job_manifest_add(m, dir, get, del, path)))
			rc = sfs_errf(err, rc,
				      rc == -EINVAL
					  ? "aws: s3://%s/%s: a name with a newline or an "
					    "empty, '.' or '..' segment cannot go to a task"
					  : "out of memory",
				      w->bucket, key);
		free(path);
		free(get);
		free(del);
	}
	aws_s3_list_free(&l);
	return rc;
}

/* The task's script: built, put beside the prefix, its presigned URL. */
int aws_put_job(struct sfs_sandbox *sb, struct sfs_run *run, struct aws_ws *w, const char *workdir,
		char **job_key, char **job_url, struct sfs_err *err)
{
	long expires = (long)sfs_opt_get_double("aws.url_expiry");
	time_t now = time(NULL);
	struct sfs_buf m = {0}, script = {0}, key = {0};
	struct aws_post post = {0};
	struct sfs_kvlist env = {0};
	struct sfs_sh_cmd c = {0};
	char *wrapper = NULL, meta[1100];
	int rc = manifest(w, expires, now, &m, err);
	if (!rc)
		rc = aws_post_policy(&w->cfg, w->bucket, w->root, expires, now, &post, err);
	if (!rc)
		rc = sfs_sb_run_env(sb, &env, err);
	if (!rc) {
		struct sfs_sh_run wrap = {
		    .dir = TASK_RUNDIR "/run", .workspace = workdir, .cmd = run->cmd, .env = &env};
		rc = sfs_sh_wrapper(&c, &wrap, err);
	}
	if (!rc)
		rc = sfs_sh_cmd_string(&c, &wrapper, err);
	if (!rc) {
		struct aws_job j = {.workdir = workdir,
				    .rundir = TASK_RUNDIR,
				    .root = w->root,
				    .post = &post,
				    .token = w->cfg.session_token,
				    .manifest = m.buf,
				    .wrapper = wrapper,
				    .parallel = (int)sfs_opt_get_double("aws.sync_parallel")};
		rc = aws_job_script(&j, &script, err);
	}
	if (!rc && (aws_meta_prefix(w->root, meta, sizeof(meta)) ||
		    sfs_buf_printf(&key, "%sruns/%d-%lld/job.sh", meta, run->n, (long long)now)))
		rc = sfs_errf(err, -ENAMETOOLONG, "aws: prefix too long");
	if (!rc) {
		struct aws_s3_call call = {.method = "PUT",
					   .key = key.buf,
					   .body = script.buf,
					   .body_len = script.len,
					   .sink_fd = -1};
		rc = aws_s3(&w->cfg, w->bucket, &call, NULL, NULL, NULL, err);
	}
	if (!rc)
		rc = aws_presign(&w->cfg, "GET", w->bucket, key.buf, expires, now, job_url, err);
	if (!rc)
		*job_key = sfs_buf_take(&key);
	sfs_buf_free(&m);
	sfs_buf_free(&script);
	sfs_buf_free(&key);
	aws_post_free(&post);
	sfs_kv_free(&env);
	sfs_sh_cmd_free(&c);
	free(wrapper);
	return rc;
}

int aws_delete_job(struct sfs_sandbox *sb, const char *key)
{
	struct aws_ws w;
	struct sfs_err e = {0};
	int rc = aws_ws_open(sb, &w, &e);
	if (rc)
		return rc;
	struct aws_s3_call call = {.method = "DELETE", .key = key, .sink_fd = -1};
	rc = aws_s3(&w.cfg, w.bucket, &call, NULL, NULL, NULL, &e);
	aws_ws_close(&w);
	return rc;
}

int aws_run_keep(struct sfs_sandbox *sb, struct sfs_run *run, const char *cluster,
		 const char *project, const char *task, const char *group, const char *stream,
		 char **job_key, struct sfs_err *err)
{
	int rc = 0;
	pthread_mutex_lock(&aws_state_mu);
	struct aws_runst *r = aws_runst_locked(aws_state_get_locked(sb), run->n, true);
	if (r) {
		aws_runst_clear(r);
		r->cluster = cluster ? strdup(cluster) : NULL;
		r->project = project ? strdup(project) : NULL;
		r->task = strdup(task);
		r->group = strdup(group);
		r->stream = strdup(stream);
		r->job_key = *job_key;
		*job_key = NULL;
		if (!(r->cluster || r->project) || !r->task || !r->group || !r->stream)
			rc = -ENOMEM;
	} else {
		rc = -ENOMEM;
	}
	/* the task in the run's own directory: a restarted daemon finds it there */
	json_t *rec = !rc ? json_pack("{s:s?, s:s?, s:s, s:s, s:s, s:s?}", "cluster", r->cluster,
				      "project", r->project, "task", r->task, "group", r->group,
				      "stream", r->stream, "job", r->job_key)
			  : NULL;
	pthread_mutex_unlock(&aws_state_mu);
	if (rc)
		return sfs_errf(err, rc, "out of memory");
	char *text = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
	json_decref(rec);
	char path[4200];
	if (sfs_pathf(path, sizeof(path), "%s/aws", run->dir) < 0 || !text ||
	    sfs_write_file_atomic(path, text, strlen(text), NULL))
		sfs_log(SFS_LOG_WARN,
			"%s: run %d: cannot record %s in %s: a restarted daemon "
			"will not find it",
			sb->name, run->n, task, path);
	free(text);
	run->state = SFS_RUN_RUNNING;
	return 0;
}

/* RunTask's command: fetch the script, run it. */
static const char task_cmd[] =
    "curl -fsS -o /tmp/sandboxfs-job.sh \"$1\" || { echo 'sandboxfs: cannot fetch the run "
    "script' >&2; exit 125; }; exec sh /tmp/sandboxfs-job.sh";

int aws_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char *runner = aws_setting(sb, "runner");
	bool cb = runner && !strcmp(runner, "codebuild");
	free(runner);
	if (cb)
		return aws_cb_start(sb, run, err);
	char *cluster = aws_setting(sb, "cluster"), *td = aws_setting(sb, "task_definition");
	char *subnets = aws_setting(sb, "subnets"), *sgs = aws_setting(sb, "security_groups");
	char *cpu = aws_state_job_dup(sb, "cpu"), *mem = aws_state_job_dup(sb, "memory");
	const char *workdir = aws_workdir(sb);
	struct sfs_buf miss = {0};
	if (!cluster)
		sfs_buf_adds(&miss, ", cluster (new cluster= or aws.cluster)");
	if (!td)
		sfs_buf_adds(&miss,
			     ", task definition (new task_definition= or aws.task_definition)");
	if (!subnets)
		sfs_buf_adds(&miss, ", subnets (new subnets= or aws.subnets)");
	struct aws_ws w;
	struct taskdef t = {0};
	char *job_key = NULL, *job_url = NULL, *image = NULL;
	json_t *body = NULL, *out = NULL;
	int rc = 0;
	if (miss.len) {
		rc = sfs_errf(err, -EINVAL,
			      "aws: exec needs the job settings it lacks: %s; the workspace "
			      "s3://%s works without them",
			      miss.buf + 2, sb->id ? sb->id : "");
		goto out_nows;
	}
	rc = aws_ws_open(sb, &w, err);
	if (rc)
		goto out_nows;
	image = sb->image ? strdup(sb->image) : NULL;
	rc = describe_taskdef(&w.cfg, td, image, &t, err);
	if (!rc)
		rc = aws_put_job(sb, run, &w, workdir, &job_key, &job_url, err);
	if (rc)
		goto out;
	char token[65];
	snprintf(token, sizeof(token), "%.32s-%d-%lld", sb->key, run->n, (long long)time(NULL));
	json_t *ovr = json_pack("{s:[{s:s, s:[s,s,s,s,s]}]}", "containerOverrides", "name",
				t.container, "command", "sh", "-c", task_cmd, "sandboxfs", job_url);
	if (ovr && cpu)
		json_object_set_new(ovr, "cpu", json_string(cpu));
	if (ovr && mem)
		json_object_set_new(ovr, "memory", json_string(mem));
	json_t *vpc = json_pack("{s:o, s:s}", "subnets", csv_array(subnets), "assignPublicIp",
				sfs_opt_get_bool("aws.assign_public_ip") ? "ENABLED" : "DISABLED");
	if (vpc && sgs)
		json_object_set_new(vpc, "securityGroups", csv_array(sgs));
	body = ovr && vpc
		   ? json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:{s:O}, s:O}", "cluster", cluster,
			       "taskDefinition", t.arn, "launchType", "FARGATE", "count", 1,
			       "startedBy", "sandboxfs", "clientToken", token,
			       "networkConfiguration", "awsvpcConfiguration", vpc, "overrides", ovr)
		   : NULL;
	json_decref(ovr);
	json_decref(vpc);
	rc = body ? aws_json(&w.cfg, "ecs", "RunTask", body, &out, err)
		  : sfs_errf(err, -ENOMEM, "out of memory");
	if (rc)
		goto out;
	json_t *task = json_array_get(json_object_get(out, "tasks"), 0);
	const char *arn = json_string_value(json_object_get(task, "taskArn"));
	if (!arn) {
		json_t *f = json_array_get(json_object_get(out, "failures"), 0);
		const char *reason = json_string_value(json_object_get(f, "reason"));
		const char *detail = json_string_value(json_object_get(f, "detail"));
		rc = sfs_errf(err, -EIO, "aws: ecs RunTask started no task: %s%s%s",
			      reason ? reason : "no reason given", detail ? ": " : "",
			      detail ? detail : "");
		goto out;
	}
	const char *tid = strrchr(arn, '/');
	struct sfs_buf stream = {0};
	if (sfs_buf_printf(&stream, "%s/%s/%s", t.prefix, t.container, tid ? tid + 1 : arn)) {
		rc = sfs_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	rc = aws_run_keep(sb, run, cluster, NULL, arn, t.group, stream.buf, &job_key, err);
	sfs_buf_free(&stream);
out:
	if (rc && job_key)
		aws_delete_job(sb, job_key); /* no task will read it: its URLs go too */
	aws_ws_close(&w);
out_nows:
	json_decref(body);
	json_decref(out);
	taskdef_free(&t);
	free(job_key);
	free(job_url);
	free(image);
	free(cluster);
	free(td);
	free(subnets);
	free(sgs);
	free(cpu);
	free(mem);
	sfs_buf_free(&miss);
	return rc;
}

/* Run n's state, from RUNDIR/aws when this daemon did not start it; NULL
 * when there is none.  With aws_state_mu held. */
struct aws_runst *aws_run_locked(struct sfs_sandbox *sb, const struct sfs_run *run)
{
	struct aws_runst *r = aws_runst_locked(sb->priv, run->n, false);
	if (r || !run->dir)
		return r;
	char path[4200], *text = NULL;
	size_t len;
	if (sfs_pathf(path, sizeof(path), "%s/aws", run->dir) < 0 ||
	    sfs_read_file(path, &text, &len))
		return NULL;
	json_t *o = json_loadb(text, len, 0, NULL);
	free(text);
	const char *c = json_string_value(json_object_get(o, "cluster"));
	const char *t = json_string_value(json_object_get(o, "task"));
	const char *g = json_string_value(json_object_get(o, "group"));
	const char *s = json_string_value(json_object_get(o, "stream"));
	const char *j = json_string_value(json_object_get(o, "job"));
	const char *p = json_string_value(json_object_get(o, "project"));
	struct aws_state *st = (c || p) && t && g && s ? aws_state_get_locked(sb) : NULL;
	if (st && (r = aws_runst_locked(st, run->n, true))) {
		r->cluster = c ? strdup(c) : NULL;
		r->project = p ? strdup(p) : NULL;
		r->task = strdup(t);
		r->group = strdup(g);
		r->stream = strdup(s);
		r->job_key = j ? strdup(j) : NULL;
	}
	json_decref(o);
	return r;
}

/* Copies of run's task fields (NULL when the run is unknown). */
static bool run_copy(struct sfs_sandbox *sb, const struct sfs_run *run, char **cluster, char **task,
		     char **job)
{
	pthread_mutex_lock(&aws_state_mu);
	struct aws_runst *r = aws_run_locked(sb, run);
	*cluster = r && r->cluster ? strdup(r->cluster) : NULL;
	*task = r && r->task ? strdup(r->task) : NULL;
	if (job)
		*job = r && r->job_key ? strdup(r->job_key) : NULL;
	pthread_mutex_unlock(&aws_state_mu);
	return *cluster && *task;
}

/* Whether run is a CodeBuild build (codebuild.c). */
static bool is_build(struct sfs_sandbox *sb, const struct sfs_run *run)
{
	pthread_mutex_lock(&aws_state_mu);
	struct aws_runst *r = aws_run_locked(sb, run);
	bool b = r && r->project;
	pthread_mutex_unlock(&aws_state_mu);
	return b;
}

int aws_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	if (run->state != SFS_RUN_RUNNING)
		return 0;
	if (is_build(sb, run))
		return aws_cb_refresh(sb, run, err);
	char *cluster, *task, *job;
	struct aws_ws w;
	if (!run_copy(sb, run, &cluster, &task, &job)) {
		free(cluster);
		free(task);
		free(job);
		run->state = SFS_RUN_LOST; /* no task was recorded for it */
		return 0;
	}
	json_t *body = json_pack("{s:s, s:[s]}", "cluster", cluster, "tasks", task), *out = NULL;
	int rc = aws_ws_open(sb, &w, err);
	if (!rc) {
		rc = body ? aws_json(&w.cfg, "ecs", "DescribeTasks", body, &out, err)
			  : sfs_errf(err, -ENOMEM, "out of memory");
		aws_ws_close(&w);
	}
	json_t *t = json_array_get(json_object_get(out, "tasks"), 0);
	const char *last = json_string_value(json_object_get(t, "lastStatus"));
	if (!rc && last && !strcmp(last, "STOPPED")) {
		json_t *ctr = json_array_get(json_object_get(t, "containers"), 0);
		json_t *code = json_object_get(ctr, "exitCode");
		const char *stop_code = json_string_value(json_object_get(t, "stopCode"));
		if (json_is_integer(code)) {
			int c = (int)json_integer_value(code);
			/* the script exits 128+N for a command ended by signal N */
			if (c > 128 && c <= 192) {
				run->state = SFS_RUN_KILLED;
				run->code = c - 128;
			} else {
				run->state = SFS_RUN_EXITED;
				run->code = c;
			}
		} else if (stop_code && !strcmp(stop_code, "UserInitiated")) {
			/* StopTask before the container ran: ECS's TERM */
			run->state = SFS_RUN_KILLED;
			run->code = 15;
		} else {
			/* the container never ran (image pull, resources...) */
			const char *why = json_string_value(json_object_get(t, "stoppedReason"));
			char msg[512];
			snprintf(msg, sizeof(msg),
				 "aws: run %d: task stopped without an exit code: %s", run->n,
				 why ? why : "no reason given"); /* message: may be cut */
			sfs_sb_set_error(sb, msg);
			run->state = SFS_RUN_LOST;
		}
		if (job && !aws_delete_job(sb, job)) {
			pthread_mutex_lock(&aws_state_mu);
			struct aws_runst *r = aws_runst_locked(sb->priv, run->n, false);
			if (r) {
				free(r->job_key);
				r->job_key = NULL;
			}
			pthread_mutex_unlock(&aws_state_mu);
		}
	} else if (!rc && !t) {
		/* MISSING right after RunTask is ECS being eventually consistent;
		 * later it means the task is gone (stopped tasks stay an hour) */
		if (time(NULL) - run->started > 300)
			run->state = SFS_RUN_LOST;
	}
	json_decref(body);
	json_decref(out);
	free(cluster);
	free(task);
	free(job);
	return rc;
}

/* One GetLogEvents page after token into pending; 0, or -errno. */
static int fetch_events(struct aws_ws *w, const char *group, const char *stream, const char *token,
			struct sfs_buf *bytes, char **next, struct sfs_err *err)
{
	json_t *body = json_pack("{s:s, s:s, s:b}", "logGroupName", group, "logStreamName", stream,
				 "startFromHead", 1),
	       *out = NULL;
	if (body && token)
		json_object_set_new(body, "nextToken", json_string(token));
	int rc = body ? aws_json(&w->cfg, "logs", "GetLogEvents", body, &out, err)
		      : sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(body);
	*next = NULL;
	if (rc == -ENOENT)
		return 0; /* no stream before the task's first line */
	if (rc)
		return rc;
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(out, "events"), i, e)
	{
		const char *msg = json_string_value(json_object_get(e, "message"));
		/* awslogs cut the output into lines: each event is one */
		if (msg && (sfs_buf_adds(bytes, msg) || sfs_buf_addc(bytes, '\n'))) {
			rc = -ENOMEM;
			break;
		}
	}
	const char *nt = json_string_value(json_object_get(out, "nextForwardToken"));
	/* the same token back: the end of the stream for now */
	if (!rc && nt && (!token || strcmp(nt, token)))
		*next = strdup(nt);
	json_decref(out);
	return rc ? sfs_errf(err, rc, "out of memory") : 0;
}

ssize_t aws_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			 size_t max, struct sfs_err *err)
{
	char *group = NULL, *stream = NULL, *token = NULL;
	struct sfs_buf got = {0};
	ssize_t n = 0;
	pthread_mutex_lock(&aws_state_mu);
	struct aws_runst *r = aws_run_locked(sb, run);
	if (r && r->off != off) {
		/* another position (a restart): read the stream again from its head */
		free(r->token);
		r->token = NULL;
		r->off = 0;
		sfs_buf_reset(&r->pending);
	}
	if (r && r->pending.len) {
		/* what an earlier page brought beyond max */
		n = (ssize_t)(r->pending.len < max ? r->pending.len : max);
		memcpy(buf, r->pending.buf, (size_t)n);
		memmove(r->pending.buf, r->pending.buf + n, r->pending.len - (size_t)n);
		r->pending.len -= (size_t)n;
		r->off += n;
		pthread_mutex_unlock(&aws_state_mu);
		return n;
	}
	bool known = r && r->group && r->stream;
	off_t at = r ? r->off : 0;
	if (known) {
		group = strdup(r->group);
		stream = strdup(r->stream);
		token = r->token ? strdup(r->token) : NULL;
	}
	pthread_mutex_unlock(&aws_state_mu);
	if (!known)
		return sfs_errf(err, -ENOENT, "aws: run %d has no task", run->n);
	struct aws_ws w;
	bool opened = false;
	int rc =
	    group && stream ? aws_ws_open(sb, &w, err) : sfs_errf(err, -ENOMEM, "out of memory");
	opened = !rc;
	char *next = NULL;
	/* skip what was handed out before (after a restart: from the head) */
	while (!rc) {
		rc = fetch_events(&w, group, stream, token, &got, &next, err);
		if (rc || !next)
			break;
		free(token);
		token = next;
		next = NULL;
		if ((off_t)got.len > off - at)
			break;
	}
	if (opened)
		aws_ws_close(&w);
	if (!rc) {
		size_t skip = off > at ? (size_t)(off - at) : 0;
		if (skip > got.len)
			skip = got.len;
		size_t avail = got.len - skip;
		n = (ssize_t)(avail < max ? avail : max);
		if (n) /* got.buf is NULL when no event came */
			memcpy(buf, got.buf + skip, (size_t)n);
		pthread_mutex_lock(&aws_state_mu);
		r = aws_runst_locked(sb->priv, run->n, false);
		if (r && r->off == at) {
			free(r->token);
			r->token = token;
			token = NULL;
			r->off = off + n;
			sfs_buf_reset(&r->pending);
			if (avail > (size_t)n &&
			    sfs_buf_add(&r->pending, got.buf + skip + n, avail - (size_t)n))
				rc = -ENOMEM;
		}
		pthread_mutex_unlock(&aws_state_mu);
	}
	free(group);
	free(stream);
	free(token);
	free(next);
	sfs_buf_free(&got);
	return rc ? rc : n;
}

int aws_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		 struct sfs_err *err)
{
	(void)escalate; /* ECS sends KILL itself after the stop timeout */
	if (is_build(sb, run))
		return aws_cb_kill(sb, run, sig, err);
	if (sig != 15 && sig != 9)
		return sfs_errf(err, -EOPNOTSUPP,
				"aws: ECS StopTask sends TERM (then KILL after the stop timeout); "
				"signal %d cannot be sent to a task",
				sig);
	char *cluster, *task;
	if (!run_copy(sb, run, &cluster, &task, NULL)) {
		free(cluster);
		free(task);
		return sfs_errf(err, -ESRCH, "aws: run %d has no task", run->n);
	}
	struct aws_ws w;
	json_t *body = json_pack("{s:s, s:s, s:s}", "cluster", cluster, "task", task, "reason",
				 "sandboxfs kill");
	int rc = aws_ws_open(sb, &w, err);
	if (!rc) {
		rc = body ? aws_json(&w.cfg, "ecs", "StopTask", body, NULL, err)
			  : sfs_errf(err, -ENOMEM, "out of memory");
		aws_ws_close(&w);
	}
	if (!rc) {
		pthread_mutex_lock(&aws_state_mu);
		struct aws_runst *r = aws_runst_locked(sb->priv, run->n, false);
		if (r)
			r->kill_sig = sig;
		pthread_mutex_unlock(&aws_state_mu);
	}
	json_decref(body);
	free(cluster);
	free(task);
	return rc;
}
