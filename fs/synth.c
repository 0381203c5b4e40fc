#include "synth.h"
#include "remote/remote.h"
#include "snaptree.h"

#include "../ctl/cowbase.h"
#include "../ctl/wsnap.h"

#include "../ctl/audit.h"
#include "../ctl/quota.h"
#include "../ctl/secrets.h"
#include "../ctl/tree.h"
#include "../journal/journal.h"
#include "../providers/redact.h"
#include "../providers/strbuf.h"
#include "../providers/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static time_t started_at;

/* Fixed children of the per-sandbox and per-run directories. */
struct row {
	const char *name;
	unsigned kind;
	mode_t mode;
};

static const struct row sandbox_rows[] = {
    {"ctl", SFS_K_SB_CTL, S_IFREG | 0600},
    {"caps", SFS_K_SB_CAPS, S_IFREG | 0444},
    {"status", SFS_K_SB_STATUS, S_IFREG | 0444},
    {"journal", SFS_K_SB_JOURNAL, S_IFLNK | 0777},
    {"workspace", SFS_K_WS, S_IFDIR | 0755},
    {"runs", SFS_K_SB_RUNS, S_IFDIR | 0555},
    {"snapshots", SFS_K_SB_SNAPSHOTS, S_IFDIR | 0755},
    {"ports", SFS_K_SB_PORTS, S_IFDIR | 0555},
    /* who did what: owner-only, like a run's journal */
    {"audit", SFS_K_SB_AUDIT, S_IFREG | 0400},
};

/* A run's cmd, journal, status and wait have no permission bits here: what
 * a run printed and ran may hold secrets, so they get sfs_fs_opts.runs_mode
 * (owner-only unless the mount says -o runs_mode=0444), see kind_mode. */
static const struct row run_rows[] = {
    {"cmd", SFS_K_RUN_CMD, S_IFREG},
    {"journal", SFS_K_RUN_JOURNAL, S_IFREG},
    {"status", SFS_K_RUN_STATUS, S_IFREG},
    {"wait", SFS_K_RUN_WAIT, S_IFREG},
    {"stdin", SFS_K_RUN_STDIN, S_IFREG | 0200},
    {"ctl", SFS_K_RUN_CTL, S_IFREG | 0600},
};

static const struct row provider_rows[] = {
    {"caps", SFS_K_PROVIDER_CAPS, S_IFREG | 0444},
    {"status", SFS_K_PROVIDER_STATUS, S_IFREG | 0444},
};

static mode_t kind_mode(unsigned kind)
{
	switch (kind) {
	case SFS_K_ROOT:
		return S_IFDIR | 0755;
	case SFS_K_MOUNT_CTL:
		return S_IFREG | 0600;
	case SFS_K_PROVIDERS:
	case SFS_K_PROVIDER:
		return S_IFDIR | 0555;
	case SFS_K_SB:
		return S_IFDIR | 0755;
	case SFS_K_RUN:
	case SFS_K_SNAPSHOT:
		return S_IFDIR | 0555;
	case SFS_K_PORT:
	case SFS_K_SNAP_INFO:
		return S_IFREG | 0444;
	case SFS_K_SNAP_DIFF:
		/* it shows the contents of files its reader may not read */
		return S_IFREG | 0400;
	}
	for (size_t i = 0; i < sizeof(sandbox_rows) / sizeof(sandbox_rows[0]); i++)
		if (sandbox_rows[i].kind == kind)
			return sandbox_rows[i].mode;
	for (size_t i = 0; i < sizeof(run_rows) / sizeof(run_rows[0]); i++)
		if (run_rows[i].kind == kind)
			return (run_rows[i].mode & 07777)
				   ? run_rows[i].mode
				   : run_rows[i].mode | (sfs_fs_opts.runs_mode & 0444);
	for (size_t i = 0; i < sizeof(provider_rows) / sizeof(provider_rows[0]); i++)
		if (provider_rows[i].kind == kind)
			return provider_rows[i].mode;
	return 0;
}

static bool under_sandbox(unsigned kind)
{
	return kind >= SFS_K_SB && kind <= SFS_K_PORT;
}

static bool under_run(unsigned kind)
{
	return kind >= SFS_K_RUN && kind <= SFS_K_RUN_CTL;
}

int synth_resolve(fuse_ino_t ino, struct synth *s)
{
	if (!started_at)
		started_at = time(NULL);
	memset(s, 0, sizeof(*s));
	if (ino == FUSE_ROOT_ID) {
		s->kind = SFS_K_ROOT;
		return 0;
	}
	s->kind = SFS_INO_KIND(ino);
	s->serial = SFS_INO_SERIAL(ino);
	s->aux = SFS_INO_AUX(ino);
	if (s->kind == SFS_K_ROOT || s->kind == SFS_K_WS || kind_mode(s->kind) == 0)
		return -ENOENT;
	if (s->kind >= SFS_K_PROVIDER && s->kind <= SFS_K_PROVIDER_STATUS) {
		if (s->aux >= sfs_nproviders)
			return -ENOENT;
		s->provider = sfs_providers[s->aux];
	}
	if (!under_sandbox(s->kind))
		return 0;
	s->sb = tree_get_serial(s->serial);
	if (!s->sb)
		return -ENOENT;
	s->provider = s->sb->provider;
	if (under_run(s->kind)) {
		s->run = tree_run(s->sb, (int)s->aux);
		if (!s->run ||
		    (s->kind == SFS_K_RUN_STDIN && !s->provider->caps[SFS_CAP_WRITABLE_STDIN])) {
			synth_release(s);
			return -ENOENT;
		}
	}
	if (s->kind == SFS_K_SB_JOURNAL && tree_nruns(s->sb) == 0) {
		synth_release(s);
		return -ENOENT;
	}
	if (s->kind == SFS_K_SB_AUDIT && !(s->run = audit_run(s->sb))) {
		synth_release(s); /* -o audit=false */
		return -ENOENT;
	}
	bool of_snapshot =
	    s->kind == SFS_K_SNAPSHOT || s->kind == SFS_K_SNAP_INFO || s->kind == SFS_K_SNAP_DIFF;
	if (of_snapshot || s->kind == SFS_K_PORT) {
		pthread_mutex_lock(&sfs_records_mu);
		bool found = false;
		/* by serial, never by index: a deleted snapshot must not lend
		 * its number to another */
		for (size_t i = 0; of_snapshot && i < s->sb->nsnapshots; i++)
			found |= s->sb->snapshots[i].serial == s->aux;
		for (size_t i = 0; s->kind == SFS_K_PORT && i < s->sb->nports; i++)
			found |= (uint32_t)s->sb->ports[i].port == s->aux;
		pthread_mutex_unlock(&sfs_records_mu);
		if (!found) {
			synth_release(s);
			return -ENOENT;
		}
	}
	return 0;
}

void synth_release(struct synth *s)
{
	if (s->sb)
		tree_put(s->sb);
	s->sb = NULL;
	s->run = NULL;
}

/* ---- listings ---------------------------------------------------------- */

struct list {
	struct synth_entry *v;
	size_t n, cap;
	int err;
};

static void add(struct list *l, const char *name, fuse_ino_t ino, mode_t mode)
{
	if (l->err)
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 16;
		struct synth_entry *grown = realloc(l->v, cap * sizeof(*grown));
		if (!grown) {
			l->err = -ENOMEM;
			return;
		}
		l->v = grown;
		l->cap = cap;
	}
	if (sfs_pathf(l->v[l->n].name, sizeof(l->v[0].name), "%s", name) < 0) {
		l->err = -ENAMETOOLONG; /* never an entry of a cut name */
		return;
	}
	l->v[l->n].ino = ino;
	l->v[l->n].mode = mode;
	l->n++;
}

int synth_list(const struct synth *d, struct synth_entry **out, size_t *n)
{
	struct list l = {0};
	char num[32];
	switch (d->kind) {
	case SFS_K_ROOT: {
		add(&l, "ctl", SFS_INO_MAKE(SFS_K_MOUNT_CTL, 0, 0), kind_mode(SFS_K_MOUNT_CTL));
		add(&l, "providers", SFS_INO_MAKE(SFS_K_PROVIDERS, 0, 0),
		    kind_mode(SFS_K_PROVIDERS));
		pthread_mutex_lock(&sfs_records_mu);
		for (size_t i = 0; i < tree.nsbs; i++)
			if (!tree.sbs[i]->destroying) /* rmdir'd, its runs still ending */
				add(&l, tree.sbs[i]->name,
				    SFS_INO_MAKE(SFS_K_SB, tree.sbs[i]->serial, 0),
				    kind_mode(SFS_K_SB));
		pthread_mutex_unlock(&sfs_records_mu);
		break;
	}
	case SFS_K_PROVIDERS:
		for (size_t i = 0; i < sfs_nproviders; i++)
			add(&l, sfs_providers[i]->name, SFS_INO_MAKE(SFS_K_PROVIDER, 0, i),
			    kind_mode(SFS_K_PROVIDER));
		break;
	case SFS_K_PROVIDER:
		for (size_t i = 0; i < sizeof(provider_rows) / sizeof(provider_rows[0]); i++)
			add(&l, provider_rows[i].name,
			    SFS_INO_MAKE(provider_rows[i].kind, 0, d->aux), provider_rows[i].mode);
		break;
	case SFS_K_SB: {
		int nruns = tree_nruns(d->sb);
		for (size_t i = 0; i < sizeof(sandbox_rows) / sizeof(sandbox_rows[0]); i++) {
			const struct row *r = &sandbox_rows[i];
			if (r->kind == SFS_K_SB_JOURNAL && nruns == 0)
				continue;
			if (r->kind == SFS_K_SB_AUDIT && !audit_run(d->sb))
				continue;
			add(&l, r->name,
			    r->kind == SFS_K_WS ? 0 : SFS_INO_MAKE(r->kind, d->serial, 0), r->mode);
		}
		break;
	}
	case SFS_K_SB_RUNS: {
		int nruns = tree_nruns(d->sb);
		for (int i = 1; i <= nruns; i++) {
			snprintf(num, sizeof(num), "%d", i);
			add(&l, num, SFS_INO_MAKE(SFS_K_RUN, d->serial, i), kind_mode(SFS_K_RUN));
		}
		break;
	}
	case SFS_K_RUN:
		for (size_t i = 0; i < sizeof(run_rows) / sizeof(run_rows[0]); i++) {
			if (run_rows[i].kind == SFS_K_RUN_STDIN &&
			    !d->provider->caps[SFS_CAP_WRITABLE_STDIN])
				continue;
			add(&l, run_rows[i].name, SFS_INO_MAKE(run_rows[i].kind, d->serial, d->aux),
			    kind_mode(run_rows[i].kind));
		}
		break;
	case SFS_K_SB_SNAPSHOTS:
		pthread_mutex_lock(&sfs_records_mu);
		for (size_t i = 0; i < d->sb->nsnapshots; i++)
			add(&l, d->sb->snapshots[i].id,
			    SFS_INO_MAKE(SFS_K_SNAPSHOT, d->serial, d->sb->snapshots[i].serial),
			    kind_mode(SFS_K_SNAPSHOT));
		pthread_mutex_unlock(&sfs_records_mu);
		break;
	case SFS_K_SB_PORTS:
		pthread_mutex_lock(&sfs_records_mu);
		for (size_t i = 0; i < d->sb->nports; i++) {
			snprintf(num, sizeof(num), "%d", d->sb->ports[i].port);
			add(&l, num, SFS_INO_MAKE(SFS_K_PORT, d->serial, d->sb->ports[i].port),
			    kind_mode(SFS_K_PORT));
		}
		pthread_mutex_unlock(&sfs_records_mu);
		break;
	case SFS_K_SNAPSHOT: {
		/* info always; a workspace snapshot's tree/ and diff too, a
		 * layer snapshot's diff (ctl/wsnap.h) */
		bool ws = false, layer = false;
		pthread_mutex_lock(&sfs_records_mu);
		for (size_t i = 0; i < d->sb->nsnapshots; i++) {
			if (d->sb->snapshots[i].serial != d->aux)
				continue;
			ws = d->sb->snapshots[i].commit != NULL;
			layer = d->sb->snapshots[i].layer;
		}
		pthread_mutex_unlock(&sfs_records_mu);
		add(&l, "info", SFS_INO_MAKE(SFS_K_SNAP_INFO, d->serial, d->aux),
		    kind_mode(SFS_K_SNAP_INFO));
		if (ws || layer)
			add(&l, "diff", SFS_INO_MAKE(SFS_K_SNAP_DIFF, d->serial, d->aux),
			    kind_mode(SFS_K_SNAP_DIFF));
		fuse_ino_t tree = ws ? stree_root_ino(d->serial, d->aux) : 0;
		if (ws && !tree)
			l.err = -ENOMEM;
		if (tree)
			add(&l, "tree", tree, S_IFDIR | 0555);
		break;
	}
	default:
		free(l.v);
		return -ENOTDIR;
	}
	if (l.err) {
		free(l.v);
		return l.err;
	}
	*out = l.v;
	*n = l.n;
	return 0;
}

/* ---- text ------------------------------------------------------------- */

/* Flat-keyed values are one line: newlines in messages become spaces. */
static void tf_kv(struct sfs_buf *t, const char *key, const char *val)
{
	sfs_buf_printf(t, "%s ", key);
	for (const char *p = val ? val : ""; *p; p++)
		sfs_buf_addc(t, *p == '\n' ? ' ' : *p);
	sfs_buf_addc(t, '\n');
}

/* sb: a sandbox's caps, which its provider may tell per sandbox (local:
 * networkPolicy only with isolation=bwrap); NULL: the provider's. */
static void caps_text(struct sfs_buf *t, const struct sfs_provider *p, struct sfs_sandbox *sb)
{
	for (int i = 0; i < SFS_CAP_COUNT; i++) {
		bool on = p->caps[i];
		if (sb && p->ops->sandbox_cap)
			on = p->ops->sandbox_cap(sb, (enum sfs_cap)i, on);
		sfs_buf_printf(t, "%s %s\n", sfs_cap_names[i], on ? "true" : "false");
	}
}

static void sandbox_status(struct sfs_buf *t, struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&sfs_records_mu);
	tf_kv(t, "name", sb->name);
	tf_kv(t, "provider", sb->provider->name);
	tf_kv(t, "id", sb->id ? sb->id : "-");
	tf_kv(t, "state", sfs_sb_state_name(sb->state));
	tf_kv(t, "created", sb->created);
	tf_kv(t, "image", sb->image ? sb->image : "-");
	tf_kv(t, "journal", sfs_provider_journal_mode(sb->provider));
	tf_kv(t, "workspace", sb->workspace ? sb->workspace : "-");
	sfs_buf_printf(t, "runs %zu\n", sb->nruns);
	sfs_buf_printf(t, "snapshots %s\n", wsnap_status_kind(sb));
	if (sb->provider->ops->status_lines) {
		char extra[1536] = "";
		sb->provider->ops->status_lines(sb, extra, sizeof(extra));
		sfs_buf_printf(t, "%s", extra);
	}
	if (sb->progress)
		tf_kv(t, "progress", sb->progress);
	if (sb->error)
		tf_kv(t, "error", sb->error);
	tf_kv(t, "redact", sb->redact_journal ? "journal" : "none");
	pthread_mutex_unlock(&sfs_records_mu);
	char base[4096], cow[16];
	if (cowbase_describe(sb, base, sizeof(base), cow, sizeof(cow))) {
		tf_kv(t, "base", base); /* a copy-on-write view of base */
		tf_kv(t, "cow", cow);
	}
	quota_status(t, sfs_state_dir, sb->key, sb->statedir);
	bool remote = tree_workspace_is_remote(sb);
	sfs_buf_printf(t, "followers %d\n", journal_followers());
	/* provider round trips made for workspace/ (tests count them); docker
	 * without host access (docker.fs=archive) makes them too */
	unsigned long calls = rws_calls(sb->serial);
	if (remote || calls)
		sfs_buf_printf(t, "remote_calls %lu\n", calls);
}

int synth_text(const struct synth *s, char **out, size_t *len)
{
	struct sfs_buf t = {0};
	char buf[256];
	switch (s->kind) {
	case SFS_K_PROVIDER_CAPS:
		caps_text(&t, s->provider, NULL);
		break;
	case SFS_K_SB_CAPS:
		caps_text(&t, s->provider, s->sb);
		break;
	case SFS_K_PROVIDER_STATUS: {
		bool ok =
		    !s->provider->ops->configured || s->provider->ops->configured(buf, sizeof(buf));
		sfs_buf_printf(&t, "configured %s\n", ok ? "true" : "false");
		tf_kv(&t, "reason", ok && !s->provider->ops->configured ? "ready" : buf);
		sfs_buf_printf(&t, "journal %s\n", sfs_provider_journal_mode(s->provider));
		break;
	}
	case SFS_K_SB_STATUS:
		sandbox_status(&t, s->sb);
		break;
	case SFS_K_RUN_CMD:
		sfs_buf_printf(&t, "%s\n", s->run->cmd);
		break;
	case SFS_K_RUN_STATUS:
		journal_status_text(s->run, buf, sizeof(buf));
		sfs_buf_printf(&t, "%s\n", buf);
		break;
	case SFS_K_PORT:
		pthread_mutex_lock(&sfs_records_mu);
		for (size_t i = 0; i < s->sb->nports; i++)
			if ((uint32_t)s->sb->ports[i].port == s->aux)
				sfs_buf_printf(&t, "%s\n", s->sb->ports[i].url);
		pthread_mutex_unlock(&sfs_records_mu);
		break;
	case SFS_K_SNAP_INFO: {
		int r = wsnap_info_text(s->sb, s->aux, &t);
		if (r) {
			sfs_buf_free(&t);
			return r;
		}
		break;
	}
	case SFS_K_SNAP_DIFF: {
		/* the workspace's own bytes, as workspace/ shows them: not
		 * redacted (a changed byte would make it a patch that does
		 * not apply) */
		int r = wsnap_diff_text(s->sb, s->aux, &t);
		if (r) {
			sfs_buf_free(&t);
			return r;
		}
		*len = t.len;
		*out = t.buf ? sfs_buf_take(&t) : strdup("");
		return *out ? 0 : -ENOMEM;
	}
	default:
		return -EINVAL;
	}
	if (!t.buf) {
		t.buf = strdup("");
		if (!t.buf)
			return -ENOMEM;
	}
	/* never cut short: a marker may be longer than what it hides */
	char *red = sfs_redact_dup(t.buf);
	free(t.buf);
	if (!red)
		return -ENOMEM;
	if (s->kind == SFS_K_SB_STATUS) {
		/* "secrets NAME..." after the key pass, which would hide the
		 * names as the value of a key named "secrets" */
		pthread_mutex_lock(&sfs_records_mu);
		char *names = secrets_names_locked(s->sb);
		pthread_mutex_unlock(&sfs_records_mu);
		char *line = NULL, *shown = NULL, *all = NULL;
		if (names && asprintf(&line, "secrets %s\n", names) < 0)
			line = NULL;
		shown = line ? sfs_redact_values_dup(line) : NULL;
		if (shown && asprintf(&all, "%s%s", red, shown) < 0)
			all = NULL;
		free(names);
		free(line);
		free(shown);
		free(red);
		if (!all)
			return -ENOMEM;
		red = all;
	}
	*out = red;
	*len = strlen(red);
	return 0;
}

int synth_stat(const struct synth *s, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = kind_mode(s->kind);
	st->st_nlink = S_ISDIR(st->st_mode) ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_blksize = 4096;
	time_t t = started_at;
	if (s->sb) {
		struct tm tm = {0};
		if (strptime(s->sb->created, "%Y-%m-%dT%H:%M:%SZ", &tm))
			t = timegm(&tm);
	}
	if (s->run && s->kind != SFS_K_SB_AUDIT)
		t = s->run->started;
	if (s->kind == SFS_K_SNAPSHOT || s->kind == SFS_K_SNAP_INFO || s->kind == SFS_K_SNAP_DIFF) {
		/* a snapshot directory's times are when it was taken */
		pthread_mutex_lock(&sfs_records_mu);
		for (size_t i = 0; i < s->sb->nsnapshots; i++)
			if (s->sb->snapshots[i].serial == s->aux)
				t = (time_t)s->sb->snapshots[i].created;
		pthread_mutex_unlock(&sfs_records_mu);
	}
	st->st_atime = st->st_mtime = st->st_ctime = t;
	switch (s->kind) {
	case SFS_K_RUN_JOURNAL:
	case SFS_K_SB_AUDIT:
		st->st_size = journal_size(s->run);
		st->st_mtime = time(NULL);
		break;
	case SFS_K_SB_JOURNAL: {
		char target[64];
		st->st_size =
		    snprintf(target, sizeof(target), "runs/%d/journal", tree_nruns(s->sb));
		break;
	}
	case SFS_K_PROVIDER_CAPS:
	case SFS_K_PROVIDER_STATUS:
	case SFS_K_SB_CAPS:
	case SFS_K_SB_STATUS:
	case SFS_K_RUN_CMD:
	case SFS_K_RUN_STATUS:
	case SFS_K_SNAP_INFO:
	case SFS_K_PORT: {
		char *text;
		size_t len;
		if (synth_text(s, &text, &len) == 0) {
			st->st_size = (off_t)len;
			free(text);
		}
		break;
	}
	}
	st->st_blocks = (st->st_size + 511) / 512;
	return 0;
}
