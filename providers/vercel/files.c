/*
 * workspace/ on Vercel (fs/cache/ caches on top): reads through fs/read,
 * writes and source trees as one gzip'd tar through fs/write, mkdir through
 * fs/mkdir; the API has no list, stat, delete, rename or chmod, so those are
 * the shell kit's file scripts in a waited command (one call each).
 */
#include "vercel.h"

#include "../sh/sh.h"
#include "../strbuf.h"
#include "../tar.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static int run_cmd(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, bool bytes, long timeout_ms,
		   int *exit, char **out, size_t *outlen, struct sfs_err *err)
{
	/* bytes base64-framed: the command API's logs carry text */
	return vc_exec_cmd(sb, c, bytes && out, timeout_ms, exit, out, outlen, err);
}

/* The kit's file scripts and run polls through waited commands (sh/fsops.c). */
const struct sfs_sh_exec vc_sh = {.what = "vercel", .run = run_cmd, .abs_path = vc_abs_path};

int vc_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err)
{
	return sfs_sh_xfs_stat(&vc_sh, sb, path, st, err);
}

int vc_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
	       struct sfs_err *err)
{
	return sfs_sh_xfs_list(&vc_sh, sb, path, ents, n, err);
}

static int status_err(const char *what, const char *path, struct sfs_http_resp *resp,
		      struct sfs_err *err)
{
	return sfs_http_status_errf(err, resp, "vercel: %s %s", what, path[0] ? path : "/");
}

/* A session route (no query, no project check). */
static int session_req(void *ctx, const char *route, struct sfs_http_req *req,
		       struct sfs_http_resp *resp, struct sfs_err *err)
{
	(void)ctx;
	return vc_req(route, NULL, false, req, resp, err);
}

int vc_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err)
{
	char route[256];
	int r = vc_session_path(sb, "/fs/read", route, sizeof(route), err);
	char *abs = r ? NULL : vc_abs_path(sb, path);
	if (r)
		return r;
	json_t *body = abs ? json_pack("{s:s}", "path", abs) : NULL;
	free(abs);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct sfs_http_req req = {
	    .method = "POST", .json = body, .retry_unsafe = true}; /* a read */
	r = sfs_http_download_fd(session_req, NULL, route, &req, fd, err, "vercel: read %s",
				 path[0] ? path : "/");
	json_decref(body);
	return r;
}

/* gzip of n bytes (the fs/write body). */
static int gzip_buf(const void *in, size_t n, struct sfs_buf *out)
{
	z_stream z = {0};
	if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	uLong bound = deflateBound(&z, (uLong)n) + 32;
	int r = sfs_buf_reserve(out, bound);
	if (!r) {
		z.next_in = (Bytef *)(uintptr_t)in;
		z.avail_in = (uInt)n;
		z.next_out = (Bytef *)out->buf;
		z.avail_out = (uInt)bound;
		r = deflate(&z, Z_FINISH) == Z_STREAM_END ? 0 : -EIO;
		out->len = z.total_out;
	}
	deflateEnd(&z);
	return r;
}

/* POSTs a tar archive (n bytes) gzip'd to fs/write, unpacked at dir. */
static int put_tar(struct sfs_sandbox *sb, const char *what, const char *dir, const void *tar,
		   size_t n, struct sfs_err *err)
{
	char route[256];
	int r = vc_session_path(sb, "/fs/write", route, sizeof(route), err);
	if (r)
		return r;
	struct sfs_buf gz = {0}, hdr = {0};
	if (gzip_buf(tar, n, &gz) || sfs_buf_printf(&hdr, "x-cwd: %s", dir)) {
		sfs_buf_free(&gz);
		sfs_buf_free(&hdr);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	const char *headers[] = {hdr.buf, NULL};
	struct sfs_http_req req = {.method = "POST",
				   .headers = headers,
				   .body = gz.buf,
				   .body_len = gz.len,
				   .content_type = "application/gzip",
				   .retry_unsafe = true}; /* a whole archive can be repeated */
	struct sfs_http_resp resp;
	r = vc_req(route, NULL, false, &req, &resp, err);
	if (!r) {
		if (resp.status < 200 || resp.status >= 300)
			r = status_err(what, dir, &resp, err);
		sfs_http_resp_free(&resp);
	}
	sfs_buf_free(&gz);
	sfs_buf_free(&hdr);
	return r;
}

int vc_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err)
{
	/* one tar entry named by the path below the workspace (x-cwd) */
	unsigned char h[4 * SFS_TAR_BLOCK];
	long ln = sfs_tar_long_name(h, sizeof(h) - SFS_TAR_BLOCK, path);
	if (ln < 0)
		return sfs_errf(err, -ENAMETOOLONG, "vercel: write %s: name too long", path);
	struct sfs_buf data = {0}, tar = {0};
	int r = sfs_buf_add_fd(&data, fd);
	if (r)
		return sfs_errf(err, r, "vercel: write %s: %s", path, strerror(-r));
	sfs_tar_header(h + ln, path, '0', data.len, mode & 07777 ? mode & 07777 : 0644,
		       (int64_t)time(NULL));
	static const char zeros[3 * SFS_TAR_BLOCK];
	size_t pad = (SFS_TAR_BLOCK - data.len % SFS_TAR_BLOCK) % SFS_TAR_BLOCK;
	if (sfs_buf_add(&tar, h, (size_t)ln + SFS_TAR_BLOCK) ||
	    (data.len && sfs_buf_add(&tar, data.buf, data.len)) ||
	    sfs_buf_add(&tar, zeros, pad + 2 * SFS_TAR_BLOCK))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	sfs_buf_free(&data);
	char *ws = r ? NULL : vc_abs_path(sb, "");
	if (!r && !ws)
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (!r)
		r = put_tar(sb, "write", ws, tar.buf, tar.len, err);
	free(ws);
	sfs_buf_free(&tar);
	return r;
}

/* The source tree of `new … source=` (ctl/source.c): one fs/write of the
 * whole archive, whatever the file count. */
int vc_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err)
{
	struct sfs_buf tar = {0};
	int r = sfs_buf_add_fd(&tar, fd);
	if (r) {
		sfs_buf_free(&tar);
		return sfs_errf(err, r, "vercel: source tree (%lld bytes): %s", (long long)size,
				strerror(-r));
	}
	char *ws = vc_abs_path(sb, "");
	r = ws ? put_tar(sb, "source tree", ws, tar.buf, tar.len, err)
	       : sfs_errf(err, -ENOMEM, "out of memory");
	free(ws);
	sfs_buf_free(&tar);
	return r;
}

int vc_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	return sfs_sh_xfs_chmod(&vc_sh, sb, path, mode, err);
}

int vc_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	char route[256];
	int r = vc_session_path(sb, "/fs/mkdir", route, sizeof(route), err);
	if (r)
		return r;
	char *abs = vc_abs_path(sb, path);
	json_t *body = abs ? json_pack("{s:s, s:b}", "path", abs, "recursive", 0) : NULL;
	free(abs);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	r = vc_call("POST", route, NULL, false, body, NULL, err);
	json_decref(body);
	if (r == -EBUSY)
		return sfs_errf(err, -EEXIST, "vercel: mkdir %s: it exists", path);
	/* the route makes 0755 (umask 022) and takes no mode */
	if (!r && (mode & 07777) != 0755)
		r = vc_fs_chmod(sb, path, mode, err);
	return r;
}

int vc_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err)
{
	return sfs_sh_xfs_remove(&vc_sh, sb, path, dir, err);
}

int vc_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err)
{
	return sfs_sh_xfs_rename(&vc_sh, sb, from, to, err);
}

int vc_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path, struct sfs_err *err)
{
	return sfs_sh_xfs_symlink(&vc_sh, sb, target, path, err);
}

/* ---- bulk download: one tar of many files in one waited command ---------- */

int vc_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		    int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		    void *arg, struct sfs_err *err)
{
	return sfs_sh_xread_many(&vc_sh, sb, paths, n, on_file, arg, err);
}
