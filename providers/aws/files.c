/*
 * The workspace of an aws sandbox: the S3 prefix s3://BUCKET/ROOT (ROOT ends
 * in '/'), behind the remote workspace layer (fs/cache + fs/remote).
 *   file  ROOT+path            body = contents; x-amz-meta-mode (octal st_mode),
 *                              x-amz-meta-mtime (unix seconds)
 *   dir   ROOT+path+"/"        an empty marker object (so empty directories
 *                              exist); a prefix with objects under it is a
 *                              directory whether or not it has a marker
 * A listing is one ListObjectsV2 call with delimiter "/" (pages aside); it
 * carries no metadata, so it shows files 0644 and directories 0755 with
 * LastModified as mtime; fs_stat (one or two list calls) adds a HEAD for a
 * file's stored mode.
 * Writes above AWS_MULTIPART_MIN go up as a multipart upload.
 */
#include "aws.h"
#include "sigv4.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../provider.h"
#include "../untrusted/name.h"
#include "../strbuf.h"
#include "../util.h"

int aws_ws_open(struct sfs_sandbox *sb, struct aws_ws *w, struct sfs_err *err)
{
	memset(w, 0, sizeof(*w));
	const char *id = sb->id, *slash = id ? strchr(id, '/') : NULL;
	if (!slash || slash == id || (size_t)(slash - id) >= sizeof(w->bucket))
		return sfs_errf(err, -EINVAL, "aws: sandbox %s has no bucket in its id", sb->name);
	if (sfs_pathf(w->bucket, sizeof(w->bucket), "%.*s", (int)(slash - id), id) < 0 ||
	    sfs_pathf(w->root, sizeof(w->root), "%s", slash + 1) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "aws: sandbox %s: its id is too long",
				sb->name);
	int rc = aws_config_load(&w->cfg, sfs_opt_get("aws.region"),
				 sfs_opt_get("aws.s3_addressing"), err);
	if (rc)
		return rc;
	const char *miss = aws_config_missing(&w->cfg);
	if (*miss) {
		aws_config_free(&w->cfg);
		return sfs_errf(err, -EACCES, "aws: no %s", miss);
	}
	return 0;
}

void aws_ws_close(struct aws_ws *w)
{
	aws_config_free(&w->cfg);
}

/* ROOT + path (+ "/" for a directory marker), malloc'd. */
static char *key_of(const struct aws_ws *w, const char *path, bool dir)
{
	struct sfs_buf b = {0};
	if (sfs_buf_printf(&b, "%s%s%s", w->root, path, dir && *path ? "/" : ""))
		return NULL;
	return sfs_buf_take(&b);
}

static int oom(struct sfs_err *err)
{
	return sfs_errf(err, -ENOMEM, "out of memory");
}

int aws_put_marker(struct aws_ws *w, const char *path, mode_t mode, struct sfs_err *err)
{
	char *key = key_of(w, path, true);
	char mh[64], th[64];
	snprintf(mh, sizeof(mh), "x-amz-meta-mode: %o", (unsigned)(S_IFDIR | (mode & 07777)));
	snprintf(th, sizeof(th), "x-amz-meta-mtime: %lld", (long long)time(NULL));
	const char *h[] = {mh, th, NULL};
	if (!key)
		return oom(err);
	struct aws_s3_call call = {.method = "PUT", .key = key, .headers = h, .sink_fd = -1};
	int rc = aws_s3(&w->cfg, w->bucket, &call, NULL, NULL, NULL, err);
	free(key);
	return rc;
}

static void fill_list_stat(struct sfs_rstat *st, bool dir, int64_t size, int64_t mtime)
{
	memset(st, 0, sizeof(*st));
	st->mode = dir ? (S_IFDIR | 0755) : (S_IFREG | 0644);
	st->size = dir ? 0 : size;
	st->mtime = mtime;
}

int aws_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err)
{
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	if (!*path) {
		fill_list_stat(st, true, 0, 0);
		aws_ws_close(&w);
		return 0;
	}
	/* The exact key sorts first among the keys it prefixes, so a list of
	 * one says whether it is a file.  A directory needs a second list of
	 * "path/": names like "path-1" or "path.txt" sort before "path/" and
	 * could fill any short first page. */
	char *key = key_of(&w, path, false), *dkey = key_of(&w, path, true);
	struct aws_s3_list l = {0};
	rc = key && dkey ? aws_s3_list(&w.cfg, w.bucket, key, true, 1, &l, err) : oom(err);
	bool found = false;
	if (!rc && l.nobjs && !strcmp(l.objs[0].key, key)) {
		fill_list_stat(st, false, l.objs[0].size, l.objs[0].mtime);
		found = true;
	}
	if (!rc && !found) {
		aws_s3_list_free(&l);
		rc = aws_s3_list(&w.cfg, w.bucket, dkey, false, 1, &l, err);
		if (!rc && l.nobjs) {
			fill_list_stat(st, true, 0, 0);
			found = true;
		}
	}
	if (!rc && !found)
		rc = -ENOENT; /* no message: a lookup of a missing name is normal */
	if (!rc && S_ISREG(st->mode)) {
		/* the stored mode and mtime, when the object has them */
		char *mode = NULL;
		struct aws_s3_call call = {
		    .method = "HEAD", .key = key, .sink_fd = -1, .capture = "x-amz-meta-mode"};
		struct sfs_err e = {0};
		if (!aws_s3(&w.cfg, w.bucket, &call, NULL, NULL, &mode, &e) && mode) {
			unsigned long m = strtoul(mode, NULL, 8);
			if (S_ISREG(m))
				st->mode = (mode_t)m;
		}
		free(mode);
	}
	aws_s3_list_free(&l);
	free(key);
	free(dkey);
	aws_ws_close(&w);
	return rc;
}

int aws_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
		struct sfs_err *err)
{
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	char *prefix = key_of(&w, path, true);
	struct aws_s3_list l = {0};
	rc = prefix ? aws_s3_list(&w.cfg, w.bucket, prefix, true, 0, &l, err) : oom(err);
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
		const char *name = l.objs[i].key + pl;
		int k = sfs_store_entry(name, false, &len);
		if (k < 0)
			sfs_name_drop(&drops, name, len);
		if (k <= 0)
			continue; /* the directory's own marker */
		(*ents)[*n].name = strdup(name);
		if (!(*ents)[*n].name) {
			rc = oom(err);
			break;
		}
		fill_list_stat(&(*ents)[*n].st, false, l.objs[i].size, l.objs[i].mtime);
		(*n)++;
	}
	for (size_t i = 0; !rc && i < l.nprefixes; i++) {
		const char *p = l.prefixes[i] + pl;
		int k = sfs_store_entry(p, true, &len);
		if (k < 0)
			sfs_name_drop(&drops, p, len);
		if (k <= 0)
			continue;
		(*ents)[*n].name = strndup(p, len);
		if (!(*ents)[*n].name) {
			rc = oom(err);
			break;
		}
		fill_list_stat(&(*ents)[*n].st, true, 0, 0);
		(*n)++;
	}
	sfs_store_left_out("aws", sb->name, "s3", w.bucket, prefix, &drops);
	if (rc) {
		sfs_rdirents_free(*ents, *n);
		*ents = NULL;
		*n = 0;
	}
	aws_s3_list_free(&l);
	free(prefix);
	aws_ws_close(&w);
	return rc;
}

int aws_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err)
{
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	char *key = key_of(&w, path, false);
	struct aws_s3_call call = {.method = "GET", .key = key, .sink_fd = fd};
	rc = key ? aws_s3(&w.cfg, w.bucket, &call, NULL, NULL, NULL, err) : oom(err);
	free(key);
	aws_ws_close(&w);
	return rc;
}

/* Reads len bytes at off of fd into a new buffer. */
static int read_at(int fd, off_t off, size_t len, char **out, struct sfs_err *err)
{
	char *buf = malloc(len ? len : 1);
	if (!buf)
		return oom(err);
	size_t got = 0;
	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			free(buf);
			return sfs_errf(err, r < 0 ? -errno : -EIO,
					"aws: reading the file to upload: %s",
					r < 0 ? strerror(errno) : "it shrank");
		}
		got += (size_t)r;
	}
	*out = buf;
	return 0;
}

static int multipart(struct aws_ws *w, const char *key, int fd, off_t size, const char *const *meta,
		     struct sfs_err *err)
{
	struct sfs_buf body = {0}, done = {0};
	struct aws_s3_call create = {
	    .method = "POST", .key = key, .query = "uploads", .headers = meta, .sink_fd = -1};
	int rc = aws_s3(&w->cfg, w->bucket, &create, NULL, &body, NULL, err);
	char *uid = rc ? NULL : aws_xml_text(body.buf, body.len, "UploadId");
	sfs_buf_free(&body);
	if (rc)
		return rc;
	if (!uid)
		return sfs_errf(err, -EPROTO, "aws: s3 multipart upload of %s: no UploadId", key);
	struct sfs_buf q = {0};
	rc = sfs_buf_adds(&done, "<CompleteMultipartUpload>") ? oom(err) : 0;
	int part = 0;
	for (off_t off = 0; !rc && off < size; off += AWS_MULTIPART_PART) {
		size_t len =
		    (size_t)(size - off < AWS_MULTIPART_PART ? size - off : AWS_MULTIPART_PART);
		char *data = NULL, *etag = NULL;
		part++;
		rc = read_at(fd, off, len, &data, err);
		sfs_buf_reset(&q);
		if (!rc && sfs_buf_printf(&q, "partNumber=%d&uploadId=%s", part, uid))
			rc = oom(err);
		struct aws_s3_call put = {.method = "PUT",
					  .key = key,
					  .query = q.buf,
					  .body = data,
					  .body_len = len,
					  .sink_fd = -1,
					  .capture = "ETag"};
		if (!rc)
			rc = aws_s3(&w->cfg, w->bucket, &put, NULL, NULL, &etag, err);
		if (!rc && !etag)
			rc = sfs_errf(err, -EPROTO, "aws: s3 part %d of %s: no ETag", part, key);
		if (!rc &&
		    sfs_buf_printf(&done, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>",
				   part, etag))
			rc = oom(err);
		free(data);
		free(etag);
	}
	if (!rc && sfs_buf_adds(&done, "</CompleteMultipartUpload>"))
		rc = oom(err);
	sfs_buf_reset(&q);
	if (sfs_buf_printf(&q, "uploadId=%s", uid) && !rc)
		rc = oom(err);
	if (!rc) {
		struct sfs_buf resp = {0};
		struct aws_s3_call complete = {.method = "POST",
					       .key = key,
					       .query = q.buf,
					       .body = done.buf,
					       .body_len = done.len,
					       .sink_fd = -1,
					       .retry_unsafe = true};
		rc = aws_s3(&w->cfg, w->bucket, &complete, NULL, &resp, NULL, err);
		/* S3 may answer 200 and then report an error in the body */
		char *code = rc ? NULL : aws_xml_text(resp.buf, resp.len, "Code");
		if (code)
			rc = sfs_errf(err, -EIO, "aws: s3 completing the upload of %s: %s", key,
				      code);
		free(code);
		sfs_buf_free(&resp);
	} else if (q.buf) {
		/* leave no half-finished upload behind (it costs storage) */
		struct sfs_err e = {0};
		struct aws_s3_call abort_call = {
		    .method = "DELETE", .key = key, .query = q.buf, .sink_fd = -1};
		aws_s3(&w->cfg, w->bucket, &abort_call, NULL, NULL, NULL, &e);
	}
	sfs_buf_free(&q);
	sfs_buf_free(&done);
	free(uid);
	return rc;
}

int aws_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err)
{
	struct stat st;
	if (fstat(fd, &st))
		return sfs_errf(err, -errno, "aws: %s: %s", path, strerror(errno));
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	char mh[64], th[64];
	snprintf(mh, sizeof(mh), "x-amz-meta-mode: %o", (unsigned)(S_IFREG | (mode & 07777)));
	snprintf(th, sizeof(th), "x-amz-meta-mtime: %lld", (long long)st.st_mtime);
	const char *meta[] = {mh, th, NULL};
	char *key = key_of(&w, path, false);
	if (!key) {
		rc = oom(err);
	} else if (st.st_size > AWS_MULTIPART_MIN) {
		rc = multipart(&w, key, fd, st.st_size, meta, err);
	} else {
		char *data = NULL;
		rc = read_at(fd, 0, (size_t)st.st_size, &data, err);
		struct aws_s3_call put = {.method = "PUT",
					  .key = key,
					  .headers = meta,
					  .body = data,
					  .body_len = (size_t)st.st_size,
					  .sink_fd = -1};
		if (!rc)
			rc = aws_s3(&w.cfg, w.bucket, &put, NULL, NULL, NULL, err);
		free(data);
	}
	free(key);
	aws_ws_close(&w);
	return rc;
}

int aws_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	rc = aws_put_marker(&w, path, mode, err);
	aws_ws_close(&w);
	return rc;
}

static int delete_key(struct aws_ws *w, const char *key, struct sfs_err *err)
{
	struct aws_s3_call call = {.method = "DELETE", .key = key, .sink_fd = -1};
	return aws_s3(&w->cfg, w->bucket, &call, NULL, NULL, NULL, err);
}

int aws_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err)
{
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	char *key = key_of(&w, path, dir);
	if (!key) {
		rc = oom(err);
	} else if (dir) {
		struct aws_s3_list l = {0};
		rc = aws_s3_list(&w.cfg, w.bucket, key, false, 2, &l, err);
		for (size_t i = 0; !rc && i < l.nobjs; i++)
			if (strcmp(l.objs[i].key, key))
				rc =
				    sfs_errf(err, -ENOTEMPTY, "aws: %s: directory not empty", path);
		aws_s3_list_free(&l);
		if (!rc)
			rc = delete_key(&w, key, err);
	} else {
		rc = delete_key(&w, key, err);
	}
	free(key);
	aws_ws_close(&w);
	return rc;
}

/* Server-side copy of src to dst; REPLACE with meta when meta is given. */
static int copy_key(struct aws_ws *w, const char *src, const char *dst, const char *const *meta,
		    struct sfs_err *err)
{
	struct sfs_buf cs = {0};
	const char *h[6] = {0};
	size_t n = 0;
	int rc = sfs_buf_printf(&cs, "x-amz-copy-source: /%s/", w->bucket);
	if (!rc)
		rc = sfs_sigv4_uri_encode(&cs, src, strlen(src), true);
	if (rc)
		return oom(err);
	h[n++] = cs.buf;
	if (meta) {
		h[n++] = "x-amz-metadata-directive: REPLACE";
		for (size_t i = 0; meta[i] && n < 5; i++)
			h[n++] = meta[i];
	}
	struct sfs_buf body = {0};
	struct aws_s3_call call = {.method = "PUT", .key = dst, .headers = h, .sink_fd = -1};
	rc = aws_s3(&w->cfg, w->bucket, &call, NULL, &body, NULL, err);
	/* a copy may answer 200 with an <Error> body */
	char *code = rc ? NULL : aws_xml_text(body.buf, body.len, "Code");
	if (code)
		rc = sfs_errf(err, -EIO, "aws: s3 copy of %s: %s", src, code);
	free(code);
	sfs_buf_free(&body);
	sfs_buf_free(&cs);
	return rc;
}

/*
 * S3 has no rename: copy then delete, object by object (a directory is
 * every key under its prefix).  Not atomic: a failure midway leaves both
 * names holding some objects and nothing lost; the error says so.
 */
int aws_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err)
{
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	char *fk = key_of(&w, from, false), *tk = key_of(&w, to, false);
	struct aws_s3_list l = {0};
	if (!fk || !tk) {
		rc = oom(err);
		goto out;
	}
	/* a file of that name, else a directory prefix "from/" */
	rc = aws_s3_list(&w.cfg, w.bucket, fk, true, 3, &l, err);
	bool file = false;
	for (size_t i = 0; !rc && i < l.nobjs; i++)
		file = file || !strcmp(l.objs[i].key, fk);
	aws_s3_list_free(&l);
	if (rc)
		goto out;
	if (file) {
		rc = copy_key(&w, fk, tk, NULL, err);
		if (!rc)
			rc = delete_key(&w, fk, err);
		goto out;
	}
	struct sfs_buf fp = {0}, tp = {0};
	if (sfs_buf_printf(&fp, "%s/", fk) || sfs_buf_printf(&tp, "%s/", tk)) {
		sfs_buf_free(&fp);
		rc = oom(err);
		goto out;
	}
	rc = aws_s3_list(&w.cfg, w.bucket, fp.buf, false, 0, &l, err);
	if (!rc && !l.nobjs)
		rc = sfs_errf(err, -ENOENT, "aws: %s: no such file or directory", from);
	for (size_t i = 0; !rc && i < l.nobjs; i++) {
		struct sfs_buf dst = {0};
		if (sfs_buf_printf(&dst, "%s%s", tp.buf, l.objs[i].key + fp.len)) {
			rc = oom(err);
			break;
		}
		rc = copy_key(&w, l.objs[i].key, dst.buf, NULL, err);
		sfs_buf_free(&dst);
	}
	/* deletes only once every copy is made: a failed copy loses nothing */
	for (size_t i = 0; !rc && i < l.nobjs; i++)
		rc = delete_key(&w, l.objs[i].key, err);
	aws_s3_list_free(&l);
	sfs_buf_free(&fp);
	sfs_buf_free(&tp);
out:
	free(fk);
	free(tk);
	aws_ws_close(&w);
	return rc;
}

int aws_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	struct aws_ws w;
	struct sfs_rstat st;
	int rc = aws_fs_stat(sb, path, &st, err);
	if (rc == -ENOENT)
		return sfs_errf(err, rc, "aws: %s: no such file or directory", path);
	if (!rc)
		rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	if (S_ISDIR(st.mode)) {
		rc = *path ? aws_put_marker(&w, path, mode, err) : 0;
	} else {
		char mh[64], th[64];
		snprintf(mh, sizeof(mh), "x-amz-meta-mode: %o",
			 (unsigned)(S_IFREG | (mode & 07777)));
		snprintf(th, sizeof(th), "x-amz-meta-mtime: %lld", (long long)st.mtime);
		const char *meta[] = {mh, th, NULL};
		char *key = key_of(&w, path, false);
		rc = key ? copy_key(&w, key, key, meta, err) : oom(err);
		free(key);
	}
	aws_ws_close(&w);
	return rc;
}
