/*
 * The local provider.  A sandbox is a host directory (under the state dir, or
 * an existing one given as dir=) and runs are process groups started in it by
 * the run wrapper (wrapper.c), which records everything in the run's
 * directory so a restarted daemon finds it again.
 */
#include "local.h"

#include "../cow/cow.h"
#include "../git/git.h"
#include "../netpolicy/proxy.h"
#include "../untrusted/tree.h"
#include "../config.h"
#include "../options.h"
#include "../provider.h"
#include "../util.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Local's own state of a sandbox (sb->priv): its host directory and whether
 * the daemon made it (then destroy removes it).  Set under sb->op_mutex or
 * before the record is listed, read by FUSE workers too (the workspace
 * root), so it sits behind local_state_mu, a leaf lock (provider.h's lock
 * order); it reaches the registry through the state hooks as pdata
 * {"dir", "owned"}. */
struct local_state {
	char dir[4096];
	bool owned;
	struct local_iso iso; /* isolated.c */
};
static pthread_mutex_t local_state_mu = PTHREAD_MUTEX_INITIALIZER;

/* Copies sb's directory into buf (PATH_MAX bytes); NULL when it has none. */
static const char *local_dir(struct sfs_sandbox *sb, char *buf, bool *owned)
{
	pthread_mutex_lock(&local_state_mu);
	const struct local_state *st = sb->priv;
	if (st) {
		memcpy(buf, st->dir, sizeof(st->dir));
		if (owned)
			*owned = st->owned;
	}
	pthread_mutex_unlock(&local_state_mu);
	return st ? buf : NULL;
}

static int set_local_dir(struct sfs_sandbox *sb, const char *dir, bool owned, struct sfs_err *err)
{
	struct local_state *st = calloc(1, sizeof(*st));
	if (!st)
		return sfs_errf(err, -ENOMEM, "out of memory");
	if (snprintf(st->dir, sizeof(st->dir), "%s", dir) >= (int)sizeof(st->dir)) {
		free(st);
		return sfs_errf(err, -ENAMETOOLONG, "local: %s: path too long", dir);
	}
	st->owned = owned;
	st->iso.umask = sfs_local_umask_default(false); /* until set_iso */
	pthread_mutex_lock(&local_state_mu);
	struct local_state *old = sb->priv;
	if (old)
		st->iso = old->iso;
	sb->priv = st;
	pthread_mutex_unlock(&local_state_mu);
	free(old);
	return 0;
}

/* A copy of sb's isolation settings (zero when it has no state yet). */
static void get_iso(struct sfs_sandbox *sb, struct local_iso *iso)
{
	pthread_mutex_lock(&local_state_mu);
	const struct local_state *st = sb->priv;
	if (st)
		*iso = st->iso;
	else
		memset(iso, 0, sizeof(*iso));
	pthread_mutex_unlock(&local_state_mu);
}

static void set_iso(struct sfs_sandbox *sb, const struct local_iso *iso)
{
	pthread_mutex_lock(&local_state_mu);
	struct local_state *st = sb->priv;
	if (st)
		st->iso = *iso;
	pthread_mutex_unlock(&local_state_mu);
}

static json_t *local_state_save(const struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&local_state_mu);
	const struct local_state *st = sb->priv;
	json_t *o = st ? json_pack("{s:s, s:b, s:i}", "dir", st->dir, "owned", st->owned, "umask",
				   (int)st->iso.umask)
		       : NULL;
	if (o && st->iso.bwrap)
		json_object_set_new(o, "iso", sfs_local_iso_json(&st->iso));
	pthread_mutex_unlock(&local_state_mu);
	return o;
}

static int local_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err)
{
	const char *dir = json_string_value(json_object_get(saved, "dir"));
	if (!dir)
		return 0; /* resume adopts sb->id */
	int r = set_local_dir(sb, dir, json_is_true(json_object_get(saved, "owned")), err);
	json_t *iso_o = json_object_get(saved, "iso");
	struct local_iso iso = {0};
	if (!r && json_is_object(iso_o)) {
		sfs_local_iso_from_json(iso_o, &iso);
		sfs_local_iso_load_holder(sb, &iso);
	}
	/* a record from before umask= has the default */
	json_t *um = json_object_get(saved, "umask");
	iso.umask = json_is_integer(um) ? (mode_t)(json_integer_value(um) & 0777)
					: sfs_local_umask_default(iso.bwrap);
	if (!r) {
		set_iso(sb, &iso);
		sfs_local_iso_loaded(sb, &iso);
	}
	return r;
}

static void local_state_free(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&local_state_mu);
	struct local_state *st = sb->priv;
	sb->priv = NULL;
	pthread_mutex_unlock(&local_state_mu);
	free(st);
}

static int local_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	const char *want = sfs_kv_get(opts, "dir");
	const char *base = sfs_kv_get(opts, "base"), *hide = sfs_kv_get(opts, "hide");
	const char *hide_case = sfs_kv_get(opts, "hide.case");
	for (size_t i = 0; i < opts->n; i++) {
		const char *k = opts->v[i].key;
		if (strcmp(k, "dir") != 0 && strcmp(k, "image") != 0 && strcmp(k, "base") != 0 &&
		    strcmp(k, "hide") != 0 && strcmp(k, "hide.case") != 0 &&
		    strncmp(k, "env.", 4) != 0 && strcmp(k, "provider") != 0 &&
		    strcmp(k, "isolation") != 0 && strcmp(k, "network") != 0 &&
		    strcmp(k, "umask") != 0)
			return sfs_errf(err, -EINVAL,
					"local: unknown option \"%s\" (known: dir= base= hide= "
					"hide.case= isolation= network= umask=)",
					k);
	}
	if (want && base)
		return sfs_errf(err, -EINVAL, "new: dir= and base= exclude each other");
	struct local_iso iso;
	int r = sfs_local_iso_options(opts, &iso, err);
	if (r)
		return r;
	r = sfs_cow_check(base, hide, hide_case, err);
	if (r)
		return r;
	char dir[4096];
	bool owned = !want && !base;
	if (base) {
		/* a copy-on-write view of base (providers/cow): runs and
		 * workspace/ see the merged dir, which destroy unmounts */
		r = sfs_cow_create(sb->statedir, base, hide, hide_case, dir, err);
		if (r)
			return r;
	} else if (want) {
		if (!realpath(want, dir))
			return sfs_errf(err, -errno, "local: dir=%s: %s", want, strerror(errno));
		struct stat st;
		if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
			return sfs_errf(err, -ENOTDIR, "local: dir=%s is not a directory", want);
	} else {
		if (sfs_pathf(dir, sizeof(dir), "%s/workspace", sb->statedir) < 0)
			return sfs_errf(err, -ENAMETOOLONG, "local: %s/workspace: path too long",
					sb->statedir);
		r = sfs_mkdir_p(dir, 0755);
		if (r)
			return sfs_errf(err, r, "local: mkdir %s: %s", dir, strerror(-r));
	}
	/* the record is listed (creating) and status reads it: publish */
	r = sfs_sb_publish(sb, dir, "host", iso.bwrap ? SFS_ISO_WORKSPACE : dir, err);
	if (!r)
		r = set_local_dir(sb, dir, owned, err);
	if (!r && iso.bwrap)
		r = sfs_local_iso_create(sb, dir, owned, &iso, err);
	if (!r)
		set_iso(sb, &iso);
	if (r && base) {
		struct sfs_err ignored = {0};
		sfs_cow_remove(sb->statedir, &ignored);
	}
	return r;
}

static int local_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	char buf[4096];
	const char *dir = local_dir(sb, buf, NULL);
	if (!dir && sb->id) {
		/* `resume NAME provider=local id=/some/dir`: adopt that dir */
		int r = sfs_sb_publish(sb, NULL, sb->image ? NULL : "host", sb->id, err);
		if (!r)
			r = set_local_dir(sb, sb->id, false, err);
		if (r)
			return r;
		dir = sb->id;
	}
	if (sfs_cow_present(sb->statedir)) {
		/* a base workspace: its overlay again, unless still mounted */
		char merged[4096];
		int r = sfs_cow_resume(sb->statedir, merged, err);
		if (r)
			return r;
	}
	struct stat st;
	if (!dir || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode))
		return sfs_errf(err, -ENOENT, "local: workspace %s is gone", dir ? dir : "(none)");
	return 0;
}

/* The run's pids from its pid file, "PID WPID WSTART" (-1, 0 where
 * unknown): the command's group, the wrapper and the wrapper's start time;
 * a run an earlier wrapper started has no WSTART, or keeps WPID in a file
 * of its own.  Numbers only: sfs_local_wrapper_open proves them. */
static void read_pids(struct sfs_run *run, pid_t *pgid, pid_t *wpid, uint64_t *wstart)
{
	char path[4200], *text = NULL;
	*pgid = *wpid = -1;
	*wstart = 0;
	if (sfs_pathf(path, sizeof(path), "%s/pid", run->dir) < 0 ||
	    sfs_read_file(path, &text, NULL) < 0)
		return;
	int a = 0, b = 0;
	unsigned long long c = 0;
	int got = sscanf(text, "%d %d %llu", &a, &b, &c);
	free(text);
	*pgid = got >= 1 && a > 1 ? a : -1;
	if (got >= 2) {
		*wpid = b > 1 ? b : -1;
		*wstart = got == 3 ? c : 0;
		return;
	}
	if (sfs_pathf(path, sizeof(path), "%s/wpid", run->dir) < 0 ||
	    sfs_read_file(path, &text, NULL) < 0)
		return;
	b = atoi(text);
	free(text);
	*wpid = b > 1 ? b : -1;
}

static int local_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char path[4200], *text = NULL;
	if (sfs_pathf(path, sizeof(path), "%s/status", run->dir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "local: %s/status: path too long", run->dir);
	if (sfs_read_file(path, &text, NULL) == 0) {
		int n = 0;
		if (sscanf(text, "exit %d", &n) == 1) {
			run->state = SFS_RUN_EXITED;
			run->code = n;
		} else if (sscanf(text, "signal %d", &n) == 1) {
			run->state = SFS_RUN_KILLED;
			run->code = n;
		} else {
			run->state = SFS_RUN_LOST;
		}
		free(text);
		return 0;
	}
	/* No status yet: the wrapper holds a lock on the run's directory while
	 * it lives, or on RUNDIR/lock when that is there (a file system that
	 * cannot lock directories, or an earlier wrapper's). */
	if (sfs_pathf(path, sizeof(path), "%s/lock", run->dir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "local: %s/lock: path too long", run->dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		fd = open(run->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 && errno != ENOENT)
		/* EMFILE, ENOMEM...: the daemon's trouble, not the run's; the
		 * state stays as it was and the next look decides */
		return sfs_errf(err, -errno, "local: %s: %s", path, strerror(errno));
	if (fd < 0) {
		run->state = SFS_RUN_LOST;
		return 0;
	}
	int lr = flock(fd, LOCK_SH | LOCK_NB) == 0 ? 0 : errno;
	if (lr == ENOLCK) {
		close(fd);
		return sfs_errf(err, -lr, "local: %s: %s", path, strerror(lr));
	}
	/* EBADF, EINVAL...: nothing can lock it, so no wrapper holds it */
	if (lr != EWOULDBLOCK && lr != EINTR) {
		/* free: the wrapper died without a word; check status once more
		 * since it may have finished between our two looks */
		if (sfs_pathf(path, sizeof(path), "%s/status", run->dir) == 0 &&
		    access(path, F_OK) == 0) {
			close(fd);
			return local_run_refresh(sb, run, err);
		}
		run->state = SFS_RUN_LOST;
	} else {
		run->state = SFS_RUN_RUNNING;
	}
	close(fd);
	return 0;
}

/* Builds the run's environment: the daemon's (an isolated run's own
 * instead: isolated.c), the sandbox's env and secrets, minus
 * local.scrub_env names, plus SANDBOXFS_RUN_DIR and the command (SFS_LOCAL_CMD_ENV). */
static char **build_env(struct sfs_sandbox *sb, struct sfs_run *run, const struct local_iso *iso,
			struct sfs_err *err)
{
	struct sfs_kvlist env = {0};
	int r = 0;
	/* an isolated run gets none of the daemon's environment */
	if (iso->bwrap)
		r = sfs_local_iso_env(iso, &env);
	for (char **e = iso->bwrap ? NULL : environ; e && *e && !r; e++) {
		char *eq = strchr(*e, '=');
		if (!eq)
			continue;
		char key[512];
		size_t kl = (size_t)(eq - *e);
		if (kl >= sizeof(key))
			continue;
		memcpy(key, *e, kl);
		key[kl] = '\0';
		r = sfs_kv_set(&env, key, eq + 1);
	}
	/* the daemon's credentials for other providers are not the run's */
	for (size_t i = 0; i < sfs_nproviders; i++)
		for (const char *const *c = sfs_providers[i]->credential_env; c && *c; c++)
			sfs_kv_del(&env, *c);
	sfs_kv_del(&env, SFS_GIT_TOKEN_ENV); /* git sources' token (providers/git) */
	sfs_kv_del(&env, SFS_GIT_SSH_PASSPHRASE_ENV);
	/* a variable the daemon reads a secret from reaches the run only as
	 * the secret's NAME (we hold op_mutex: sb->secrets is ours to read) */
	for (size_t i = 0; i < sb->secrets.n; i++)
		if (!strncmp(sb->secrets.v[i].val, "env:", 4))
			sfs_kv_del(&env, sb->secrets.v[i].val + 4);
	struct sfs_kvlist sbenv = {0};
	int er = r ? 0 : sfs_sb_run_env(sb, &sbenv, err);
	if (!r && !er)
		r = sfs_kv_copy(&env, &sbenv);
	sfs_kv_free(&sbenv);
	if (er) {
		sfs_kv_free(&env);
		return NULL;
	}
	const char *scrub = sfs_config_get("local.scrub_env", "");
	char *list = strdup(scrub), *save = NULL;
	if (!list)
		r = -ENOMEM;
	for (char *t = list ? strtok_r(list, ", ", &save) : NULL; t && !r;
	     t = strtok_r(NULL, ", ", &save))
		sfs_kv_del(&env, t);
	free(list);
	if (!r)
		r = sfs_kv_set(&env, "SANDBOXFS_RUN_DIR", run->dir);
	if (!r)
		r = sfs_kv_set(&env, SFS_LOCAL_CMD_ENV, run->cmd);
	char mask[8];
	snprintf(mask, sizeof(mask), "%03o", (unsigned)(iso->umask & 0777));
	if (!r)
		r = sfs_kv_set(&env, SFS_LOCAL_UMASK_ENV, mask);
	char **envp = r ? NULL : calloc(env.n + 1, sizeof(char *));
	for (size_t i = 0; envp && i < env.n; i++) {
		if (asprintf(&envp[i], "%s=%s", env.v[i].key, env.v[i].val) < 0) {
			for (size_t j = 0; j < i; j++)
				free(envp[j]);
			free(envp);
			envp = NULL;
		}
	}
	sfs_kv_free(&env);
	if (!envp)
		sfs_errf(err, -ENOMEM, "out of memory");
	return envp;
}

static void free_env(char **envp)
{
	for (char **e = envp; e && *e; e++)
		free(*e);
	free(envp);
}

/* Wrappers are our children until they exit; reaped from tick. */
static pthread_mutex_t children_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t *children;
static size_t nchildren, children_cap;

static void remember_child(pid_t pid)
{
	pthread_mutex_lock(&children_lock);
	if (nchildren == children_cap) {
		size_t cap = children_cap ? children_cap * 2 : 16;
		pid_t *grown = realloc(children, cap * sizeof(*grown));
		if (!grown) {
			/* leave it unreaped: a zombie is better than a crash */
			pthread_mutex_unlock(&children_lock);
			return;
		}
		children = grown;
		children_cap = cap;
	}
	children[nchildren++] = pid;
	pthread_mutex_unlock(&children_lock);
}

static void local_tick(void)
{
	pthread_mutex_lock(&children_lock);
	for (size_t i = 0; i < nchildren;) {
		pid_t r = waitpid(children[i], NULL, WNOHANG);
		if (r == children[i] || (r < 0 && errno == ECHILD))
			children[i] = children[--nchildren];
		else
			i++;
	}
	pthread_mutex_unlock(&children_lock);
	sfs_local_iso_tick();
}

static int local_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	char dirbuf[4096];
	const char *dir = local_dir(sb, dirbuf, NULL);
	if (!dir)
		return sfs_errf(err, -EIO, "local: sandbox has no workspace");
	struct local_iso iso;
	get_iso(sb, &iso);
	bool changed = false;
	int ir = sfs_local_iso_ensure(sb, dir, &iso, &changed, err);
	if (changed)
		set_iso(sb, &iso);
	if (ir)
		return ir;
	char holder[128] = "";
	if (iso.bwrap && sfs_holder_format(&iso.holder, holder, sizeof(holder)) < 0)
		return sfs_errf(err, -EIO, "local: bad holder record");
	char **envp = build_env(sb, run, &iso, err);
	if (!envp)
		return err ? err->code : -ENOMEM;
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		free_env(envp);
		return sfs_errf(err, -errno, "pipe: %s", strerror(errno));
	}
	char fdarg[16], maxarg[32];
	snprintf(fdarg, sizeof(fdarg), "%d", SFS_LOCAL_READY_FD);
	snprintf(maxarg, sizeof(maxarg), "%.0f", sfs_opt_get_double("journal.max_size"));
	char *argv[] = {"sandboxfs",
			SFS_LOCAL_WRAP_ARG,
			run->dir,
			iso.bwrap ? SFS_ISO_WORKSPACE : (char *)dir,
			fdarg,
			maxarg,
			iso.bwrap ? holder : NULL,
			NULL};
	pid_t pid;
	int sr = sfs_local_spawn_wrapper(argv, envp, pipefd[1], &pid);
	if (sr < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		free_env(envp);
		return sfs_errf(err, sr, "spawning the run wrapper: %s", strerror(-sr));
	}
	close(pipefd[1]);
	free_env(envp);
	char buf[512];
	size_t got = 0;
	for (;;) {
		ssize_t r = read(pipefd[0], buf + got, sizeof(buf) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got >= sizeof(buf) - 1 || memchr(buf, '\n', got))
			break;
	}
	close(pipefd[0]);
	buf[got] = '\0';
	if (strncmp(buf, "ok\n", 3) != 0) {
		waitpid(pid, NULL, 0);
		char *nl = strchr(buf, '\n');
		if (nl)
			*nl = '\0';
		return sfs_errf(err, -EIO, "local: run wrapper failed: %s",
				got ? buf : "exited before starting the command");
	}
	/* The wrapper stays our child, reaped by local_tick. */
	remember_child(pid);
	run->state = SFS_RUN_RUNNING;
	return 0;
}

/* What a kill of a run must reach: its process group, and every other
 * descendant of its wrapper (one that left the group with setsid, a
 * daemonizing server), which the wrapper as subreaper keeps as its own.
 * Never by the numbers in the pid file alone: a finished run's group id
 * may be anybody's process group by now.  Only a run whose wrapper is
 * proven alive (a pidfd on it, its recorded start time and argv) is
 * signalled, and only processes a walk of /proc finds in its session or
 * below it, each through a pidfd of its own (descendants.c). */
struct run_procs {
	pid_t pgid;			  /* -1: no pid file */
	struct sfs_local_wrapper wrapper; /* pidfd -1: gone (or not proven) */
};

static struct run_procs run_procs_of(struct sfs_run *run)
{
	struct run_procs p;
	pid_t wpid;
	uint64_t wstart;
	read_pids(run, &p.pgid, &wpid, &wstart);
	if (p.pgid < 0 || sfs_local_wrapper_open(run->dir, wpid, wstart, &p.wrapper) < 0)
		p.wrapper.pidfd = -1;
	return p;
}

static void run_procs_close(struct run_procs *p)
{
	sfs_local_wrapper_close(&p->wrapper);
}

static bool procs_alive(const struct run_procs *p)
{
	if (p->wrapper.pidfd < 0)
		return false;
	/* cannot tell (ENOMEM...): never report a run ended that may not be */
	return sfs_local_run_alive(&p->wrapper) != 0;
}

static int procs_signal(const struct run_procs *p, int sig)
{
	int r = sfs_local_run_signal(&p->wrapper, sig);
	return r == -ESRCH ? 0 : r;
}

static int local_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
			  struct sfs_err *err)
{
	struct run_procs procs = run_procs_of(run);
	if (procs.pgid < 0)
		return sfs_errf(err, -ESRCH, "run %d: no process group recorded", run->n);
	if (!procs_alive(&procs)) {
		run_procs_close(&procs);
		return sfs_errf(err, -ESRCH, "run %d: no process is left to signal", run->n);
	}
	int r = procs_signal(&procs, sig);
	if (r || !escalate) {
		run_procs_close(&procs);
		return r ? sfs_errf(err, r, "run %d: kill: %s", run->n, strerror(-r)) : 0;
	}
	double grace = sfs_opt_get_double("local.kill_grace");
	struct timespec step = {0, 20 * 1000 * 1000};
	for (double waited = 0; waited < grace && procs_alive(&procs); waited += 0.02)
		nanosleep(&step, NULL);
	/* KILL again on every look: a process forked between two walks is
	 * caught by the next one */
	for (int i = 0; i < 250 && procs_alive(&procs); i++) {
		procs_signal(&procs, SIGKILL);
		nanosleep(&step, NULL);
	}
	bool survived = procs_alive(&procs);
	run_procs_close(&procs);
	if (survived)
		return sfs_errf(err, -EIO,
				"run %d: process group %d or a descendant survived SIGKILL", run->n,
				procs.pgid);
	/* isolated: what the run left in the sandbox (orphans belong to the
	 * namespace's pid 1, not to the wrapper) goes with the namespace;
	 * the next run starts a new one */
	struct local_iso iso;
	get_iso(sb, &iso);
	return sfs_local_iso_end(sb, &iso, err);
}

static int local_stdin_write(struct sfs_sandbox *sb, struct sfs_run *run, const void *buf,
			     size_t len, struct sfs_err *err)
{
	char path[4200];
	if (sfs_pathf(path, sizeof(path), "%s/stdin", run->dir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "run %d: stdin: path too long", run->n);
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return sfs_errf(err, errno == ENXIO ? -EPIPE : -errno, "run %d: stdin: %s", run->n,
				errno == ENXIO ? "closed" : strerror(errno));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	const char *p = buf;
	while (len) {
		ssize_t w = write(fd, p, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			int e = errno;
			close(fd);
			return sfs_errf(err, -e, "run %d: stdin: %s", run->n, strerror(e));
		}
		p += w;
		len -= (size_t)w;
	}
	close(fd);
	return 0;
}

static int local_stdin_close(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	pid_t pgid, wpid;
	uint64_t wstart;
	read_pids(run, &pgid, &wpid, &wstart);
	struct sfs_local_wrapper w;
	int r = sfs_local_wrapper_open(run->dir, wpid, wstart, &w);
	if (!r) {
		r = sfs_local_wrapper_signal(&w, SIGUSR1);
		sfs_local_wrapper_close(&w);
	}
	if (r)
		return sfs_errf(err, -ESRCH, "run %d: the run wrapper is gone", run->n);
	return 0;
}

/* Makes dir/name with len bytes of '\n'; -errno. */
static int make_file(const char *dir, const char *name, size_t len)
{
	char path[4200], room[SFS_LOCAL_STATUS_ROOM];
	if (sfs_pathf(path, sizeof(path), "%s/%s", dir, name) < 0)
		return -ENAMETOOLONG;
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	memset(room, '\n', sizeof(room));
	ssize_t w = len ? write(fd, room, len) : 0;
	int r = w == (ssize_t)len ? 0 : w < 0 ? -errno : -ENOSPC;
	close(fd);
	return r;
}

/* The files the wrapper opens or makes at a run's start (wrapper.c), made
 * ahead: it opens the journal, takes the FIFO, rewrites pid's temp file and
 * renames the status reservation (with its room) beside the directory. */
static int local_run_prepare_dir(struct sfs_sandbox *sb, const char *dir)
{
	(void)sb;
	char path[4200];
	int r = make_file(dir, "journal", 0);
	if (!r)
		r = make_file(dir, ".pid.tmp", 0);
	if (!r)
		r = make_file(dir, ".status.tmp", SFS_LOCAL_STATUS_ROOM);
	if (!r && sfs_pathf(path, sizeof(path), "%s/stdin", dir) < 0)
		r = -ENAMETOOLONG;
	if (!r && mkfifo(path, 0600) < 0)
		r = -errno;
	return r;
}

static int local_journal_path(struct sfs_sandbox *sb, struct sfs_run *run, char *buf, size_t len)
{
	if (snprintf(buf, len, "%s/journal", run->dir) >= (int)len)
		return -ENAMETOOLONG;
	return 0;
}

static int local_workspace_root_fd(struct sfs_sandbox *sb, int *fd, struct sfs_err *err)
{
	char buf[4096];
	const char *dir = local_dir(sb, buf, NULL);
	if (!dir)
		return sfs_errf(err, -ENOENT, "local: sandbox has no workspace");
	*fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (*fd < 0)
		return sfs_errf(err, -errno, "local: workspace %s: %s", dir, strerror(errno));
	return 0;
}

static int local_run_ids(struct sfs_sandbox *sb, uid_t *uid, gid_t *gid)
{
	struct local_iso iso;
	get_iso(sb, &iso);
	if (!iso.bwrap)
		return -ENOENT;
	*uid = iso.uid;
	*gid = iso.gid;
	return 0;
}

/* Ends every run of sb together: TERM to all runs at once (their groups
 * and the descendants that left them), one grace period for all of them,
 * then KILL to what is left (never a grace per run: ten runs that ignore
 * TERM cost one grace, not ten). */
static void end_all_runs(struct sfs_sandbox *sb)
{
	/* run records are never freed while the daemon runs: the pointers
	 * stay good outside the lock, and the pid files are read there */
	pthread_mutex_lock(&sfs_records_mu);
	size_t n = sb->nruns;
	struct sfs_run **runs = calloc(n ? n : 1, sizeof(*runs));
	if (runs && n)
		memcpy(runs, sb->runs, n * sizeof(*runs));
	pthread_mutex_unlock(&sfs_records_mu);
	struct run_procs *procs = runs ? calloc(n ? n : 1, sizeof(*procs)) : NULL;
	for (size_t i = 0; procs && i < n; i++)
		procs[i] = run_procs_of(runs[i]);
	free(runs);
	if (!procs)
		return;
	/* a finished run (no live wrapper) is not signalled at all */
	size_t live = 0;
	for (size_t i = 0; i < n; i++) {
		if (procs_alive(&procs[i])) {
			procs_signal(&procs[i], SIGTERM);
			procs[live++] = procs[i];
		} else {
			run_procs_close(&procs[i]);
		}
	}
	double grace = sfs_opt_get_double("local.kill_grace");
	struct timespec step = {0, 20 * 1000 * 1000};
	for (int sig = SIGTERM; live && sig; sig = sig == SIGTERM ? SIGKILL : 0) {
		double limit = sig == SIGTERM ? grace : 5.0;
		for (double waited = 0; live && waited < limit; waited += 0.02) {
			size_t k = 0;
			for (size_t i = 0; i < live; i++) {
				if (procs_alive(&procs[i]))
					procs[k++] = procs[i];
				else
					run_procs_close(&procs[i]);
			}
			live = k;
			/* under KILL, again on every look: catches a fork
			 * between two walks */
			for (size_t i = 0; sig == SIGKILL && i < live; i++)
				procs_signal(&procs[i], SIGKILL);
			if (live)
				nanosleep(&step, NULL);
		}
	}
	for (size_t i = 0; i < live; i++) {
		sfs_log(SFS_LOG_ERR, "%s: process group %d or a descendant survived SIGKILL",
			sb->name, procs[i].pgid);
		run_procs_close(&procs[i]);
	}
	free(procs);
}

static int local_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	end_all_runs(sb);
	struct local_iso iso;
	get_iso(sb, &iso);
	int ir = sfs_local_iso_end(sb, &iso, err);
	if (ir)
		return ir;
	char buf[4096];
	bool owned = false;
	const char *dir = local_dir(sb, buf, &owned);
	if (dir && owned) {
		int r = sfs_rm_rf(dir);
		if (r)
			return sfs_errf(err, r, "local: removing %s: %s", dir, strerror(-r));
	}
	/* its uid may go to another sandbox once nothing of it is left */
	sfs_local_iso_release(sb, &iso);
	/* a base workspace: its upper layer goes, the base stays as it was */
	return sfs_cow_remove(sb->statedir, err);
}

static int local_fork(struct sfs_sandbox *src, struct sfs_sandbox *dst, const char *from,
		      struct sfs_err *err)
{
	if (from)
		/* a workspace snapshot's from= is done by ctl (fork, then restore) */
		return sfs_errf(err, -ENOENT, "local: fork from=%s: no snapshot by that name",
				from);
	char buf[4096], dstbuf[4096];
	const char *dir = local_dir(src, buf, NULL);
	if (!dir)
		return sfs_errf(err, -ENOENT, "local: source has no workspace");
	/* the fork is isolated as its source is, with the same network */
	struct local_iso iso;
	get_iso(src, &iso);
	struct sfs_kvlist opts = {0};
	int r = sfs_kv_set(&opts, "isolation", iso.bwrap ? "bwrap" : "none");
	if (!r && iso.bwrap)
		r = sfs_kv_set(&opts, "network", iso.network);
	char mask[8];
	snprintf(mask, sizeof(mask), "%04o", (unsigned)(iso.umask & 0777));
	if (!r)
		r = sfs_kv_set(&opts, "umask", mask);
	if (!r)
		r = local_create(dst, &opts, err);
	else
		sfs_errf(err, r, "out of memory");
	sfs_kv_free(&opts);
	if (r)
		return r;
	char *dstdir = (char *)local_dir(dst, dstbuf, NULL);
	if (!dstdir)
		return sfs_errf(err, -EIO, "local: the new sandbox has no workspace");
	/* The source may be running: its runs can swap a FIFO, a device or a
	 * symlink in while the copy reads (cp -a would open a FIFO and wait
	 * on it).  untrusted_copy_tree walks it by fds, opens nothing but
	 * regular files and directories, copies symlinks as their text, and
	 * writes no set-user-ID or set-group-ID bit and no extended
	 * attribute but ACLs (no file capability). */
	int sfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (sfd < 0)
		r = sfs_errf(err, -errno, "local: %s: %s", dir, strerror(errno));
	int dfd = r ? -1 : open(dstdir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (!r && dfd < 0)
		r = sfs_errf(err, -errno, "local: %s: %s", dstdir, strerror(errno));
	struct untrusted_copy_stats st = {0};
	struct sfs_err cerr = {0};
	if (!r && (r = untrusted_copy_tree(sfd, dfd, &st, &cerr)))
		sfs_errf(err, r, "local: fork: %s", cerr.msg);
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
	/* one line for all that was left out, so a fork of a tree of FIFOs
	 * does not flood the log */
	if (st.special || st.mounts || st.changed)
		sfs_log(SFS_LOG_WARN,
			"%s: fork of %s left out %llu FIFO(s), socket(s) or device(s), "
			"%llu mount point(s) and %llu file(s) changed or removed while copied",
			dst->name, src->name, (unsigned long long)st.special,
			(unsigned long long)st.mounts, (unsigned long long)st.changed);
	struct local_iso made;
	get_iso(dst, &made);
	if (!r)
		r = sfs_local_iso_adopt_copy(&iso, &made, dstdir, err);
	if (r) {
		sfs_local_iso_end(dst, &made, NULL);
		sfs_rm_rf(dstdir);
		sfs_local_iso_release(dst, &made);
	}
	return r;
}

static int local_expose(struct sfs_sandbox *sb, int port, char **url, struct sfs_err *err)
{
	/* Local runs share the host's network: the port is already reachable;
	 * an isolated sandbox's own network namespace is not */
	struct local_iso iso;
	get_iso(sb, &iso);
	if (iso.bwrap && strcmp(iso.network, "host") != 0)
		return sfs_errf(err, -EOPNOTSUPP,
				"local: expose: the sandbox has a network of its own (network=%s); "
				"only network=host shares its ports with the host",
				iso.network);
	if (asprintf(url, "http://127.0.0.1:%d", port) < 0)
		return sfs_errf(err, -ENOMEM, "out of memory");
	return 0;
}

static void local_status_lines(const struct sfs_sandbox *sb, char *buf, size_t len)
{
	pthread_mutex_lock(&local_state_mu);
	const struct local_state *st = sb->priv;
	if (st)
		snprintf(buf, len, "isolation %s\nnetwork %s\numask %04o\n",
			 st->iso.bwrap ? "bwrap" : "none", /* message: may be cut */
			 st->iso.bwrap ? st->iso.network : "host",
			 (unsigned)(st->iso.umask & 0777));
	pthread_mutex_unlock(&local_state_mu);
}

static bool local_sandbox_cap(struct sfs_sandbox *sb, enum sfs_cap cap, bool dflt)
{
	if (cap != SFS_CAP_NETWORK_POLICY)
		return dflt;
	/* enforced only in a namespace of its own (tests/bats/isolation.bats) */
	struct local_iso iso;
	get_iso(sb, &iso);
	return iso.bwrap;
}

static int local_set_network(struct sfs_sandbox *sb, const char *policy, struct sfs_err *err)
{
	struct local_iso iso;
	get_iso(sb, &iso);
	char buf[4096];
	const char *dir = local_dir(sb, buf, NULL);
	if (!dir)
		return sfs_errf(err, -EIO, "local: sandbox has no workspace");
	int r = sfs_local_iso_set_network(sb, dir, &iso, policy, err);
	if (!r)
		set_iso(sb, &iso);
	return r;
}

static bool local_configured(char *why, size_t len)
{
	snprintf(why, len, "ready: runs are host process groups");
	return true;
}

static const struct sfs_provider_ops local_ops = {
    .create = local_create,
    .resume = local_resume,
    .destroy = local_destroy,
    .run_start = local_run_start,
    .run_prepare_dir = local_run_prepare_dir,
    .run_refresh = local_run_refresh,
    .journal_local_path = local_journal_path,
    .workspace_root_fd = local_workspace_root_fd,
    .run_ids = local_run_ids,
    .run_kill = local_run_kill,
    .run_stdin_write = local_stdin_write,
    .run_stdin_close = local_stdin_close,
    .fork = local_fork,
    .expose = local_expose,
    .tick = local_tick,
    .state_save = local_state_save,
    .state_load = local_state_load,
    .state_free = local_state_free,
    .configured = local_configured,
    .status_lines = local_status_lines,
    .sandbox_cap = local_sandbox_cap,
    .set_network = local_set_network,
    .shutdown = sfs_proxy_shutdown,
};

const struct sfs_provider sfs_provider_local = {
    .name = "local",
    .host_fs = true,
    .caps =
	{
	    [SFS_CAP_FS] = true,
	    [SFS_CAP_EXEC] = true,
	    [SFS_CAP_ENV] = true,
	    [SFS_CAP_PORTS] = true,
	    [SFS_CAP_BACKGROUND] = true,
	    [SFS_CAP_WRITABLE_STDIN] = true,
	    [SFS_CAP_KILLABLE] = true,
	    [SFS_CAP_SNAPSHOTS] =
		true, /* workspace snapshots (ctl/wsnap.c): tests/bats/snapshots.bats */
	    [SFS_CAP_NETWORK_POLICY] = false,
	    [SFS_CAP_DURABLE_FS] = true,
	    [SFS_CAP_FORK] = true,
	},
    .ops = &local_ops,
    .options = sfs_local_options,
};
