/*
 * Runs: a detached session command under an sh wrapper, which appends the
 * command's merged output to RUNDIR/journal and, when it ends, writes
 * "exit N" or "signal N" to RUNDIR/status (temp + mv, so it is whole).
 * RUNDIR is ${TMPDIR:-/tmp}/sandboxfs-runs/KEY-N inside the sandbox: outside
 * the workspace, so runs do not show in `ls` or `git status`.
 */
#include "daytona.h"

#include "../config.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define READ_MAX (512 * 1024)

static char *run_dir_expr(struct sfs_sandbox *sb, struct sfs_run *run)
{
	char *d = NULL;
	if (asprintf(&d, "\"${TMPDIR:-/tmp}/sandboxfs-runs/%s-%d\"", sb->key, run->n) < 0)
		return NULL;
	return d;
}

static long poll_timeout_ms(void)
{
	return (long)(sfs_config_get_double("daytona.poll_timeout", 10.0) * 1000);
}

/* The wrapper, as one sh script. */
static char *wrapper_script(struct sfs_sandbox *sb, struct sfs_run *run)
{
	char *d = run_dir_expr(sb, run);
	char *env = NULL, *ws = NULL, *cmd = NULL;
	size_t el = 0, wl = 0, cl = 0;
	int r = d ? 0 : -ENOMEM;
	if (!r && !(env = strdup("")))
		r = -ENOMEM;
	for (size_t i = 0; !r && i < sb->env.n; i++) {
		const char *k = sb->env.v[i].key;
		bool ok = k[0] && !(k[0] >= '0' && k[0] <= '9');
		for (const char *p = k; *p && ok; p++)
			ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			     (*p >= '0' && *p <= '9') || *p == '_';
		if (!ok)
			continue; /* not a shell name: cannot be exported */
		char *line = NULL;
		size_t ll = 0;
		if (asprintf(&line, "export %s=", k) < 0) {
			r = -ENOMEM;
			break;
		}
		ll = strlen(line);
		if (dt_shq(&line, &ll, sb->env.v[i].val)) {
			free(line);
			r = -ENOMEM;
			break;
		}
		char *grown = realloc(env, el + ll + 2);
		if (!grown) {
			free(line);
			r = -ENOMEM;
			break;
		}
		env = grown;
		memcpy(env + el, line, ll);
		el += ll;
		env[el++] = '\n';
		env[el] = '\0';
		free(line);
	}
	if (!r &&
	    (dt_shq(&ws, &wl, sb->workspace ? sb->workspace : "/") || dt_shq(&cmd, &cl, run->cmd)))
		r = -ENOMEM;
	char *script = NULL;
	if (!r && asprintf(&script,
			   "D=%s\n"
			   "mkdir -p \"$D\" || exit 1\n"
			   "echo $$ > \"$D/wpid.tmp\" && mv -f \"$D/wpid.tmp\" \"$D/wpid\"\n"
			   "done_with() { echo \"$1\" > \"$D/status.tmp\" && "
			   "mv -f \"$D/status.tmp\" \"$D/status\"; }\n"
			   "cd %s 2>>\"$D/journal\" || { done_with 'exit 126'; exit 126; }\n"
			   "%s"
			   "( exec sh -c %s ) </dev/null >>\"$D/journal\" 2>&1\n"
			   "s=$?\n"
			   "if [ \"$s\" -gt 128 ] && [ \"$s\" -lt 160 ]; then "
			   "done_with \"signal $((s - 128))\"; else done_with \"exit $s\"; fi\n",
			   d, ws, env, cmd) < 0)
		script = NULL;
	free(d);
	free(env);
	free(ws);
	free(cmd);
	return script;
}

int dt_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char sid[96], path[256];
	snprintf(sid, sizeof(sid), "sandboxfs-%s-%d", sb->key, run->n);
	json_t *body = json_pack("{s:s}", "sessionId", sid);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = dt_toolbox(sb, "POST", "/process/session", body, NULL, err);
	json_decref(body);
	if (r == -EBUSY)
		r = 0; /* a session left by an earlier daemon for this run number */
	if (r)
		return r;
	char *script = wrapper_script(sb, run);
	char *cmd = strdup("sh -c ");
	size_t len = cmd ? strlen(cmd) : 0;
	if (!script || !cmd || dt_shq(&cmd, &len, script)) {
		free(script);
		free(cmd);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(script);
	body = json_pack("{s:s, s:b}", "command", cmd, "runAsync", 1);
	free(cmd);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "/process/session/%s/exec", sid);
	json_t *out = NULL;
	r = dt_toolbox(sb, "POST", path, body, &out, err);
	json_decref(body);
	if (r)
		return r;
	/* the command id, for whoever debugs a run by hand */
	const char *cid = json_string_value(json_object_get(out, "cmdId"));
	char file[4200];
	snprintf(file, sizeof(file), "%s/daytona", run->dir);
	char text[256];
	int tl = snprintf(text, sizeof(text), "session %s\ncommand %s\n", sid, cid ? cid : "-");
	sfs_write_file_atomic(file, text, (size_t)tl, NULL);
	json_decref(out);
	run->state = SFS_RUN_RUNNING;
	return 0;
}

int dt_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char *d = run_dir_expr(sb, run);
	char *script = NULL;
	if (!d || asprintf(&script,
			   "D=%s\n"
			   "if [ -f \"$D/status\" ]; then cat \"$D/status\"\n"
			   "elif [ -f \"$D/wpid\" ] && kill -0 \"$(cat \"$D/wpid\")\" 2>/dev/null; "
			   "then echo running\n"
			   "elif [ -f \"$D/status\" ]; then cat \"$D/status\"\n"
			   "elif [ -d \"$D\" ] && [ ! -f \"$D/wpid\" ]; then echo running\n"
			   "elif [ -d \"$D\" ]; then echo lost\n"
			   "else echo none; fi\n",
			   d) < 0) {
		free(d);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(d);
	int code = 0;
	char *out = NULL;
	int r = dt_exec(sb, script, poll_timeout_ms(), &code, &out, err);
	free(script);
	if (r)
		return r;
	/* the answer is the last line: anything before it is stray stderr */
	char *line = out, *p;
	while ((p = strchr(line, '\n')) && p[1])
		line = p + 1;
	int n = 0;
	if (sscanf(line, "exit %d", &n) == 1) {
		run->state = SFS_RUN_EXITED;
		run->code = n;
	} else if (sscanf(line, "signal %d", &n) == 1) {
		run->state = SFS_RUN_KILLED;
		run->code = n;
	} else if (!strncmp(line, "running", 7)) {
		run->state = SFS_RUN_RUNNING;
	} else if (!strncmp(line, "none", 4)) {
		/* the wrapper has not made its directory yet, or never will */
		run->state = time(NULL) - run->started < 60 ? SFS_RUN_RUNNING : SFS_RUN_LOST;
	} else if (!strncmp(line, "lost", 4)) {
		run->state = SFS_RUN_LOST;
	} else {
		r = sfs_errf(err, -EPROTO, "daytona: run %d: unexpected status \"%.60s\"", run->n,
			     line);
	}
	free(out);
	return r;
}

ssize_t dt_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err)
{
	if (max > READ_MAX)
		max = READ_MAX;
	char *d = run_dir_expr(sb, run);
	char *script = NULL;
	/* base64 keeps stderr the API folds into the output out of the bytes */
	if (!d || asprintf(&script,
			   "printf 'sfs-b64:'; tail -c +%lld %s/journal 2>/dev/null | "
			   "head -c %zu | base64",
			   (long long)off + 1, d, max) < 0) {
		free(d);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(d);
	int code = 0;
	char *out = NULL;
	int r = dt_exec(sb, script, poll_timeout_ms(), &code, &out, err);
	free(script);
	if (r)
		return r;
	char *frame = strstr(out, "sfs-b64:");
	ssize_t n;
	if (!frame) {
		n = sfs_errf(err, -EIO, "daytona: journal read of run %d: no frame in the answer",
			     run->n);
	} else {
		frame += 8;
		size_t fl = strlen(frame);
		unsigned char *tmp = malloc(fl / 4 * 3 + 4);
		long got = tmp ? sfs_base64_decode(frame, fl, tmp) : -ENOMEM;
		if (got < 0) {
			n = sfs_errf(err, got == -ENOMEM ? -ENOMEM : -EIO,
				     "daytona: journal read of run %d: bad frame", run->n);
		} else {
			n = (size_t)got > max ? (ssize_t)max : got;
			memcpy(buf, tmp, (size_t)n);
		}
		free(tmp);
	}
	free(out);
	return n;
}
