/*
 * Runs as CodeBuild builds (aws.runner=codebuild or new runner=codebuild;
 * docs/aws.md "CodeBuild"): the same script as an ECS task's (job.c, put
 * beside the prefix by aws_put_job) run by StartBuild with a buildspec
 * override; the journal is the build's CloudWatch Logs stream, read as an
 * ECS task's (runs.c); kill is StopBuild.  CodeBuild reports a build's
 * status (SUCCEEDED, FAILED, STOPPED...) but no exit code, so the buildspec
 * PUTs the script's exit status to a presigned URL of an object beside the
 * script (RUNS/N-T/exit) and refresh reads it once the build has ended.
 * The exit object outlives the script (deleted at the run's end, as an ECS
 * task's): a restarted daemon reads the end of the run again from it.
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
#include "../strbuf.h"
#include "../util.h"

/* The build's one command: fetch the script, run it with TERM (StopBuild)
 * passed on to it, PUT its exit status.  The outer shell traps TERM so the
 * script still syncs back and the status is still written. */
static const char build_cmd[] =
    "if curl -fsS -o /tmp/sandboxfs-job.sh \"$SFS_JOB_URL\"; then "
    "trap 'kill -TERM $p 2>/dev/null' TERM; sh /tmp/sandboxfs-job.sh & p=$!; wait $p; c=$?; "
    "while kill -0 $p 2>/dev/null; do wait $p; c=$?; done; "
    "else echo 'sandboxfs: cannot fetch the run script'; c=125; fi; "
    "printf %s \"$c\" | curl -fsS -o /dev/null -X PUT --data-binary @- \"$SFS_EXIT_URL\"; "
    "exit $c";

static char *project_of(struct sfs_sandbox *sb)
{
	char *v = aws_state_job_dup(sb, "project");
	const char *o = v ? NULL : sfs_opt_get("aws.codebuild_project");
	return v ? v : o && *o ? strdup(o) : NULL;
}

/* "P/.sandboxfs/NAME/runs/N-T/job.sh" -> ".../exit" */
static char *exit_key(const char *job_key)
{
	const char *slash = strrchr(job_key, '/');
	size_t n = slash ? (size_t)(slash - job_key + 1) : 0;
	char *k = malloc(n + 5);
	if (k) {
		memcpy(k, job_key, n);
		memcpy(k + n, "exit", 5);
	}
	return k;
}

static json_t *env_var(const char *name, const char *value)
{
	return json_pack("{s:s, s:s, s:s}", "name", name, "value", value, "type", "PLAINTEXT");
}

int aws_cb_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char *project = project_of(sb);
	if (!project)
		return sfs_errf(err, -EINVAL,
				"aws: exec with runner=codebuild needs the CodeBuild project it "
				"lacks: project (new project= or aws.codebuild_project); the "
				"workspace s3://%s works without it",
				sb->id ? sb->id : "");
	struct aws_ws w;
	char *job_key = NULL, *job_url = NULL, *ekey = NULL, *exit_url = NULL, *spec = NULL;
	json_t *body = NULL, *out = NULL;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		goto out_nows;
	long expires = (long)sfs_opt_get_double("aws.url_expiry");
	rc = aws_put_job(sb, run, &w, aws_workdir(sb), &job_key, &job_url, err);
	if (!rc && !(ekey = exit_key(job_key)))
		rc = sfs_errf(err, -ENOMEM, "out of memory");
	if (!rc)
		rc =
		    aws_presign(&w.cfg, "PUT", w.bucket, ekey, expires, time(NULL), &exit_url, err);
	if (rc)
		goto out;
	/* JSON is YAML: the buildspec needs no YAML writer */
	json_t *bs = json_pack("{s:s, s:{s:{s:[s]}}}", "version", "0.2", "phases", "build",
			       "commands", build_cmd);
	spec = bs ? json_dumps(bs, JSON_COMPACT) : NULL;
	json_decref(bs);
	char token[65], group[300];
	snprintf(token, sizeof(token), "%.32s-%d-%lld", sb->key, run->n, (long long)time(NULL));
	if (sfs_pathf(group, sizeof(group), "/aws/codebuild/%s", project) < 0) {
		rc = sfs_errf(err, -ENAMETOOLONG, "aws: CodeBuild project name too long");
		goto out;
	}
	body = spec ? json_pack("{s:s, s:s, s:s, s:[o,o], s:{s:{s:s, s:s, s:s}}}", "projectName",
				project, "buildspecOverride", spec, "idempotencyToken", token,
				"environmentVariablesOverride", env_var("SFS_JOB_URL", job_url),
				env_var("SFS_EXIT_URL", exit_url), "logsConfigOverride",
				"cloudWatchLogs", "status", "ENABLED", "groupName", group,
				"streamName", "sandboxfs")
		    : NULL;
	if (body && sb->image && strcmp(sb->image, "none"))
		json_object_set_new(body, "imageOverride", json_string(sb->image));
	rc = body ? aws_json(&w.cfg, "codebuild", "StartBuild", body, &out, err)
		  : sfs_errf(err, -ENOMEM, "out of memory");
	if (rc)
		goto out;
	const char *id = json_string_value(json_object_get(json_object_get(out, "build"), "id"));
	const char *uuid = id ? strrchr(id, ':') : NULL;
	if (!uuid) {
		rc = sfs_errf(err, -EPROTO, "aws: codebuild StartBuild answered no build id");
		goto out;
	}
	/* a stream name given in logsConfigOverride is the prefix of the build's */
	struct sfs_buf stream = {0};
	if (sfs_buf_printf(&stream, "sandboxfs/%s", uuid + 1)) {
		rc = sfs_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	rc = aws_run_keep(sb, run, NULL, project, id, group, stream.buf, &job_key, err);
	sfs_buf_free(&stream);
out:
	if (rc && job_key)
		aws_delete_job(sb, job_key);
	aws_ws_close(&w);
out_nows:
	json_decref(body);
	json_decref(out);
	free(project);
	free(job_key);
	free(job_url);
	free(ekey);
	free(exit_url);
	free(spec);
	return rc;
}

/* The exit status the buildspec PUT, or -1 when there is none. */
static int read_exit(struct aws_ws *w, const char *ekey)
{
	struct sfs_buf b = {0};
	struct sfs_err e = {0};
	struct aws_s3_call call = {.method = "GET", .key = ekey, .sink_fd = -1};
	int code = -1;
	if (!aws_s3(&w->cfg, w->bucket, &call, NULL, &b, NULL, &e) && b.len && b.len < 8) {
		char *end;
		char text[8];
		memcpy(text, b.buf, b.len);
		text[b.len] = 0;
		long v = strtol(text, &end, 10);
		if (end != text && !*end && v >= 0 && v <= 255)
			code = (int)v;
	}
	sfs_buf_free(&b);
	return code;
}

int aws_cb_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char *id = NULL, *job = NULL, *ekey = NULL;
	pthread_mutex_lock(&aws_state_mu);
	struct aws_runst *r = aws_run_locked(sb, run);
	id = r && r->task ? strdup(r->task) : NULL;
	job = r && r->job_key ? strdup(r->job_key) : NULL;
	pthread_mutex_unlock(&aws_state_mu);
	if (!id) {
		free(job);
		run->state = SFS_RUN_LOST;
		return 0;
	}
	struct aws_ws w;
	json_t *body = json_pack("{s:[s]}", "ids", id), *out = NULL;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		goto out;
	rc = body ? aws_json(&w.cfg, "codebuild", "BatchGetBuilds", body, &out, err)
		  : sfs_errf(err, -ENOMEM, "out of memory");
	json_t *b = json_array_get(json_object_get(out, "builds"), 0);
	const char *st = json_string_value(json_object_get(b, "buildStatus"));
	if (!rc && st && strcmp(st, "IN_PROGRESS")) {
		int c = job && (ekey = exit_key(job)) ? read_exit(&w, ekey) : -1;
		if (c > 128 && c <= 192) {
			run->state = SFS_RUN_KILLED; /* the script's 128+N for signal N */
			run->code = c - 128;
		} else if (c >= 0) {
			run->state = SFS_RUN_EXITED;
			run->code = c;
		} else if (!strcmp(st, "STOPPED")) {
			run->state = SFS_RUN_KILLED; /* StopBuild before the script ran */
			run->code = 15;
		} else {
			char msg[512];
			snprintf(msg, sizeof(msg),
				 "aws: run %d: build %s ended %s without an exit status", run->n,
				 id, st); /* message: may be cut */
			sfs_sb_set_error(sb, msg);
			run->state = SFS_RUN_LOST;
		}
		/* the exit object stays (a restarted daemon reads the run's end
		 * again); destroy removes it with the rest of .sandboxfs/NAME/ */
		if (job && !aws_delete_job(sb, job)) {
			pthread_mutex_lock(&aws_state_mu);
			r = aws_runst_locked(sb->priv, run->n, false);
			if (r) {
				free(r->job_key);
				r->job_key = NULL;
			}
			pthread_mutex_unlock(&aws_state_mu);
		}
	} else if (!rc && !b && time(NULL) - run->started > 300) {
		run->state = SFS_RUN_LOST; /* builds stay a year: this one is gone */
	}
	aws_ws_close(&w);
out:
	json_decref(body);
	json_decref(out);
	free(id);
	free(job);
	free(ekey);
	return rc;
}

int aws_cb_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, struct sfs_err *err)
{
	if (sig != 15 && sig != 9)
		return sfs_errf(err, -EOPNOTSUPP,
				"aws: CodeBuild StopBuild stops the build (TERM); signal %d cannot "
				"be sent to a build",
				sig);
	pthread_mutex_lock(&aws_state_mu);
	struct aws_runst *r = aws_run_locked(sb, run);
	char *id = r && r->task ? strdup(r->task) : NULL;
	pthread_mutex_unlock(&aws_state_mu);
	if (!id)
		return sfs_errf(err, -ESRCH, "aws: run %d has no build", run->n);
	struct aws_ws w;
	json_t *body = json_pack("{s:s}", "id", id);
	int rc = aws_ws_open(sb, &w, err);
	if (!rc) {
		rc = body ? aws_json(&w.cfg, "codebuild", "StopBuild", body, NULL, err)
			  : sfs_errf(err, -ENOMEM, "out of memory");
		aws_ws_close(&w);
	}
	json_decref(body);
	free(id);
	return rc;
}
