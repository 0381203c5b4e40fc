/* The toolbox file API behind workspace/ (fs/cache/ caches on top). */
#include "daytona.h"

#include "../untrusted/name.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A FileInfo object to attributes (public for the fuzz harness). */
int dt_file_info_from_json(json_t *o, struct sfs_rstat *st)
{
	memset(st, 0, sizeof(*st));
	const char *perm = json_string_value(json_object_get(o, "permissions"));
	const char *mode = json_string_value(json_object_get(o, "mode"));
	mode_t bits = perm ? (mode_t)strtoul(perm, NULL, 8) & 07777 : 0644;
	mode_t type = S_IFREG;
	if (json_is_true(json_object_get(o, "isDir")))
		type = S_IFDIR;
	else if (mode && (mode[0] == 'l' || mode[0] == 'L'))
		type = S_IFLNK;
	else if (mode && mode[0] == 'p')
		type = S_IFIFO;
	else if (mode && mode[0] == 'S')
		type = S_IFSOCK;
	st->mode = type | bits;
	st->size = (off_t)json_integer_value(json_object_get(o, "size"));
	const char *t = json_string_value(json_object_get(o, "modifiedAt"));
	st->mtime = sfs_parse_time(t ? t : json_string_value(json_object_get(o, "modTime")));
	const char *target = json_string_value(json_object_get(o, "symlinkTarget"));
	if (type == S_IFLNK && target && !(st->link = strdup(target)))
		return -ENOMEM;
	return 0;
}

static int query_call(struct sfs_sandbox *sb, const char *method, const char *fmt, const char *rel,
		      json_t **out, struct sfs_err *err)
{
	char *p = dt_abs_path(sb, rel, true);
	char *path = NULL;
	if (!p || asprintf(&path, fmt, p) < 0) {
		free(p);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(p);
	int r = dt_toolbox(sb, method, path, NULL, out, err);
	free(path);
	return r;
}

/* A symlink whose target the API did not give: read it with readlink. */
static int read_target(struct sfs_sandbox *sb, const char *rel, struct sfs_rstat *st,
		       struct sfs_err *err)
{
	char *abs = dt_abs_path(sb, rel, false);
	if (!abs)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int code = 0;
	char *out = NULL;
	const char *args[] = {abs, NULL};
	int r = dt_exec(sb, "readlink -- \"$1\"", args, 0, &code, &out, err);
	free(abs);
	if (!r && code != 0)
		r = sfs_errf(err, -EIO, "daytona: readlink %s failed", rel);
	if (!r) {
		size_t n = strlen(out);
		if (n && out[n - 1] == '\n')
			out[n - 1] = '\0';
		st->link = out;
		out = NULL;
	}
	free(out);
	return r;
}

int dt_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err)
{
	json_t *o = NULL;
	int r = query_call(sb, "GET", "/files/info?path=%s", path, &o, err);
	if (!r)
		r = dt_file_info_from_json(o, st);
	json_decref(o);
	if (!r && S_ISLNK(st->mode) && !st->link)
		r = read_target(sb, path, st, err);
	return r;
}

int dt_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
	       struct sfs_err *err)
{
	json_t *o = NULL;
	int r = query_call(sb, "GET", "/files?path=%s", path, &o, err);
	if (r)
		return r;
	if (!json_is_array(o)) {
		json_decref(o);
		return sfs_errf(err, -EPROTO, "daytona: listing %s: not a list", path);
	}
	struct sfs_name_drops drops = {0};
	r = sfs_rdirents_from_json(o, dt_file_info_from_json, ents, n, &drops);
	json_decref(o);
	if (r)
		return sfs_errf(err, r, "out of memory");
	sfs_name_drops_log(&drops, "daytona", sb->name, path);
	return 0;
}

static int status_err(const char *what, const char *path, struct sfs_http_resp *resp,
		      struct sfs_err *err)
{
	return sfs_http_status_errf(err, resp, "daytona: %s %s", what, path[0] ? path : "/");
}

static int toolbox(void *sb, const char *route, struct sfs_http_req *req,
		   struct sfs_http_resp *resp, struct sfs_err *err)
{
	return dt_toolbox_req(sb, route, req, resp, err);
}

int dt_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err)
{
	char *p = dt_abs_path(sb, path, true);
	char *q = NULL;
	if (!p || asprintf(&q, "/files/download?path=%s", p) < 0) {
		free(p);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(p);
	struct sfs_http_req req = {.method = "GET"};
	int r = sfs_http_download_fd(toolbox, sb, q, &req, fd, err, "daytona: download %s",
				     path[0] ? path : "/");
	free(q);
	return r;
}

static int post_query(struct sfs_sandbox *sb, const char *what, const char *path, const char *query,
		      struct sfs_err *err)
{
	struct sfs_http_req req = {.method = "POST"};
	struct sfs_http_resp resp;
	int r = dt_toolbox_req(sb, query, &req, &resp, err);
	if (r)
		return r;
	if (resp.status < 200 || resp.status >= 300)
		r = status_err(what, path, &resp, err);
	sfs_http_resp_free(&resp);
	return r;
}

int dt_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	char *p = dt_abs_path(sb, path, true);
	char *q = NULL;
	if (!p ||
	    asprintf(&q, "/files/permissions?path=%s&mode=0%o", p, (unsigned)(mode & 07777)) < 0) {
		free(p);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(p);
	int r = post_query(sb, "chmod", path, q, err);
	free(q);
	return r;
}

int dt_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err)
{
	char *p = dt_abs_path(sb, path, true);
	char *q = NULL;
	if (!p || asprintf(&q, "/files/upload?path=%s", p) < 0) {
		free(p);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(p);
	const char *base = strrchr(path, '/');
	struct sfs_http_req req = {.method = "POST",
				   .upload_field = "file",
				   .upload_fd = fd,
				   .upload_name = base ? base + 1 : path,
				   .retry_unsafe = true}; /* a whole-file upload can be repeated */
	struct sfs_http_resp resp;
	int r = dt_toolbox_req(sb, q, &req, &resp, err);
	free(q);
	if (r)
		return r;
	if (resp.status < 200 || resp.status >= 300)
		r = status_err("upload", path, &resp, err);
	sfs_http_resp_free(&resp);
	/* uploads create files 0644; anything else needs a chmod */
	if (!r && (mode & 07777) != 0644 && mode)
		r = dt_fs_chmod(sb, path, mode, err);
	return r;
}

int dt_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err)
{
	char *p = dt_abs_path(sb, path, true);
	char *q = NULL;
	if (!p || asprintf(&q, "/files/folder?path=%s&mode=0%o", p, (unsigned)(mode & 07777)) < 0) {
		free(p);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(p);
	int r = post_query(sb, "mkdir", path, q, err);
	free(q);
	if (r == -EBUSY || (r && strstr(err->msg, "exists")))
		r = sfs_errf(err, -EEXIST, "daytona: mkdir %s: it exists", path);
	return r;
}

int dt_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err)
{
	char *p = dt_abs_path(sb, path, true);
	char *q = NULL;
	if (!p || asprintf(&q, "/files?path=%s&recursive=false", p) < 0) {
		free(p);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(p);
	struct sfs_http_req req = {.method = "DELETE"};
	struct sfs_http_resp resp;
	int r = dt_toolbox_req(sb, q, &req, &resp, err);
	free(q);
	if (r)
		return r;
	if (resp.status < 200 || resp.status >= 300) {
		r = status_err(dir ? "rmdir" : "unlink", path, &resp, err);
		if (dir && strcasestr(err->msg, "not empty"))
			r = sfs_errf(err, -ENOTEMPTY, "daytona: rmdir %s: directory not empty",
				     path);
		else if (!dir && strcasestr(err->msg, "is a directory"))
			r = -EISDIR;
	}
	sfs_http_resp_free(&resp);
	return r;
}

int dt_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err)
{
	char *a = dt_abs_path(sb, from, true), *b = dt_abs_path(sb, to, true);
	char *q = NULL;
	if (!a || !b || asprintf(&q, "/files/move?source=%s&destination=%s", a, b) < 0) {
		free(a);
		free(b);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	free(a);
	free(b);
	int r = post_query(sb, "rename", from, q, err);
	free(q);
	return r;
}

int dt_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path, struct sfs_err *err)
{
	/* the file API has no symlink call */
	char *abs = dt_abs_path(sb, path, false);
	if (!abs)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int code = 0;
	char *out = NULL;
	const char *args[] = {target, abs, NULL};
	int r = dt_exec(sb, "ln -s -- \"$1\" \"$2\"", args, 0, &code, &out, err);
	free(abs);
	if (!r && code != 0)
		r = sfs_errf(err, out && strstr(out, "exists") ? -EEXIST : -EIO,
			     "daytona: symlink %s: %s", path, out ? out : "failed");
	free(out);
	return r;
}

/* The source tree of `new … source=` (ctl/source.c): the toolbox has no bulk
 * upload the emulator offers, so the archive goes up as one file and is
 * unpacked in the sandbox by one command: two calls, whatever the file count. */
int dt_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err)
{
	static const char rel[] = ".sandboxfs-source.tar";
	int r = dt_fs_write(sb, rel, fd, 0600, err);
	if (r)
		return r;
	char *tar = dt_abs_path(sb, rel, false), *root = dt_abs_path(sb, "", false);
	if (!tar || !root) {
		free(tar);
		free(root);
		dt_fs_remove(sb, rel, false, NULL);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	const char *args[] = {tar, root, NULL};
	int code = -1;
	char *out = NULL;
	r = dt_exec(sb, "tar -xf \"$1\" -C \"$2\"; s=$?; rm -f -- \"$1\"; exit $s", args, 0, &code,
		    &out, err);
	if (!r && code != 0)
		r = sfs_errf(err, -EIO, "daytona: unpacking the source tree (%lld bytes): tar: %s",
			     (long long)size, out && *out ? out : "failed");
	if (r)
		dt_fs_remove(sb, rel, false, NULL);
	free(out);
	free(tar);
	free(root);
	return r;
}
