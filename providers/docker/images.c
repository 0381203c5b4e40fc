/*
 * Snapshot images: which ones a docker sandbox owns, how they go when it
 * goes, and how one committed but never recorded is found again.
 *
 * A snapshot is the image sandboxfs-snapshot:<cid12>-<label>-<unix time>
 * (no "<label>-" without a label), committed from the sandbox's container;
 * it inherits the container's labels, so it also carries
 * sandboxfs.local_id (the sandbox's key) and sandboxfs.state (the state
 * directory).  A fork made `from=` a snapshot runs a container made from
 * that image, so the image cannot go while that fork lives: it is handed to
 * the fork's doomed list (saved.c) and goes with the fork's last container.
 */
#include "docker.h"
#include "engine.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SNAPSHOT_REPO "sandboxfs-snapshot"
#define MAX_HOLDERS 256

/* The containers made from image id or from an image on top of it (the
 * engine's `ancestor` filter): an array of their ids, or NULL on error. */
static json_t *image_users(const char *id)
{
	char filt[160];
	if (sfs_pathf(filt, sizeof(filt), "{\"ancestor\":[\"%s\"]}", id) < 0)
		return NULL;
	char *efilt = sfs_http_escape_component(filt);
	if (!efilt)
		return NULL;
	char path[400];
	int pr = sfs_pathf(path, sizeof(path), "/containers/json?all=true&filters=%s", efilt);
	free(efilt);
	if (pr < 0)
		return NULL;
	json_t *arr = NULL, *ids = json_array();
	struct sfs_err err = {0};
	if (!ids || dk_json("GET", path, NULL, 30, &arr, "listing containers", &err) < 0 ||
	    !json_is_array(arr)) {
		sfs_log(SFS_LOG_WARN, "docker: image %s: who uses it: %s", id,
			err.msg[0] ? err.msg : "out of memory");
		json_decref(arr);
		json_decref(ids);
		return NULL;
	}
	size_t i;
	json_t *c;
	json_array_foreach(arr, i, c)
	{
		json_t *cid = json_object_get(c, "Id");
		if (json_is_string(cid))
			json_array_append(ids, cid);
	}
	json_decref(arr);
	return ids;
}

/* DELETE /images/id: true when it is gone (or was already). */
static bool delete_image(const char *id, const char *what)
{
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/images/%s", id) < 0)
		return false;
	struct sfs_err err = {0};
	int r = dk_json("DELETE", path, NULL, 60, NULL, what, &err);
	if (r >= 0 || r == -ENOENT)
		return true;
	sfs_log(SFS_LOG_WARN, "docker: image %s stays: %s", id, err.msg);
	return false;
}

/* Lets go of an image sb owned (a snapshot, or a doomed one): deleted when
 * no container uses it; handed to the sandbox whose container does (its
 * doomed list); kept when sb's own container does.  True when sb no longer
 * has to keep it. */
static bool release_image(struct sfs_sandbox *sb, const char *id)
{
	json_t *users = image_users(id);
	if (!users)
		return false;
	if (!json_array_size(users)) {
		json_decref(users);
		return delete_image(id, "deleting snapshot image");
	}
	struct sfs_sandbox **sbs = calloc(MAX_HOLDERS, sizeof(*sbs));
	char(*cids)[DK_ID_MAX] = calloc(MAX_HOLDERS, sizeof(*cids));
	size_t n = sbs && cids ? dk_list(sbs, cids, MAX_HOLDERS) : 0;
	struct sfs_sandbox *holder = NULL;
	const char *stranger = NULL;
	size_t i;
	json_t *u;
	json_array_foreach(users, i, u)
	{
		const char *ucid = json_string_value(u);
		struct sfs_sandbox *found = NULL;
		for (size_t k = 0; k < n && !found; k++)
			if (strcmp(cids[k], ucid) == 0)
				found = sbs[k];
		if (found == sb) {
			holder = sb; /* ours still runs on it: it waits here */
			break;
		}
		if (found && !holder)
			holder = found;
		if (!found && !stranger)
			stranger = ucid;
	}
	bool released = false;
	if (holder && holder != sb) {
		if (dk_saved_doom(holder, id) == 0) {
			released = true;
			/* the holder may have just lost its container (its own
			 * destroy): then the image can go now, and it must not stay
			 * on a list nobody reads any more */
			json_t *users2 = image_users(id);
			if (users2 && !json_array_size(users2) &&
			    delete_image(id, "deleting snapshot image")) {
				json_t *one = json_pack("[s]", id);
				if (one)
					dk_saved_undoom(holder, one);
				json_decref(one);
			}
			json_decref(users2);
		}
	} else if (!holder) {
		sfs_log(SFS_LOG_WARN,
			"docker: image %s stays: container %.12s, which no sandbox owns, uses it",
			id, stranger ? stranger : "?");
	}
	free(sbs);
	free(cids);
	json_decref(users);
	return released;
}

/* Releases every image in ids; an image under another one of the list goes
 * only after it, so passes repeat while they make progress.  Released ones
 * are taken out of ids. */
static void release_all(struct sfs_sandbox *sb, json_t *ids)
{
	bool progress = true;
	while (progress && json_array_size(ids)) {
		progress = false;
		for (size_t i = 0; i < json_array_size(ids);) {
			const char *id = json_string_value(json_array_get(ids, i));
			if (!id || release_image(sb, id)) {
				json_array_remove(ids, i);
				progress = true;
			} else {
				i++;
			}
		}
	}
}

void dk_release_doomed(struct sfs_sandbox *sb)
{
	json_t *doomed = dk_saved_doomed(sb);
	json_t *before = doomed ? json_deep_copy(doomed) : NULL;
	if (!doomed || !before) {
		json_decref(doomed);
		json_decref(before);
		return;
	}
	release_all(sb, doomed);
	/* before minus what is left: the released ones */
	json_t *released = json_array();
	size_t i;
	json_t *v;
	json_array_foreach(before, i, v)
	{
		bool left = false;
		size_t j;
		json_t *w;
		json_array_foreach(doomed, j, w) left |= json_equal(v, w);
		if (!left && released)
			json_array_append(released, v);
	}
	if (released)
		dk_saved_undoom(sb, released);
	json_decref(released);
	json_decref(before);
	json_decref(doomed);
}

void dk_release_snapshots(struct sfs_sandbox *sb)
{
	/* the op holder reads its record's fields bare (provider.h) */
	json_t *ids = json_array();
	for (size_t i = 0; ids && i < sb->nsnapshots; i++)
		json_array_append_new(ids, json_string(sb->snapshots[i].id));
	if (!ids) {
		sfs_log(SFS_LOG_WARN, "%s: snapshot images stay (out of memory)", sb->name);
		return;
	}
	release_all(sb, ids);
	json_decref(ids);
	dk_release_doomed(sb);
}

/* ---- adoption at resume ---------------------------------------------- */

/* Splits "<label>-<time>" or "<time>" (the tag after "<cid12>-"); false
 * when it is not of that form. */
static bool parse_tag_rest(const char *rest, char *label, size_t len, int64_t *created)
{
	const char *dash = strrchr(rest, '-');
	const char *t = dash ? dash + 1 : rest;
	if (!*t || strspn(t, "0123456789") != strlen(t) || strlen(t) > 15)
		return false;
	*created = strtoll(t, NULL, 10);
	return sfs_pathf(label, len, "%.*s", dash ? (int)(dash - rest) : 0, rest) == 0;
}

static bool listed(struct sfs_sandbox *sb, const char *shortid, json_t *doomed)
{
	bool found = false;
	pthread_mutex_lock(&sfs_records_mu);
	for (size_t i = 0; i < sb->nsnapshots && !found; i++)
		found = strcmp(sb->snapshots[i].id, shortid) == 0;
	pthread_mutex_unlock(&sfs_records_mu);
	size_t i;
	json_t *v;
	json_array_foreach(doomed, i, v) found |= strcmp(json_string_value(v) ?: "", shortid) == 0;
	return found;
}

/* Whether image img (an /images/json entry) with tag tag is one of sb's
 * snapshots: its tag starts with sb's container, or its labels name sb's
 * key, and no other state directory's daemon made it. */
static bool owned(struct sfs_sandbox *sb, const char *cid, json_t *img, const char *tag)
{
	json_t *labels = json_object_get(img, "Labels");
	const char *st = json_string_value(json_object_get(labels, "sandboxfs.state"));
	const char *key = json_string_value(json_object_get(labels, "sandboxfs.local_id"));
	if (st && (!sfs_state_dir || strcmp(st, sfs_state_dir) != 0))
		return false;
	if (strlen(cid) >= 12 && strncmp(tag, cid, 12) == 0 && tag[12] == '-')
		return true;
	return st && key && strcmp(key, sb->key) == 0;
}

int dk_adopt_snapshots(struct sfs_sandbox *sb, const char *cid)
{
	char filt[96];
	snprintf(filt, sizeof(filt), "{\"reference\":[\"%s\"]}",
		 SNAPSHOT_REPO); /* may be cut: never, a constant */
	char *efilt = sfs_http_escape_component(filt);
	if (!efilt)
		return -ENOMEM;
	char path[256];
	int pr = sfs_pathf(path, sizeof(path), "/images/json?filters=%s", efilt);
	free(efilt);
	if (pr < 0)
		return -ENAMETOOLONG;
	json_t *arr = NULL;
	struct sfs_err err = {0};
	if (dk_json("GET", path, NULL, 30, &arr, "listing snapshot images", &err) < 0 ||
	    !json_is_array(arr)) {
		sfs_log(SFS_LOG_WARN, "%s: looking for unrecorded snapshots: %s", sb->name,
			err.msg);
		json_decref(arr);
		return 0;
	}
	json_t *doomed = dk_saved_doomed(sb);
	int adopted = 0;
	size_t i;
	json_t *img;
	json_array_foreach(arr, i, img)
	{
		const char *id = json_string_value(json_object_get(img, "Id"));
		if (!id)
			continue;
		const char *hex = strncmp(id, "sha256:", 7) == 0 ? id + 7 : id;
		char shortid[16];
		snprintf(shortid, sizeof(shortid), "%.12s", hex);
		size_t j;
		json_t *t;
		json_array_foreach(json_object_get(img, "RepoTags"), j, t)
		{
			const char *rt = json_string_value(t);
			const char *pre = SNAPSHOT_REPO ":";
			if (!rt || strncmp(rt, pre, strlen(pre)) != 0)
				continue;
			const char *tag = rt + strlen(pre);
			char label[64];
			int64_t created;
			if (strlen(tag) < 14 || tag[12] != '-' ||
			    !parse_tag_rest(tag + 13, label, sizeof(label), &created) ||
			    !owned(sb, cid, img, tag) || listed(sb, shortid, doomed))
				continue;
			if (sfs_sb_snapshot_adopt(sb, shortid, label[0] ? label : NULL, created))
				continue;
			sfs_log(SFS_LOG_INFO,
				"%s: adopted snapshot %s (%s), committed but not recorded",
				sb->name, shortid, rt);
			adopted++;
			break;
		}
	}
	json_decref(doomed);
	json_decref(arr);
	return adopted;
}
