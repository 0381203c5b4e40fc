/*
 * workspace/ through the sprite's fs routes (provider-apis.md §3.4): read,
 * write (raw bodies), list (with attributes; stat is a listing of the
 * parent), delete, rename, chmod.  The API has no mkdir or symlink: those
 * are one short exec each, which also gives mkdir its exact errors (the
 * SDKs' `.keep` upload would make parents and leave a file behind).
 */
#include "sprites.h"

#include "../sh/sh.h"
#include "../untrusted/name.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WRITE_MAX (16 << 20) /* the API's limit (413 beyond) */
#define FS_PATH_MAX 4096     /* an fs route with its query */

/* workspace + "/" + rel, escaped for a query value when escape. */
static char *abs_path(struct sfs_sandbox *sb, const char *rel, bool escape)
{
	char *p = NULL;
	const char *ws = sb->workspace ? sb->workspace : "/";
	if (asprintf(&p, "%s%s%s", ws, *rel && ws[strlen(ws) - 1] != '/' ? "/" : "", rel) < 0)
		return NULL;
	if (!escape)
		return p;
	char *e = sfs_http_escape_component(p);
	free(p);
	return e;
}

/* A non-2xx answer as errno + the server's message. */
static int status_err(const char *op, const char *path, struct sfs_http_resp *resp,
		      struct sfs_err *err)
{
	return sfs_http_status_errf(err, resp, "sprites: %s %s", op, path);
}

static int api_req(void *ctx, const char *route, struct sfs_http_req *req,
		   struct sfs_http_resp *resp, struct sfs_err *err)
{
	(void)ctx;
	return sp_api_req(route, req, resp, err);
}

/* The path of an fs route: `route?path=ABS` (+ extra query). */
static int fs_path(struct sfs_sandbox *sb, const char *route, const char *rel, const char *extra,
		   char path[FS_PATH_MAX], struct sfs_err *err)
{
	char *p = rel ? abs_path(sb, rel, true) : NULL;
	char *rest = NULL;
	if ((rel && !p) || asprintf(&rest, "/fs/%s%s%s%s", route, p ? "?path=" : "", p ? p : "",
				    extra ? extra : "") < 0) {
		free(p);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(p);
	int r = sp_path(path, FS_PATH_MAX, sb->id, rest);
	free(rest);
	return r < 0 ? sfs_errf(err, -ENAMETOOLONG, "sprites: %s: path too long", rel) : 0;
}

/* One fs route, body raw or JSON. */
static int fs_call(struct sfs_sandbox *sb, const char *method, const char *route, const char *rel,
		   const char *extra, struct sfs_http_req *req, struct sfs_http_resp *resp,
		   struct sfs_err *err)
{
	char path[FS_PATH_MAX];
	int r = fs_path(sb, route, rel, extra, path, err);
	req->method = method;
	return r ? r : sp_api_req(path, req, resp, err);
}

/* An entry's attributes (sfs_rdirents_from_json checks its name). */
static int stat_from_json(json_t *o, struct sfs_rstat *st)
{
	const char *type = json_string_value(json_object_get(o, "type"));
	const char *mode = json_string_value(json_object_get(o, "mode"));
	mode_t t = S_IFREG;
	if ((type && !strcmp(type, "directory")) || json_is_true(json_object_get(o, "isDir")))
		t = S_IFDIR;
	else if (type && !strcmp(type, "symlink"))
		t = S_IFLNK;
	st->mode = t | (mode ? (mode_t)strtoul(mode, NULL, 8) & 07777 : 0644);
	json_int_t size = json_integer_value(json_object_get(o, "size"));
	st->size = size > 0 ? (off_t)size : 0;
	st->mtime = sfs_parse_time(json_string_value(json_object_get(o, "modTime")));
	const char *target = json_string_value(json_object_get(o, "target"));
	if (t == S_IFLNK && target && !(st->link = strdup(target)))
		return -ENOMEM;
	return 0;
}

/* The entries of a listing of rel (a directory's children, or the file). */
static int list_raw(struct sfs_sandbox *sb, const char *rel, struct sfs_rdirent **ents, size_t *n,
		    struct sfs_err *err)
{
	*ents = NULL;
	*n = 0;
	struct sfs_http_req req = {0};
	struct sfs_http_resp resp = {0};
	int r = fs_call(sb, "GET", "list", rel, NULL, &req, &resp, err);
	if (r)
		return r;
	if (resp.status < 200 || resp.status > 299) {
		r = status_err("list", rel, &resp, err);
		sfs_http_resp_free(&resp);
		return r;
	}
	json_t *o = json_loadb(resp.body, resp.len, 0, NULL);
	sfs_http_resp_free(&resp);
	json_t *arr = json_object_get(o, "entries");
	if (!json_is_array(arr)) {
		json_decref(o);
		return sfs_errf(err, -EPROTO, "sprites: list %s: no entries in the answer", rel);
	}
	struct sfs_name_drops drops = {0};
	r = sfs_rdirents_from_json(arr, stat_from_json, ents, n, &drops);
	json_decref(o);
	if (r)
		return sfs_errf(err, -ENOMEM, "out of memory");
	sfs_name_drops_log(&drops, "sprites", sb->name, rel);
	return 0;
}

int sp_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
	       struct sfs_err *err)
{
	int r = list_raw(sb, path, ents, n, err);
	/* a listing of a file is the file itself: not a directory */
	if (!r && *n == 1 && !S_ISDIR((*ents)[0].st.mode)) {
		const char *base = strrchr(path, '/');
		if (!strcmp((*ents)[0].name, base ? base + 1 : path)) {
			struct sfs_rstat st;
			if (!sp_fs_stat(sb, path, &st, NULL)) {
				bool dir = S_ISDIR(st.mode);
				free(st.link);
				if (!dir) {
					sfs_rdirents_free(*ents, *n);
					*ents = NULL;
					*n = 0;
					return sfs_errf(err, -ENOTDIR,
							"sprites: %s: not a directory", path);
				}
			}
		}
	}
	return r;
}

int sp_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err)
{
	/* the parent's listing has the entry's own attributes */
	char *parent = strdup(path);
	if (!parent)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char *slash = strrchr(parent, '/');
	const char *name = slash ? slash + 1 : parent;
	struct sfs_rdirent *ents;
	size_t n;
	int r;
	if (!*path) {
		/* the workspace root: its parent may be outside what we may list */
		memset(st, 0, sizeof *st);
		st->mode = S_IFDIR | 0755;
		r = list_raw(sb, "", &ents, &n, err);
		if (!r)
			sfs_rdirents_free(ents, n);
		free(parent);
		return r;
	}
	if (slash)
		*slash = '\0';
	r = list_raw(sb, slash ? parent : "", &ents, &n, err);
	if (!r) {
		r = sfs_errf(err, -ENOENT, "sprites: %s: no such file or directory", path);
		for (size_t i = 0; i < n; i++) {
			if (!strcmp(ents[i].name, name)) {
				*st = ents[i].st;
				ents[i].st.link = NULL;
				sfs_err_clear(err);
				r = 0;
				break;
			}
		}
		sfs_rdirents_free(ents, n);
	}
	free(parent);
	return r;
}

int sp_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err)
{
	char route[FS_PATH_MAX];
	struct sfs_http_req req = {.method = "GET"};
	int r = fs_path(sb, "read", path, NULL, route, err);
	return r ? r
		 : sfs_http_download_fd(api_req, NULL, route, &req, fd, err, "sprites: read %s",
					path);
}

int sp_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sfs_errf(err, -errno, "sprites: write %s: %m", path);
	if (st.st_size > WRITE_MAX)
		return sfs_errf(err, -EFBIG,
				"sprites: write %s: %lld bytes, the API takes at most %d", path,
				(long long)st.st_size, WRITE_MAX);
	struct sfs_buf data = {0};
	int r = sfs_buf_add_fd(&data, fd);
	if (r) {
		sfs_buf_free(&data);
		return sfs_errf(err, r, "sprites: write %s: %s", path, strerror(-r));
	}
	char extra[64];
	snprintf(extra, sizeof extra, "&mode=0%o&mkdir=false",
		 (unsigned)(mode & 07777 ? mode & 07777 : 0644));
	struct sfs_http_req req = {.body = data.buf ? data.buf : "",
				   .body_len = data.len,
				   .content_type = "application/octet-stream",
				   .retry_unsafe = true}; /* a whole-file PUT can be repeated */
	struct sfs_http_resp resp = {0};
	r = fs_call(sb, "PUT", "write", path, extra, &req, &resp, err);
	sfs_buf_free(&data);
	if (!r && (resp.status < 200 || resp.status > 299))
		r = status_err("write", path, &resp, err);
	sfs_http_resp_free(&resp);
	return r;
}

/* A JSON fs route (rename, chmod, delete with a body). */
static int fs_json(struct sfs_sandbox *sb, const char *method, const char *route, json_t *body,
		   const char *what, const char *rel, long *status, struct sfs_err *err)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	if (!text)
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct sfs_http_req req = {
	    .body = text, .body_len = strlen(text), .content_type = "application/json"};
	struct sfs_http_resp resp = {0};
	int r = fs_call(sb, method, route, NULL, NULL, &req, &resp, err);
	free(text);
	if (status)
		*status = resp.status;
	if (!r && (resp.status < 200 || resp.status > 299))
		r = status_err(what, rel, &resp, err);
	sfs_http_resp_free(&resp);
	return r;
}

int sp_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err)
{
	char *p = abs_path(sb, path, false);
	if (!p)
		return sfs_errf(err, -ENOMEM, "out of memory");
	json_t *body = json_pack("{s:s, s:b}", "path", p, "recursive", 0);
	free(p);
	long status = 0;
	int r = fs_json(sb, "DELETE", "delete", body, dir ? "rmdir" : "unlink", path, &status, err);
	if (r == -EINVAL && dir && status == 400)
		r = sfs_errf(err, -ENOTEMPTY, "sprites: rmdir %s: directory not empty", path);
	return r;
}

int sp_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err)
{
	char *a = abs_path(sb, from, false), *b = abs_path(sb, to, false);
	json_t *body = a && b ? json_pack("{s:s, s:s}", "source", a, "dest", b) : NULL;
	free(a);
	free(b);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	return fs_json(sb, "POST", "rename", body, "rename", from, NULL, err);
}

int sp_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	char *p = abs_path(sb, path, false), m[8];
	snprintf(m, sizeof m, "%04o", (unsigned)(mode & 07777));
	json_t *body =
	    p ? json_pack("{s:s, s:s, s:b}", "path", p, "mode", m, "recursive", 0) : NULL;
	free(p);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	return fs_json(sb, "POST", "chmod", body, "chmod", path, NULL, err);
}

/* sh -c SCRIPT sandboxfs ARGS: its exit code is an errno (0 ok). */
static int exec_errno(struct sfs_sandbox *sb, const char *script, const char *const *args,
		      const char *what, const char *rel, struct sfs_err *err)
{
	const char *argv[8] = {"/bin/sh", "-c", script, "sandboxfs"};
	size_t k = 4;
	for (size_t i = 0; args[i] && k < 7; i++)
		argv[k++] = args[i];
	argv[k] = NULL;
	int code = -1;
	int r = sp_exec_capture(sb, argv, 60000, &code, NULL, NULL, err);
	if (r)
		return r;
	if (code)
		return sfs_errf(err, -(code == 17 || code == 2 || code == 20 ? code : EIO),
				"sprites: %s %s: %s", what, rel,
				code == 17   ? "it exists"
				: code == 2  ? "no such directory"
				: code == 20 ? "not a directory"
					     : "failed");
	return 0;
}

int sp_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	char *p = abs_path(sb, path, false), m[8];
	if (!p)
		return sfs_errf(err, -ENOMEM, "out of memory");
	snprintf(m, sizeof m, "%04o", (unsigned)(mode & 07777));
	const char *args[] = {p, m, NULL};
	int r = exec_errno(sb,
			   "[ -e \"$1\" ] || [ -L \"$1\" ] && exit 17; d=$(dirname -- \"$1\"); "
			   "[ -e \"$d\" ] || exit 2; [ -d \"$d\" ] || exit 20; "
			   "mkdir -m \"$2\" -- \"$1\" || exit 5",
			   args, "mkdir", path, err);
	free(p);
	return r;
}

int sp_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path, struct sfs_err *err)
{
	char *p = abs_path(sb, path, false);
	if (!p)
		return sfs_errf(err, -ENOMEM, "out of memory");
	const char *args[] = {target, p, NULL};
	int r = exec_errno(sb,
			   "[ -e \"$2\" ] || [ -L \"$2\" ] && exit 17; d=$(dirname -- \"$2\"); "
			   "[ -d \"$d\" ] || exit 2; ln -s -- \"$1\" \"$2\" || exit 5",
			   args, "symlink", path, err);
	free(p);
	return r;
}

/* The source tree of `new … source=` (ctl/source.c): one upload of the
 * archive and one exec that unpacks and removes it, whatever the file count
 * (so at most the write route's 16 MiB). */
int sp_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err)
{
	static const char rel[] = ".sandboxfs-source.tar";
	int r = sp_fs_write(sb, rel, fd, 0600, err);
	if (r)
		return r;
	char *tar = abs_path(sb, rel, false), *root = abs_path(sb, "", false);
	const char *argv[] = {
	    "/bin/sh",	 "-c", "tar -xf \"$1\" -C \"$2\" 2>&1; s=$?; rm -f -- \"$1\"; exit $s",
	    "sandboxfs", tar,  root,
	    NULL};
	int code = -1;
	char *out = NULL;
	if (!tar || !root)
		r = sfs_errf(err, -ENOMEM, "out of memory");
	else
		r = sp_exec_capture(sb, argv, -1, &code, &out, NULL, err);
	if (!r && code != 0)
		r = sfs_errf(err, -EIO, "sprites: unpacking the source tree (%lld bytes): tar: %s",
			     (long long)size, out && *out ? out : "failed");
	if (r)
		sp_fs_remove(sb, rel, false, NULL);
	free(out);
	free(tar);
	free(root);
	return r;
}

/* ---- bulk reads: one tar of many files in one exec ------------------------- */

/* The shell kit's commands over the exec socket: its binary frames carry
 * stdout byte for byte, so `bytes` asks nothing more of it. */
static int sh_run(struct sfs_sandbox *sb, const struct sfs_sh_cmd *c, bool bytes, long timeout_ms,
		  int *exit, char **out, size_t *outlen, struct sfs_err *err)
{
	(void)bytes;
	return sp_exec_capture(sb, (const char *const *)c->argv,
			       timeout_ms > 0 ? timeout_ms : 60000, exit, out, outlen, err);
}

static char *sh_abs_path(struct sfs_sandbox *sb, const char *rel)
{
	return abs_path(sb, rel, false);
}

static const struct sfs_sh_exec sp_sh = {.what = "sprites", .run = sh_run, .abs_path = sh_abs_path};

int sp_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		    int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		    void *arg, struct sfs_err *err)
{
	return sfs_sh_xread_many(&sp_sh, sb, paths, n, on_file, arg, err);
}
