#include "tree.h"
#include "audit.h"
#include "ctl.h"
#include "forgotten.h"
#include "leftovers.h"
#include "registry.h"
#include "runs.h"
#include "sandbox.h"
#include "secrets.h"
#include "source.h"
#include "tree_internal.h"
#include "cowbase.h"
#include "quota.h"
#include "wsnap.h"

#include "../fs/snapshots/snapshots.h"

#include "../journal/journal.h"
#include "../providers/later.h"
#include "../providers/options.h"
#include "../providers/util.h"

#include <errno.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct sfs_tree tree;

void (*tree_run_started_hook)(struct sfs_sandbox *sb, struct sfs_run *run);
void (*tree_sandbox_gone_hook)(struct sfs_sandbox *sb);
void (*tree_sandbox_reset_hook)(struct sfs_sandbox *sb);

/* ---- lookups ---------------------------------------------------------- */

static struct sfs_sandbox *find_locked(const char *name)
{
	for (size_t i = 0; i < tree.nsbs; i++)
		if (strcmp(tree.sbs[i]->name, name) == 0)
			return tree.sbs[i];
	return NULL;
}

struct sfs_sandbox *tree_get(const char *name)
{
	pthread_mutex_lock(&sfs_records_mu);
	struct sfs_sandbox *sb = find_locked(name);
	if (sb && sb->destroying)
		sb = NULL; /* on its way out (tree_rmdir): already gone to fs/ */
	if (sb)
		sb->refs++;
	pthread_mutex_unlock(&sfs_records_mu);
	return sb;
}

struct sfs_sandbox *tree_get_serial(uint32_t serial)
{
	struct sfs_sandbox *sb = NULL;
	pthread_mutex_lock(&sfs_records_mu);
	for (size_t i = 0; i < tree.nsbs; i++) {
		if (tree.sbs[i]->serial == serial && !tree.sbs[i]->destroying) {
			sb = tree.sbs[i];
			sb->refs++;
			break;
		}
	}
	pthread_mutex_unlock(&sfs_records_mu);
	return sb;
}

void tree_put(struct sfs_sandbox *sb)
{
	if (!sb)
		return;
	pthread_mutex_lock(&sfs_records_mu);
	sb->refs--;
	pthread_mutex_unlock(&sfs_records_mu);
}

size_t tree_list(char (*names)[64], uint32_t *serials, size_t max)
{
	pthread_mutex_lock(&sfs_records_mu);
	size_t n = 0;
	for (size_t i = 0; i < tree.nsbs && n < max; i++) {
		if (tree.sbs[i]->destroying)
			continue;
		memcpy(names[n], tree.sbs[i]->name, 64);
		serials[n++] = tree.sbs[i]->serial;
	}
	pthread_mutex_unlock(&sfs_records_mu);
	return n;
}

struct sfs_run *tree_run(struct sfs_sandbox *sb, int n)
{
	struct sfs_run *run = NULL;
	pthread_mutex_lock(&sfs_records_mu);
	if (n >= 1 && (size_t)n <= sb->nruns)
		run = sb->runs[n - 1];
	pthread_mutex_unlock(&sfs_records_mu);
	return run;
}

int tree_nruns(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&sfs_records_mu);
	int n = (int)sb->nruns;
	pthread_mutex_unlock(&sfs_records_mu);
	return n;
}

/* ---- registry ---------------------------------------------------------- */

/*
 * Registry saves.  The JSON is copied out of the records under
 * sfs_records_mu (short: no text is made, no file touched); the text is
 * made, redacted, written, fsync'd and renamed holding only tree_save_mu, so status,
 * lookups and every other sandbox never wait for the disk.  tree_save_mu comes
 * after op_mutex and the fs/ and journal/ locks and before sfs_records_mu
 * (provider.h's lock order): saves run one at a time, each writing a text
 * taken after the previous one's, so an older snapshot never overwrites a
 * newer one.  A change that must be undone when its save fails (create,
 * rename, env, drop) is made and undone holding tree_save_mu, so no other save
 * can write it meanwhile.
 *
 * Saves asked for while one is being written are folded into the next:
 * save_asked counts the requests (each made after its change), save_done is
 * the count a written text covered; a request it covers returns at once.
 */
pthread_mutex_t tree_save_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_ulong save_asked;
static unsigned long save_done; /* under tree_save_mu */

/* The registry without `skip` (NULL: all of it); callers hold tree_save_mu.
 * Only a durable save covers the requests made before it. */
static int save_held(const struct sfs_sandbox *skip, bool durable, struct sfs_err *err)
{
	unsigned long covers = atomic_load(&save_asked);
	json_t *root = NULL;
	int r = 0;
	pthread_mutex_lock(&sfs_records_mu);
	struct sfs_sandbox **rest = calloc(tree.nsbs ? tree.nsbs : 1, sizeof(*rest));
	size_t n = 0;
	for (size_t i = 0; rest && i < tree.nsbs; i++)
		if (tree.sbs[i] != skip)
			rest[n++] = tree.sbs[i];
	r = rest ? registry_dump(rest, n, tree.kept, &root, err)
		 : sfs_errf(err, -ENOMEM, "out of memory");
	pthread_mutex_unlock(&sfs_records_mu);
	free(rest);
	/* the text is made, redacted and written outside the records lock */
	if (!r)
		r = registry_write(tree.statedir, root, durable, err);
	json_decref(root);
	if (!r && durable && covers > save_done)
		save_done = covers;
	return r;
}

int tree_save_held(const struct sfs_sandbox *skip, struct sfs_err *err)
{
	return save_held(skip, true, err);
}

/* A save that a kill -9 of the daemon keeps but a power cut may not (no
 * fsync): for the records of a sandbox being made, which the save that
 * ends its making writes durably. */
static int tree_save_quick(struct sfs_err *err)
{
	pthread_mutex_lock(&tree_save_mu);
	int r = save_held(NULL, false, err);
	pthread_mutex_unlock(&tree_save_mu);
	return r;
}

int tree_save(struct sfs_err *err)
{
	unsigned long mine = atomic_fetch_add(&save_asked, 1) + 1;
	pthread_mutex_lock(&tree_save_mu);
	int r = save_done >= mine ? 0 : tree_save_held(NULL, err);
	pthread_mutex_unlock(&tree_save_mu);
	return r;
}

int tree_swap_env(struct sfs_sandbox *sb, struct sfs_kvlist *env, struct sfs_err *err)
{
	pthread_mutex_lock(&tree_save_mu);
	pthread_mutex_lock(&sfs_records_mu);
	struct sfs_kvlist old = sb->env;
	sb->env = *env;
	*env = old;
	pthread_mutex_unlock(&sfs_records_mu);
	int r = tree_save_held(NULL, err);
	if (r) {
		pthread_mutex_lock(&sfs_records_mu);
		old = sb->env;
		sb->env = *env;
		*env = old;
		pthread_mutex_unlock(&sfs_records_mu);
	}
	pthread_mutex_unlock(&tree_save_mu);
	return r;
}

static int add_locked(struct sfs_sandbox *sb)
{
	struct sfs_sandbox **grown = realloc(tree.sbs, (tree.nsbs + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	tree.sbs = grown;
	sb->serial = ++tree.next_serial;
	tree.sbs[tree.nsbs++] = sb;
	return 0;
}

void tree_remove_locked(struct sfs_sandbox *sb, bool bury)
{
	for (size_t i = 0; i < tree.nsbs; i++) {
		if (tree.sbs[i] == sb) {
			memmove(&tree.sbs[i], &tree.sbs[i + 1],
				(tree.nsbs - i - 1) * sizeof(tree.sbs[0]));
			tree.nsbs--;
			break;
		}
	}
	if (!bury)
		return;
	struct sfs_sandbox **grown =
	    realloc(tree.graveyard, (tree.ngraveyard + 1) * sizeof(*grown));
	if (grown) {
		tree.graveyard = grown;
		tree.graveyard[tree.ngraveyard++] = sb;
	}
	/* on ENOMEM it leaks: never freed while something may point at it */
}

static bool known(const struct sfs_provider *p, const char *key)
{
	bool found = false;
	pthread_mutex_lock(&sfs_records_mu);
	for (size_t i = 0; i < tree.nsbs && !found; i++)
		found = tree.sbs[i]->provider == p && strcmp(tree.sbs[i]->key, key) == 0;
	pthread_mutex_unlock(&sfs_records_mu);
	return found;
}

/* sfs_sb_publish gave sb an id: one that new or fork is making is saved
 * with it at once, for the provider's create may go on for long (a cloud
 * VM boots) and what a crash meanwhile leaves must be destroyable. */
static void id_published(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&sfs_records_mu);
	bool save = sb->state == SFS_SB_CREATING && sb->saved_while_creating;
	pthread_mutex_unlock(&sfs_records_mu);
	struct sfs_err err = {0};
	if (save && tree_save_quick(&err) < 0)
		sfs_log(SFS_LOG_WARN,
			"%s: registry: %s (until the next save, a crash loses its id)", sb->name,
			err.msg);
}

int tree_init(const char *statedir, const struct sfs_provider *default_provider,
	      struct sfs_err *err)
{
	tree.statedir = strdup(statedir);
	sfs_state_dir = tree.statedir;
	sfs_set_sandbox_lookup(known);
	sfs_set_id_published_hook(id_published);
	tree.default_provider = default_provider;
	if (!tree.statedir)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char path[4200];
	/* STATE/sandboxes/KEY/runs/N/.status.tmp and the like fit every
	 * path buffer, and are refused with ENAMETOOLONG if they ever do not */
	if (strlen(statedir) > SFS_STATEDIR_MAX ||
	    sfs_pathf(path, sizeof(path), "%s/sandboxes", statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG,
				"state dir %.64s...: path too long (%zu bytes, at most %d)",
				statedir, strlen(statedir), SFS_STATEDIR_MAX);
	int r = sfs_mkdir_p(path, 0700);
	if (r)
		return sfs_errf(err, r, "state dir %s: %s", path, strerror(-r));
	uint64_t quota;
	const char *qtext = sfs_opt_get("quota");
	if (qtext && (r = quota_parse(qtext, &quota, err)))
		return r;
	/* the state dir's lock is ours: what a killed daemon left half-written
	 * is nobody's */
	leftovers_sweep(statedir);
	if ((r = snap_store_init(statedir, err)))
		return r;
	cowbase_init(); /* base= sandboxes' snapshots/base/diff */
	struct sfs_sandbox **sbs;
	size_t nsbs;
	r = registry_load(statedir, &sbs, &nsbs, &tree.kept, err);
	if (r)
		return r;
	destroy_reserve_space();
	bool resave = false;
	/* destroyed ones: their state dirs go once the registry no longer
	 * lists them (a crash in between finds the marker again) */
	struct sfs_sandbox **gone = calloc(nsbs ? nsbs : 1, sizeof(*gone));
	size_t ngone = 0;
	if (!gone) {
		free(sbs);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < nsbs; i++) {
		struct sfs_sandbox *sb = sbs[i];
		bool interrupted = sfs_sb_get_state(sb) == SFS_SB_CREATING;
		if (interrupted && !sb->id) {
			/* killed before the provider's create returned: its dir
			 * goes, and what the provider made is not known here */
			sfs_log(SFS_LOG_ERR,
				"%s: dropped: a daemon stopped while %s was creating it, before "
				"it answered; what %s made for it is not known here",
				sb->name, sb->provider->name, sb->provider->name);
			gone[ngone++] = sb;
			resave = true;
			continue;
		}
		/* a reboot unmounted its quota's file system: before the dir is read */
		struct sfs_err qerr = {0};
		int qr = quota_attach(tree.statedir, sb->key, sb->statedir, &qerr);
		if (qr)
			sfs_log(SFS_LOG_ERR, "%s: %s", sb->name, qerr.msg);
		char marker[4300], decided[4300];
		destroy_marker_path(sb, marker, sizeof(marker));
		destroy_decided_path(sb, decided, sizeof(decided));
		bool runs_loaded = false;
		if (access(marker, F_OK) != 0 && access(decided, F_OK) == 0) {
			runs_load(sb); /* the provider ends them */
			runs_loaded = true;
		}
		if (access(marker, F_OK) == 0 || (runs_loaded && destroy_finish_decided(sb) == 0)) {
			/* destroyed, but the registry write did not happen: finish */
			sfs_log(SFS_LOG_INFO, "%s: finishing its destruction", sb->name);
			gone[ngone++] = sb;
			resave = true;
			continue;
		}
		pthread_mutex_lock(&sfs_records_mu);
		bool dup = find_locked(sb->name) != NULL;
		int ar = dup ? -EEXIST : add_locked(sb);
		pthread_mutex_unlock(&sfs_records_mu);
		if (ar) {
			journal_detach_sandbox(sb); /* runs_load may have attached its runs */
			sandbox_free(sb);
			continue;
		}
		if (interrupted) {
			tree_set_error(sb, "interrupted: a daemon stopped while it was being "
					   "created; rmdir destroys what was made");
			sfs_sb_set_state(sb, SFS_SB_ERROR);
			resave = true;
		}
		if (qr) {
			tree_set_error(sb, qerr.msg);
			sfs_sb_set_state(sb, SFS_SB_ERROR);
		}
		secrets_load(sb); /* values are never saved: read again */
		enum sfs_sb_state st = sfs_sb_get_state(sb);
		if (st == SFS_SB_RUNNING || st == SFS_SB_STOPPED) {
			struct sfs_err rerr = {0};
			pthread_mutex_lock(&sb->op_mutex);
			size_t nsnaps = sb->nsnapshots;
			int rr = sb->provider->ops->resume(sb, &rerr);
			/* snapshots the provider found unrecorded are saved at once */
			resave |= sb->nsnapshots != nsnaps;
			if (rr < 0) {
				sfs_log(SFS_LOG_ERR, "%s: resume: %s", sb->name, rerr.msg);
				tree_set_error(sb, rerr.msg);
				sfs_sb_set_state(sb, SFS_SB_ERROR);
			}
			pthread_mutex_unlock(&sb->op_mutex);
		}
		if (!runs_loaded)
			runs_load(sb);
		if (audit_start(sb))
			sfs_log(SFS_LOG_WARN, "%s: audit: out of memory: no audit", sb->name);
	}
	free(sbs);
	struct sfs_err serr = {0};
	int sr = resave ? tree_save(&serr) : 0;
	if (sr < 0)
		sfs_log(SFS_LOG_ERR, "registry: %s", serr.msg);
	for (size_t i = 0; i < ngone; i++) {
		if (!sr) {
			audit_close(gone[i]);
			tree_remove_statedir(gone[i]);
		}
		/* destroy_finish_decided loaded its runs, which the journal engine lists */
		journal_detach_sandbox(gone[i]);
		sandbox_free(gone[i]);
	}
	free(gone);
	return 0;
}

void tree_shutdown(void)
{
	for (size_t i = 0; i < tree.nsbs; i++)
		sandbox_free(tree.sbs[i]);
	for (size_t i = 0; i < tree.ngraveyard; i++)
		sandbox_free(tree.graveyard[i]);
	free(tree.sbs);
	free(tree.graveyard);
	json_decref(tree.kept);
	tree.kept = NULL;
	sfs_set_sandbox_lookup(NULL);
	sfs_set_id_published_hook(NULL);
	sfs_state_dir = NULL;
	free(tree.statedir);
	tree.sbs = tree.graveyard = NULL;
	tree.nsbs = tree.ngraveyard = 0;
}

/* ---- lifecycle -------------------------------------------------------- */

static bool key_listed_locked(const char *key)
{
	for (size_t i = 0; i < tree.nsbs; i++)
		if (strcmp(tree.sbs[i]->key, key) == 0)
			return true;
	return false;
}

static bool key_listed(const char *key)
{
	pthread_mutex_lock(&sfs_records_mu);
	bool listed = key_listed_locked(key);
	pthread_mutex_unlock(&sfs_records_mu);
	return listed;
}

/* Takes a reserved record out of the tree, and out of the registry when it
 * was saved there.  A failed save leaves it listed as creating: the next
 * start finds it (tree_init). */
static void unlist_reserved(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&sfs_records_mu);
	tree_remove_locked(sb, true);
	sb->refs--;
	pthread_mutex_unlock(&sfs_records_mu);
	struct sfs_err serr = {0};
	if (sb->saved_while_creating && tree_save_quick(&serr) < 0)
		sfs_log(SFS_LOG_ERR,
			"registry: %s (if an earlier save listed \"%s\", the next start finds "
			"it as creating)",
			serr.msg, sb->name);
}

/* Reserves name with a new CREATING record; the caller fills it in.  Its
 * key is want (a forgotten sandbox's, resume) unless NULL or taken by
 * another record meanwhile: then a new random one.  A saved record (new,
 * fork) is in the registry before its state dir exists: a daemon killed
 * while it is made leaves no dir that no record names (tree_init). */
static int reserve(const char *name, const struct sfs_provider *p, const char *want, bool saved,
		   uint64_t quota, struct sfs_sandbox **out, struct sfs_err *err)
{
	int r = ctl_check_sandbox_name(name, err);
	if (r)
		return r;
	char key[40];
again:
	if (want) {
		if (sfs_pathf(key, sizeof(key), "%s", want) < 0)
			return sfs_errf(err, -ENAMETOOLONG, "key %s: too long", want);
	} else if ((r = sfs_random_hex(key, 16)))
		return sfs_errf(err, r, "random: %s", strerror(-r));
	struct sfs_sandbox *sb = sandbox_new(tree.statedir, name, key, p);
	if (!sb)
		return sfs_errf(err, -ENOMEM, "out of memory");
	sb->state = SFS_SB_CREATING;
	sb->saved_while_creating = saved;
	sfs_now_rfc3339(sb->created, sizeof(sb->created));
	pthread_mutex_lock(&sfs_records_mu);
	if (want && key_listed_locked(want)) {
		pthread_mutex_unlock(&sfs_records_mu);
		sandbox_free(sb);
		want = NULL;
		goto again;
	}
	struct sfs_sandbox *old = find_locked(name);
	if (old) {
		bool going = old->destroying;
		pthread_mutex_unlock(&sfs_records_mu);
		sandbox_free(sb);
		if (going)
			return sfs_errf(err, -EBUSY, "sandbox \"%s\" is still being destroyed",
					name);
		return sfs_errf(err, -EEXIST, "sandbox \"%s\" already exists", name);
	}
	r = add_locked(sb);
	if (!r)
		sb->refs++;
	pthread_mutex_unlock(&sfs_records_mu);
	if (r) {
		sandbox_free(sb);
		return sfs_errf(err, r, "out of memory");
	}
	if (saved && (r = tree_save_quick(err)) < 0) {
		unlist_reserved(sb);
		return r;
	}
	r = sfs_mkdir_p(sb->statedir, 0700);
	if (r) {
		unlist_reserved(sb);
		return sfs_errf(err, r, "state dir %s: %s", sb->statedir, strerror(-r));
	}
	/* before anything is written in it: all of it is under the quota (a
	 * forgotten sandbox's dir that a resume takes has its own again) */
	r = quota ? quota_make(tree.statedir, sb->key, sb->statedir, quota, err)
		  : quota_attach(tree.statedir, sb->key, sb->statedir, err);
	if (!r && audit_start(sb))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (r) {
		if (!want) {
			quota_release(tree.statedir, sb->key, sb->statedir);
			sfs_rm_rf(sb->statedir);
		}
		unlist_reserved(sb);
		return r;
	}
	*out = sb;
	return 0;
}

int tree_remove_statedir(struct sfs_sandbox *sb)
{
	quota_release(tree.statedir, sb->key, sb->statedir);
	return sfs_rm_rf(sb->statedir);
}

/* Undoes reserve() after a failed create: nothing is left behind (but a
 * forgotten sandbox's state dir that a resume took: keep_dir).  The dir
 * goes first: a crash before the registry lets go of the record leaves a
 * record without a dir (tree_init handles it), never a dir without one. */
static void unreserve_keeping(struct sfs_sandbox *sb, bool keep_dir)
{
	if (!keep_dir) {
		audit_close(sb);
		tree_remove_statedir(sb);
	}
	unlist_reserved(sb);
	if (tree_sandbox_gone_hook)
		tree_sandbox_gone_hook(sb);
}

static void unreserve(struct sfs_sandbox *sb)
{
	unreserve_keeping(sb, false);
}

static int commit_created(struct sfs_sandbox *sb, struct sfs_err *err)
{
	pthread_mutex_lock(&tree_save_mu);
	pthread_mutex_lock(&sfs_records_mu);
	sb->state = SFS_SB_RUNNING;
	pthread_mutex_unlock(&sfs_records_mu);
	int r = tree_save_held(NULL, err);
	if (r) {
		pthread_mutex_lock(&sfs_records_mu);
		sb->state = SFS_SB_CREATING;
		pthread_mutex_unlock(&sfs_records_mu);
	}
	pthread_mutex_unlock(&tree_save_mu);
	return r;
}

static const struct sfs_provider *pick_provider(const struct sfs_kvlist *opts, struct sfs_err *err)
{
	const char *pname = opts ? sfs_kv_get(opts, "provider") : NULL;
	if (!pname)
		return tree.default_provider;
	const struct sfs_provider *p = sfs_provider_find(pname);
	if (!p)
		sfs_errf(err, -EINVAL, "unknown provider \"%s\"", pname);
	return p;
}

int tree_create(const char *name, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	struct sfs_kvlist none = {0};
	if (!opts)
		opts = &none;
	const struct sfs_provider *p = pick_provider(opts, err);
	if (!p)
		return err ? err->code : -EINVAL;
	char why[256];
	if (p->ops->configured && !p->ops->configured(why, sizeof(why)))
		return sfs_errf(err, -EIO, "provider %s is not usable: %s", p->name, why);
	int r = source_check(p, opts, err);
	if (r)
		return r;
	for (size_t i = 0; i < opts->n; i++) {
		const char *k = opts->v[i].key;
		if (strncmp(k, "env.", 4) == 0 || strncmp(k, "secret.", 7) == 0) {
			int r = sfs_provider_require(p, SFS_CAP_ENV, err);
			if (r)
				return r;
		}
	}
	uint64_t quota = 0;
	const char *qtext = sfs_kv_get(opts, "quota");
	if (!qtext)
		qtext = sfs_opt_get("quota");
	if (qtext && (r = quota_parse(qtext, &quota, err)))
		return r;
	const char *red = sfs_kv_get(opts, "redact");
	if (red && strcmp(red, "journal") != 0 && strcmp(red, "none") != 0)
		return sfs_errf(err, -EINVAL, "redact=%s: expected journal or none", red);
	struct sfs_sandbox *sb;
	r = reserve(name, p, NULL, true, quota, &sb, err);
	if (r)
		return r;
	/* the values are read now: a missing one fails `new` before the
	 * provider makes anything */
	r = secrets_from_opts(sb, opts, err);
	if (r) {
		unreserve(sb);
		return r;
	}
	pthread_mutex_lock(&sfs_records_mu); /* status reads it meanwhile */
	sb->redact_journal = red && !strcmp(red, "journal");
	pthread_mutex_unlock(&sfs_records_mu);
	struct sfs_kvlist popts = {0}; /* the provider's options: source= etc. are ours */
	for (size_t i = 0; i < opts->n && !r; i++)
		if (strncmp(opts->v[i].key, "env.", 4) == 0)
			r = sfs_kv_set(&sb->env, opts->v[i].key + 4, opts->v[i].val);
		else if (!source_key(opts->v[i].key) && strncmp(opts->v[i].key, "secret.", 7) &&
			 strcmp(opts->v[i].key, "redact") && strcmp(opts->v[i].key, "quota"))
			r = sfs_kv_add(&popts, opts->v[i].key, opts->v[i].val);
	if (r) {
		sfs_kv_free(&popts);
		unreserve(sb);
		return sfs_errf(err, r, "out of memory");
	}
	pthread_mutex_lock(&sb->op_mutex);
	r = p->ops->create(sb, &popts, err);
	sfs_kv_free(&popts);
	if (!r) {
		r = source_populate(sb, opts, err);
		/* "what changed since it started": snapshots/base (SPEC §10) */
		if (!r && sfs_kv_get(opts, "source") && wsnap_on_host(sb))
			r = wsnap_take(sb, "base", NULL, err);
		/* a copy-on-write base knows its changes: nothing to hash */
		else if (!r && sfs_kv_get(opts, "base") && wsnap_changed_paths_hook)
			r = wsnap_add_layer(sb, "base", err);
		if (r)
			p->ops->destroy(sb, NULL);
	}
	pthread_mutex_unlock(&sb->op_mutex);
	if (r) {
		wsnap_forget(sb, NULL);
		unreserve(sb);
		return r;
	}
	/* setup runs are ordinary runs of the still-creating sandbox; a failed
	 * one leaves it visible in state error with its journal (SPEC §9) */
	r = source_setup(sb, opts, err);
	pthread_mutex_lock(&sb->op_mutex);
	if (r) {
		tree_set_error(sb, err ? err->msg : "setup failed");
		sfs_sb_set_progress(sb, NULL);
		sfs_sb_set_state(sb, SFS_SB_ERROR);
		tree_save(NULL);
	} else {
		/* a prepared tree to fork and restore from (SPEC §9); a remote
		 * workspace goes through its host mirror (fetched whole once) */
		if (sfs_kv_get(opts, "setup") && wsnap_possible(sb))
			r = wsnap_take(sb, "setup", NULL, err);
		if (!r)
			r = commit_created(sb, err);
		if (r) {
			wsnap_forget(sb, NULL);
			p->ops->destroy(sb, NULL);
		}
	}
	pthread_mutex_unlock(&sb->op_mutex);
	if (r && sfs_sb_get_state(sb) != SFS_SB_ERROR) {
		unreserve(sb);
		return r;
	}
	tree_put(sb);
	if (r)
		return r;
	sfs_log(SFS_LOG_INFO, "created sandbox %s on %s (%s)", name, p->name, sb->id);
	return 0;
}

int tree_resume(const char *name, const char *pname, const char *id, struct sfs_err *err)
{
	const struct sfs_provider *p = sfs_provider_find(pname);
	if (!p)
		return sfs_errf(err, -EINVAL, "unknown provider \"%s\"", pname);
	/* the same provider and id as a forgotten sandbox: its state dir
	 * again, so its runs come back and new ones number on (forgotten.h) */
	char key[40];
	bool found = forgotten_find(tree.statedir, p->name, id, key_listed, key);
	struct sfs_sandbox *sb;
	int r = reserve(name, p, found ? key : NULL, false, 0, &sb, err);
	if (r)
		return r;
	bool again = found && strcmp(sb->key, key) == 0;
	r = sandbox_set_str(&sb->id, id);
	if (r) {
		unreserve_keeping(sb, again);
		return sfs_errf(err, r, "out of memory");
	}
	pthread_mutex_lock(&sb->op_mutex);
	r = p->ops->resume(sb, err);
	if (!r && again) {
		forgotten_clear_destroy_markers(sb);
		runs_load(sb); /* under op_mutex: no exec takes a number first */
	}
	if (!r)
		r = commit_created(sb, err);
	if (!r && again)
		forgotten_unmark(sb);
	pthread_mutex_unlock(&sb->op_mutex);
	if (r) {
		if (again)
			journal_detach_sandbox(sb);
		unreserve_keeping(sb, again);
		return r;
	}
	if (again)
		sfs_log(SFS_LOG_INFO, "%s: resumed with the runs of its forgotten state (%s)", name,
			key);
	tree_put(sb);
	return 0;
}

struct sfs_sandbox *tree_get_or_err(const char *name, struct sfs_err *err)
{
	struct sfs_sandbox *sb = tree_get(name);
	if (!sb)
		sfs_errf(err, -ENOENT, "no sandbox named \"%s\"", name);
	return sb;
}

int tree_rename(const char *from, const char *to, struct sfs_err *err)
{
	int r = ctl_check_sandbox_name(to, err);
	if (r)
		return r;
	struct sfs_sandbox *sb = tree_get_or_err(from, err);
	if (!sb)
		return -ENOENT;
	if (sfs_sb_get_state(sb) == SFS_SB_CREATING) {
		tree_put(sb);
		return sfs_errf(err, -EBUSY, "sandbox \"%s\" is still being created", from);
	}
	/* the name is a field readers see: it changes only under the op lock
	 * (provider.h's rule), so an op that reads it bare never sees it torn */
	pthread_mutex_lock(&sb->op_mutex);
	pthread_mutex_lock(&tree_save_mu);
	pthread_mutex_lock(&sfs_records_mu);
	if (strcmp(sb->name, from) != 0 || find_locked(from) != sb)
		r = sfs_errf(err, -ENOENT, "no sandbox named \"%s\"", from);
	else if (strcmp(from, to) == 0)
		r = 0;
	else if (find_locked(to))
		r = sfs_errf(err, -EEXIST, "sandbox \"%s\" already exists", to);
	else {
		char old[64];
		memcpy(old, sb->name, sizeof(old));
		memcpy(sb->name, to, strlen(to) + 1); /* checked by the caller: < 64 */
		pthread_mutex_unlock(&sfs_records_mu);
		r = tree_save_held(NULL, err);
		pthread_mutex_lock(&sfs_records_mu);
		if (r)
			memcpy(sb->name, old, sizeof(old));
	}
	pthread_mutex_unlock(&sfs_records_mu);
	pthread_mutex_unlock(&tree_save_mu);
	pthread_mutex_unlock(&sb->op_mutex);
	tree_put(sb);
	return r;
}

int tree_fork(struct sfs_sandbox *src, const char *newname, const char *from, struct sfs_err *err)
{
	int r = sfs_provider_require(src->provider, SFS_CAP_FORK, err);
	if (r)
		return r;
	if (!src->provider->ops->fork)
		return sfs_errf(err, -EOPNOTSUPP, "provider %s cannot fork", src->provider->name);
	struct sfs_sandbox *dst;
	/* a fork of a sandbox with a quota has the same one */
	r = reserve(newname, src->provider, NULL, true, quota_bytes(tree.statedir, src->key), &dst,
		    err);
	if (r)
		return r;
	pthread_mutex_lock(&sfs_records_mu);
	r = sfs_kv_copy(&dst->env, &src->env);
	if (!r)
		r = sfs_kv_copy(&dst->secrets, &src->secrets);
	if (!r)
		r = sfs_kv_copy(&dst->secret_vals, &src->secret_vals);
	dst->redact_journal = src->redact_journal;
	pthread_mutex_unlock(&sfs_records_mu);
	if (r) {
		unreserve(dst);
		return sfs_errf(err, r, "out of memory");
	}
	/* from= a workspace snapshot: a fork of the live sandbox whose
	 * workspace is then restored to it (only differences are written) */
	char *commit = from ? wsnap_commit_of(src, from) : NULL;
	pthread_mutex_lock(&src->op_mutex);
	r = src->provider->ops->fork(src, dst, commit ? NULL : from, err);
	pthread_mutex_unlock(&src->op_mutex);
	if (!r && commit) {
		pthread_mutex_lock(&dst->op_mutex);
		r = wsnap_restore_into(dst, from, commit, NULL, err);
		pthread_mutex_unlock(&dst->op_mutex);
		if (r)
			dst->provider->ops->destroy(dst, NULL);
	}
	free(commit);
	if (!r) {
		r = commit_created(dst, err);
		if (r)
			dst->provider->ops->destroy(dst, NULL);
	}
	if (r) {
		unreserve(dst);
		return r;
	}
	tree_put(dst);
	return 0;
}

/* RUNDIR/cmd written (temp + rename) and left open in *fd, not yet
 * flushed: the caller has it flushed once the run has started. */
static int write_cmd(const char *dir, const char *cmd, int *fd, struct sfs_err *err)
{
	char path[4300], tmp[4320];
	if (sfs_pathf(path, sizeof(path), "%s/cmd", dir) < 0 ||
	    sfs_pathf(tmp, sizeof(tmp), "%s/.cmd.tmp", dir) < 0) {
		*fd = -1;
		return sfs_errf(err, -ENAMETOOLONG, "%s/cmd: path too long", dir);
	}
	*fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (*fd < 0)
		return sfs_errf(err, -errno, "%s: %s", tmp, strerror(errno));
	size_t len = strlen(cmd);
	ssize_t w = len ? write(*fd, cmd, len) : 0;
	if (w != (ssize_t)len || rename(tmp, path) < 0) {
		int e = w < 0 || w == (ssize_t)len ? errno : EIO;
		close(*fd);
		*fd = -1;
		unlink(tmp);
		return sfs_errf(err, -e, "%s: %s", path, strerror(e));
	}
	return 0;
}

/* A moment after an exec: the next run's directory, made ahead (ctl/runs.h,
 * providers/later.c).  sb stays valid (records live as long as the
 * daemon).  Not at all while another op holds the sandbox (a destroy's
 * grace, a snapshot, a remote call): the one later thread would wait
 * there, and every other sandbox's flushes behind it; the next exec makes
 * its directory itself and asks again.  Still creating is fine: only a
 * setup= run asks then, so the provider is up, and the next setup= run
 * or the first exec after them takes it. */
static void make_spare_later(void *arg)
{
	struct sfs_sandbox *sb = arg;
	struct sfs_err err = {0};
	if (pthread_mutex_trylock(&sb->op_mutex) != 0)
		return;
	enum sfs_sb_state st = sfs_sb_get_state(sb);
	if (tree_check_live(sb, &err) == 0 && (st == SFS_SB_RUNNING || st == SFS_SB_CREATING)) {
		int64_t t0 = sfs_now_ms();
		/* only a making says how long the next one may take */
		if (runs_make_spare(sb))
			sb->spare_make_ms = sfs_now_ms() - t0;
	}
	pthread_mutex_unlock(&sb->op_mutex);
}

/* setup: a setup= command of a sandbox still creating (ctl/source.c). */
static int exec_run(struct sfs_sandbox *sb, const char *cmd, int *n, bool setup,
		    struct sfs_err *err)
{
	int r = sfs_provider_require(sb->provider, SFS_CAP_EXEC, err);
	if (r)
		return r;
	pthread_mutex_lock(&sb->op_mutex);
	/* forget and destroy take op_mutex too: after this check no run can
	 * start that nobody sees */
	r = tree_check_live(sb, err);
	if (r) {
		pthread_mutex_unlock(&sb->op_mutex);
		return r;
	}
	enum sfs_sb_state st = sfs_sb_get_state(sb);
	if (st != (setup ? SFS_SB_CREATING : SFS_SB_RUNNING)) {
		/* in state error, say why (a container removed behind our back ...) */
		char why[512] = "";
		pthread_mutex_lock(&sfs_records_mu);
		if (st == SFS_SB_ERROR && sb->error)
			snprintf(why, sizeof(why), ": %s", sb->error); /* message: may be cut */
		pthread_mutex_unlock(&sfs_records_mu);
		r = sfs_errf(err, -EIO, "sandbox \"%s\" is %s, not running%s", sb->name,
			     sfs_sb_state_name(st), why);
		pthread_mutex_unlock(&sb->op_mutex);
		return r;
	}
	/* the number first (its directory), then cmd, then the start: a
	 * daemon killed anywhere in between leaves a run the next one finds
	 * (ctl/runs.h), never a number to hand out again */
	struct sfs_run *run = NULL;
	r = runs_reserve(sb, cmd, &run, err);
	if (r) {
		pthread_mutex_unlock(&sb->op_mutex);
		return r;
	}
	int cmd_fd = -1;
	r = write_cmd(run->dir, cmd, &cmd_fd, err);
	if (r)
		goto fail_dir;
	r = sb->provider->ops->run_start(sb, run, err);
	if (r) {
		close(cmd_fd);
		goto fail_dir; /* nothing started: the number may be used again */
	}
	/* cmd's flush and the next run's directory (made ahead, ctl/runs.h)
	 * are left until this run has started (and a short one ended), which
	 * they slow, but done before the next exec if that comes after the
	 * same gap as this one: as late as that allows, up to
	 * SFS_LATER_DELAY_MS; at once for a script's loop, whose next exec
	 * gains more from them than this run loses (docs/performance.md,
	 * round 8) */
	int64_t now = sfs_now_ms();
	int64_t slack = now - sb->last_exec_ms - sb->spare_make_ms - 1;
	int later_ms =
	    slack <= 0 ? 0 : (int)(slack < SFS_LATER_DELAY_MS ? slack : SFS_LATER_DELAY_MS);
	sb->last_exec_ms = now;
	/* a kill -9 of the daemon loses nothing without the flush (the page
	 * cache keeps the run's directory and cmd); only a power cut in those
	 * milliseconds could lose the record of a run that the cut killed
	 * anyway (docs/architecture.md) */
	sfs_later_flush(cmd_fd, later_ms);
	pthread_mutex_lock(&sfs_records_mu);
	r = sandbox_add_run_locked(sb, run);
	pthread_mutex_unlock(&sfs_records_mu);
	if (r) {
		/* cannot track it: stop it rather than leave it unseen */
		if (sb->provider->ops->run_kill)
			sb->provider->ops->run_kill(sb, run, 9, false, NULL);
		sfs_errf(err, r, "out of memory");
		goto fail_dir;
	}
	journal_attach(sb, run, NULL);
	*n = run->n;
	char rp[32];
	snprintf(rp, sizeof(rp), "runs/%d", run->n);
	audit_line(sb, "run.start", rp, 0, cmd);
	pthread_mutex_unlock(&sb->op_mutex);
	sfs_later_call(make_spare_later, sb, later_ms);
	if (tree_run_started_hook)
		tree_run_started_hook(sb, run);
	return 0;
fail_dir:
	sfs_rm_rf(run->dir);
	sandbox_run_free(run);
	pthread_mutex_unlock(&sb->op_mutex);
	return r;
}

int tree_exec(struct sfs_sandbox *sb, const char *cmd, int *n, struct sfs_err *err)
{
	return exec_run(sb, cmd, n, false, err);
}

int tree_exec_setup(struct sfs_sandbox *sb, const char *cmd, int *n, struct sfs_err *err)
{
	return exec_run(sb, cmd, n, true, err);
}

/* ---- what fs/ reaches through the tree ---------------------------------- */

int tree_snapshot_delete(struct sfs_sandbox *sb, const char *id, struct sfs_err *err)
{
	const struct sfs_provider_ops *ops = sb->provider->ops;
	char *commit = wsnap_commit_of(sb, id);
	if (commit || wsnap_is_layer(sb, id)) {
		/* a workspace snapshot: its ref goes, then the record */
		free(commit);
		pthread_mutex_lock(&sb->op_mutex);
		wsnap_forget(sb, id);
		pthread_mutex_lock(&sfs_records_mu);
		sandbox_snapshot_remove_locked(sb, id);
		pthread_mutex_unlock(&sfs_records_mu);
		int r = tree_save(err);
		pthread_mutex_unlock(&sb->op_mutex);
		return r;
	}
	int r = sfs_provider_require(sb->provider, SFS_CAP_SNAPSHOTS, err);
	if (r)
		return r;
	if (!ops->snapshot_delete)
		return sfs_errf(err, -EOPNOTSUPP, "provider %s cannot delete snapshots",
				sb->provider->name);
	/* the op holder changes the list (provider.h's rule) */
	pthread_mutex_lock(&sb->op_mutex);
	pthread_mutex_lock(&sfs_records_mu);
	bool found = sandbox_snapshot_find_locked(sb, id) >= 0;
	pthread_mutex_unlock(&sfs_records_mu);
	if (!found)
		r = sfs_errf(err, -ENOENT, "no snapshot \"%s\" in snapshots/", id);
	else
		r = ops->snapshot_delete(sb, id, err);
	if (!r) {
		pthread_mutex_lock(&sfs_records_mu);
		sandbox_snapshot_remove_locked(sb, id);
		pthread_mutex_unlock(&sfs_records_mu);
		r = tree_save(err);
	}
	pthread_mutex_unlock(&sb->op_mutex);
	return r;
}

int tree_stdin_write(struct sfs_sandbox *sb, struct sfs_run *run, const void *buf, size_t len,
		     struct sfs_err *err)
{
	int r = sfs_provider_require(sb->provider, SFS_CAP_WRITABLE_STDIN, err);
	if (r)
		return r;
	if (!sb->provider->ops->run_stdin_write)
		return sfs_errf(err, -EOPNOTSUPP, "provider %s cannot write stdin",
				sb->provider->name);
	/* not under op_mutex: a write to a pipe must not wait behind a slow op */
	return sb->provider->ops->run_stdin_write(sb, run, buf, len, err);
}

bool tree_workspace_is_remote(const struct sfs_sandbox *sb)
{
	return sb->provider->ops->fs_stat && !sb->provider->ops->workspace_root_fd;
}

int tree_workspace_root(struct sfs_sandbox *sb, int *fd, char **root, struct sfs_err *err)
{
	const struct sfs_provider_ops *ops = sb->provider->ops;
	*fd = -1;
	*root = NULL;
	int r = ops->workspace_root_fd ? ops->workspace_root_fd(sb, fd, err) : -EOPNOTSUPP;
	if (r == -EOPNOTSUPP && ops->fs_stat)
		return -EREMOTE;
	if (r)
		return r;
	/* a restore may publish a new root meanwhile: hand out a copy */
	*root = sfs_sb_dup_workspace(sb);
	return 0;
}
