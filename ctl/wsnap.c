/*
 * Workspace snapshots of sandboxes: ids, records and results around the
 * object store of fs/snapshots (which knows nothing of sandboxes).
 */
#include "wsnap.h"
#include "wsnap_internal.h"
#include "ctl.h"
#include "sandbox.h"
#include "tree.h"

#include "../fs/snapshots/snapshots.h"
#include "../providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int (*wsnap_changed_paths_hook)(struct sfs_sandbox *sb, const char *id, int *basefd, char ***paths,
				size_t *n, struct sfs_err *err);

bool wsnap_possible(const struct sfs_sandbox *sb)
{
	return wsnap_on_host(sb) || wsnap_remote(sb);
}

bool wsnap_on_host(const struct sfs_sandbox *sb)
{
	return sb->provider->caps[SFS_CAP_FS] && sb->provider->ops->workspace_root_fd;
}

const char *wsnap_status_kind(const struct sfs_sandbox *sb)
{
	if (sb->provider->ops->snapshot && sb->provider->caps[SFS_CAP_SNAPSHOTS])
		return "native";
	return wsnap_possible(sb) ? "workspace" : "none";
}

static void cache_path(const struct sfs_sandbox *sb, char *buf, size_t len)
{
	if (sfs_pathf(buf, len, "%s/snapshots.statcache", sb->statedir) < 0) /* "": no file */
		sfs_log(SFS_LOG_ERR, "%s: state path too long", sb->name);
}

/* The workspace's root on this host: the workspace itself, or the mirror
 * of a remote one brought up to date (the caller holds sb->op_mutex). */
static int root_fd(struct sfs_sandbox *sb, int *fd, struct sfs_err *err)
{
	if (!wsnap_possible(sb))
		return sfs_errf(err, -EOPNOTSUPP,
				"provider %s has no file access for workspace snapshots",
				sb->provider->name);
	if (wsnap_remote(sb))
		return wsnap_remote_pull(sb, fd, err);
	return sb->provider->ops->workspace_root_fd(sb, fd, err);
}

/* The id for a new snapshot; the caller holds sb->op_mutex (the list does
 * not change under it). */
static int pick_id(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err)
{
	char buf[64];
	if (label) {
		struct sfs_err e = {0};
		if (ctl_check_sandbox_name(label, &e))
			return sfs_errf(err, -EINVAL,
					"snapshot: label \"%s\" cannot name snapshots/%s (a name "
					"like a sandbox's)",
					label, label);
		if (sfs_pathf(buf, sizeof(buf), "%s", label) < 0)
			return sfs_errf(err, -ENAMETOOLONG, "snapshot: label too long");
	}
	pthread_mutex_lock(&sfs_records_mu);
	bool taken = label && sandbox_snapshot_find_locked(sb, buf) >= 0;
	for (uint32_t n = sb->last_snapshot_serial + 1; !label; n++) {
		snprintf(buf, sizeof(buf), "snap-%" PRIu32, n);
		if (sandbox_snapshot_find_locked(sb, buf) < 0)
			break;
	}
	pthread_mutex_unlock(&sfs_records_mu);
	if (taken)
		return sfs_errf(err, -EEXIST, "snapshot: snapshots/%s exists already", buf);
	*id = strdup(buf);
	return *id ? 0 : sfs_errf(err, -ENOMEM, "out of memory");
}

/* treefd >= 0: the tree to record instead of the workspace (a remote
 * sandbox's source checkout, still on this host), without the stat cache. */
static int take(struct sfs_sandbox *sb, const char *label, int treefd, char **idp,
		struct sfs_err *err)
{
	char *id = NULL;
	int r = pick_id(sb, label, &id, err);
	int fd = treefd;
	if (!r && treefd < 0)
		r = root_fd(sb, &fd, err);
	char commit[41], cache[4200];
	struct snap_stats st;
	int64_t now = (int64_t)time(NULL);
	cache_path(sb, cache, sizeof(cache));
	if (!r) {
		sfs_sb_set_progress(sb, "snapshot");
		r = snap_take(fd, treefd < 0 ? cache : NULL, sb->key, id, label, now, commit, &st,
			      err);
		sfs_sb_set_progress(sb, NULL);
	}
	if (fd >= 0 && treefd < 0)
		close(fd);
	char *lab = label ? strdup(label) : NULL, *com = r ? NULL : strdup(commit);
	if (!r && (!com || (label && !lab)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (!r) {
		pthread_mutex_lock(&sfs_records_mu);
		r = sandbox_snapshot_add_locked(sb, id, lab, now);
		if (!r)
			sb->snapshots[sb->nsnapshots - 1].commit = com;
		pthread_mutex_unlock(&sfs_records_mu);
		if (r)
			r = sfs_errf(err, r, "snapshot: %s",
				     r == -ENOSPC ? "no more snapshot numbers" : "out of memory");
	}
	if (r) {
		if (com) /* the store's ref goes with the record that was not made */
			snap_forget(sb->key, id, NULL);
		free(lab);
		free(com);
		free(id);
		return r;
	}
	sfs_log(SFS_LOG_INFO,
		"%s: snapshot %s: %" PRIu64 " files, %" PRIu64 " bytes, %" PRIu64
		" skipped, %" PRIu64 " read",
		sb->name, id, st.files, st.bytes, st.skipped, st.hashed);
	if (idp)
		*idp = strdup(id);
	return 0;
}

int wsnap_take(struct sfs_sandbox *sb, const char *label, char **idp, struct sfs_err *err)
{
	return take(sb, label, -1, idp, err);
}

int wsnap_take_tree(struct sfs_sandbox *sb, const char *label, int treefd, struct sfs_err *err)
{
	return take(sb, label, treefd, NULL, err);
}

int wsnap_add_layer(struct sfs_sandbox *sb, const char *id, struct sfs_err *err)
{
	char *idc = strdup(id), *lab = strdup(id);
	int r = idc && lab ? 0 : -ENOMEM;
	pthread_mutex_lock(&sfs_records_mu);
	if (!r && sandbox_snapshot_find_locked(sb, id) >= 0)
		r = -EEXIST;
	if (!r)
		r = sandbox_snapshot_add_locked(sb, idc, lab, (int64_t)time(NULL));
	if (!r)
		sb->snapshots[sb->nsnapshots - 1].layer = true;
	pthread_mutex_unlock(&sfs_records_mu);
	if (r) {
		free(idc);
		free(lab);
		return sfs_errf(err, r, "snapshot %s: %s", id,
				r == -EEXIST ? "exists already" : "out of memory");
	}
	return 0;
}

bool wsnap_is_layer(struct sfs_sandbox *sb, const char *id)
{
	pthread_mutex_lock(&sfs_records_mu);
	int i = sandbox_snapshot_find_locked(sb, id);
	bool layer = i >= 0 && sb->snapshots[i].layer;
	pthread_mutex_unlock(&sfs_records_mu);
	return layer;
}

char *wsnap_commit_of(struct sfs_sandbox *sb, const char *id)
{
	char *c = NULL;
	pthread_mutex_lock(&sfs_records_mu);
	int i = sandbox_snapshot_find_locked(sb, id);
	if (i >= 0 && sb->snapshots[i].commit)
		c = strdup(sb->snapshots[i].commit);
	pthread_mutex_unlock(&sfs_records_mu);
	return c;
}

void wsnap_forget(struct sfs_sandbox *sb, const char *id)
{
	struct sfs_err err = {0};
	int dropped = snap_forget(sb->key, id, &err);
	if (dropped < 0)
		sfs_log(SFS_LOG_WARN, "%s: snapshot refs: %s", sb->name, err.msg);
	if (dropped <= 0)
		return; /* nothing became unreachable: no sweep */
	/* the objects only those snapshots used go now (fs/snapshots/gc.c);
	 * every sandbox's stat cache is STATE/sandboxes/KEY/snapshots.statcache
	 * (cache_path), and sb->statedir is STATE/sandboxes/KEY */
	char glob[4300];
	const char *slash = strrchr(sb->statedir, '/');
	if (sfs_pathf(glob, sizeof(glob), "%.*s/*/snapshots.statcache",
		      slash ? (int)(slash - sb->statedir) : 0, sb->statedir) < 0)
		return; /* no sweep rather than one that misses the caches */
	struct snap_gc_stats st;
	if (snap_gc(slash ? glob : NULL, &st, &err))
		sfs_log(SFS_LOG_WARN, "%s: snapshot store gc: %s", sb->name, err.msg);
	else if (st.removed || st.caches_dropped)
		sfs_log(SFS_LOG_INFO,
			"%s: snapshot store gc: %" PRIu64 " objects (%" PRIu64
			" bytes) removed, %" PRIu64 " kept, %" PRIu64 " stat caches dropped",
			sb->name, st.removed, st.removed_bytes, st.kept, st.caches_dropped);
}

int wsnap_restore_into(struct sfs_sandbox *sb, const char *id, const char *commit,
		       struct sfs_buf *out, struct sfs_err *err)
{
	char cache[4200];
	cache_path(sb, cache, sizeof(cache));
	struct snap_restore_stats st = {0};
	int r;
	if (wsnap_remote(sb)) {
		r = wsnap_remote_restore(sb, commit, cache, &st, err);
	} else {
		int fd = -1;
		r = root_fd(sb, &fd, err);
		if (r)
			return r;
		/* as its runs would write: the kernel refuses what they could not */
		uid_t uid = 0;
		gid_t gid = 0;
		if (!sb->provider->ops->run_ids || sb->provider->ops->run_ids(sb, &uid, &gid))
			uid = gid = 0;
		sfs_sb_set_progress(sb, "restore");
		r = snap_restore(commit, fd, cache, &st, NULL, NULL, uid, gid, err);
		sfs_sb_set_progress(sb, NULL);
		close(fd);
	}
	if (r)
		return r;
	size_t running = 0;
	pthread_mutex_lock(&sfs_records_mu);
	for (size_t i = 0; i < sb->nruns; i++)
		running += sb->runs[i]->state == SFS_RUN_RUNNING;
	pthread_mutex_unlock(&sfs_records_mu);
	if (out)
		sfs_buf_printf(out,
			       "restored %s: %" PRIu64 " written, %" PRIu64 " removed, %" PRIu64
			       " modes changed, %" PRIu64
			       " unchanged; processes were left alone (%zu runs still "
			       "running)\n",
			       id, st.written, st.removed, st.modes, st.unchanged, running);
	return 0;
}

/* A copy of the snapshot with this serial: id, label, commit, time, and
 * whether it is a layer snapshot. */
static bool find_serial(struct sfs_sandbox *sb, uint32_t serial, char **id, char **label,
			char **commit, int64_t *created, bool *layer)
{
	bool found = false;
	pthread_mutex_lock(&sfs_records_mu);
	for (size_t i = 0; i < sb->nsnapshots && !found; i++) {
		struct sfs_snapshot *s = &sb->snapshots[i];
		if (s->serial != serial)
			continue;
		found = true;
		*id = strdup(s->id);
		*label = s->label ? strdup(s->label) : NULL;
		*commit = s->commit ? strdup(s->commit) : NULL;
		*created = s->created;
		*layer = s->layer;
	}
	pthread_mutex_unlock(&sfs_records_mu);
	return found;
}

int wsnap_info_text(struct sfs_sandbox *sb, uint32_t serial, struct sfs_buf *out)
{
	char *id = NULL, *label = NULL, *commit = NULL;
	int64_t created = 0;
	bool layer = false;
	if (!find_serial(sb, serial, &id, &label, &commit, &created, &layer))
		return -ENOENT;
	char when[40];
	time_t t = (time_t)created;
	struct tm tm;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
	struct snap_info info;
	int r = commit ? snap_info_read(commit, &info, NULL) : 0;
	if (!r) {
		sfs_buf_printf(out, "id %s\nkind %s\nlabel %s\ntime %s\n", id,
			       commit  ? "workspace"
			       : layer ? "layer"
				       : "native",
			       label ? label : "-", when);
		if (commit)
			sfs_buf_printf(out,
				       "commit %s\nfiles %" PRIu64 "\nbytes %" PRIu64
				       "\nskipped %" PRIu64 "\n",
				       commit, info.st.files, info.st.bytes, info.st.skipped);
	}
	free(id);
	free(label);
	free(commit);
	return r ? -EIO : 0;
}

static void free_paths(char **paths, size_t n)
{
	for (size_t i = 0; paths && i < n; i++)
		free(paths[i]);
	free(paths);
}

int wsnap_diff_text(struct sfs_sandbox *sb, uint32_t serial, struct sfs_buf *out)
{
	char *id = NULL, *label = NULL, *commit = NULL;
	int64_t created = 0;
	bool layer = false;
	if (!find_serial(sb, serial, &id, &label, &commit, &created, &layer))
		return -ENOENT;
	struct sfs_err err = {0};
	int fd = -1, basefd = -1, r = 0;
	char **paths = NULL;
	size_t n = 0;
	if (layer)
		r = wsnap_changed_paths_hook
			? wsnap_changed_paths_hook(sb, id, &basefd, &paths, &n, &err)
			: sfs_errf(&err, -EOPNOTSUPP, "no changed-paths hook for a layer snapshot");
	if (r)
		goto out;
	/* a remote workspace's mirror has one user at a time: the op holder */
	bool remote = wsnap_remote(sb);
	if (remote)
		pthread_mutex_lock(&sb->op_mutex);
	r = root_fd(sb, &fd, &err);
	char cache[4200];
	cache_path(sb, cache, sizeof(cache));
	if (!r && basefd >= 0)
		r = snap_diff_paths(basefd, fd, (const char *const *)paths, n, out, &err);
	else if (!r && commit)
		r = snap_diff(commit, fd, cache, out, &err);
	else if (!r)
		r = sfs_errf(&err, -EOPNOTSUPP, "a native snapshot has no diff");
	if (remote)
		pthread_mutex_unlock(&sb->op_mutex);
out:
	if (r && err.msg[0]) {
		char name[64];
		sfs_log(SFS_LOG_WARN, "%s: snapshots/%s/diff: %s", sfs_sb_copy_name(sb, name), id,
			err.msg);
	}
	if (fd >= 0)
		close(fd);
	if (basefd >= 0)
		close(basefd);
	free_paths(paths, n);
	free(id);
	free(label);
	free(commit);
	return r;
}
