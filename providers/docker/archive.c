/* The archive API: a container's files as tar, readable even when it is stopped. */
#include "docker.h"
#include "engine.h"

#include "../tar.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARCHIVE_MAX (64 << 20)

/* The first entry of the archive, which must be a regular file. */
struct first_file {
	const char *data; /* inside the archive buffer */
	uint64_t size;
	bool whole;
};

static int first_entry(void *ctx, const struct sfs_tar_entry *e)
{
	return e->type == '0' ? 0 : SFS_TAR_STOP;
}

static int first_data(void *ctx, const struct sfs_tar_entry *e, const void *p, size_t n)
{
	/* in memory the reader hands the whole entry over in one piece */
	struct first_file *f = ctx;
	f->data = p;
	return 0;
}

static int first_end(void *ctx, const struct sfs_tar_entry *e)
{
	struct first_file *f = ctx;
	f->size = e->size;
	f->whole = true;
	return SFS_TAR_STOP;
}

int dk_archive_read(const char *cid, const char *path, char **data, size_t *len,
		    struct sfs_err *err)
{
	char *epath = sfs_http_escape_component(path);
	if (!epath)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char url[4300];
	int pr = sfs_pathf(url, sizeof(url), "/containers/%s/archive?path=%s", cid, epath);
	free(epath);
	if (pr < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: %s: path too long", path);
	struct dk_resp resp;
	int r = dk_request("GET", url, NULL, NULL, 0, 60, &resp, err);
	if (r)
		return r;
	if (resp.status >= 400) {
		char msg[512];
		dk_reply_message(&resp, msg, sizeof(msg));
		r = sfs_errf(err, sfs_http_status_errno(resp.status), "docker: reading %s: %s",
			     path, msg);
		dk_resp_free(&resp);
		return r;
	}
	/* the first entry; long-name and pax entries before it are the reader's */
	struct first_file f = {0};
	const struct sfs_tar_ops ops = {
	    .entry = first_entry, .data = first_data, .end = first_end, .max_size = ARCHIVE_MAX};
	struct sfs_err terr = {0};
	r = sfs_tar_walk(resp.body, resp.len, &ops, &f, &terr);
	if (r < 0) {
		r = sfs_errf(err, r == -ENOMEM ? -ENOMEM : -EIO, "docker: reading %s: %s", path,
			     terr.msg);
	} else if (!f.whole) {
		r = sfs_errf(err, -EIO, "docker: reading %s: not a regular file", path);
	} else {
		size_t size = (size_t)f.size;
		char *copy = malloc(size + 1);
		if (!copy) {
			r = sfs_errf(err, -ENOMEM, "out of memory");
		} else {
			if (size)
				memcpy(copy, f.data, size);
			copy[size] = '\0';
			*data = copy;
			*len = size;
			r = 0;
		}
	}
	dk_resp_free(&resp);
	return r;
}
