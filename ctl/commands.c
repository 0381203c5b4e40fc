#include "commands.h"
#include "audit.h"
#include "ctl.h"
#include "sandbox.h"
#include "secrets.h"
#include "tree.h"
#include "verbs.h"
#include "wsnap.h"

#include "../journal/journal.h"
#include "../providers/netpolicy/policy.h"
#include "../providers/redact.h"
#include "../providers/strbuf.h"
#include "../providers/util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- output ----------------------------------------------------------- */

/* ---- the parse-all-then-run driver ------------------------------------ */

struct parsed {
	struct ctl_cmd *cmds;
	size_t n, cap;
	const struct ctl_verb *table;
	struct sfs_err err;
	int rc;
	char *bad; /* the line that did not parse */
};

static int parse_one(const char *line, void *arg)
{
	struct parsed *p = arg;
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 4;
		struct ctl_cmd *grown = realloc(p->cmds, cap * sizeof(*grown));
		if (!grown)
			return p->rc = sfs_errf(&p->err, -ENOMEM, "out of memory");
		p->cmds = grown;
		p->cap = cap;
	}
	memset(&p->cmds[p->n], 0, sizeof(p->cmds[0]));
	int r = ctl_parse_line(p->table, line, &p->cmds[p->n], &p->err);
	if (r == -ENODATA)
		return 0;
	if (r) {
		p->bad = strdup(line); /* for SANDBOX/audit; NULL on ENOMEM */
		return p->rc = r;
	}
	p->n++;
	return 0;
}

typedef int (*run_fn)(struct ctl_cmd *cmd, void *ctx, struct sfs_buf *o, struct sfs_err *err);

/* Every env name in opts (keys after `prefix`, "" for all) is usable. */
static int check_env_names(const char *verb, const struct sfs_kvlist *opts, const char *prefix,
			   struct sfs_err *err)
{
	size_t n = strlen(prefix);
	for (size_t i = 0; i < opts->n; i++) {
		const char *k = opts->v[i].key;
		if (strncmp(k, prefix, n) != 0)
			continue;
		if (!ctl_env_name_ok(k + n))
			return sfs_errf(err, -EINVAL,
					"%s: bad variable name \"%s\" in \"%s=\" (names are "
					"A-Z a-z 0-9 _, not starting with a digit)",
					verb, k + n, k);
	}
	return 0;
}

/* Words and option values end up in the registry (JSON, which holds text
 * only) and in status files: bytes that are not UTF-8 would be dropped at
 * the next save, so they are refused up front.  exec's command line is
 * kept in runs/N/cmd as bytes and is not checked. */
static int check_text(struct ctl_cmd *c, struct sfs_err *err)
{
	const char *verb = c->verb->name;
	for (int i = 0; i < c->nargs; i++)
		if (!sfs_utf8_valid(c->args[i]))
			return sfs_errf(err, -EINVAL, "%s: an argument is not UTF-8 text", verb);
	for (size_t i = 0; i < c->opts.n; i++)
		if (!sfs_utf8_valid(c->opts.v[i].key) || !sfs_utf8_valid(c->opts.v[i].val))
			return sfs_errf(
			    err, -EINVAL,
			    "%s: the value of an option is not UTF-8 text (sandboxfs keeps "
			    "options as text)",
			    verb);
	return 0;
}

/* Argument checks with no side effects, run on every line before any line
 * runs, so a bad line anywhere in a write changes nothing. */
static int check_cmd(struct ctl_cmd *c, struct sfs_err *err)
{
	long v;
	if (check_text(c, err))
		return -EINVAL;
	switch (c->verb->id) {
	case V_NEW:
		if (check_env_names("new", &c->opts, "env.", err))
			return -EINVAL;
		for (size_t i = 0; i < c->opts.n; i++)
			if (!strncmp(c->opts.v[i].key, "secret.", 7) &&
			    secret_ref_check(c->opts.v[i].key + 7, c->opts.v[i].val, err))
				return -EINVAL;
		return ctl_check_sandbox_name(c->args[0], err);
	case V_FORGET:
		return ctl_check_sandbox_name(c->args[0], err);
	case V_RESUME:
		if (!sfs_kv_get(&c->opts, "provider") || !sfs_kv_get(&c->opts, "id"))
			return sfs_errf(err, -EINVAL, "resume: provider= and id= are required");
		return ctl_check_sandbox_name(c->args[0], err);
	case V_FORK:
		return ctl_check_sandbox_name(c->args[0], err);
	case V_KILL:
		if (c->nargs == 2 && ctl_parse_int(c->args[0], 1, 1L << 24, &v) < 0)
			return sfs_errf(err, -EINVAL, "kill: bad run number \"%s\"", c->args[0]);
		if (c->nargs >= 1 && ctl_parse_int(c->args[c->nargs - 1], 1, 1L << 24, &v) < 0 &&
		    ctl_parse_signal(c->args[c->nargs - 1]) < 0)
			return sfs_errf(err, -EINVAL, "kill: bad signal \"%s\"",
					c->args[c->nargs - 1]);
		if (c->nargs == 2 && ctl_parse_signal(c->args[1]) < 0)
			return sfs_errf(err, -EINVAL, "kill: bad signal \"%s\"", c->args[1]);
		return 0;
	case V_RUN_KILL:
		if (c->nargs && ctl_parse_signal(c->args[0]) < 0)
			return sfs_errf(err, -EINVAL, "kill: bad signal \"%s\"", c->args[0]);
		return 0;
	case V_CANCEL:
		if (c->nargs && ctl_parse_int(c->args[0], 1, 1L << 24, &v) < 0)
			return sfs_errf(err, -EINVAL, "cancel: bad run number \"%s\"", c->args[0]);
		return 0;
	case V_EXPOSE:
		if (ctl_parse_int(c->args[0], 1, 65535, &v) < 0)
			return sfs_errf(err, -EINVAL, "expose: bad port \"%s\"", c->args[0]);
		return 0;
	case V_POLICY: {
		if (strcmp(c->args[0], "network") != 0)
			return sfs_errf(err, -EINVAL,
					"policy: unknown policy \"%s\" (known: network)",
					c->args[0]);
		struct sfs_netpolicy p;
		int r = sfs_netpolicy_parse(c->args[1], &p, err);
		sfs_netpolicy_free(&p);
		return r;
	}
	case V_ENV:
		if (c->nargs > 0)
			return sfs_errf(err, -EINVAL, "env: expected K=V, got \"%s\"", c->args[0]);
		if (c->opts.n == 0)
			return sfs_errf(err, -EINVAL, "env: nothing to set (usage: env K=V...)");
		return check_env_names("env", &c->opts, "", err);
	case V_SECRET:
		if (c->nargs > 0 || c->opts.n == 0)
			return sfs_errf(err, -EINVAL,
					"expected secret NAME=env:VAR, NAME=file:PATH or NAME= "
					"(removes it)");
		for (size_t i = 0; i < c->opts.n; i++) {
			const char *k = c->opts.v[i].key, *v = c->opts.v[i].val;
			if (secret_ref_check(k, v[0] ? v : "env:X", err))
				return -EINVAL;
		}
		return 0;
	}
	return 0;
}

/* lib9p style: the message names the command it came from (escaped: a
 * line may hold any bytes), and is redacted as a whole. */
static void name_command(struct sfs_err *err, const char *line)
{
	char shown[SFS_ERR_MAX], msg[SFS_ERR_MAX];
	sfs_escape_redacted(line, strlen(line), strlen(line), shown, sizeof(shown), NULL);
	sfs_msgf(msg, sizeof(msg), "%s: \"%s\"", err->msg, shown);
	snprintf(err->msg, sizeof(err->msg), "%s", msg); /* message: may be cut */
	sfs_redact(err->msg, sizeof(err->msg));
}

/* Lines whose effect is staged rather than saved one by one (the sandbox
 * ctl's env and unsetenv): a run of them in one write is saved once, by
 * flush(ctx, true, err) before the next other line or the end of the write
 * (flush(ctx, false, ...) drops what was staged).  So K env lines cost one
 * registry save, not K saves of a registry that grows with each. */
struct stager {
	bool (*stages)(const struct ctl_cmd *c);
	int (*flush)(void *ctx, bool keep, struct sfs_err *err);
};

/* SANDBOX/audit's line for a command that ran (or was refused), with the
 * result it had; staged lines get their run's saved-or-not result. */
typedef void (*audit_fn)(void *ctx, const char *line, int r);

static void audit_range(audit_fn aud, void *ctx, const struct parsed *p, size_t from, size_t to,
			int r)
{
	for (size_t k = from; aud && k < to; k++)
		aud(ctx, p->cmds[k].line, r);
}

static int drive(const struct ctl_verb *table, const char *buf, size_t len, run_fn fn, void *ctx,
		 const struct stager *st, audit_fn aud, char **result, const char *who)
{
	struct parsed p = {.table = table};
	struct sfs_buf o = {0};
	int r = ctl_for_each_line(buf, len, parse_one, &p);
	if (r && aud && p.bad)
		aud(ctx, p.bad, r);
	free(p.bad);
	for (size_t i = 0; !r && i < p.n; i++) {
		r = check_cmd(&p.cmds[i], &p.err);
		if (r) {
			audit_range(aud, ctx, &p, i, i + 1, r);
			name_command(&p.err, p.cmds[i].line);
		}
	}
	if (r && !p.err.msg[0])
		sfs_errf(&p.err, r, "unreadable command (a NUL byte, or not text)");
	if (!r && p.n == 0)
		r = p.rc = sfs_errf(&p.err, -EINVAL, "empty command");
	/* staged: the first line of the run of staged lines not yet saved; a
	 * run takes effect whole or not at all, and its error names that line */
	const char *staged = NULL, *failed = NULL;
	size_t staged_from = 0, ran = 0;
	for (size_t i = 0; !r && i < p.n; i++) {
		sfs_err_clear(&p.err);
		bool stages = st && st->stages(&p.cmds[i]);
		if (staged && !stages) {
			r = st->flush(ctx, true, &p.err);
			audit_range(aud, ctx, &p, staged_from, i, r);
			failed = staged;
			staged = NULL;
			if (r)
				break;
		}
		r = fn(&p.cmds[i], ctx, &o, &p.err);
		ran = i + 1;
		failed = p.cmds[i].line;
		if (!stages)
			audit_range(aud, ctx, &p, i, i + 1, r);
		if (stages && !staged) {
			staged = p.cmds[i].line;
			staged_from = i;
		}
	}
	if (staged) {
		int fr = st->flush(ctx, !r, &p.err);
		audit_range(aud, ctx, &p, staged_from, ran, r ? r : fr);
		if (!r)
			r = fr;
		failed = staged;
	}
	if (r && p.err.code == 0)
		sfs_errf(&p.err, r, "%s", strerror(-r));
	if (r && failed)
		name_command(&p.err, failed);
	for (size_t i = 0; i < p.n; i++)
		ctl_cmd_free(&p.cmds[i]);
	free(p.cmds);
	if (r) {
		free(o.buf);
		o = (struct sfs_buf){0};
		sfs_buf_printf(&o, "error: %s\n", p.err.msg);
		sfs_log(SFS_LOG_WARN, "%s ctl: %s", who, p.err.msg);
	}
	*result = o.buf;
	return r;
}

/* ---- mount ctl -------------------------------------------------------- */

/* The mount ctl's commands go to the audit of the sandbox they name (one
 * that exists after them, or before: forget). */
static int run_mount_cmd(struct ctl_cmd *c, struct sfs_buf *o, struct sfs_err *err);

static int run_mount(struct ctl_cmd *c, void *ctx, struct sfs_buf *o, struct sfs_err *err)
{
	struct sfs_sandbox *before = tree_get(c->args[0]);
	int r = run_mount_cmd(c, o, err);
	struct sfs_sandbox *sb = before ? before : tree_get(c->args[0]);
	audit_line(sb, "ctl", "/ctl", r, c->line);
	/* A forgotten record's audit ends with that line, written now: its
	 * writer would otherwise flush later, into a state dir that a resumed
	 * record owns by then and may be removing (an rmdir's rm -rf that
	 * finds a new audit file leaves the directory behind). */
	if (!r && c->verb->id == V_FORGET && sb)
		audit_close(sb);
	tree_put(sb);
	return r;
}

static int run_mount_cmd(struct ctl_cmd *c, struct sfs_buf *o, struct sfs_err *err)
{
	int r;
	switch (c->verb->id) {
	case V_NEW:
		r = tree_create(c->args[0], &c->opts, err);
		if (!r)
			sfs_buf_printf(o, "%s\n", c->args[0]);
		return r;
	case V_RESUME: {
		const char *p = sfs_kv_get(&c->opts, "provider"), *id = sfs_kv_get(&c->opts, "id");
		if (!p || !id)
			return sfs_errf(err, -EINVAL, "resume: provider= and id= are required");
		r = tree_resume(c->args[0], p, id, err);
		if (!r)
			sfs_buf_printf(o, "%s\n", c->args[0]);
		return r;
	}
	case V_FORGET:
		return tree_forget(c->args[0], err);
	}
	return sfs_errf(err, -EINVAL, "unknown command");
}

int ctl_mount_write(const char *buf, size_t len, char **result)
{
	return drive(ctl_mount_verbs, buf, len, run_mount, NULL, NULL, NULL, result, "mount");
}

static void usage_lines(struct sfs_buf *o, const struct ctl_verb *t)
{
	for (; t->name; t++)
		sfs_buf_printf(o, "usage %s\n", t->usage);
}

char *ctl_mount_read_text(void)
{
	struct sfs_buf o = {0};
	char names[1][64];
	uint32_t serial;
	(void)names;
	(void)serial;
	pthread_mutex_lock(&sfs_records_mu);
	size_t n = tree.nsbs;
	pthread_mutex_unlock(&sfs_records_mu);
	sfs_buf_printf(&o, "sandboxes %zu\n", n);
	sfs_buf_printf(&o, "default_provider %s\n", tree.default_provider->name);
	usage_lines(&o, ctl_mount_verbs);
	if (!o.buf)
		return strdup("");
	return o.buf;
}

/* ---- sandbox ctl ------------------------------------------------------ */

static int pick_run(struct sfs_sandbox *sb, const char *arg, struct sfs_run **run,
		    struct sfs_err *err)
{
	long n = tree_nruns(sb);
	if (arg && ctl_parse_int(arg, 1, 1L << 24, &n) < 0)
		return sfs_errf(err, -EINVAL, "bad run number \"%s\"", arg);
	if (n < 1)
		return sfs_errf(err, -ENOENT, "sandbox \"%s\" has no runs", sb->name);
	*run = tree_run(sb, (int)n);
	if (!*run)
		return sfs_errf(err, -ENOENT, "no run %ld", n);
	return 0;
}

/* How long kill waits for the run's status to leave `running`: after an
 * escalating kill the process group is gone and only the wrapper's status
 * file and the engine's look at it are left; a single signal may be caught
 * or ignored, and then the run rightly stays `running`, which costs that kill
 * the whole wait: 3 s, because on a loaded 2-core machine a run that a
 * signal does end was seen taking more than 1 s to die and be recorded. */
#define KILL_SETTLE_MS 5000
#define SIGNAL_SETTLE_MS 3000

/* So that when kill returns, runs/N/status already says how the run ended:
 * the engine is asked to look every 10 ms until it has seen the end or `ms`
 * have passed.  Holds no lock while it waits. */
static void wait_run_settled(struct sfs_run *run, int ms)
{
	journal_wait_end(run, ms, 10);
}

static int kill_run(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		    struct sfs_err *err)
{
	int r = sfs_provider_require(sb->provider, SFS_CAP_KILLABLE, err);
	if (r)
		return r;
	if (!sb->provider->ops->run_kill)
		return sfs_errf(err, -EOPNOTSUPP, "provider %s cannot kill", sb->provider->name);
	if (!journal_run_active(run)) {
		char st[64];
		journal_status_text(run, st, sizeof(st));
		return sfs_errf(err, -ESRCH, "run %d is not running (%s)", run->n, st);
	}
	pthread_mutex_lock(&sb->op_mutex);
	r = sb->provider->ops->run_kill(sb, run, sig, escalate, err);
	pthread_mutex_unlock(&sb->op_mutex);
	if (!r)
		wait_run_settled(run, escalate ? KILL_SETTLE_MS : SIGNAL_SETTLE_MS);
	journal_poke();
	return r;
}

static int do_kill(struct sfs_sandbox *sb, struct ctl_cmd *c, struct sfs_err *err)
{
	const char *run_arg = NULL, *sig_arg = NULL;
	if (c->nargs == 2) {
		run_arg = c->args[0];
		sig_arg = c->args[1];
	} else if (c->nargs == 1) {
		long dummy;
		/* a lone number is a run (the grammar puts RUN first) */
		if (ctl_parse_int(c->args[0], 1, 1L << 24, &dummy) == 0)
			run_arg = c->args[0];
		else
			sig_arg = c->args[0];
	}
	int sig = SIGTERM;
	if (sig_arg && (sig = ctl_parse_signal(sig_arg)) < 0)
		return sfs_errf(err, -EINVAL, "kill: bad signal \"%s\"", sig_arg);
	struct sfs_run *run;
	int r = pick_run(sb, run_arg, &run, err);
	if (r)
		return r;
	return kill_run(sb, run, sig, sig_arg == NULL, err);
}

static int do_cancel(struct sfs_sandbox *sb, struct ctl_cmd *c, struct sfs_buf *o,
		     struct sfs_err *err)
{
	struct sfs_run *run;
	int r = pick_run(sb, c->nargs ? c->args[0] : NULL, &run, err);
	if (r)
		return r;
	if (sb->provider->caps[SFS_CAP_KILLABLE])
		return kill_run(sb, run, SIGTERM, true, err);
	/* SPEC §7: with no way to stop the process, destroying the sandbox
	 * is the cancel; the directory stays to say so in status. */
	pthread_mutex_lock(&sb->op_mutex);
	r = sb->provider->ops->destroy(sb, err);
	if (!r) {
		sfs_sb_set_state(sb, SFS_SB_DESTROYED);
		tree_set_error(sb, "cancelled: the provider cannot kill a process, so the "
				   "sandbox was destroyed");
		/* its runs went with it: `lost`, every reader answered now,
		 * and so it stays after a restart (RUNDIR/ended) */
		journal_end_sandbox(sb, true);
	}
	pthread_mutex_unlock(&sb->op_mutex);
	if (!r)
		r = tree_save(err);
	journal_poke();
	return r;
}

/* One write to a sandbox's ctl: the sandbox, and the environment its env
 * and unsetenv lines are building (see struct stager).  While `staging`,
 * the write holds sb->op_mutex (provider ops read sb->env holding it), so
 * nothing else changes sb->env under the staged copy. */
struct sb_write {
	struct sfs_sandbox *sb;
	bool staging;
	struct sfs_kvlist env;
};

static int do_env(struct sb_write *w, struct ctl_cmd *c, bool set, struct sfs_err *err)
{
	struct sfs_sandbox *sb = w->sb;
	int r = sfs_provider_require(sb->provider, SFS_CAP_ENV, err);
	if (r)
		return r;
	if (set && c->nargs > 0)
		return sfs_errf(err, -EINVAL, "env: expected K=V, got \"%s\"", c->args[0]);
	if (set && c->opts.n == 0)
		return sfs_errf(err, -EINVAL, "env: nothing to set (usage: env K=V...)");
	if (!w->staging) {
		pthread_mutex_lock(&sb->op_mutex);
		w->staging = true;
		pthread_mutex_lock(&sfs_records_mu);
		r = sfs_kv_copy(&w->env, &sb->env);
		pthread_mutex_unlock(&sfs_records_mu);
	}
	if (set)
		for (size_t i = 0; !r && i < c->opts.n; i++)
			r = sfs_kv_set(&w->env, c->opts.v[i].key, c->opts.v[i].val);
	else
		for (int i = 0; !r && i < c->nargs; i++)
			sfs_kv_del(&w->env, c->args[i]);
	return r ? sfs_errf(err, r, "out of memory") : 0;
}

static bool env_line(const struct ctl_cmd *c)
{
	return c->verb->id == V_ENV || c->verb->id == V_UNSETENV;
}

/* Publishes and saves the staged environment (keep), or drops it. */
static int env_flush(void *ctx, bool keep, struct sfs_err *err)
{
	struct sb_write *w = ctx;
	if (!w->staging)
		return 0;
	int r = keep ? tree_swap_env(w->sb, &w->env, err) : 0;
	sfs_kv_free(&w->env); /* the old list, or the one that was not kept */
	w->staging = false;
	pthread_mutex_unlock(&w->sb->op_mutex);
	return r;
}

static const struct stager env_stager = {env_line, env_flush};

static int optional_op(struct sfs_sandbox *sb, enum sfs_cap cap, const void *op, const char *what,
		       struct sfs_err *err)
{
	if (cap != SFS_CAP_COUNT) {
		int r = sfs_provider_require(sb->provider, cap, err);
		if (r)
			return r;
	}
	if (!op)
		return sfs_errf(err, -EOPNOTSUPP, "provider %s does not support %s",
				sb->provider->name, what);
	return 0;
}

/* A workspace snapshot (ctl/wsnap.c): for providers without native ones,
 * and for kind=workspace anywhere. */
static int do_workspace_snapshot(struct sfs_sandbox *sb, const char *label, struct sfs_buf *o,
				 struct sfs_err *err)
{
	int r = sfs_provider_require(sb->provider, SFS_CAP_FS, err);
	if (r)
		return r;
	if (!wsnap_possible(sb))
		return sfs_errf(err, -EOPNOTSUPP,
				"snapshot: provider %s has no file access for a workspace "
				"snapshot",
				sb->provider->name);
	char *id = NULL;
	pthread_mutex_lock(&sb->op_mutex);
	r = wsnap_take(sb, label, &id, err);
	pthread_mutex_unlock(&sb->op_mutex);
	if (r)
		return r;
	sfs_buf_printf(o, "%s\n", id);
	free(id);
	return tree_save(err);
}

static int do_snapshot(struct sfs_sandbox *sb, struct ctl_cmd *c, struct sfs_buf *o,
		       struct sfs_err *err)
{
	const struct sfs_provider_ops *ops = sb->provider->ops;
	const char *kind = sfs_kv_get(&c->opts, "kind");
	if (kind && strcmp(kind, "native") != 0 && strcmp(kind, "workspace") != 0)
		return sfs_errf(err, -EINVAL, "snapshot: kind=%s: expected native or workspace",
				kind);
	if (kind ? strcmp(kind, "workspace") == 0 : strcmp(wsnap_status_kind(sb), "workspace") == 0)
		return do_workspace_snapshot(sb, c->nargs ? c->args[0] : NULL, o, err);
	int r = optional_op(sb, SFS_CAP_SNAPSHOTS, (const void *)ops->snapshot, "snapshot", err);
	if (r)
		return r;
	const char *label = c->nargs ? c->args[0] : NULL;
	char *id = NULL;
	/* the op holder changes the list (provider.h's rule) */
	pthread_mutex_lock(&sb->op_mutex);
	r = ops->snapshot(sb, label, &id, err);
	if (r) {
		pthread_mutex_unlock(&sb->op_mutex);
		return r;
	}
	char *lab = label ? strdup(label) : NULL;
	pthread_mutex_lock(&sfs_records_mu);
	r = label && !lab ? -ENOMEM : sandbox_snapshot_add_locked(sb, id, lab, time(NULL));
	pthread_mutex_unlock(&sfs_records_mu);
	pthread_mutex_unlock(&sb->op_mutex);
	if (r) {
		r = sfs_errf(err, r, "%s (the snapshot exists: %s)",
			     r == -ENOSPC ? "no more snapshot numbers" : "out of memory", id);
		free(lab);
		free(id);
		return r;
	}
	sfs_buf_printf(o, "%s\n", id);
	return tree_save(err);
}

static int do_restore(struct sfs_sandbox *sb, struct ctl_cmd *c, struct sfs_buf *o,
		      struct sfs_err *err)
{
	const struct sfs_provider_ops *ops = sb->provider->ops;
	char *commit = wsnap_commit_of(sb, c->args[0]);
	if (commit) {
		/* a workspace snapshot: written back in place, the runs go on */
		pthread_mutex_lock(&sb->op_mutex);
		int r = tree_check_live(sb, err);
		if (!r)
			r = wsnap_restore_into(sb, c->args[0], commit, o, err);
		pthread_mutex_unlock(&sb->op_mutex);
		free(commit);
		/* a host workspace's watcher sees the writes; a remote one's
		 * cache must be told */
		if (!r && tree_workspace_is_remote(sb) && tree_sandbox_reset_hook)
			tree_sandbox_reset_hook(sb);
		return r;
	}
	if (wsnap_is_layer(sb, c->args[0]))
		return sfs_errf(err, -EOPNOTSUPP,
				"restore: snapshots/%s is the start of a copy-on-write base: it "
				"has a diff, no stored tree",
				c->args[0]);
	int r = optional_op(sb, SFS_CAP_SNAPSHOTS, (const void *)ops->restore, "restore", err);
	if (r)
		return r;
	bool known = false;
	pthread_mutex_lock(&sfs_records_mu);
	for (size_t i = 0; i < sb->nsnapshots; i++)
		known |= strcmp(sb->snapshots[i].id, c->args[0]) == 0;
	pthread_mutex_unlock(&sfs_records_mu);
	if (!known)
		return sfs_errf(err, -ENOENT, "restore: no snapshot \"%s\" in snapshots/",
				c->args[0]);
	pthread_mutex_lock(&sb->op_mutex);
	r = ops->restore(sb, c->args[0], err);
	pthread_mutex_unlock(&sb->op_mutex);
	if (r)
		return r;
	/* a new filesystem: workspace/ must be looked up afresh */
	if (tree_sandbox_reset_hook)
		tree_sandbox_reset_hook(sb);
	return tree_save(err);
}

static int run_sandbox(struct ctl_cmd *c, void *ctx, struct sfs_buf *o, struct sfs_err *err)
{
	struct sb_write *w = ctx;
	struct sfs_sandbox *sb = w->sb;
	const struct sfs_provider_ops *ops = sb->provider->ops;
	int r, n;
	switch (c->verb->id) {
	case V_EXEC:
		r = tree_exec(sb, c->rest, &n, err);
		if (!r)
			sfs_buf_printf(o, "%d\n", n);
		return r;
	case V_KILL:
		return do_kill(sb, c, err);
	case V_CANCEL:
		return do_cancel(sb, c, o, err);
	case V_SNAPSHOT:
		return do_snapshot(sb, c, o, err);
	case V_RESTORE:
		return do_restore(sb, c, o, err);
	case V_FORK:
		r = tree_fork(sb, c->args[0], sfs_kv_get(&c->opts, "from"), err);
		if (!r)
			sfs_buf_printf(o, "%s\n", c->args[0]);
		return r;
	case V_EXPOSE: {
		long port;
		if (ctl_parse_int(c->args[0], 1, 65535, &port) < 0)
			return sfs_errf(err, -EINVAL, "expose: bad port \"%s\"", c->args[0]);
		r = optional_op(sb, SFS_CAP_PORTS, (const void *)ops->expose, "expose", err);
		if (r)
			return r;
		char *url = NULL;
		pthread_mutex_lock(&sb->op_mutex);
		r = ops->expose(sb, (int)port, &url, err);
		pthread_mutex_unlock(&sb->op_mutex);
		if (r)
			return r;
		pthread_mutex_lock(&sfs_records_mu);
		size_t i;
		for (i = 0; i < sb->nports && sb->ports[i].port != port; i++)
			;
		if (i < sb->nports) {
			free(sb->ports[i].url);
			sb->ports[i].url = url;
		} else {
			struct sfs_port *grown =
			    realloc(sb->ports, (sb->nports + 1) * sizeof(*grown));
			if (grown) {
				sb->ports = grown;
				sb->ports[sb->nports].port = (int)port;
				sb->ports[sb->nports].url = url;
				sb->nports++;
			} else {
				free(url);
				r = sfs_errf(err, -ENOMEM, "out of memory");
			}
		}
		pthread_mutex_unlock(&sfs_records_mu);
		if (!r)
			r = tree_save(err);
		if (!r)
			sfs_buf_printf(o, "%ld\n", port);
		return r;
	}
	case V_STOP:
	case V_START: {
		int (*op)(struct sfs_sandbox *, struct sfs_err *) =
		    c->verb->id == V_STOP ? ops->stop : ops->start;
		r = optional_op(sb, SFS_CAP_COUNT, (const void *)op, c->verb->name, err);
		if (r)
			return r;
		pthread_mutex_lock(&sb->op_mutex);
		r = op(sb, err);
		if (!r)
			sfs_sb_set_state(sb,
					 c->verb->id == V_STOP ? SFS_SB_STOPPED : SFS_SB_RUNNING);
		pthread_mutex_unlock(&sb->op_mutex);
		if (!r && c->verb->id == V_START && tree_sandbox_reset_hook)
			tree_sandbox_reset_hook(sb);
		return r ? r : tree_save(err);
	}
	case V_DESTROY: {
		char name[64];
		return tree_destroy(sfs_sb_copy_name(sb, name), err);
	}
	case V_POLICY:
		if (!ops->set_network)
			return sfs_errf(
			    err, -EOPNOTSUPP,
			    "policy network: the %s provider cannot change a sandbox's network",
			    sb->provider->name);
		pthread_mutex_lock(&sb->op_mutex);
		r = ops->set_network(sb, c->args[1], err);
		pthread_mutex_unlock(&sb->op_mutex);
		return r ? r : tree_save(err);
	case V_ENV:
		return do_env(w, c, true, err);
	case V_UNSETENV:
		return do_env(w, c, false, err);
	case V_SECRET:
		return secrets_set(sb, &c->opts, err);
	}
	return sfs_errf(err, -EINVAL, "unknown command");
}

static void audit_sandbox(void *ctx, const char *line, int r)
{
	struct sb_write *w = ctx;
	audit_line(w->sb, "ctl", "ctl", r, line);
}

/* A ctl opened before its sandbox was forgotten or destroyed refuses every
 * verb: a run started there would be one nobody can see or kill. */
static int refuse_if_gone(struct sfs_sandbox *sb, char **result)
{
	struct sfs_err err = {0};
	int r = tree_check_live(sb, &err);
	if (!r)
		return 0;
	struct sfs_buf o = {0};
	sfs_buf_printf(&o, "error: %s\n", err.msg);
	*result = o.buf;
	char name[64];
	sfs_log(SFS_LOG_WARN, "%s ctl: %s", sfs_sb_copy_name(sb, name), err.msg);
	return r;
}

int ctl_sandbox_write(struct sfs_sandbox *sb, const char *buf, size_t len, char **result)
{
	int r = refuse_if_gone(sb, result);
	if (r)
		return r;
	char name[64];
	struct sb_write w = {.sb = sb};
	r = drive(ctl_sandbox_verbs, buf, len, run_sandbox, &w, &env_stager, audit_sandbox, result,
		  sfs_sb_copy_name(sb, name));
	tree_set_last_result(sb, *result);
	return r;
}

char *ctl_sandbox_read_text(struct sfs_sandbox *sb)
{
	struct sfs_buf o = {0};
	pthread_mutex_lock(&sfs_records_mu);
	sfs_buf_printf(&o, "state %s\n", sfs_sb_state_name(sb->state));
	sfs_buf_printf(&o, "runs %zu\n", sb->nruns);
	if (sb->last_result) {
		const char *lr = sb->last_result;
		size_t l = strlen(lr);
		sfs_buf_printf(&o, "last %.*s\n", (int)(l && lr[l - 1] == '\n' ? l - 1 : l), lr);
	}
	pthread_mutex_unlock(&sfs_records_mu);
	usage_lines(&o, ctl_sandbox_verbs);
	return o.buf ? o.buf : strdup("");
}

/* ---- run ctl ---------------------------------------------------------- */

struct run_ctx {
	struct sfs_sandbox *sb;
	struct sfs_run *run;
};

static int run_run(struct ctl_cmd *c, void *ctx, struct sfs_buf *o, struct sfs_err *err)
{
	struct run_ctx *rc = ctx;
	int sig = SIGTERM;
	switch (c->verb->id) {
	case V_RUN_KILL:
		if (c->nargs && (sig = ctl_parse_signal(c->args[0])) < 0)
			return sfs_errf(err, -EINVAL, "kill: bad signal \"%s\"", c->args[0]);
		return kill_run(rc->sb, rc->run, sig, c->nargs == 0, err);
	case V_RUN_EOF: {
		int r = sfs_provider_require(rc->sb->provider, SFS_CAP_WRITABLE_STDIN, err);
		if (r)
			return r;
		if (!rc->sb->provider->ops->run_stdin_close)
			return sfs_errf(err, -EOPNOTSUPP, "provider cannot close stdin");
		return rc->sb->provider->ops->run_stdin_close(rc->sb, rc->run, err);
	}
	}
	return sfs_errf(err, -EINVAL, "unknown command");
}

static void audit_run_ctl(void *ctx, const char *line, int r)
{
	struct run_ctx *rc = ctx;
	char path[48];
	snprintf(path, sizeof(path), "runs/%d/ctl", rc->run->n);
	audit_line(rc->sb, "ctl", path, r, line);
}

int ctl_run_write(struct sfs_sandbox *sb, struct sfs_run *run, const char *buf, size_t len,
		  char **result)
{
	int r = refuse_if_gone(sb, result);
	if (r)
		return r;
	struct run_ctx ctx = {sb, run};
	char who[96], name[64];
	snprintf(who, sizeof(who), "%s run %d", sfs_sb_copy_name(sb, name),
		 run->n); /* message: may be cut */
	return drive(ctl_run_verbs, buf, len, run_run, &ctx, NULL, audit_run_ctl, result, who);
}

char *ctl_run_read_text(struct sfs_sandbox *sb, struct sfs_run *run)
{
	struct sfs_buf o = {0};
	char st[64];
	journal_status_text(run, st, sizeof(st));
	sfs_buf_printf(&o, "status %s\n", st);
	usage_lines(&o, ctl_run_verbs);
	return o.buf ? o.buf : strdup("");
}

/* ---- open ctl files: lines held across writes ------------------------- */

void ctl_file_init(struct ctl_file *f, enum ctl_file_kind kind, struct sfs_sandbox *sb,
		   struct sfs_run *run)
{
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->sb = sb;
	f->run = run;
	pthread_mutex_init(&f->mu, NULL);
}

static int dispatch(struct ctl_file *f, const char *lines, size_t len, char **result)
{
	switch (f->kind) {
	case CTL_FILE_MOUNT:
		return ctl_mount_write(lines, len, result);
	case CTL_FILE_SANDBOX:
		return ctl_sandbox_write(f->sb, lines, len, result);
	case CTL_FILE_RUN:
		return ctl_run_write(f->sb, f->run, lines, len, result);
	}
	return -EBADF;
}

static bool all_blank(const char *s)
{
	for (; *s; s++)
		if (*s != ' ' && *s != '\t' && *s != '\n')
			return false;
	return true;
}

static const char *file_who(struct ctl_file *f, char *buf, size_t size)
{
	if (f->kind == CTL_FILE_MOUNT)
		return "mount";
	/* a copy: `mv` may rename the sandbox meanwhile */
	char name[64];
	sfs_sb_copy_name(f->sb, name);
	if (f->kind == CTL_FILE_SANDBOX)
		snprintf(buf, size, "%s", name); /* message: may be cut */
	else
		snprintf(buf, size, "%s run %d", name, f->run->n); /* message: may be cut */
	return buf;
}

int ctl_file_write(struct ctl_file *f, const char *buf, size_t len, char **result)
{
	struct sfs_err err = {0};
	char *lines = NULL;
	*result = NULL;
	pthread_mutex_lock(&f->mu); /* one write at a time: lines keep their order */
	bool held_before = ctl_linebuf_pending(&f->lb);
	int r = ctl_linebuf_feed(&f->lb, buf, len, &lines, &err);
	if (r) {
		struct sfs_buf o = {0};
		char who[96];
		sfs_buf_printf(&o, "error: %s\n", err.msg);
		sfs_log(SFS_LOG_WARN, "%s ctl: %s", file_who(f, who, sizeof(who)), err.msg);
		*result = o.buf;
		if (f->kind == CTL_FILE_SANDBOX)
			tree_set_last_result(f->sb, *result);
	} else if (lines && !all_blank(lines)) {
		r = dispatch(f, lines, strlen(lines), result);
		if (r)
			ctl_linebuf_fail(&f->lb);
	} else if (!held_before && !ctl_linebuf_pending(&f->lb)) {
		/* a write of blank lines only: "empty command", as always */
		r = dispatch(f, "", 0, result);
	}
	/* else: a piece of a line that is still unfinished, or blank lines
	 * around one; nothing runs yet and the last result stays readable */
	pthread_mutex_unlock(&f->mu);
	free(lines);
	return r;
}

void ctl_file_close(struct ctl_file *f)
{
	pthread_mutex_lock(&f->mu);
	char *dropped = NULL;
	char *line = ctl_linebuf_take(&f->lb, &dropped);
	pthread_mutex_unlock(&f->mu);
	if (line) {
		/* `echo -n CMD > ctl`: the file's one write, closed without a
		 * newline, is a whole line; its result goes to the log and the
		 * sandbox's ctl */
		char *result = NULL;
		dispatch(f, line, strlen(line), &result);
		free(result);
		free(line);
	} else if (dropped) {
		/* several writes and no final newline: maybe a writer killed
		 * mid-command, so the tail never runs */
		struct sfs_err err = {0};
		char shown[200], who[96];
		bool cut;
		sfs_escape_redacted(dropped, strlen(dropped), 40, shown, sizeof(shown), &cut);
		sfs_errf(&err, -EINVAL,
			 "not run: \"%s%s\" had no newline when the file was closed after several "
			 "writes (end every line with a newline; only a single write may omit it)",
			 shown, cut ? "..." : "");
		sfs_log(SFS_LOG_WARN, "%s ctl: %s", file_who(f, who, sizeof(who)), err.msg);
		if (f->kind == CTL_FILE_SANDBOX) {
			struct sfs_buf o = {0};
			sfs_buf_printf(&o, "error: %s\n", err.msg);
			if (o.buf)
				tree_set_last_result(f->sb, o.buf);
			free(o.buf);
		}
		free(dropped);
	}
	ctl_linebuf_free(&f->lb);
	pthread_mutex_destroy(&f->mu);
}
