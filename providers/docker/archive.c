/* The archive API: a container's files as tar, readable even when it is stopped. */
#include "docker.h"
#include "engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAR_BLOCK 512
#define ARCHIVE_MAX (64 << 20)

static uint64_t octal(const char *p, size_t n)
{
	uint64_t v = 0;
	for (size_t i = 0; i < n && p[i]; i++) {
		if (p[i] == ' ')
			continue;
		if (p[i] < '0' || p[i] > '7')
			break;
		v = v * 8 + (uint64_t)(p[i] - '0');
	}
	return v;
}

int dk_archive_read(const char *cid, const char *path, char **data, size_t *len,
		    struct sfs_err *err)
{
	char *epath = dk_urlencode(path);
	if (!epath)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char url[4300];
	snprintf(url, sizeof(url), "/containers/%s/archive?path=%s", cid, epath);
	free(epath);
	struct dk_resp resp;
	int r = dk_request("GET", url, NULL, NULL, 0, 60, &resp, err);
	if (r)
		return r;
	if (resp.status >= 400) {
		char msg[512];
		dk_reply_message(&resp, msg, sizeof(msg));
		r = sfs_errf(err, dk_errno(resp.status), "docker: reading %s: %s", path, msg);
		dk_resp_free(&resp);
		return r;
	}
	/* the first regular entry; long-name entries ('L', 'x') come first */
	size_t off = 0;
	r = sfs_errf(err, -EIO, "docker: reading %s: not a regular file", path);
	while (off + TAR_BLOCK <= resp.len) {
		const char *h = resp.body + off;
		if (h[0] == '\0')
			break;
		uint64_t size = octal(h + 124, 12);
		char type = h[156];
		off += TAR_BLOCK;
		if (size > resp.len - off || size > ARCHIVE_MAX) {
			r = sfs_errf(err, -EIO, "docker: reading %s: truncated archive", path);
			break;
		}
		if (type == '0' || type == '\0') {
			char *copy = malloc(size + 1);
			if (!copy) {
				r = sfs_errf(err, -ENOMEM, "out of memory");
				break;
			}
			memcpy(copy, resp.body + off, size);
			copy[size] = '\0';
			*data = copy;
			*len = size;
			r = 0;
			break;
		}
		if (type != 'L' && type != 'x' && type != 'g')
			break;
		off += (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
	}
	dk_resp_free(&resp);
	return r;
}
