/* Runs: the detached wrapper exec, its status, kill, and journal reads. */
#include "docker.h"
#include "engine.h"
#include "exec.h"
#include "../sh/sh.h"

#include "../config.h"
#include "../options.h"
#include "../util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Engine calls a refresh may make, per run: at most one a second. */
#define CHECK_INTERVAL_MS 1000

void dk_run_dir(int n, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%d", DK_RUNS_DIR,
		 n); /* may be cut: never, a constant and a number */
}

/* The run's record, loaded from RUNDIR/docker.json after a restart.  Copies
 * it into *out; false when the run never got that far. */
static bool run_record(struct sfs_sandbox *sb, const struct sfs_run *run, struct dk_run *out)
{
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	struct dk_run *r = d ? dk_run_locked(d, run->n) : NULL;
	if (r && !r->loaded && run->dir) {
		char path[4200], *text = NULL;
		json_t *j = sfs_pathf(path, sizeof(path), "%s/docker.json", run->dir) == 0 &&
				    sfs_read_file(path, &text, NULL) == 0
				? json_loads(text, 0, NULL)
				: NULL;
		free(text);
		const char *cid = json_string_value(json_object_get(j, "container"));
		const char *eid = json_string_value(json_object_get(j, "exec"));
		const char *started = json_string_value(json_object_get(j, "started"));
		/* a record too long to hold whole is no record: never a cut id */
		if (cid && eid && sfs_pathf(r->cid, sizeof(r->cid), "%s", cid) == 0 &&
		    sfs_pathf(r->eid, sizeof(r->eid), "%s", eid) == 0 &&
		    sfs_pathf(r->started, sizeof(r->started), "%s", started ? started : "") == 0)
			r->loaded = true;
		json_decref(j);
	}
	bool ok = r && r->loaded;
	if (ok)
		*out = *r;
	pthread_mutex_unlock(&dk_mu);
	return ok;
}

/* Makes run's record (its wrapper: exec eid, "" when not known, in the life
 * `started` of container cid) and saves it as RUNDIR/docker.json for a
 * restarted daemon.  A daemon killed before the save leaves a run without
 * one: dk_run_refresh then asks the container (run_from_container). */
static void save_record(struct sfs_sandbox *sb, const struct sfs_run *run, const char *cid,
			const char *eid, const char *started)
{
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	struct dk_run *rec = d ? dk_run_locked(d, run->n) : NULL;
	if (rec && sfs_pathf(rec->cid, sizeof(rec->cid), "%s", cid) == 0 &&
	    sfs_pathf(rec->eid, sizeof(rec->eid), "%s", eid) == 0 &&
	    sfs_pathf(rec->started, sizeof(rec->started), "%s", started) == 0) {
		rec->loaded = true;
		rec->next_check_ms = dk_now_ms() + CHECK_INTERVAL_MS;
	}
	pthread_mutex_unlock(&dk_mu);
	json_t *j = json_pack("{s:s, s:s, s:s}", "container", cid, "exec", eid, "started", started);
	char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	json_decref(j);
	char path[4200];
	struct sfs_err werr = {0};
	if (text && sfs_pathf(path, sizeof(path), "%s/docker.json", run->dir) < 0)
		sfs_errf(&werr, -ENAMETOOLONG, "%s/docker.json: path too long", run->dir);
	if (!text || werr.code || sfs_write_file_atomic(path, text, strlen(text), &werr))
		sfs_log(SFS_LOG_ERR, "%s: run %d: %s", sb->name, run->n,
			text ? werr.msg : "out of memory");
	free(text);
}

static void set_next_check(struct sfs_sandbox *sb, int n, int64_t when)
{
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	struct dk_run *r = d ? dk_run_locked(d, n) : NULL;
	if (r)
		r->next_check_ms = when;
	pthread_mutex_unlock(&dk_mu);
}

/* When run n may next make an engine call (0: now). */
static int64_t next_check(struct sfs_sandbox *sb, int n)
{
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	struct dk_run *r = d ? dk_run_locked(d, n) : NULL;
	int64_t when = r ? r->next_check_ms : 0;
	pthread_mutex_unlock(&dk_mu);
	return when;
}

/* Host-side preparation through the merged dir: saves an exec per run.
 * Only for containers whose execs run as root (files we create as root are
 * theirs); anything unexpected (a leftover directory) returns an error and
 * the caller falls back to the exec. */
static int host_prep(struct sfs_sandbox *sb, int n, const char *cmd)
{
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	bool root = d && d->root_user;
	pthread_mutex_unlock(&dk_mu);
	if (!root)
		return -EPERM;
	int runs;
	int r = dk_host_open(sb, DK_RUNS_DIR, O_PATH | O_DIRECTORY, 0, &runs, NULL);
	if (r)
		return r;
	char name[16];
	snprintf(name, sizeof(name), "%d", n);
	if (mkdirat(runs, name, 0755) < 0) {
		r = -errno;
		close(runs);
		return r;
	}
	int dir = openat(runs, name, O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC);
	close(runs);
	if (dir < 0)
		return -errno;
	int jfd =
	    openat(dir, "journal", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	int cfd = openat(dir, "cmd", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	r = jfd < 0 || cfd < 0 ? -errno : 0;
	if (!r && (dprintf(cfd, "%s\n", cmd) < 0))
		r = -EIO;
	if (jfd >= 0)
		close(jfd);
	if (cfd >= 0)
		close(cfd);
	close(dir);
	return r;
}

/* The run is going: its record, with the exec id ("" when the agent started
 * it: refresh then asks the container, as for a record made from it). */
static void record_started(struct sfs_sandbox *sb, struct sfs_run *run, const char *cid,
			   const char *eid)
{
	char started[64];
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	memcpy(started, d ? d->started : "", d ? sizeof(d->started) : 1); /* the same size */
	pthread_mutex_unlock(&dk_mu);
	save_record(sb, run, cid, eid, started);
	run->state = SFS_RUN_RUNNING;
}

int dk_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char cid[DK_ID_MAX], dir[64];
	dk_current(sb, cid, sizeof(cid));
	if (!cid[0])
		return sfs_errf(err, -EIO, "docker: sandbox \"%s\" has no container", sb->name);
	dk_run_dir(run->n, dir, sizeof(dir));
	int r = dk_net_attach(sb, cid, err);
	if (r)
		return r;
	json_t *env = dk_exec_env(sb, run->n, err);
	if (!env)
		return err ? err->code : -ENOMEM;
	bool prepared = host_prep(sb, run->n, run->cmd) == 0;
	if (prepared && dk_agent_enabled(sb) && dk_agent_run(sb, cid, run, env) == 0) {
		json_decref(env);
		record_started(sb, run, cid, "");
		return 0;
	}
	if (!prepared) {
		/* a clean run dir made by the container's own user */
		struct sfs_sh_cmd prep;
		r = sfs_sh_prep(&prep, dir, run->cmd, 0, err);
		if (r) {
			json_decref(env);
			return r;
		}
		struct dk_exec x = {
		    .cid = cid, .argv = (const char *const *)prep.argv, .workdir = "/"};
		struct dk_buf e = {.max = 512};
		int code = 0;
		r = dk_exec_run(&x, NULL, &e, &code, err);
		sfs_sh_cmd_free(&prep);
		if (!r && code)
			r = sfs_errf(err, -EIO, "docker: preparing %s in the container: %s", dir,
				     e.b.len ? e.b.buf : "failed");
		dk_buf_free(&e);
	}
	/* the environment goes through the exec API, not the wrapper */
	struct sfs_sh_run wrap = {
	    .dir = dir, .workspace = sb->workspace ? sb->workspace : "/", .cmd = run->cmd};
	struct sfs_sh_cmd c = {0};
	if (!r)
		r = sfs_sh_wrapper(&c, &wrap, err);
	struct dk_exec x = {
	    .cid = cid, .argv = (const char *const *)c.argv, .env = env, .workdir = "/"};
	char eid[DK_ID_MAX];
	if (!r)
		r = dk_exec_create(&x, false, eid, sizeof(eid), err);
	sfs_sh_cmd_free(&c);
	json_decref(env);
	if (!r)
		r = dk_exec_start_detached(eid, err);
	if (r)
		return r;
	record_started(sb, run, cid, eid);
	return 0;
}

static bool parse_status(const char *text, struct sfs_run *run)
{
	bool sig;
	int n;
	if (!sfs_sh_parse_status(text, &sig, &n))
		return false;
	run->state = sig ? SFS_RUN_KILLED : SFS_RUN_EXITED;
	run->code = n;
	return true;
}

/* Reads the wrapper's status file: 1 found (run updated), 0 not there yet,
 * -EAGAIN when only an engine call could tell (archive mode). */
static int read_status(struct sfs_sandbox *sb, const char *cid, struct sfs_run *run,
		       bool allow_engine)
{
	char path[96];
	snprintf(path, sizeof(path), "%s/%d/status", DK_RUNS_DIR,
		 run->n); /* may be cut: never, a constant and a number */
	int fd;
	int r = dk_host_open(sb, path, O_RDONLY, 0, &fd, NULL);
	if (r == 0) {
		char buf[64];
		ssize_t got = pread(fd, buf, sizeof(buf) - 1, 0);
		close(fd);
		if (got <= 0)
			return 0;
		buf[got] = '\0';
		if (!parse_status(buf, run))
			run->state = SFS_RUN_LOST;
		return 1;
	}
	if (r == -ENOENT)
		return 0;
	if (!allow_engine)
		return -EAGAIN;
	char *text = NULL;
	size_t len;
	r = dk_archive_read(cid, path, &text, &len, NULL);
	if (r)
		return r == -ENOENT ? 0 : r;
	if (!parse_status(text, run))
		run->state = SFS_RUN_LOST;
	free(text);
	return 1;
}

/* No status: is the wrapper still there?  1 yes, 0 no, <0 cannot tell. */
static int wrapper_alive(struct sfs_sandbox *sb, const struct dk_run *rec, const char *cid)
{
	if (strcmp(rec->cid, cid) != 0)
		return 0; /* restored to another container since */
	bool running;
	int code;
	/* no exec id: a record made from the container (run_from_container) */
	int r = rec->eid[0] ? dk_exec_inspect(rec->eid, &running, &code, NULL) : -ENOENT;
	if (r == 0)
		return running;
	if (r != -ENOENT)
		return r;
	/* the engine forgot the exec (it restarted, and so may have the
	 * container), or it was never known */
	struct dk_info info;
	r = dk_inspect(cid, &info, NULL);
	if (r == -ENOENT) {
		dk_container_gone(cid); /* the next poll notices what an event missed */
		return 0;
	}
	if (r)
		return r;
	dk_note_container(sb, &info);
	bool same_life = info.running && strcmp(info.started, rec->started) == 0;
	/* a run the agent started: the container's /proc tells, no exec */
	int seen = same_life ? dk_agent_wrapper_alive(sb, info.raw, rec->n) : 0;
	dk_info_free(&info);
	if (!same_life)
		return 0;
	if (seen >= 0)
		return seen;
	char dir[64], out[32];
	dk_run_dir(rec->n, dir, sizeof(dir));
	struct sfs_sh_cmd c;
	r = sfs_sh_alive(&c, dir, NULL);
	if (!r)
		r = dk_sh_cmd(cid, &c, out, sizeof(out), NULL);
	sfs_sh_cmd_free(&c);
	return r ? r : strcmp(out, "yes") == 0;
}

/*
 * $1 run dir.  What the container knows of a run nobody recorded: its status
 * file's text, "running" while its wrapper lives (the pid in wpid, and that
 * process still the wrapper of this run dir: pids start again when the
 * container restarts), else "none".
 */
static const char trace_script[] =
    "d=$1\n"
    "[ -f \"$d/status\" ] && { cat \"$d/status\"; exit 0; }\n"
    "p=$(cat \"$d/wpid\" 2>/dev/null)\n"
    "if [ -n \"$p\" ] && kill -0 \"$p\" 2>/dev/null &&\n"
    "   tr '\\0' '\\n' <\"/proc/$p/cmdline\" 2>/dev/null | grep -qxF -- \"$d\"; then\n"
    "  echo running; exit 0\n"
    "fi\n"
    "[ -f \"$d/status\" ] && { cat \"$d/status\"; exit 0; }\n"
    "echo none\n";

/*
 * A run without a record (the daemon that started it was killed before
 * saving docker.json, or before starting it at all): the container's run
 * dir tells.  Its status file when there is one; a wrapper still running is
 * followed from now on with a record made here (its exec id unknown);
 * no trace, or a container that is not running, is lost.
 */
static int run_from_container(struct sfs_sandbox *sb, struct sfs_run *run, const char *cid,
			      struct sfs_err *err)
{
	int r = read_status(sb, cid, run, true);
	if (r == 1)
		return 0;
	if (r < 0)
		return sfs_errf(err, r, "docker: run %d: cannot read its status", run->n);
	struct dk_info info;
	r = dk_inspect(cid, &info, err);
	if (r == -ENOENT) {
		dk_container_gone(cid);
		run->state = SFS_RUN_LOST;
		return 0;
	}
	if (r)
		return r;
	dk_note_container(sb, &info);
	char started[64];
	memcpy(started, info.started, sizeof(info.started)); /* the same size */
	bool up = info.running;
	dk_info_free(&info);
	if (!up) {
		run->state = SFS_RUN_LOST; /* stopped: no wrapper, and no status */
		return 0;
	}
	char dir[64], out[64];
	dk_run_dir(run->n, dir, sizeof(dir));
	const char *args[] = {dir, NULL};
	struct sfs_sh_cmd c;
	r = sfs_sh_script(&c, trace_script, "sfs-trace", args, err);
	if (!r) {
		r = dk_sh_cmd(cid, &c, out, sizeof(out), err);
		sfs_sh_cmd_free(&c);
	}
	if (r)
		return r;
	if (strcmp(out, "running") == 0) {
		save_record(sb, run, cid, "", started);
		run->state = SFS_RUN_RUNNING;
		return 0;
	}
	if (!parse_status(out, run))
		run->state = SFS_RUN_LOST; /* "none": the wrapper never started */
	return 0;
}

int dk_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	struct dk_run rec;
	if (dk_is_gone(sb)) {
		run->state = SFS_RUN_LOST; /* no container left */
		return 0;
	}
	char cid[DK_ID_MAX];
	dk_current(sb, cid, sizeof(cid));
	int64_t now = dk_now_ms();
	if (!run_record(sb, run, &rec)) {
		if (!cid[0]) {
			run->state = SFS_RUN_LOST;
			return 0;
		}
		if (now < next_check(sb, run->n))
			return 0; /* keep what we knew; checked again within a second */
		set_next_check(sb, run->n, now + CHECK_INTERVAL_MS);
		return run_from_container(sb, run, cid, err);
	}
	bool may_call = now >= rec.next_check_ms;
	int r = read_status(sb, cid[0] ? cid : rec.cid, run, may_call);
	if (r == 1)
		return 0;
	if (!may_call)
		return 0; /* keep what we knew; checked again within a second */
	set_next_check(sb, run->n, now + CHECK_INTERVAL_MS);
	if (r < 0 && r != -EAGAIN)
		return sfs_errf(err, r, "docker: run %d: cannot read its status", run->n);
	int alive = cid[0] ? wrapper_alive(sb, &rec, cid) : 0;
	if (alive < 0)
		return sfs_errf(err, alive, "docker: run %d: cannot tell whether it runs", run->n);
	if (alive) {
		run->state = SFS_RUN_RUNNING;
		return 0;
	}
	/* gone: it may have written its status just before */
	if (cid[0] && read_status(sb, cid, run, true) == 1)
		return 0;
	run->state = SFS_RUN_LOST;
	return 0;
}

int dk_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		struct sfs_err *err)
{
	struct dk_run rec;
	char cid[DK_ID_MAX];
	dk_current(sb, cid, sizeof(cid));
	if (!run_record(sb, run, &rec) || strcmp(rec.cid, cid) != 0)
		return sfs_errf(err, -ESRCH, "run %d: no process is left to signal", run->n);
	char dir[64], out[32];
	dk_run_dir(run->n, dir, sizeof(dir));
	double g = sfs_opt_get_double("docker.kill_grace");
	struct sfs_sh_cmd c;
	int r = sfs_sh_kill(&c, dir, sig, escalate, (int)(g < 0 ? 0 : g * 1000), err);
	/* through the agent when it answers, else one exec */
	if (!r && (!dk_agent_enabled(sb) ||
		   dk_agent_kill(sb, cid, run->n, &c, g + 10, out, sizeof(out)) != 0))
		r = dk_sh_cmd(cid, &c, out, sizeof(out), err);
	sfs_sh_cmd_free(&c);
	set_next_check(sb, run->n, 0); /* look at the run again at once */
	if (r)
		return r;
	return sfs_sh_kill_answer(out, run->n, err);
}

int dk_journal_local_path(struct sfs_sandbox *sb, struct sfs_run *run, char *buf, size_t len)
{
	if (dk_fs_archive_only())
		return -EOPNOTSUPP;
	pthread_mutex_lock(&dk_mu);
	struct dk_sb *d = dk_sb_locked(sb);
	struct dk_run *r = d ? dk_run_locked(d, run->n) : NULL;
	int jfd = r ? r->jfd : -1;
	pthread_mutex_unlock(&dk_mu);
	if (jfd < 0) {
		char path[96];
		snprintf(path, sizeof(path), "%s/%d/journal", DK_RUNS_DIR,
			 run->n); /* may be cut: never, a constant and a number */
		int fd;
		int rc = dk_host_open(sb, path, O_RDONLY, 0, &fd, NULL);
		if (rc)
			return rc;
		/* Served as /proc/self/fd/N: the engine opens it by path, and a
		 * path into the merged dir could be redirected by a symlink the
		 * container plants; this names the very file we opened. */
		pthread_mutex_lock(&dk_mu);
		d = dk_sb_locked(sb);
		r = d ? dk_run_locked(d, run->n) : NULL;
		if (r && r->jfd < 0)
			r->jfd = fd;
		else
			close(fd);
		jfd = r ? r->jfd : -1;
		pthread_mutex_unlock(&dk_mu);
		if (jfd < 0)
			return -ENOMEM;
	}
	if (snprintf(buf, len, "/proc/self/fd/%d", jfd) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

ssize_t dk_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err)
{
	char path[96];
	snprintf(path, sizeof(path), "%s/%d/journal", DK_RUNS_DIR,
		 run->n); /* may be cut: never, a constant and a number */
	if (dk_is_gone(sb))
		return sfs_errf(err, -ENOENT, "docker: run %d: its container is gone", run->n);
	int fd;
	if (dk_host_open(sb, path, O_RDONLY, 0, &fd, NULL) == 0) {
		ssize_t n = pread(fd, buf, max, off);
		if (n < 0)
			n = -errno;
		close(fd);
		return n;
	}
	char cid[DK_ID_MAX];
	dk_current(sb, cid, sizeof(cid));
	if (!cid[0]) /* removed: there is nothing left to read from */
		return sfs_errf(err, -ENOENT, "docker: sandbox has no container");
	struct sfs_sh_cmd c;
	int r = sfs_sh_read(&c, path, off, max, false, err);
	if (r)
		return r;
	struct dk_exec x = {
	    .cid = cid, .argv = (const char *const *)c.argv, .workdir = "/", .user = "0"};
	struct dk_buf o = {.max = max};
	int code = 0;
	r = dk_exec_run(&x, &o, NULL, &code, err);
	sfs_sh_cmd_free(&c);
	if (r == -EIO) {
		/* a stopped container still answers the archive API */
		char *data = NULL;
		size_t len = 0;
		struct sfs_err aerr = {0};
		if (dk_archive_read(cid, path, &data, &len, &aerr) == 0) {
			size_t n = (size_t)off < len ? len - (size_t)off : 0;
			if (n > max)
				n = max;
			memcpy(buf, data + (n ? off : 0), n);
			free(data);
			return (ssize_t)n;
		}
	}
	if (r) {
		dk_buf_free(&o);
		return r;
	}
	if (code == 3) {
		dk_buf_free(&o);
		return 0; /* no journal (yet) */
	}
	size_t n = o.b.len;
	if (n)
		memcpy(buf, o.b.buf, n);
	dk_buf_free(&o);
	return (ssize_t)n;
}
