/*
 * Native snapshots and fork, as server-side copies (CopyObject, metadata
 * copied with the object): a snapshot is the prefix's objects under
 * PREFIX/.sandboxfs/NAME/snapshots/ID/; restore copies them back and then
 * deletes what the snapshot does not have (every copy before any delete, so
 * a failure midway loses nothing); fork copies the prefix (or a snapshot of
 * it) to the new sandbox's prefix.
 */
#include "aws.h"
#include "sigv4.h"
#include "state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../provider.h"
#include "../strbuf.h"

/* CopyObject src -> dst in the same bucket (COPY keeps mode and mtime). */
static int copy_obj(struct aws_ws *w, const char *src, const char *dst, struct sfs_err *err)
{
	struct sfs_buf h = {0}, body = {0};
	int rc = sfs_buf_printf(&h, "x-amz-copy-source: %s/", w->bucket);
	if (!rc)
		rc = sfs_sigv4_uri_encode(&h, src, strlen(src), true);
	if (rc) {
		sfs_buf_free(&h);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	const char *hdrs[] = {h.buf, NULL};
	struct aws_s3_call call = {.method = "PUT", .key = dst, .headers = hdrs, .sink_fd = -1};
	rc = aws_s3(&w->cfg, w->bucket, &call, NULL, &body, NULL, err);
	/* S3 may answer 200 with an <Error> body to a copy */
	char *code = rc ? NULL : aws_xml_text(body.buf, body.len, "Code");
	if (code) {
		char *msg = aws_xml_text(body.buf, body.len, "Message");
		rc = sfs_errf(err, -EIO, "aws: s3 copy s3://%s/%s: %s: %s", w->bucket, src, code,
			      msg ? msg : "no message");
		free(msg);
		free(code);
	}
	sfs_buf_free(&h);
	sfs_buf_free(&body);
	return rc;
}

/* Every object under from copied to the same name under to. */
static int copy_prefix(struct aws_ws *w, const char *from, const char *to, struct sfs_err *err)
{
	struct aws_s3_list l = {0};
	int rc = aws_s3_list(&w->cfg, w->bucket, from, false, 0, &l, err);
	size_t fl = strlen(from);
	for (size_t i = 0; !rc && i < l.nobjs; i++) {
		struct sfs_buf dst = {0};
		if (sfs_buf_printf(&dst, "%s%s", to, l.objs[i].key + fl))
			rc = sfs_errf(err, -ENOMEM, "out of memory");
		else
			rc = copy_obj(w, l.objs[i].key, dst.buf, err);
		sfs_buf_free(&dst);
	}
	aws_s3_list_free(&l);
	return rc;
}

static int delete_prefix(struct aws_ws *w, const char *prefix, struct sfs_err *err)
{
	struct aws_s3_list l = {0};
	int rc = aws_s3_list(&w->cfg, w->bucket, prefix, false, 0, &l, err);
	for (size_t i = 0; !rc && i < l.nobjs; i++) {
		struct aws_s3_call call = {.method = "DELETE", .key = l.objs[i].key, .sink_fd = -1};
		rc = aws_s3(&w->cfg, w->bucket, &call, NULL, NULL, NULL, err);
	}
	aws_s3_list_free(&l);
	return rc;
}

/* PREFIX/.sandboxfs/NAME/snapshots/ID/ */
static int snap_prefix(const struct aws_ws *w, const char *id, char *out, size_t len,
		       struct sfs_err *err)
{
	char meta[1100];
	if (!id || !*id || strchr(id, '/') || !strcmp(id, ".") || !strcmp(id, ".."))
		return sfs_errf(err, -EINVAL, "aws: bad snapshot id \"%s\"", id ? id : "");
	if (aws_meta_prefix(w->root, meta, sizeof(meta)) ||
	    snprintf(out, len, "%ssnapshots/%s/", meta, id) >= (int)len)
		return sfs_errf(err, -ENAMETOOLONG, "aws: prefix too long");
	return 0;
}

int aws_snapshot(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err)
{
	(void)label; /* kept by the record, not in the bucket */
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	char sid[64], dst[1200];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	size_t n = strftime(sid, sizeof(sid), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(sid + n, sizeof(sid) - n, "-%04lx", random() & 0xffff);
	rc = snap_prefix(&w, sid, dst, sizeof(dst), err);
	if (!rc)
		rc = copy_prefix(&w, w.root, dst, err);
	if (rc) {
		struct sfs_err ignored = {0};
		delete_prefix(&w, dst, &ignored); /* no half snapshot stays */
	} else if (!(*id = strdup(sid))) {
		rc = sfs_errf(err, -ENOMEM, "out of memory");
	}
	aws_ws_close(&w);
	return rc;
}

int aws_restore(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	char src[1200];
	struct aws_s3_list snap = {0}, live = {0};
	rc = snap_prefix(&w, snapshot_id, src, sizeof(src), err);
	if (!rc)
		rc = aws_s3_list(&w.cfg, w.bucket, src, false, 0, &snap, err);
	if (!rc && !snap.nobjs)
		rc = sfs_errf(err, -ENOENT, "aws: snapshot %s: no objects under s3://%s/%s",
			      snapshot_id, w.bucket, src);
	if (!rc)
		rc = aws_s3_list(&w.cfg, w.bucket, w.root, false, 0, &live, err);
	size_t sl = strlen(src), rl = strlen(w.root);
	if (!rc)
		rc = copy_prefix(&w, src, w.root, err);
	/* then what the snapshot does not have */
	for (size_t i = 0; !rc && i < live.nobjs; i++) {
		const char *rel = live.objs[i].key + rl;
		bool keep = false;
		for (size_t j = 0; !keep && j < snap.nobjs; j++)
			keep = !strcmp(snap.objs[j].key + sl, rel);
		if (keep)
			continue;
		struct aws_s3_call call = {
		    .method = "DELETE", .key = live.objs[i].key, .sink_fd = -1};
		rc = aws_s3(&w.cfg, w.bucket, &call, NULL, NULL, NULL, err);
	}
	aws_s3_list_free(&snap);
	aws_s3_list_free(&live);
	aws_ws_close(&w);
	return rc;
}

int aws_snapshot_delete(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	struct aws_ws w;
	int rc = aws_ws_open(sb, &w, err);
	if (rc)
		return rc;
	char p[1200];
	rc = snap_prefix(&w, snapshot_id, p, sizeof(p), err);
	if (!rc)
		rc = delete_prefix(&w, p, err);
	aws_ws_close(&w);
	return rc;
}

int aws_fork(struct sfs_sandbox *src, struct sfs_sandbox *dst, const char *from,
	     struct sfs_err *err)
{
	struct aws_ws w;
	int rc = aws_ws_open(src, &w, err);
	if (rc)
		return rc;
	/* the new sandbox beside the old: B/P/DST/ */
	struct sfs_buf id = {0}, ws = {0};
	size_t rl = strlen(w.root), start = rl - 1;
	while (start > 0 && w.root[start - 1] != '/')
		start--;
	char from_prefix[1200];
	if (sfs_buf_printf(&id, "%s/%.*s%s/", w.bucket, (int)start, w.root, dst->name) ||
	    sfs_buf_printf(&ws, "s3://%s", id.buf))
		rc = sfs_errf(err, -ENOMEM, "out of memory");
	if (!rc && from)
		rc = snap_prefix(&w, from, from_prefix, sizeof(from_prefix), err);
	const char *to = id.buf ? id.buf + strlen(w.bucket) + 1 : NULL;
	struct aws_s3_list there = {0};
	if (!rc)
		rc = aws_s3_list(&w.cfg, w.bucket, to, false, 1, &there, err);
	if (!rc && there.nobjs)
		rc = sfs_errf(err, -EEXIST, "aws: fork: s3://%s/%s already holds objects", w.bucket,
			      to);
	aws_s3_list_free(&there);
	if (!rc)
		rc = copy_prefix(&w, from ? from_prefix : w.root, to, err);
	if (rc && to) {
		struct sfs_err ignored = {0};
		delete_prefix(&w, to, &ignored); /* a failed fork leaves nothing */
	}
	if (!rc)
		rc = sfs_sb_publish(dst, id.buf, src->image, ws.buf, err);
	/* the job settings new gave the source are the fork's too */
	pthread_mutex_lock(&aws_state_mu);
	struct aws_state *st = src->priv;
	struct sfs_kvlist job = {0};
	if (!rc && st && sfs_kv_copy(&job, &st->job))
		rc = sfs_errf(err, -ENOMEM, "out of memory");
	pthread_mutex_unlock(&aws_state_mu);
	for (size_t i = 0; !rc && i < job.n; i++)
		if (aws_state_set_job(dst, job.v[i].key, job.v[i].val))
			rc = sfs_errf(err, -ENOMEM, "out of memory");
	sfs_kv_free(&job);
	sfs_buf_free(&id);
	sfs_buf_free(&ws);
	aws_ws_close(&w);
	return rc;
}
