#include "exec.h"
#include "engine.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void dk_buf_free(struct dk_buf *b)
{
	sfs_buf_free(&b->b);
}

static bool buf_add(struct dk_buf *b, const char *data, size_t n)
{
	if (b->max && b->b.len + n > b->max) {
		n = b->max - b->b.len;
		b->truncated = true;
	}
	return sfs_buf_add(&b->b, data, n) == 0;
}

bool dk_demux_feed(struct dk_demux *d, const char *data, size_t len, dk_frame_fn fn, void *arg)
{
	while (len) {
		if (d->left == 0) {
			size_t take = 8 - d->hlen;
			if (take > len)
				take = len;
			memcpy(d->hdr + d->hlen, data, take);
			d->hlen += take;
			data += take;
			len -= take;
			if (d->hlen < 8)
				return true;
			d->hlen = 0;
			d->stream = d->hdr[0];
			d->left = (uint32_t)d->hdr[4] << 24 | (uint32_t)d->hdr[5] << 16 |
				  (uint32_t)d->hdr[6] << 8 | d->hdr[7];
			continue;
		}
		size_t take = d->left < len ? d->left : len;
		if (!fn(arg, d->stream, data, take))
			return false;
		d->left -= (uint32_t)take;
		data += take;
		len -= take;
	}
	return true;
}

static json_t *argv_json(const char *const *argv)
{
	json_t *a = json_array();
	for (; a && *argv; argv++)
		if (json_array_append_new(a, json_string(*argv))) {
			json_decref(a);
			return NULL;
		}
	return a;
}

/* A 409 from exec means the container is not running: a provider failure. */
static int busy_is_io(struct sfs_err *err)
{
	if (err)
		err->code = -EIO;
	return -EIO;
}

static void short_id(const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%.12s", id);
}

int dk_exec_create(const struct dk_exec *x, bool attach, char *id, size_t idlen,
		   struct sfs_err *err)
{
	json_t *body =
	    json_pack("{s:o, s:b, s:b, s:b, s:b}", "Cmd", argv_json(x->argv), "AttachStdin", 0,
		      "AttachStdout", attach, "AttachStderr", attach, "Tty", 0);
	if (body && x->env)
		json_object_set(body, "Env", x->env);
	if (body && x->workdir)
		json_object_set_new(body, "WorkingDir", json_string(x->workdir));
	if (body && x->user)
		json_object_set_new(body, "User", json_string(x->user));
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char path[256], what[96], sid[16];
	short_id(x->cid, sid, sizeof(sid));
	if (sfs_pathf(path, sizeof(path), "/containers/%s/exec", x->cid) < 0) {
		json_decref(body);
		return sfs_errf(err, -ENAMETOOLONG, "docker: container id too long");
	}
	snprintf(what, sizeof(what), "exec in container %s", sid); /* message: may be cut */
	json_t *reply;
	int r = dk_json("POST", path, body, 30, &reply, what, err);
	json_decref(body);
	if (r == -EBUSY) /* 409: the container is not running */
		r = busy_is_io(err);
	if (r == -ENOENT)
		r = sfs_errf(err, -ENOENT, "docker: container %s " DK_GONE_TEXT, sid);
	if (r < 0)
		return r;
	const char *eid = json_string_value(json_object_get(reply, "Id"));
	if (!eid || strlen(eid) >= idlen) {
		json_decref(reply);
		return sfs_errf(err, -EIO, "docker: %s: no exec id in the reply", what);
	}
	memcpy(id, eid, strlen(eid) + 1); /* its length checked above */
	json_decref(reply);
	return 0;
}

int dk_exec_start_detached(const char *eid, struct sfs_err *err)
{
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/exec/%s/start", eid) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: exec id too long");
	json_t *body = json_pack("{s:b, s:b}", "Detach", 1, "Tty", 0);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = dk_json("POST", path, body, 30, NULL, "exec start", err);
	json_decref(body);
	if (r == -EBUSY)
		r = busy_is_io(err);
	return r < 0 ? r : 0;
}

int dk_exec_inspect(const char *eid, bool *running, int *code, struct sfs_err *err)
{
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/exec/%s/json", eid) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: exec id too long");
	json_t *reply;
	int r = dk_json("GET", path, NULL, 30, &reply, "exec inspect", err);
	if (r < 0)
		return r;
	json_t *ec = json_object_get(reply, "ExitCode");
	*running = json_is_true(json_object_get(reply, "Running"));
	*code = json_is_integer(ec) ? (int)json_integer_value(ec) : -1;
	json_decref(reply);
	return 0;
}

struct stream_arg {
	struct dk_demux demux;
	dk_frame_fn fn;
	void *arg;
};

static bool stream_sink(void *arg, const char *data, size_t len)
{
	struct stream_arg *s = arg;
	return dk_demux_feed(&s->demux, data, len, s->fn, s->arg);
}

int dk_exec_stream(const char *eid, dk_frame_fn fn, void *arg, const int *stop, struct sfs_err *err)
{
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/exec/%s/start", eid) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: exec id too long");
	json_t *body = json_pack("{s:b, s:b}", "Detach", 0, "Tty", 0);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	struct stream_arg s = {.fn = fn, .arg = arg};
	int r = dk_stream("POST", path, body, stream_sink, &s, stop, err);
	json_decref(body);
	return r < 0 ? r : 0;
}

struct collect {
	struct dk_buf *out, *errout;
	bool oom;
};

static bool collect_frame(void *arg, int stream, const char *data, size_t len)
{
	struct collect *c = arg;
	struct dk_buf *b = stream == 2 ? c->errout : c->out;
	if (b && !buf_add(b, data, len)) {
		c->oom = true;
		return false;
	}
	return true;
}

int dk_exec_run(const struct dk_exec *x, struct dk_buf *out, struct dk_buf *errout, int *code,
		struct sfs_err *err)
{
	char eid[128];
	int r = dk_exec_create(x, true, eid, sizeof(eid), err);
	if (r)
		return r;
	struct collect c = {out, errout, false};
	r = dk_exec_stream(eid, collect_frame, &c, NULL, err);
	if (c.oom)
		return sfs_errf(err, -ENOMEM, "out of memory");
	if (r)
		return r;
	/* the stream can close a moment before the daemon records the exit */
	struct timespec step = {0, 5 * 1000 * 1000};
	for (int i = 0; i < 400; i++) {
		bool running;
		r = dk_exec_inspect(eid, &running, code, err);
		if (r)
			return r;
		if (!running && *code >= 0)
			return 0;
		nanosleep(&step, NULL);
	}
	return sfs_errf(err, -EIO, "docker: exec %.12s: still running after its output ended", eid);
}
