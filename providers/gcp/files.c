/*
 * The workspace of a gcp sandbox: the Cloud Storage prefix gs://BUCKET/ROOT
 * (ROOT ends in '/'), behind the remote workspace layer (fs/cache +
 * fs/remote).
 *   file  ROOT+path       contents; metadata goog-reserved-posix-mode (octal
 *                         permission bits) and goog-reserved-file-mtime
 *                         (unix seconds), as gsutil's --preserve-posix
 *   dir   ROOT+path+"/"   an empty marker object with the same metadata (so
 *                         empty directories exist); a prefix with objects
 *                         under it is a directory with or without one
 * A symlink is an empty object with metadata gcsfuse_symlink_target (what
 * Cloud Run's Cloud Storage volumes, gcsfuse, write and read).
 * A listing is one objects.list call per directory (per 1000 entries) with
 * delimiter "/", includeTrailingDelimiter (sub-directories' markers come as
 * items too) and fields=items(name,size,updated,metadata),prefixes: the
 * metadata comes along, so it carries the stored modes.  stat is one GET
 * of the object's metadata, and for a directory one list of "path/".
 */
#include "gcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../provider.h"
#include "../untrusted/name.h"
#include "../strbuf.h"
#include "../util.h"

static int oom(struct sfs_err *err)
{
	return sfs_errf(err, -ENOMEM, "out of memory");
}

int gcp_ws_of(struct sfs_sandbox *sb, struct gcp_ws *w, struct sfs_err *err)
{
	memset(w, 0, sizeof(*w));
	const char *id = sb->id, *slash = id ? strchr(id, '/') : NULL;
	if (!slash || slash == id || (size_t)(slash - id) >= sizeof(w->bucket) ||
	    strlen(slash + 1) >= sizeof(w->root))
		return sfs_errf(err, -EINVAL, "gcp: sandbox %s has no bucket in its id", sb->name);
	if (sfs_pathf(w->bucket, sizeof(w->bucket), "%.*s", (int)(slash - id), id) < 0 ||
	    sfs_pathf(w->root, sizeof(w->root), "%s", slash + 1) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "gcp: sandbox %s: its id is too long",
				sb->name);
	return 0;
}

/* ROOT + path (+ "/" for a directory marker), malloc'd. */
static char *key_of(const struct gcp_ws *w, const char *path, bool dir)
{
	struct sfs_buf b = {0};
	if (sfs_buf_printf(&b, "%s%s%s", w->root, path, dir && *path ? "/" : ""))
		return NULL;
	return sfs_buf_take(&b);
}

/* The sandbox's bucket/root and the object name of path (malloc'd). */
static int ws_key(struct sfs_sandbox *sb, const char *path, bool dir, struct gcp_ws *w, char **key,
		  struct sfs_err *err)
{
	*key = NULL;
	int rc = gcp_ws_of(sb, w, err);
	if (rc)
		return rc;
	*key = key_of(w, path, dir);
	return *key ? 0 : oom(err);
}

/* 0, or -ENOMEM for a symlink's target that could not be copied */
static int fill_stat(struct sfs_rstat *st, bool dir, const struct gcs_obj *o)
{
	memset(st, 0, sizeof(*st));
	unsigned perm = o && o->mode ? o->mode : dir ? 0755 : 0644;
	st->mode = (dir ? S_IFDIR : S_IFREG) | (perm & 07777);
	st->size = dir || !o ? 0 : o->size;
	st->mtime = o ? o->mtime : 0;
	if (!dir && o && o->link) {
		st->mode = S_IFLNK | 0777;
		st->size = (off_t)strlen(o->link);
		if (!(st->link = strdup(o->link)))
			return -ENOMEM;
	}
	return 0;
}

int gcp_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err)
{
	struct gcp_ws w;
	int rc = gcp_ws_of(sb, &w, err);
	if (rc)
		return rc;
	char *key = key_of(&w, path, false), *dkey = key_of(&w, path, true);
	if (!key || !dkey) {
		rc = oom(err);
		goto out;
	}
	struct gcs_obj o = {0};
	if (*path) {
		rc = gcs_stat(w.bucket, key, &o, err);
		if (!rc) {
			if (fill_stat(st, false, &o))
				rc = oom(err);
			gcs_obj_free(&o);
			goto out;
		}
		if (rc != -ENOENT)
			goto out;
	}
	/* a directory: its marker (with its mode) or any object under it */
	struct gcs_list l = {0};
	rc = gcs_list(w.bucket, dkey, false, 1, &l, err);
	if (!rc && !l.nobjs && *path)
		rc = -ENOENT; /* no message: a lookup of a missing name is normal */
	if (!rc)
		fill_stat(st, true, l.nobjs && !strcmp(l.objs[0].name, dkey) ? &l.objs[0] : NULL);
	gcs_list_free(&l);
out:
	free(key);
	free(dkey);
	return rc;
}

int gcp_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
		struct sfs_err *err)
{
	struct gcp_ws w;
	int rc = gcp_ws_of(sb, &w, err);
	if (rc)
		return rc;
	char *prefix = key_of(&w, path, true);
	struct gcs_list l = {0};
	rc = prefix ? gcs_list(w.bucket, prefix, true, 0, &l, err) : oom(err);
	size_t pl = prefix ? strlen(prefix) : 0;
	*ents = NULL;
	*n = 0;
	if (!rc && (l.nobjs || l.nprefixes)) {
		*ents = calloc(l.nobjs + l.nprefixes, sizeof(**ents));
		if (!*ents)
			rc = oom(err);
	}
	struct sfs_name_drops drops = {0}; /* names left out: not file names */
	size_t len;
	for (size_t i = 0; !rc && i < l.nobjs; i++) {
		const char *name = l.objs[i].name + pl;
		int k = sfs_store_entry(name, false, &len);
		if (k < 0)
			sfs_name_drop(&drops, name, len);
		if (k <= 0)
			continue; /* the directory's own marker, a sub-directory's */
		if (!((*ents)[*n].name = strdup(name)) ||
		    fill_stat(&(*ents)[*n].st, false, &l.objs[i])) {
			free((*ents)[*n].name);
			rc = oom(err);
			break;
		}
		(*n)++;
	}
	for (size_t i = 0; !rc && i < l.nprefixes; i++) {
		const char *p = l.prefixes[i] + pl;
		int k = sfs_store_entry(p, true, &len);
		if (k < 0)
			sfs_name_drop(&drops, p, len);
		if (k <= 0)
			continue;
		if (!((*ents)[*n].name = strndup(p, len))) {
			rc = oom(err);
			break;
		}
		/* a sub-directory's mode is on its marker, which the list
		 * includes (includeTrailingDelimiter) when there is one */
		const struct gcs_obj *marker = NULL;
		for (size_t j = 0; !marker && j < l.nobjs; j++)
			if (!strcmp(l.objs[j].name, l.prefixes[i]))
				marker = &l.objs[j];
		fill_stat(&(*ents)[*n].st, true, marker);
		(*n)++;
	}
	sfs_store_left_out("gcp", sb->name, "gs", w.bucket, prefix, &drops);
	if (rc) {
		sfs_rdirents_free(*ents, *n);
		*ents = NULL;
		*n = 0;
	}
	gcs_list_free(&l);
	free(prefix);
	return rc;
}

int gcp_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err)
{
	struct gcp_ws w;
	char *key;
	int rc = ws_key(sb, path, false, &w, &key, err);
	if (!rc)
		rc = gcs_download(w.bucket, key, fd, err);
	free(key);
	return rc;
}

int gcp_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err)
{
	struct stat st;
	if (fstat(fd, &st))
		return sfs_errf(err, -errno, "gcp: %s: %s", path, strerror(errno));
	struct gcp_ws w;
	char *key;
	int rc = ws_key(sb, path, false, &w, &key, err);
	if (!rc)
		rc = gcs_upload_fd(w.bucket, key, fd, st.st_size, mode & 07777, st.st_mtime, err);
	free(key);
	return rc;
}

int gcp_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	struct gcp_ws w;
	char *key;
	int rc = ws_key(sb, path, true, &w, &key, err);
	if (!rc)
		rc = gcs_put_empty(w.bucket, key, mode & 07777, time(NULL), NULL, err);
	free(key);
	return rc;
}

int gcp_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err)
{
	struct gcp_ws w;
	int rc = gcp_ws_of(sb, &w, err);
	if (rc)
		return rc;
	char *key = key_of(&w, path, dir);
	if (!key)
		return oom(err);
	if (dir) {
		struct gcs_list l = {0};
		rc = gcs_list(w.bucket, key, false, 2, &l, err);
		bool marker = false;
		for (size_t i = 0; !rc && i < l.nobjs; i++) {
			if (!strcmp(l.objs[i].name, key))
				marker = true;
			else
				rc =
				    sfs_errf(err, -ENOTEMPTY, "gcp: %s: directory not empty", path);
		}
		gcs_list_free(&l);
		/* a directory that was only implied by its objects has no marker */
		if (!rc && marker)
			rc = gcs_delete(w.bucket, key, err);
	} else {
		rc = gcs_delete(w.bucket, key, err);
	}
	free(key);
	return rc;
}

int gcp_copy_prefix(const char *bucket, const char *from, const char *to, bool mirror,
		    struct sfs_err *err)
{
	struct gcs_list src = {0}, dst = {0};
	size_t fl = strlen(from), tl = strlen(to), copied = 0;
	int rc = gcs_list(bucket, from, false, 0, &src, err);
	if (!rc && mirror)
		rc = gcs_list(bucket, to, false, 0, &dst, err);
	for (; !rc && copied < src.nobjs; copied++) {
		struct sfs_buf d = {0};
		if (sfs_buf_printf(&d, "%s%s", to, src.objs[copied].name + fl)) {
			rc = oom(err);
			break;
		}
		rc = gcs_rewrite(bucket, src.objs[copied].name, d.buf, err);
		sfs_buf_free(&d);
	}
	if (rc && !mirror) {
		/* to was new: take back the copies made, so a failure changes
		 * nothing (best effort; the sources are untouched either way) */
		for (size_t i = 0; i < copied; i++) {
			struct sfs_buf d = {0};
			struct sfs_err e = {0};
			if (!sfs_buf_printf(&d, "%s%s", to, src.objs[i].name + fl))
				gcs_delete(bucket, d.buf, &e);
			sfs_buf_free(&d);
		}
	}
	/* deletes only once every copy is made: a failure loses nothing */
	for (size_t i = 0; !rc && i < dst.nobjs; i++) {
		const char *rel = dst.objs[i].name + tl;
		bool keep = false;
		for (size_t j = 0; !keep && j < src.nobjs; j++)
			keep = !strcmp(src.objs[j].name + fl, rel);
		if (!keep) {
			rc = gcs_delete(bucket, dst.objs[i].name, err);
			if (rc == -ENOENT)
				rc = 0;
		}
	}
	gcs_list_free(&src);
	gcs_list_free(&dst);
	return rc;
}

int gcp_delete_prefix(const char *bucket, const char *prefix, struct sfs_err *err)
{
	struct gcs_list l = {0};
	int rc = gcs_list(bucket, prefix, false, 0, &l, err);
	for (size_t i = 0; !rc && i < l.nobjs; i++) {
		rc = gcs_delete(bucket, l.objs[i].name, err);
		if (rc == -ENOENT)
			rc = 0; /* someone else's delete got there first */
	}
	gcs_list_free(&l);
	return rc;
}

/*
 * GCS has no rename: rewrite then delete, object by object (a directory is
 * every object under its prefix).  Every copy is made before any delete,
 * so a failure midway leaves both names holding objects and loses nothing.
 */
int gcp_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err)
{
	struct gcp_ws w;
	int rc = gcp_ws_of(sb, &w, err);
	if (rc)
		return rc;
	char *fk = key_of(&w, from, false), *tk = key_of(&w, to, false);
	struct sfs_buf fp = {0}, tp = {0};
	if (!fk || !tk) {
		rc = oom(err);
		goto out;
	}
	struct gcs_obj o = {0};
	rc = gcs_stat(w.bucket, fk, &o, err);
	gcs_obj_free(&o);
	if (!rc) {
		rc = gcs_rewrite(w.bucket, fk, tk, err);
		if (!rc)
			rc = gcs_delete(w.bucket, fk, err);
		goto out;
	}
	if (rc != -ENOENT)
		goto out;
	if (sfs_buf_printf(&fp, "%s/", fk) || sfs_buf_printf(&tp, "%s/", tk)) {
		rc = oom(err);
		goto out;
	}
	struct gcs_list l = {0};
	rc = gcs_list(w.bucket, fp.buf, false, 1, &l, err);
	if (!rc && !l.nobjs)
		rc = sfs_errf(err, -ENOENT, "gcp: %s: no such file or directory", from);
	gcs_list_free(&l);
	if (!rc)
		rc = gcp_copy_prefix(w.bucket, fp.buf, tp.buf, false, err);
	if (!rc)
		rc = gcp_delete_prefix(w.bucket, fp.buf, err);
out:
	sfs_buf_free(&fp);
	sfs_buf_free(&tp);
	free(fk);
	free(tk);
	return rc;
}

int gcp_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		   struct sfs_err *err)
{
	struct gcp_ws w;
	char *key;
	int rc = ws_key(sb, path, false, &w, &key, err);
	json_t *extra = rc ? NULL : json_pack("{s:s}", GCS_META_SYMLINK, target);
	if (!rc)
		rc = extra ? gcs_put_empty(w.bucket, key, 0777, time(NULL), extra, err) : oom(err);
	json_decref(extra);
	free(key);
	return rc;
}

int gcp_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	struct sfs_rstat st;
	int rc = gcp_fs_stat(sb, path, &st, err);
	if (rc == -ENOENT)
		return sfs_errf(err, rc, "gcp: %s: no such file or directory", path);
	if (rc)
		return rc;
	struct gcp_ws w;
	if ((rc = gcp_ws_of(sb, &w, err)))
		return rc;
	if (!*path)
		return 0; /* the root has no marker of its own to carry a mode */
	char *key = key_of(&w, path, S_ISDIR(st.mode));
	if (!key)
		return oom(err);
	if (S_ISDIR(st.mode)) {
		/* an implied directory gets a marker to carry its mode */
		struct gcs_obj o = {0};
		rc = gcs_stat(w.bucket, key, &o, err);
		gcs_obj_free(&o);
		if (rc == -ENOENT)
			rc = gcs_put_empty(w.bucket, key, mode & 07777, st.mtime, NULL, err);
		else if (!rc)
			rc = gcs_set_meta(w.bucket, key, mode & 07777, st.mtime, err);
	} else {
		rc = gcs_set_meta(w.bucket, key, mode & 07777, st.mtime, err);
	}
	free(key);
	return rc;
}
