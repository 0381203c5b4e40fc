/*
 * Destroying and forgetting sandboxes (split out of tree.c): the ordered
 * destroy that survives a full disk and a crash, rmdir's background
 * destroy, and forget.  The tree's list and registry saves stay in tree.c.
 */
#include "tree.h"
#include "audit.h"
#include "ctl.h"
#include "forgotten.h"
#include "registry.h"
#include "runs.h"
#include "sandbox.h"
#include "tree_internal.h"
#include "wsnap.h"

#include "../journal/journal.h"
#include "../providers/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Startup's side of a destroy that an rmdir decided (the `destroying`
 * marker) but no daemon finished: the provider destroys now (local: the
 * runs of the crashed daemon get TERM, one grace, KILL; the workspace goes),
 * and the sandbox then goes the way of a `destroyed` one.  Before the mount
 * exists, so nobody sees it in between.  0 when it is destroyed; otherwise
 * sb is kept in state error, saying why, and the marker stays (rmdir again,
 * or the next daemon, tries once more). */
int destroy_finish_decided(struct sfs_sandbox *sb)
{
	sfs_log(SFS_LOG_INFO, "%s: finishing the destroy its rmdir decided", sb->name);
	struct sfs_err derr = {0};
	int r = sb->provider->ops->destroy(sb, &derr);
	if (r) {
		char msg[SFS_ERR_MAX + 64];
		snprintf(msg, sizeof(msg), "rmdir: the destroy failed: %s",
			 derr.msg); /* message: may be cut */
		sfs_log(SFS_LOG_ERR, "%s: %s", sb->name, msg);
		tree_set_error(sb, msg);
		sfs_sb_set_state(sb, SFS_SB_ERROR);
		return r;
	}
	wsnap_forget(sb, NULL); /* its snapshots' refs: the objects are shared */
	char marker[4300];
	destroy_marker_path(sb, marker, sizeof(marker));
	r = destroy_write_marker(sb, marker);
	if (r)
		sfs_log(SFS_LOG_WARN, "%s: %s: %s", sb->name, marker, strerror(-r));
	destroy_empty_statedir(sb); /* keeps the `destroyed` marker */
	return 0;
}

/* ---- destroy and forget -----------------------------------------------
 *
 * Destroy is ordered so that a failure anywhere leaves a state that says
 * what it is, and so that it works on a full state disk:
 *   1. the provider destroys (local: its runs end together, TERM then KILL
 *      after one grace, and the workspace goes: space is freed first);
 *   2. the runs end for the journal engine (`lost` where unseen) and every
 *      reader is answered;
 *   3. STATE/sandboxes/KEY is emptied but for a `destroyed` marker (more space);
 *   4. the registry is written without the sandbox (on ENOSPC once more
 *      after releasing STATE/.reserve, kept for that);
 *   5. only then does the record leave the tree, and the marker goes.
 * A failure in 1 changes nothing but the error shown; a failure in 4 leaves
 * the sandbox listed as `destroyed` (rmdir again finishes it), and a daemon
 * that starts and finds the marker finishes it too.  An rmdir that returns
 * before steps 1-5 (runs going, tree_rmdir) first writes a `destroying`
 * marker, fsync'd: the destroy is decided, and a daemon killed meanwhile
 * leaves it for the next one to finish (destroy_finish_decided).
 */

#define RESERVE_BYTES (256 * 1024)

/* STATE/.reserve: space held back so that the registry can be written on a
 * full disk; released when a write of it fails with ENOSPC. */
void destroy_reserve_space(void)
{
	char path[4200];
	struct stat st;
	if (sfs_pathf(path, sizeof(path), "%s/.reserve", tree.statedir) < 0)
		return;
	if (lstat(path, &st) == 0) {
		bool own = S_ISREG(st.st_mode) && st.st_nlink == 1;
		if (own && st.st_size >= RESERVE_BYTES)
			return;
		/* a symlink or a hard link (or anything but a file of its own)
		 * is never written as root: the name is ours, the link goes
		 * and a file takes it */
		if (!own) {
			sfs_log(SFS_LOG_WARN, "%s was not a regular file of its own: replaced",
				path);
			if (unlink(path) < 0)
				return;
		}
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
		close(fd);
		return;
	}
	int r = posix_fallocate(fd, 0, RESERVE_BYTES);
	close(fd);
	if (r)
		unlink(path); /* a reserve that is not there must not look like one */
}

static bool release_space(void)
{
	char path[4200];
	return sfs_pathf(path, sizeof(path), "%s/.reserve", tree.statedir) == 0 &&
	       unlink(path) == 0;
}

/* The registry as it is, but without sb; callers hold tree_save_mu. */
static int save_without_held(struct sfs_sandbox *sb, struct sfs_err *err)
{
	int r = tree_save_held(sb, err);
	if (r == -ENOSPC && release_space()) {
		sfs_log(SFS_LOG_WARN, "state dir full: the reserve was released to write the "
				      "registry");
		sfs_err_clear(err);
		r = tree_save_held(sb, err);
	}
	return r;
}

/* Takes sb out of the tree for good once the registry no longer lists it;
 * on failure sb stays where it was.  tree_save_mu is held until sb is out, so no
 * other save writes it back meanwhile. */
static int drop(struct sfs_sandbox *sb, struct sfs_err *err)
{
	pthread_mutex_lock(&tree_save_mu);
	int r = save_without_held(sb, err);
	if (!r) {
		pthread_mutex_lock(&sfs_records_mu);
		tree_remove_locked(sb, true);
		pthread_mutex_unlock(&sfs_records_mu);
	}
	pthread_mutex_unlock(&tree_save_mu);
	if (r)
		return r;
	journal_detach_sandbox(sb);
	if (tree_sandbox_gone_hook)
		tree_sandbox_gone_hook(sb);
	return 0;
}

void destroy_marker_path(const struct sfs_sandbox *sb, char *buf, size_t len)
{
	if (sfs_pathf(buf, len, "%s/destroyed", sb->statedir) < 0) /* "": no file */
		sfs_log(SFS_LOG_ERR, "%s: state path too long", sb->name);
}

/* STATE/sandboxes/KEY/destroying: an rmdir returned 0 before the destroy
 * was done (tree_rmdir), so the destroy is decided; a daemon that starts
 * and finds it finishes the destroy (destroy_finish_decided). */
void destroy_decided_path(const struct sfs_sandbox *sb, char *buf, size_t len)
{
	if (sfs_pathf(buf, len, "%s/destroying", sb->statedir) < 0) /* "": no file */
		sfs_log(SFS_LOG_ERR, "%s: state path too long", sb->name);
}

static int write_marker_once(const struct sfs_sandbox *sb, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	int r = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	/* the new name lives in the directory: that is what a crash loses */
	int dfd = r ? -1 : open(sb->statedir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!r && dfd < 0)
		r = -errno;
	if (dfd >= 0) {
		if (fsync(dfd) < 0)
			r = -errno;
		close(dfd);
	}
	if (r)
		unlink(path);
	return r;
}

/* An empty marker file, durable once this returns 0 (file and directory
 * fsync'd); on a full disk once more after releasing STATE/.reserve. */
int destroy_write_marker(const struct sfs_sandbox *sb, const char *path)
{
	int r = write_marker_once(sb, path);
	if ((r == -ENOSPC || r == -EDQUOT) && release_space()) {
		sfs_log(SFS_LOG_WARN, "state dir full: the reserve was released to write %s", path);
		r = write_marker_once(sb, path);
	}
	return r;
}

/* Everything in dir but the marker: journals, caches. */
void destroy_empty_statedir(struct sfs_sandbox *sb)
{
	audit_close(sb);
	DIR *d = opendir(sb->statedir);
	if (!d)
		return;
	struct dirent *e;
	char path[4400];
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strcmp(e->d_name, "destroyed"))
			continue;
		int r = sfs_pathf(path, sizeof(path), "%s/%s", sb->statedir, e->d_name);
		if (!r)
			r = sfs_rm_rf(path);
		if (r)
			sfs_log(SFS_LOG_WARN, "%s: %s", path, strerror(-r));
	}
	closedir(d);
}

/* Steps 1-5 above; callers hold sb->op_mutex. */
static int destroy_locked(struct sfs_sandbox *sb, struct sfs_err *err)
{
	enum sfs_sb_state st = sfs_sb_get_state(sb);
	if (st == SFS_SB_CREATING) {
		char name[64];
		return sfs_errf(err, -EBUSY, "sandbox \"%s\" is still being created",
				sfs_sb_copy_name(sb, name));
	}
	if (st != SFS_SB_DESTROYED) {
		int r = sb->provider->ops->destroy(sb, err);
		if (r) {
			tree_set_error(sb, err ? err->msg : "destroy failed");
			return r;
		}
		sfs_sb_set_state(sb, SFS_SB_DESTROYED);
		wsnap_forget(sb, NULL); /* its snapshots' refs: the objects are shared */
	}
	journal_end_sandbox(sb, false);
	char marker[4300];
	destroy_marker_path(sb, marker, sizeof(marker));
	int mr = destroy_write_marker(sb, marker);
	if (mr)
		sfs_log(SFS_LOG_WARN, "%s: %s", marker, strerror(-mr));
	destroy_empty_statedir(sb);
	int r = drop(sb, err);
	if (r) {
		char msg[SFS_ERR_MAX + 64];
		snprintf(msg, sizeof(msg), "destroyed, but not yet taken out of the registry: %s",
			 err ? err->msg : strerror(-r)); /* message: may be cut */
		tree_set_error(sb, msg);
		return r;
	}
	tree_remove_statedir(sb);
	destroy_reserve_space(); /* best effort: there may be room again */
	return 0;
}

int tree_destroy(const char *name, struct sfs_err *err)
{
	struct sfs_sandbox *sb = tree_get_or_err(name, err);
	if (!sb)
		return -ENOENT;
	pthread_mutex_lock(&sb->op_mutex);
	int r = destroy_locked(sb, err);
	pthread_mutex_unlock(&sb->op_mutex);
	tree_put(sb);
	return r;
}

/* Destroys that went on after their rmdir returned (tree_rmdir). */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int n;
} finishers = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};

static void *finish_destroy(void *arg)
{
	struct sfs_sandbox *sb = arg;
	struct sfs_err err = {0};
	pthread_mutex_lock(&sb->op_mutex);
	int r = destroy_locked(sb, &err);
	if (r) {
		/* Its rmdir returned 0 long ago: it comes back in state error,
		 * saying why (never as if nothing happened).  The `destroying`
		 * marker stays: rmdir again, or the next daemon, tries again.
		 * (Failed after the provider destroyed: it stays `destroyed`.) */
		char msg[SFS_ERR_MAX + 64];
		if (sfs_sb_get_state(sb) != SFS_SB_DESTROYED) {
			snprintf(msg, sizeof(msg), "rmdir: the destroy failed: %s",
				 err.msg); /* message: may be cut */
			tree_set_error(sb, msg);
			sfs_sb_set_state(sb, SFS_SB_ERROR);
		}
		pthread_mutex_lock(&sfs_records_mu);
		sb->destroying = false;
		pthread_mutex_unlock(&sfs_records_mu);
		char name[64];
		sfs_log(SFS_LOG_ERR, "rmdir %s: %s", sfs_sb_copy_name(sb, name), err.msg);
		struct sfs_err serr = {0};
		if (tree_save(&serr) < 0)
			sfs_log(SFS_LOG_ERR, "registry: %s", serr.msg);
	}
	pthread_mutex_unlock(&sb->op_mutex);
	tree_put(sb);
	pthread_mutex_lock(&finishers.mu);
	finishers.n--;
	pthread_cond_broadcast(&finishers.cv);
	pthread_mutex_unlock(&finishers.mu);
	return NULL;
}

static bool has_active_runs(struct sfs_sandbox *sb)
{
	bool active = false;
	for (int n = tree_nruns(sb); n >= 1 && !active; n--) {
		struct sfs_run *run = tree_run(sb, n);
		active = run && journal_run_active(run);
	}
	return active;
}

int tree_rmdir(const char *name, struct sfs_err *err)
{
	struct sfs_sandbox *sb = tree_get_or_err(name, err);
	if (!sb)
		return -ENOENT;
	pthread_mutex_lock(&sb->op_mutex);
	int r;
	enum sfs_sb_state st = sfs_sb_get_state(sb);
	/* The kernel holds the root directory's lock for the whole of an
	 * rmdir: waiting out the runs' grace here would stall every mkdir
	 * and lookup in the root.  So a sandbox with runs going leaves the
	 * tree now and a thread of its own ends it.  (Only a provider that
	 * kills gives runs a grace; the others' destroy does not wait.) */
	char decided[4300];
	destroy_decided_path(sb, decided, sizeof(decided));
	bool marked = false;
	if (st != SFS_SB_CREATING && st != SFS_SB_DESTROYED &&
	    sb->provider->caps[SFS_CAP_KILLABLE] && has_active_runs(sb)) {
		/* Returning 0 before the destroy is done tells the user it is
		 * done: so it is decided durably first (a daemon killed in the
		 * grace finishes it at its next start).  No marker, no early
		 * return: then the destroy happens here after all. */
		int mr = destroy_write_marker(sb, decided);
		if (mr) {
			sfs_log(SFS_LOG_WARN, "%s: %s: destroying in rmdir itself", decided,
				strerror(-mr));
			goto inline_destroy;
		}
		marked = true;
		pthread_mutex_lock(&finishers.mu);
		finishers.n++;
		pthread_mutex_unlock(&finishers.mu);
		pthread_mutex_lock(&sfs_records_mu);
		sb->destroying = true;
		pthread_mutex_unlock(&sfs_records_mu);
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		r = pthread_create(&t, &attr, finish_destroy, sb);
		pthread_attr_destroy(&attr);
		if (!r) {
			pthread_mutex_unlock(&sb->op_mutex);
			return 0; /* the thread has our reference */
		}
		pthread_mutex_lock(&sfs_records_mu);
		sb->destroying = false;
		pthread_mutex_unlock(&sfs_records_mu);
		pthread_mutex_lock(&finishers.mu);
		finishers.n--;
		pthread_mutex_unlock(&finishers.mu);
		/* no thread: do it here after all */
	}
inline_destroy:
	r = destroy_locked(sb, err);
	/* this rmdir reports its own failure: nothing was decided */
	if (r && marked && sfs_sb_get_state(sb) != SFS_SB_DESTROYED)
		unlink(decided);
	pthread_mutex_unlock(&sb->op_mutex);
	tree_put(sb);
	return r;
}

void tree_drain(void)
{
	pthread_mutex_lock(&finishers.mu);
	while (finishers.n > 0)
		pthread_cond_wait(&finishers.cv, &finishers.mu);
	pthread_mutex_unlock(&finishers.mu);
}

int tree_check_live(struct sfs_sandbox *sb, struct sfs_err *err)
{
	pthread_mutex_lock(&sfs_records_mu);
	bool in = false;
	for (size_t i = 0; i < tree.nsbs && !in; i++)
		in = tree.sbs[i] == sb;
	bool destroyed = sb->destroying || sb->state == SFS_SB_DESTROYED;
	bool live = in && !sb->destroying;
	char name[64];
	memcpy(name, sb->name, sizeof(name));
	pthread_mutex_unlock(&sfs_records_mu);
	if (live)
		return 0;
	return sfs_errf(err, -ENOENT,
			"sandbox \"%s\" was %s: a file opened before that no longer works", name,
			destroyed ? "destroyed" : "forgotten");
}

int tree_forget(const char *name, struct sfs_err *err)
{
	struct sfs_sandbox *sb = tree_get_or_err(name, err);
	if (!sb)
		return -ENOENT;
	pthread_mutex_lock(&sb->op_mutex);
	int r = 0;
	enum sfs_sb_state st = sfs_sb_get_state(sb);
	if (st == SFS_SB_CREATING) {
		r = sfs_errf(err, -EBUSY, "sandbox \"%s\" is still being created", name);
		goto out;
	}
	/* The sandbox lives on: its state dir (runs still writing journals,
	 * a local workspace made by mkdir) stays, marked with provider and
	 * id for a later resume, before the registry lets go of it (a crash
	 * in between leaves a marked dir of a listed record: resume skips
	 * listed keys).  A destroyed one, or one whose dir holds nothing,
	 * leaves nothing behind, and is never marked: a resume racing this
	 * forget cannot take a dir that is about to go.  (No run can start
	 * meanwhile: we hold the op lock.) */
	bool keep = st != SFS_SB_DESTROYED && forgotten_worth_keeping(sb->statedir);
	bool mark = keep && sb->id && sb->id[0];
	struct sfs_err merr = {0};
	if (mark && forgotten_mark(sb, &merr) < 0) {
		sfs_log(SFS_LOG_WARN, "forget %s: its runs will not come back on resume: %s", name,
			merr.msg);
		mark = false;
	}
	if (!mark)
		forgotten_unmark(sb); /* one a crash left (resume removes its own) */
	r = drop(sb, err);
	if (r) {
		if (mark)
			forgotten_unmark(sb);
		goto out;
	}
	/* its snapshot list goes with the registry entry (a resume starts
	 * with none): the store's refs to them go too */
	wsnap_forget(sb, NULL);
	if (keep) {
		forgotten_clear_destroy_markers(sb); /* never destroy what was let go */
	} else {
		audit_close(sb);
		int rr = tree_remove_statedir(sb);
		if (rr)
			sfs_log(SFS_LOG_WARN, "%s: %s", sb->statedir, strerror(-rr));
	}
out:
	pthread_mutex_unlock(&sb->op_mutex);
	tree_put(sb);
	return r;
}
