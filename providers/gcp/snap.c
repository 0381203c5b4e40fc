/*
 * Snapshots of a gcp sandbox: a server-side copy (objects.rewrite) of every
 * object under its prefix to gs://BUCKET/snapshots/ID/, where ID is the
 * snapshot's id (a UTC time and 8 random hex digits).  Restore copies them
 * back and then deletes what the workspace has beyond them (every copy
 * before any delete: a failure midway loses nothing); delete removes the
 * copy.  Bytes never pass through this host.
 */
#include "gcp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../provider.h"
#include "../util.h"

/* ID: letters, digits, '-' only, so it is one safe path segment. */
static bool id_ok(const char *id)
{
	size_t n = strlen(id);
	if (!n || n > 64)
		return false;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '-'))
			return false;
	return true;
}

static int snap_prefix(const char *id, char *buf, size_t len, struct sfs_err *err)
{
	if (!id_ok(id))
		return sfs_errf(err, -EINVAL, "gcp: %s: not a snapshot id of this provider", id);
	if (sfs_pathf(buf, len, "snapshots/%s/", id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "gcp: %s: snapshot id too long", id);
	return 0;
}

int gcp_snapshot(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err)
{
	(void)label; /* the record keeps the label */
	struct gcp_ws w;
	int rc = gcp_ws_of(sb, &w, err);
	if (rc)
		return rc;
	unsigned char r[4] = {0};
	if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return sfs_errf(err, -EIO, "gcp: no random bytes for a snapshot id");
	char sid[64], prefix[96], stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	if (sfs_pathf(sid, sizeof(sid), "%s-%02x%02x%02x%02x", stamp, r[0], r[1], r[2], r[3]) < 0 ||
	    sfs_pathf(prefix, sizeof(prefix), "snapshots/%s/", sid) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "gcp: snapshot id too long");
	rc = gcp_copy_prefix(w.bucket, w.root, prefix, false, err);
	if (rc) {
		/* a half copy is no snapshot: remove what was copied */
		struct sfs_err e = {0};
		gcp_delete_prefix(w.bucket, prefix, &e);
		return rc;
	}
	if (!(*id = strdup(sid)))
		return sfs_errf(err, -ENOMEM, "out of memory");
	return 0;
}

int gcp_restore(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	struct gcp_ws w;
	char prefix[96];
	int rc = gcp_ws_of(sb, &w, err);
	if (!rc)
		rc = snap_prefix(snapshot_id, prefix, sizeof(prefix), err);
	if (rc)
		return rc;
	/* a snapshot with nothing in it was deleted behind our back: refuse
	 * rather than empty the workspace */
	struct gcs_list l = {0};
	rc = gcs_list(w.bucket, prefix, false, 1, &l, err);
	if (!rc && !l.nobjs)
		rc = sfs_errf(err, -ENOENT, "gcp: snapshot %s: gs://%s/%s is empty or gone",
			      snapshot_id, w.bucket, prefix);
	gcs_list_free(&l);
	if (!rc)
		rc = gcp_copy_prefix(w.bucket, prefix, w.root, true, err);
	return rc;
}

int gcp_snapshot_delete(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	struct gcp_ws w;
	char prefix[96];
	int rc = gcp_ws_of(sb, &w, err);
	if (!rc)
		rc = snap_prefix(snapshot_id, prefix, sizeof(prefix), err);
	if (!rc)
		rc = gcp_delete_prefix(w.bucket, prefix, err);
	return rc;
}
