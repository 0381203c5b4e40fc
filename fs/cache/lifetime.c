/* The remote cache's lifetime: invalidation when runs start or end, the
 * write-back retry thread, recovery of an earlier daemon's unsaved files,
 * and shutdown. */
#include "internal.h"

#include "../../providers/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void rc_invalidate_sandbox(uint32_t serial)
{
	uint64_t *ids = NULL;
	size_t count = 0, cap = 0;
	pthread_mutex_lock(&R.mu);
	struct rsb *rs = rc_rsb_find_locked(serial, false);
	if (!rs) {
		pthread_mutex_unlock(&R.mu);
		return;
	}
	rs->gen++;
	rc_prefetch_drop_locked(rs);
	for (size_t b = 0; b < RC_NBUCKETS; b++) {
		for (struct rc_node *n = R.by_id[b]; n; n = n->id_next) {
			if (n->serial != serial)
				continue;
			/* a file created here and not saved: its attributes are
			 * ours, the remote has none */
			if (!n->unborn)
				n->attr_ok = false;
			rc_drop_dir_locked(n);
			if (count == cap) {
				size_t ncap = cap ? cap * 2 : 64;
				uint64_t *grown = realloc(ids, ncap * sizeof(*grown));
				if (!grown)
					continue; /* the kernel's copy then lives out its TTL */
				ids = grown;
				cap = ncap;
			}
			ids[count++] = n->id;
		}
	}
	pthread_mutex_unlock(&R.mu);
	/* clean contents are revalidated on the next open (the generation
	 * moved, so attributes are fetched again); the caller drops its pages */
	for (size_t i = 0; R.hooks.node_stale && i < count; i++)
		R.hooks.node_stale(ids[i]);
	free(ids);
}

void rc_sandbox_gone(uint32_t serial)
{
	pthread_mutex_lock(&R.mu);
	struct rsb *rs = rc_rsb_find_locked(serial, false);
	if (rs) {
		rs->gone = true;
		rs->gen++;
		rc_prefetch_drop_locked(rs);
		for (size_t b = 0; b < RC_NBUCKETS; b++) {
			for (struct rc_node *n = R.by_id[b], *next; n; n = next) {
				next = n->id_next;
				if (n->serial != serial)
					continue;
				if (n->dirty)
					sfs_log(SFS_LOG_WARN,
						"workspace: %s had unsaved changes when its "
						"sandbox went away",
						n->path[0] ? n->path : "/");
				n->dirty = false;
				rc_drop_dir_locked(n);
				rc_maybe_free_locked(n);
			}
		}
	}
	pthread_mutex_unlock(&R.mu);
}

/* ---- the retry thread --------------------------------------------------- */

/* Picks a dirty, closed node whose retry is due, pinned; NULL if none. */
static struct rc_node *next_due_locked(double now, double *soonest)
{
	for (size_t b = 0; b < RC_NBUCKETS; b++) {
		for (struct rc_node *n = R.by_id[b]; n; n = n->id_next) {
			if (!n->dirty || n->rs->gone || n->nopen > 0)
				continue;
			if (n->retry_at <= now) {
				n->pins++;
				return n;
			}
			if (n->retry_at < *soonest)
				*soonest = n->retry_at;
		}
	}
	return NULL;
}

static void wait_until_locked(double when)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	double wait = when - rc_now();
	if (wait < 0.05)
		wait = 0.05;
	until.tv_sec += (time_t)wait;
	until.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&R.cv, &R.mu, &until);
}

static void *retry_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&R.mu);
	while (!R.stop) {
		double soonest = rc_now() + 5;
		struct rc_node *n = next_due_locked(rc_now(), &soonest);
		if (!n) {
			wait_until_locked(soonest);
			continue;
		}
		/* a closed file that was never tried (close went fine) waits its turn */
		n->retry_at = rc_now() + R.opt.retry_interval;
		pthread_mutex_unlock(&R.mu);
		struct sfs_sandbox *sb = rc_sandbox_of(n);
		if (sb) {
			pthread_mutex_lock(&n->io);
			rc_write_back(n, sb);
			pthread_mutex_unlock(&n->io);
			rc_sandbox_put(sb);
		}
		pthread_mutex_lock(&R.mu);
		n->pins--;
		rc_maybe_free_locked(n);
	}
	pthread_mutex_unlock(&R.mu);
	return NULL;
}

/* ---- recovery ----------------------------------------------------------- */

/* Adopts one unsaved file of an earlier daemon: data at `data`, remote
 * path in `data`.pending. */
static void adopt_pending(struct rsb *rs, struct sfs_sandbox *sb, const char *data)
{
	char pend[4300], *text = NULL;
	if (sfs_pathf(pend, sizeof(pend), "%s.pending", data) < 0 ||
	    sfs_read_file(pend, &text, NULL) < 0)
		return;
	text[strcspn(text, "\n")] = '\0';
	int fd = open(data, O_RDWR | O_CLOEXEC);
	pthread_mutex_lock(&R.mu);
	struct rc_node *n = fd >= 0 ? rc_new_node_locked(rs, text) : NULL;
	if (n) {
		n->cfd = fd;
		n->dirty = true;
		n->wseq++;
		n->retry_at = 0;
	}
	pthread_mutex_unlock(&R.mu);
	if (!n) {
		if (fd >= 0)
			close(fd);
		char nm[64];
		sfs_log(SFS_LOG_WARN, "%s: workspace: cannot recover %s (data kept in %s)",
			sfs_sb_copy_name(sb, nm), text, data);
		free(text);
		return;
	}
	char name[4200];
	rc_cache_file_name(n, "", name, sizeof(name));
	rename(data, name);
	rc_mark_pending(n, true, text);
	unlink(pend);
	char nm[64];
	sfs_log(SFS_LOG_INFO,
		"%s: workspace: %s has unsaved changes from before a restart; saving them",
		sfs_sb_copy_name(sb, nm), text);
	free(text);
}

/*
 * Unsaved files of an earlier daemon (a .pending file beside the data) get
 * nodes again and go to the retry thread; other leftovers are stale caches.
 * Runs before any node of the sandbox exists, so names cannot collide.
 */
void rc_recover_sandbox(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&R.mu);
	struct rsb *rs = rc_rsb_find_locked(sb->serial, true);
	pthread_mutex_unlock(&R.mu);
	const char *dir = rs ? rc_cachedir(rs, sb) : NULL;
	DIR *d = dir ? opendir(dir) : NULL;
	if (!d)
		return;
	char **pending = NULL;
	size_t npending = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char path[4200];
		if (sfs_pathf(path, sizeof(path), "%s/%s", dir, de->d_name) < 0)
			continue; /* never an unlink of a cut name */
		size_t nl = strlen(de->d_name);
		if (nl > 8 && !strcmp(de->d_name + nl - 8, ".pending")) {
			char **grown = realloc(pending, (npending + 1) * sizeof(*grown));
			char *stem = strndup(de->d_name, nl - 8);
			if (grown)
				pending = grown;
			if (grown && stem)
				pending[npending++] = stem;
			else
				free(stem);
			continue;
		}
		char pend[4300];
		if (sfs_pathf(pend, sizeof(pend), "%s.pending", path) == 0 &&
		    access(pend, F_OK) != 0)
			unlink(path); /* a clean copy from an earlier life */
	}
	closedir(d);
	/* first out of the way of the new names, then adopted */
	for (size_t i = 0; i < npending; i++) {
		char from[4200], to[4200];
		if (sfs_pathf(from, sizeof(from), "%s/%s", dir, pending[i]) == 0 &&
		    sfs_pathf(to, sizeof(to), "%s/.recover-%s", dir, pending[i]) == 0)
			rename(from, to);
		if (sfs_pathf(from, sizeof(from), "%s/%s.pending", dir, pending[i]) == 0 &&
		    sfs_pathf(to, sizeof(to), "%s/.recover-%s.pending", dir, pending[i]) == 0)
			rename(from, to);
	}
	for (size_t i = 0; i < npending; i++) {
		char data[4200];
		if (sfs_pathf(data, sizeof(data), "%s/.recover-%s", dir, pending[i]) == 0)
			adopt_pending(rs, sb, data);
		free(pending[i]);
	}
	free(pending);
}

/* ---- lifetime ----------------------------------------------------------- */

int rc_init(const struct rc_options *opt, const struct rc_hooks *hooks)
{
	R.opt = *opt;
	/* never exactly 0: a caller's cache (the kernel's) would re-ask for everything */
	if (!(R.opt.ttl > 0))
		R.opt.ttl = 0.001;
	if (!(R.opt.retry_interval > 0))
		R.opt.retry_interval = 1.0;
	R.hooks = *hooks;
	R.stop = false;
	return 0;
}

/* Only after the process stops forking (daemonizing): a thread does not
 * survive fork, and a lock it held at the fork would stay held forever. */
int rc_start(void)
{
	if (R.running)
		return 0;
	R.stop = false;
	int r = pthread_create(&R.retry_thread, NULL, retry_main, NULL);
	if (r)
		return -r;
	R.running = true;
	return 0;
}

void rc_stop(void)
{
	if (!R.running)
		return;
	pthread_mutex_lock(&R.mu);
	R.stop = true;
	pthread_cond_broadcast(&R.cv);
	pthread_mutex_unlock(&R.mu);
	pthread_join(R.retry_thread, NULL);
	R.running = false;
}

void rc_shutdown(void)
{
	rc_stop();
	size_t kept = 0;
	pthread_mutex_lock(&R.mu);
	for (size_t b = 0; b < RC_NBUCKETS; b++) {
		while (R.by_id[b]) {
			struct rc_node *n = R.by_id[b];
			kept += n->dirty;
			rc_free_node_locked(n, true);
		}
		R.by_path[b] = NULL;
	}
	R.next_id = 0; /* as a new daemon would: recovery moves old names aside */
	while (R.sbs) {
		struct rsb *s = R.sbs;
		R.sbs = s->next;
		rc_prefetch_drop_locked(s);
		rc_mlog_free_locked(s);
		free(s->cachedir);
		free(s);
	}
	pthread_mutex_unlock(&R.mu);
	if (kept)
		sfs_log(SFS_LOG_WARN,
			"workspace: %zu remote file(s) with unsaved changes are kept in the "
			"sandboxes' rcache/ directories (see the .pending files)",
			kept);
}
