/*
 * The Cloud Storage JSON API calls of the gcp provider
 * (provider-apis-aws-gcp.md §9): list with fields= and a delimiter, object
 * metadata, media download, multipart and resumable uploads, rewrite,
 * PATCH and delete.  Object names travel as one percent-encoded path
 * segment ('/' too) or as a query value.
 */
#include "gcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../http/http.h"
#include "../strbuf.h"
#include "../util.h"

#define LIST_FIELDS "items(name,size,updated,metadata),prefixes,nextPageToken"
#define OBJ_FIELDS "name,size,updated,metadata"

static int oom(struct sfs_err *err)
{
	return sfs_errf(err, -ENOMEM, "out of memory");
}

/* storage root + fmt, with the bucket and object escaped by the caller */
static char *url_of(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *url_of(const char *fmt, ...)
{
	char *root = gcp_storage_url();
	struct sfs_buf b = {0};
	va_list ap;
	va_start(ap, fmt);
	int rc = !root || sfs_buf_adds(&b, root) || sfs_buf_vprintf(&b, fmt, ap);
	va_end(ap);
	free(root);
	if (rc) {
		sfs_buf_free(&b);
		return NULL;
	}
	return sfs_buf_take(&b);
}

/* "gcs VERB gs://bucket/name" for messages */
static void what_of(char *buf, size_t len, const char *verb, const char *bucket, const char *name)
{
	snprintf(buf, len, "gcs %s gs://%s/%s", verb, bucket,
		 name ? name : ""); /* message: may be cut */
}

/* storage root + /storage/v1/b/BUCKET/o/NAME + suffix, both escaped */
static char *obj_url(const char *bucket, const char *name, const char *suffix)
{
	char *eb = sfs_http_escape_component(bucket), *en = sfs_http_escape_component(name);
	char *url = eb && en ? url_of("/storage/v1/b/%s/o/%s%s", eb, en, suffix) : NULL;
	free(eb);
	free(en);
	return url;
}

void gcs_obj_free(struct gcs_obj *o)
{
	free(o->name);
	free(o->link);
	memset(o, 0, sizeof(*o));
}

void gcs_list_free(struct gcs_list *l)
{
	for (size_t i = 0; i < l->nobjs; i++)
		gcs_obj_free(&l->objs[i]);
	for (size_t i = 0; i < l->nprefixes; i++)
		free(l->prefixes[i]);
	free(l->objs);
	free(l->prefixes);
	memset(l, 0, sizeof(*l));
}

static int obj_from_json(json_t *it, struct gcs_obj *o)
{
	memset(o, 0, sizeof(*o));
	const char *name = json_string_value(json_object_get(it, "name"));
	if (!name)
		return -EPROTO;
	long long size = gcp_int64(json_object_get(it, "size"));
	o->size = size < 0 ? 0 : size;
	o->mtime = gcp_time(json_string_value(json_object_get(it, "updated")));
	json_t *md = json_object_get(it, "metadata");
	const char *m = json_string_value(json_object_get(md, GCS_META_MODE));
	const char *t = json_string_value(json_object_get(md, GCS_META_MTIME));
	if (m) {
		char *end;
		unsigned long v = strtoul(m, &end, 8);
		if (*m && !*end && v <= 07777)
			o->mode = (unsigned)v;
	}
	if (t) {
		char *end;
		long long v = strtoll(t, &end, 10);
		if (*t && !*end && v >= 0)
			o->mtime = v;
	}
	const char *link = json_string_value(json_object_get(md, GCS_META_SYMLINK));
	if (link && *link && !(o->link = strdup(link)))
		return -ENOMEM;
	return (o->name = strdup(name)) ? 0 : -ENOMEM;
}

int gcs_parse_list(json_t *o, struct gcs_list *l, char **next)
{
	*next = NULL;
	json_t *items = json_object_get(o, "items"), *pre = json_object_get(o, "prefixes");
	if ((items && !json_is_array(items)) || (pre && !json_is_array(pre)))
		return -EPROTO;
	size_t ni = json_array_size(items), np = json_array_size(pre);
	if (ni) {
		struct gcs_obj *v = realloc(l->objs, (l->nobjs + ni) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->objs = v;
		for (size_t i = 0; i < ni; i++) {
			int rc = obj_from_json(json_array_get(items, i), &l->objs[l->nobjs]);
			if (rc)
				return rc;
			l->nobjs++;
		}
	}
	if (np) {
		char **v = realloc(l->prefixes, (l->nprefixes + np) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		l->prefixes = v;
		for (size_t i = 0; i < np; i++) {
			const char *p = json_string_value(json_array_get(pre, i));
			if (!p)
				return -EPROTO;
			if (!(l->prefixes[l->nprefixes] = strdup(p)))
				return -ENOMEM;
			l->nprefixes++;
		}
	}
	const char *tok = json_string_value(json_object_get(o, "nextPageToken"));
	if (tok && *tok && !(*next = strdup(tok)))
		return -ENOMEM;
	return 0;
}

int gcs_list(const char *bucket, const char *prefix, bool delim, size_t max, struct gcs_list *l,
	     struct sfs_err *err)
{
	char *eb = sfs_http_escape_component(bucket), *ep = sfs_http_escape_component(prefix);
	char *token = NULL, what[1200];
	what_of(what, sizeof(what), "list", bucket, prefix);
	int rc = eb && ep ? 0 : oom(err);
	do {
		char *et = token ? sfs_http_escape_component(token) : NULL;
		size_t page = max && max - l->nobjs < 1000 ? max - l->nobjs : 1000;
		char *url =
		    rc || (token && !et)
			? NULL
			: url_of("/storage/v1/b/%s/o?prefix=%s%s&maxResults=%zu&fields=%s%s%s", eb,
				 ep, delim ? "&delimiter=%2F&includeTrailingDelimiter=true" : "",
				 page, LIST_FIELDS, et ? "&pageToken=" : "", et ? et : "");
		free(et);
		free(token);
		token = NULL;
		if (!rc && !url)
			rc = oom(err);
		json_t *o = NULL;
		struct gcp_call c = {.method = "GET", .url = url, .sink_fd = -1, .what = what};
		if (!rc)
			rc = gcp_call(&c, NULL, &o, NULL, err);
		free(url);
		if (!rc) {
			int p = gcs_parse_list(o, l, &token);
			if (p)
				rc = p == -ENOMEM
					 ? oom(err)
					 : sfs_errf(err, -EPROTO,
						    "gcp: %s: the answer is not a listing", what);
		}
		json_decref(o);
	} while (!rc && token && (!max || l->nobjs < max));
	free(token);
	free(eb);
	free(ep);
	if (rc == -ENOENT && err) {
		/* a list only 404s for its bucket */
		char msg[sizeof(err->msg)];
		snprintf(msg, sizeof(msg), "%s", err->msg); /* message: may be cut */
		rc = sfs_errf(err, -ENOENT, "%s (no bucket %s)", msg, bucket);
	}
	return rc;
}

int gcs_stat(const char *bucket, const char *name, struct gcs_obj *o, struct sfs_err *err)
{
	char *url = obj_url(bucket, name, "?fields=" OBJ_FIELDS);
	if (!url)
		return oom(err);
	char what[1200];
	what_of(what, sizeof(what), "GET", bucket, name);
	json_t *j = NULL;
	struct sfs_err e = {0};
	struct gcp_call c = {.method = "GET", .url = url, .sink_fd = -1, .what = what};
	long status = 0;
	int rc = gcp_call(&c, &status, &j, NULL, &e);
	free(url);
	if (rc == -ENOENT && status == 404) {
		json_decref(j);
		return -ENOENT; /* a lookup of a missing name is normal */
	}
	if (rc) {
		sfs_errf(err, rc, "%s", e.msg);
		return rc;
	}
	rc = obj_from_json(j, o);
	json_decref(j);
	if (rc)
		return rc == -ENOMEM
			   ? oom(err)
			   : sfs_errf(err, -EPROTO, "gcp: %s: no object in the answer", what);
	return 0;
}

int gcs_metadata(const char *bucket, const char *name, json_t **md, struct sfs_err *err)
{
	*md = NULL;
	char *url = obj_url(bucket, name, "?fields=metadata");
	if (!url)
		return oom(err);
	char what[1200];
	what_of(what, sizeof(what), "GET", bucket, name);
	json_t *j = NULL;
	struct gcp_call c = {.method = "GET", .url = url, .sink_fd = -1, .what = what};
	int rc = gcp_call(&c, NULL, &j, NULL, err);
	free(url);
	if (!rc) {
		json_t *m = json_object_get(j, "metadata");
		*md = json_is_object(m) ? json_incref(m) : json_object();
		if (!*md)
			rc = oom(err);
	}
	json_decref(j);
	return rc;
}

int gcs_download(const char *bucket, const char *name, int fd, struct sfs_err *err)
{
	char *url = obj_url(bucket, name, "?alt=media");
	if (!url)
		return oom(err);
	char what[1200];
	what_of(what, sizeof(what), "GET", bucket, name);
	struct gcp_call c = {.method = "GET", .url = url, .sink_fd = fd, .what = what};
	int rc = gcp_call(&c, NULL, NULL, NULL, err);
	free(url);
	return rc;
}

/* The object resource of an upload: name, metadata with mode and mtime. */
static json_t *resource_of(const char *name, unsigned mode, int64_t mtime)
{
	char m[16], t[24];
	snprintf(m, sizeof(m), "%o", mode & 07777);
	snprintf(t, sizeof(t), "%lld", (long long)mtime);
	return json_pack("{s:s, s:s, s:{s:s, s:s}}", "name", name, "contentType",
			 "application/octet-stream", "metadata", GCS_META_MODE, m, GCS_META_MTIME,
			 t);
}

static int read_at(int fd, off_t off, size_t len, char *buf, struct sfs_err *err)
{
	size_t got = 0;
	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, off + (off_t)got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return sfs_errf(err, r < 0 ? -errno : -EIO,
					"gcp: reading the file to upload: %s",
					r < 0 ? strerror(errno) : "it shrank");
		got += (size_t)r;
	}
	return 0;
}

/* multipart/related: the JSON resource, then the bytes (libcurl's mime
 * makes form-data, which GCS does not take). */
static int upload_multipart(const char *bucket, const char *name, json_t *res, const char *data,
			    size_t len, struct sfs_err *err)
{
	static const char boundary[] = "sfs-gcs-2f9c1d7e0b";
	char *meta = json_dumps(res, JSON_COMPACT);
	char *eb = sfs_http_escape_component(bucket);
	char *url = eb ? url_of("/upload/storage/v1/b/%s/o?uploadType=multipart", eb) : NULL;
	struct sfs_buf body = {0};
	int rc = meta && url ? 0 : oom(err);
	if (!rc &&
	    (sfs_buf_printf(&body,
			    "--%s\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n%s\r\n"
			    "--%s\r\nContent-Type: application/octet-stream\r\n\r\n",
			    boundary, meta, boundary) ||
	     sfs_buf_add(&body, data, len) || sfs_buf_printf(&body, "\r\n--%s--\r\n", boundary)))
		rc = oom(err);
	char ctype[80], what[1200];
	if (sfs_pathf(ctype, sizeof(ctype), "multipart/related; boundary=%s", boundary) < 0 && !rc)
		rc = sfs_errf(err, -ENAMETOOLONG, "gcs: multipart boundary too long");
	what_of(what, sizeof(what), "upload", bucket, name);
	if (!rc) {
		/* an unconditional upload of the same bytes may be repeated */
		struct gcp_call c = {.method = "POST",
				     .url = url,
				     .body = body.buf,
				     .body_len = body.len,
				     .content_type = ctype,
				     .sink_fd = -1,
				     .retry_unsafe = true,
				     .what = what};
		rc = gcp_call(&c, NULL, NULL, NULL, err);
	}
	sfs_buf_free(&body);
	free(meta);
	free(eb);
	free(url);
	return rc;
}

/* Resumable: a session, then GCS_CHUNK pieces with Content-Range; 308 says
 * "go on" with the persisted range, which is where the next piece starts. */
static int upload_resumable(const char *bucket, const char *name, json_t *res, int fd, off_t size,
			    struct sfs_err *err)
{
	char *eb = sfs_http_escape_component(bucket);
	char *url = eb ? url_of("/upload/storage/v1/b/%s/o?uploadType=resumable", eb) : NULL;
	free(eb);
	if (!url)
		return oom(err);
	char what[1200], lenh[64];
	what_of(what, sizeof(what), "resumable upload", bucket, name);
	snprintf(lenh, sizeof(lenh), "X-Upload-Content-Length: %lld", (long long)size);
	const char *h[] = {"X-Upload-Content-Type: application/octet-stream", lenh, NULL};
	char *session = NULL;
	struct gcp_call start = {.method = "POST",
				 .url = url,
				 .headers = h,
				 .json = res,
				 .sink_fd = -1,
				 .capture = "Location",
				 .retry_unsafe = true, /* an unused session expires by itself */
				 .what = what};
	int rc = gcp_call(&start, NULL, NULL, &session, err);
	free(url);
	if (!rc && !session)
		rc = sfs_errf(err, -EPROTO, "gcp: %s: no session URI (Location) in the answer",
			      what);
	char *buf = rc ? NULL : malloc(GCS_CHUNK);
	if (!rc && !buf)
		rc = oom(err);
	off_t off = 0;
	while (!rc) {
		if (off >= size) {
			rc =
			    sfs_errf(err, -EIO,
				     "gcp: %s: every byte was sent, and no object came back", what);
			break;
		}
		size_t len = (size_t)(size - off < GCS_CHUNK ? size - off : GCS_CHUNK);
		char range[96];
		snprintf(range, sizeof(range), "Content-Range: bytes %lld-%lld/%lld",
			 (long long)off, (long long)(off + (off_t)len - 1), (long long)size);
		const char *ph[] = {range, NULL};
		if ((rc = read_at(fd, off, len, buf, err)))
			break;
		long status = 0;
		char *persisted = NULL;
		struct gcp_call put = {.method = "PUT",
				       .url = session,
				       .headers = ph,
				       .body = buf,
				       .body_len = len,
				       .content_type = "application/octet-stream",
				       .sink_fd = -1,
				       .capture = "Range",
				       .ok_308 = true,
				       .what = what};
		rc = gcp_call(&put, &status, NULL, &persisted, err);
		if (!rc && status != 308) {
			free(persisted);
			break; /* 200/201: the object exists */
		}
		if (!rc) {
			/* "bytes=0-N": the server has N+1 bytes; absent: none */
			long long upto = -1;
			if (persisted && sscanf(persisted, "bytes=0-%lld", &upto) != 1)
				upto = -1;
			if (upto + 1 <= off)
				rc = sfs_errf(err, -EIO,
					      "gcp: %s: the server kept nothing of bytes %lld-%lld",
					      what, (long long)off,
					      (long long)(off + (off_t)len - 1));
			off = (off_t)(upto + 1);
		}
		free(persisted);
	}
	if (rc && session) {
		/* cancel the session: nothing half-written stays behind */
		struct sfs_err e = {0};
		struct gcp_call del = {
		    .method = "DELETE", .url = session, .sink_fd = -1, .what = what};
		gcp_call(&del, NULL, NULL, NULL, &e);
	}
	free(buf);
	free(session);
	return rc;
}

int gcs_upload_fd(const char *bucket, const char *name, int fd, off_t size, unsigned mode,
		  int64_t mtime, struct sfs_err *err)
{
	json_t *res = resource_of(name, mode, mtime);
	if (!res)
		return oom(err);
	int rc;
	if (size > GCS_RESUMABLE_MIN) {
		rc = upload_resumable(bucket, name, res, fd, size, err);
	} else {
		char *data = malloc(size ? (size_t)size : 1);
		rc = data ? read_at(fd, 0, (size_t)size, data, err) : oom(err);
		if (!rc)
			rc = upload_multipart(bucket, name, res, data, (size_t)size, err);
		free(data);
	}
	json_decref(res);
	return rc;
}

int gcs_put_empty(const char *bucket, const char *name, unsigned mode, int64_t mtime, json_t *extra,
		  struct sfs_err *err)
{
	json_t *res = resource_of(name, mode, mtime);
	if (!res || (extra && json_object_update(json_object_get(res, "metadata"), extra))) {
		json_decref(res);
		return oom(err);
	}
	int rc = upload_multipart(bucket, name, res, "", 0, err);
	json_decref(res);
	return rc;
}

int gcs_rewrite(const char *bucket, const char *src, const char *dst, struct sfs_err *err)
{
	char *eb = sfs_http_escape_component(bucket), *es = sfs_http_escape_component(src),
	     *ed = sfs_http_escape_component(dst);
	char what[2400];
	snprintf(what, sizeof(what), "gcs rewrite gs://%s/%s to %s", bucket, src,
		 dst); /* message: may be cut */
	int rc = eb && es && ed ? 0 : oom(err);
	char *token = NULL;
	for (int round = 0; !rc; round++) {
		char *et = token ? sfs_http_escape_component(token) : NULL;
		char *url = url_of("/storage/v1/b/%s/o/%s/rewriteTo/b/%s/o/%s%s%s", eb, es, eb, ed,
				   et ? "?rewriteToken=" : "", et ? et : "");
		free(et);
		free(token);
		token = NULL;
		if (!url) {
			rc = oom(err);
			break;
		}
		json_t *empty = json_object(), *o = NULL;
		struct gcp_call c = {.method = "POST",
				     .url = url,
				     .json = empty,
				     .sink_fd = -1,
				     .retry_unsafe = true, /* a copy repeated is the same copy */
				     .what = what};
		rc = gcp_call(&c, NULL, &o, NULL, err);
		json_decref(empty);
		free(url);
		if (!rc && !json_is_true(json_object_get(o, "done"))) {
			const char *t = json_string_value(json_object_get(o, "rewriteToken"));
			if (!t || !*t || round > 10000)
				rc = sfs_errf(err, -EPROTO, "gcp: %s: not done and no rewriteToken",
					      what);
			else if (!(token = strdup(t)))
				rc = oom(err);
			json_decref(o);
			continue;
		}
		json_decref(o);
		break;
	}
	free(token);
	free(eb);
	free(es);
	free(ed);
	return rc;
}

int gcs_set_meta(const char *bucket, const char *name, unsigned mode, int64_t mtime,
		 struct sfs_err *err)
{
	char *url = obj_url(bucket, name, "?fields=name");
	char m[16], t[24], what[1200];
	snprintf(m, sizeof(m), "%o", mode & 07777);
	snprintf(t, sizeof(t), "%lld", (long long)mtime);
	json_t *body = json_pack("{s:{s:s, s:s}}", "metadata", GCS_META_MODE, m, GCS_META_MTIME, t);
	what_of(what, sizeof(what), "PATCH", bucket, name);
	int rc = url && body ? 0 : oom(err);
	struct gcp_call c = {
	    .method = "PATCH", .url = url, .json = body, .sink_fd = -1, .what = what};
	if (!rc)
		rc = gcp_call(&c, NULL, NULL, NULL, err);
	json_decref(body);
	free(url);
	return rc;
}

int gcs_delete(const char *bucket, const char *name, struct sfs_err *err)
{
	char *url = obj_url(bucket, name, "");
	if (!url)
		return oom(err);
	char what[1200];
	what_of(what, sizeof(what), "DELETE", bucket, name);
	struct gcp_call c = {.method = "DELETE", .url = url, .sink_fd = -1, .what = what};
	int rc = gcp_call(&c, NULL, NULL, NULL, err);
	free(url);
	return rc;
}
