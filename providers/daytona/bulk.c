/*
 * Bulk download: the contents of many workspace files in one toolbox call
 * (POST /files/bulk-download {"paths": [...]}, answered multipart/form-data
 * with one part named "file" per file, filename = the path as asked, and
 * one part named "error" per path that could not be read).  The remote
 * cache uses it to prefetch the small siblings of a file being opened
 * (fs/cache/prefetch.c).
 */
#include "daytona.h"

#include "../http/http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct bulk {
	char **abs; /* the absolute paths asked for */
	const char *const *rel;
	size_t n;
	int (*on_file)(const char *path, const void *data, size_t len, void *arg);
	void *arg;
};

static int on_part(const char *name, const char *filename, const char *data, size_t len, void *arg)
{
	struct bulk *b = arg;
	if (strcmp(name, "file") != 0)
		return 0; /* an error part: that file is simply not prefetched */
	for (size_t i = 0; i < b->n; i++)
		if (strcmp(filename, b->abs[i]) == 0)
			return b->on_file(b->rel[i], data, len, b->arg);
	return 0; /* not a path we asked for: ignored */
}

int dt_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		    int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		    void *arg, struct sfs_err *err)
{
	struct bulk b = {.rel = paths, .n = n, .on_file = on_file, .arg = arg};
	json_t *list = json_array();
	b.abs = calloc(n ? n : 1, sizeof(*b.abs));
	int r = list && b.abs ? 0 : -ENOMEM;
	for (size_t i = 0; !r && i < n; i++) {
		b.abs[i] = dt_abs_path(sb, paths[i], false);
		if (!b.abs[i] || json_array_append_new(list, json_string(b.abs[i])))
			r = -ENOMEM;
	}
	json_t *body = r ? NULL : json_pack("{s:o}", "paths", list);
	if (!r && !body)
		r = -ENOMEM;
	if (!body)
		json_decref(list);
	if (r) {
		for (size_t i = 0; b.abs && i < n; i++)
			free(b.abs[i]);
		free(b.abs);
		return sfs_errf(err, r, "out of memory");
	}
	/* reading changes nothing: repeating the POST is harmless */
	struct sfs_http_req req = {
	    .method = "POST", .json = body, .capture_header = "Content-Type", .retry_unsafe = true};
	struct sfs_http_resp resp;
	r = dt_toolbox_req(sb, "/files/bulk-download", &req, &resp, err);
	json_decref(body);
	if (!r && (resp.status < 200 || resp.status >= 300)) {
		char text[256];
		sfs_http_error_text(resp.body, resp.len, text, sizeof(text));
		r = sfs_errf(err, sfs_http_status_errno(resp.status),
			     "daytona: bulk download of %zu files: HTTP %ld%s%s", n, resp.status,
			     text[0] ? ": " : "", text);
	} else if (!r) {
		r = sfs_multipart_parse(resp.header, resp.body, resp.len, on_part, &b);
		if (r == -EPROTO)
			sfs_errf(err, r, "daytona: bulk download: not a multipart answer");
	}
	sfs_http_resp_free(&resp);
	for (size_t i = 0; i < n; i++)
		free(b.abs[i]);
	free(b.abs);
	return r;
}
