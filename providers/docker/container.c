/* Containers and images: what `new`, `restore` and `fork` are made of. */
#include "docker.h"
#include "engine.h"
#include "exec.h"
#include "../sh/sh.h"

#include "../config.h"
#include "../netpolicy/policy.h"
#include "../util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- options --------------------------------------------------------- */

static bool word_ok(const char *s)
{
	if (!*s || strlen(s) >= 64)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && !strchr("._-", *s))
			return false;
	return true;
}

/* memory=: a size (providers/util.h), at least the engine's 4 MiB. */
static int parse_memory(const char *s, int64_t *out)
{
	uint64_t v;
	if (sfs_parse_size(s, &v) || v < 4 * 1024 * 1024 || v > INT64_MAX)
		return -EINVAL;
	*out = (int64_t)v;
	return 0;
}

static int parse_ports(const char *s, struct dk_spec *spec)
{
	char *copy = strdup(s), *save = NULL;
	if (!copy)
		return -ENOMEM;
	int r = 0;
	for (char *t = strtok_r(copy, ",", &save); t && !r; t = strtok_r(NULL, ",", &save)) {
		char *end;
		long p = strtol(t, &end, 10);
		if (*end || p < 1 || p > 65535 || spec->nports == DK_MAX_PORTS)
			r = -EINVAL;
		else
			spec->ports[spec->nports++] = (int)p;
	}
	free(copy);
	return r;
}

int dk_spec_from_opts(const struct sfs_kvlist *opts, struct dk_spec *spec, struct sfs_err *err)
{
	memset(spec, 0, sizeof(*spec));
	const char *image = sfs_config_get("docker.image", NULL);
	const char *workdir = "/workspace";
	for (size_t i = 0; i < opts->n; i++) {
		const char *k = opts->v[i].key, *v = opts->v[i].val;
		if (strcmp(k, "provider") == 0 || strncmp(k, "env.", 4) == 0 ||
		    strcmp(k, "base") == 0 || strcmp(k, "hide") == 0 || strcmp(k, "hide.case") == 0)
			continue; /* base= and hide=: docker_create's (providers/cow) */
		if (strcmp(k, "image") == 0) {
			image = v;
		} else if (strcmp(k, "workdir") == 0) {
			if (v[0] != '/' || strstr(v, "/../") ||
			    strlen(v) >= sizeof(spec->workdir) ||
			    (strlen(v) >= 3 && strcmp(v + strlen(v) - 3, "/..") == 0))
				return sfs_errf(err, -EINVAL,
						"docker: workdir=%s: expected an absolute path", v);
			workdir = v;
		} else if (strcmp(k, "network") == 0 && strncmp(v, "allow:", 6) == 0) {
			struct sfs_netpolicy p;
			int r = sfs_netpolicy_parse(v, &p, err);
			sfs_netpolicy_free(&p);
			if (r)
				return r;
			if (sfs_pathf(spec->network, sizeof(spec->network), "%s", v) < 0)
				return sfs_errf(err, -EINVAL, "docker: network= is too long");
		} else if (strcmp(k, "network") == 0) {
			if (!word_ok(v))
				return sfs_errf(err, -EINVAL,
						"docker: network=%s: expected none, bridge or a "
						"network name",
						v);
			if (sfs_pathf(spec->network, sizeof(spec->network), "%s", v) < 0)
				return sfs_errf(err, -ENAMETOOLONG, "docker: network= is too long");
		} else if (strcmp(k, "cpus") == 0) {
			char *end;
			spec->cpus = strtod(v, &end);
			if (end == v || *end || spec->cpus <= 0 || spec->cpus > 1024)
				return sfs_errf(err, -EINVAL,
						"docker: cpus=%s: expected a number > 0", v);
		} else if (strcmp(k, "memory") == 0) {
			if (parse_memory(v, &spec->memory))
				return sfs_errf(
				    err, -EINVAL,
				    "docker: memory=%s: expected a size such as 512m or 1.5g "
				    "(at least 4m)",
				    v);
		} else if (strcmp(k, "ports") == 0) {
			int r = parse_ports(v, spec);
			if (r == -ENOMEM)
				return sfs_errf(err, r, "out of memory");
			if (r)
				return sfs_errf(err, -EINVAL,
						"docker: ports=%s: expected up to %d ports, "
						"comma-separated",
						v, DK_MAX_PORTS);
		} else {
			return sfs_errf(err, -EINVAL,
					"docker: unknown option \"%s\" (known: image= workdir= "
					"network= cpus= memory= ports= base= hide= env.K=)",
					k);
		}
	}
	if (!image)
		return sfs_errf(err, -EINVAL,
				"docker: image= is required (or set docker.image in the config)");
	if (!sfs_image_ref_ok(image))
		return sfs_errf(err, -EINVAL, "docker: image=%s: not an image reference", image);
	if (spec->nports && (strcmp(spec->network, "none") == 0 || dk_net_allow(spec)))
		return sfs_errf(err, -EINVAL,
				"docker: ports= cannot be published with network=none");
	if (sfs_pathf(spec->image, sizeof(spec->image), "%s", image) < 0 ||
	    sfs_pathf(spec->workdir, sizeof(spec->workdir), "%s", workdir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: image= or workdir= is too long");
	return 0;
}

json_t *dk_spec_to_json(const struct dk_spec *spec)
{
	json_t *ports = json_array();
	for (size_t i = 0; ports && i < spec->nports; i++)
		if (json_array_append_new(ports, json_integer(spec->ports[i]))) {
			json_decref(ports);
			return NULL;
		}
	if (!ports)
		return NULL;
	return json_pack("{s:s, s:s, s:s, s:f, s:I, s:o, s:s*}", "image", spec->image, "workdir",
			 spec->workdir, "network", spec->network, "cpus", spec->cpus, "memory",
			 (json_int_t)spec->memory, "ports", ports, "hostdir",
			 spec->hostdir[0] ? spec->hostdir : NULL);
}

int dk_spec_from_json(json_t *j, struct dk_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	const char *image = json_string_value(json_object_get(j, "image"));
	const char *workdir = json_string_value(json_object_get(j, "workdir"));
	const char *network = json_string_value(json_object_get(j, "network"));
	if (!image || !workdir)
		return -EINVAL;
	const char *hostdir = json_string_value(json_object_get(j, "hostdir"));
	if (sfs_pathf(spec->image, sizeof(spec->image), "%s", image) < 0 ||
	    sfs_pathf(spec->workdir, sizeof(spec->workdir), "%s", workdir) < 0 ||
	    sfs_pathf(spec->network, sizeof(spec->network), "%s", network ? network : "") < 0 ||
	    sfs_pathf(spec->hostdir, sizeof(spec->hostdir), "%s", hostdir ? hostdir : "") < 0)
		return -ENAMETOOLONG;
	spec->cpus = json_number_value(json_object_get(j, "cpus"));
	spec->memory = json_integer_value(json_object_get(j, "memory"));
	size_t i;
	json_t *p;
	json_array_foreach(json_object_get(j, "ports"), i, p)
	{
		if (spec->nports < DK_MAX_PORTS && json_is_integer(p))
			spec->ports[spec->nports++] = (int)json_integer_value(p);
	}
	return 0;
}

/* ---- inspect ----------------------------------------------------------- */

int dk_gone(const char *cid, struct sfs_err *err)
{
	return sfs_errf(err, -ENOENT, "docker: container %.12s " DK_GONE_TEXT, cid);
}

int dk_failed(struct sfs_sandbox *sb, int r, const struct sfs_err *err)
{
	if (r == -ENOENT && err && strstr(err->msg, DK_GONE_TEXT)) {
		char cid[DK_ID_MAX];
		dk_current(sb, cid, sizeof(cid));
		if (cid[0])
			dk_mark_gone(cid);
		sfs_sb_set_failed(sb, err->msg);
	}
	return r;
}

void dk_info_free(struct dk_info *info)
{
	json_decref(info->raw);
	info->raw = NULL;
}

int dk_inspect(const char *cid, struct dk_info *info, struct sfs_err *err)
{
	memset(info, 0, sizeof(*info));
	char path[256], what[96];
	if (sfs_pathf(path, sizeof(path), "/containers/%s/json", cid) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: container id too long");
	snprintf(what, sizeof(what), "container %.12s", cid);
	json_t *j;
	int r = dk_json("GET", path, NULL, 30, &j, what, err);
	if (r == -ENOENT)
		return dk_gone(cid, err);
	if (r < 0)
		return r;
	const char *id = json_string_value(json_object_get(j, "Id"));
	json_t *state = json_object_get(j, "State");
	if (!id || strlen(id) >= sizeof(info->id) || !json_is_object(state)) {
		json_decref(j);
		return sfs_errf(err, -EIO, "docker: %s: unexpected inspect reply", what);
	}
	memcpy(info->id, id, strlen(id) + 1); /* its length checked above */
	info->running = json_is_true(json_object_get(state, "Running")) &&
			!json_is_true(json_object_get(state, "Paused"));
	const char *s = json_string_value(json_object_get(state, "Status"));
	snprintf(info->status, sizeof(info->status), "%s", s ? s : "?"); /* message: may be cut */
	s = json_string_value(json_object_get(state, "StartedAt"));
	/* a start time is an identity (state.c compares it) and a merged dir
	 * a host path: an answer too long for them is refused, never cut */
	if (sfs_pathf(info->started, sizeof(info->started), "%s", s ? s : "") < 0) {
		json_decref(j);
		return sfs_errf(err, -EIO, "docker: %s: unexpected inspect reply", what);
	}
	json_t *gd = json_object_get(j, "GraphDriver");
	const char *driver = json_string_value(json_object_get(gd, "Name"));
	s = json_string_value(json_object_get(json_object_get(gd, "Data"), "MergedDir"));
	if (driver && strncmp(driver, "overlay", 7) == 0 && s)
		if (sfs_pathf(info->merged, sizeof(info->merged), "%s", s) < 0) {
			json_decref(j);
			return sfs_errf(err, -EIO, "docker: %s: unexpected inspect reply", what);
		}
	s = json_string_value(json_object_get(json_object_get(j, "Config"), "User"));
	if (sfs_pathf(info->user, sizeof(info->user), "%s", s ? s : "") < 0) {
		json_decref(j);
		return sfs_errf(err, -EIO, "docker: %s: unexpected inspect reply", what);
	}
	info->raw = j;
	return 0;
}

/* ---- images ------------------------------------------------------------ */

struct pull {
	struct sfs_sandbox *sb;
	const char *image;
	char line[4096];
	size_t len;
	char error[512];
	int64_t last_ms;
};

static void pull_line(struct pull *p)
{
	json_t *j = json_loadb(p->line, p->len, 0, NULL);
	if (!j)
		return;
	const char *e = json_string_value(json_object_get(j, "error"));
	if (e) {
		snprintf(p->error, sizeof(p->error), "%s", e); /* message: may be cut */
	} else {
		const char *status = json_string_value(json_object_get(j, "status"));
		const char *prog = json_string_value(json_object_get(j, "progress"));
		const char *id = json_string_value(json_object_get(j, "id"));
		int64_t now = dk_now_ms();
		if (status && now - p->last_ms >= 200) {
			p->last_ms = now;
			dk_progress(p->sb, "pulling %s: %s%s%s%s%s", p->image, id ? id : "",
				    id ? " " : "", status, prog ? " " : "", prog ? prog : "");
		}
	}
	json_decref(j);
}

static bool pull_sink(void *arg, const char *data, size_t len)
{
	struct pull *p = arg;
	for (size_t i = 0; i < len; i++) {
		if (data[i] == '\n') {
			pull_line(p);
			p->len = 0;
		} else if (p->len < sizeof(p->line)) {
			p->line[p->len++] = data[i];
		}
	}
	return true;
}

static int image_present(const char *image, struct sfs_err *err)
{
	char path[512];
	if (sfs_pathf(path, sizeof(path), "/images/%s/json", image) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: image name too long");
	int r = dk_json("GET", path, NULL, 30, NULL, "image inspect", err);
	return r < 0 ? r : 0;
}

int dk_ensure_image(struct sfs_sandbox *sb, const char *image, struct sfs_err *err)
{
	int r = image_present(image, err);
	if (r != -ENOENT)
		return r;
	/* fromImage + tag; a digest reference goes whole in fromImage */
	char name[256], tag[128] = "";
	if (sfs_pathf(name, sizeof(name), "%s", image) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: image name too long");
	char *slash = strrchr(name, '/'), *colon = strrchr(name, ':');
	if (!strchr(name, '@') && colon && (!slash || colon > slash)) {
		*colon = '\0';
		if (sfs_pathf(tag, sizeof(tag), "%s", colon + 1) < 0)
			return sfs_errf(err, -ENAMETOOLONG, "docker: image tag too long");
	} else if (!strchr(name, '@')) {
		snprintf(tag, sizeof(tag), "latest");
	}
	char *ename = sfs_http_escape_component(name), *etag = sfs_http_escape_component(tag);
	char path[1024];
	int pr = ename && etag ? sfs_pathf(path, sizeof(path), "/images/create?fromImage=%s%s%s",
					   ename, tag[0] ? "&tag=" : "", etag)
			       : 0;
	free(ename);
	free(etag);
	if (!ename || !etag)
		return sfs_errf(err, -ENOMEM, "out of memory");
	if (pr < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: image name too long");
	struct pull *p = calloc(1, sizeof(*p));
	if (!p)
		return sfs_errf(err, -ENOMEM, "out of memory");
	p->sb = sb;
	p->image = image;
	dk_progress(sb, "pulling %s", image);
	struct sfs_err perr = {0};
	r = dk_stream("POST", path, NULL, pull_sink, p, NULL, &perr);
	if (p->len)
		pull_line(p);
	dk_progress(sb, NULL);
	/* the engine answered a moment ago: any failure now means no image */
	if (r < 0 || p->error[0]) {
		r = sfs_errf(err, -ENOENT, "docker: image %s is not here and pulling it failed: %s",
			     image, p->error[0] ? p->error : perr.msg);
		free(p);
		return r;
	}
	free(p);
	r = image_present(image, err);
	if (r == -ENOENT)
		return sfs_errf(err, -ENOENT, "docker: image %s: pull finished but it is not here",
				image);
	return r;
}

/* ---- containers -------------------------------------------------------- */

json_t *dk_exec_env(struct sfs_sandbox *sb, int run, struct sfs_err *err)
{
	/* env and secrets: given to the exec through the API, never in argv */
	struct sfs_kvlist sbenv;
	if (sfs_sb_run_env(sb, &sbenv, err))
		return NULL;
	json_t *env = json_array();
	if (!env) {
		sfs_kv_free(&sbenv);
		sfs_errf(err, -ENOMEM, "out of memory");
		return NULL;
	}
	int r = json_array_append_new(
	    env, json_string("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
	r |= json_array_append_new(env, json_string("HOME=/root"));
	r |= dk_net_env(sb, env);
	for (size_t i = 0; !r && i < sbenv.n; i++) {
		char *kv;
		if (asprintf(&kv, "%s=%s", sbenv.v[i].key, sbenv.v[i].val) < 0) {
			r = -1;
			break;
		}
		r = json_array_append_new(env, json_string(kv));
		explicit_bzero(kv, strlen(kv));
		free(kv);
	}
	sfs_kv_free(&sbenv);
	if (!r && run > 0) {
		char kv[128];
		snprintf(kv, sizeof(kv), "SANDBOXFS_RUN_DIR=%s/%d", DK_RUNS_DIR,
			 run); /* may be cut: never, a constant and a number */
		r = json_array_append_new(env, json_string(kv));
	}
	if (r) {
		json_decref(env);
		sfs_errf(err, -ENOMEM, "out of memory");
		return NULL;
	}
	return env;
}

int dk_sh(const char *cid, const char *script, const char *const *args, char *out, size_t outlen,
	  struct sfs_err *err)
{
	struct sfs_sh_cmd c;
	int r = sfs_sh_script(&c, script, "sandboxfs", args, err);
	if (r)
		return r;
	r = dk_sh_cmd(cid, &c, out, outlen, err);
	sfs_sh_cmd_free(&c);
	return r;
}

int dk_sh_cmd(const char *cid, const struct sfs_sh_cmd *cmd, char *out, size_t outlen,
	      struct sfs_err *err)
{
	struct dk_exec x = {
	    .cid = cid, .argv = (const char *const *)cmd->argv, .workdir = "/", .user = "0"};
	struct dk_buf o = {.max = outlen ? outlen - 1 : 1}, e = {.max = 512};
	int code = 0;
	int r = dk_exec_run(&x, &o, &e, &code, err);
	if (!r && code != 0) {
		size_t l = e.b.len;
		while (l && e.b.buf[l - 1] == '\n')
			l--;
		r = sfs_errf(err, -EIO, "docker: in container %.12s: sh exited %d%s%.*s", cid, code,
			     l ? ": " : "", (int)l, l ? e.b.buf : "");
	}
	if (!r && out && outlen) {
		size_t l = o.b.len;
		while (l && (o.b.buf[l - 1] == '\n' || o.b.buf[l - 1] == ' '))
			l--;
		if (sfs_pathf(out, outlen, "%.*s", (int)l, l ? o.b.buf : "") < 0)
			r = sfs_errf(err, -ENAMETOOLONG,
				     "docker: in container %.12s: sh's answer is too long", cid);
	}
	dk_buf_free(&o);
	dk_buf_free(&e);
	return r;
}

int dk_container_remove(const char *cid, struct sfs_err *err)
{
	char path[256], what[96];
	if (sfs_pathf(path, sizeof(path), "/containers/%s?force=true&v=true", cid) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: container id too long");
	snprintf(what, sizeof(what), "removing container %.12s", cid);
	dk_events_expect_removal(cid);
	int r = dk_json("DELETE", path, NULL, 120, NULL, what, err);
	return r == -ENOENT ? 0 : r < 0 ? r : 0;
}

int dk_container_start(const char *cid, struct sfs_err *err)
{
	char path[256], what[96];
	if (sfs_pathf(path, sizeof(path), "/containers/%s/start", cid) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: container id too long");
	snprintf(what, sizeof(what), "starting container %.12s", cid);
	int r = dk_json("POST", path, NULL, 120, NULL, what, err);
	if (r == -ENOENT)
		return dk_gone(cid, err);
	return r < 0 ? r : 0;
}

static json_t *create_body(struct sfs_sandbox *sb, const struct dk_spec *spec, const char *image)
{
	char state[4200];
	if (sfs_pathf(state, sizeof(state), "%s", sfs_state_dir ? sfs_state_dir : "") < 0)
		return NULL; /* a label that names another state dir: never */
	json_t *labels =
	    json_pack("{s:s, s:s, s:s, s:s}", "sandboxfs.managed", "1", "sandboxfs.name", sb->name,
		      "sandboxfs.local_id", sb->key, "sandboxfs.state", state);
	json_t *host = json_object(), *exposed = json_object(), *bindings = json_object();
	json_t *body = json_pack("{s:s, s:[sss], s:s, s:o, s:b}", "Image", image, "Entrypoint",
				 "/bin/sh", "-c", sfs_sh_keepalive, "WorkingDir", spec->workdir,
				 "Labels", labels, "Tty", 0);
	if (!body || !host || !exposed || !bindings) {
		json_decref(body);
		json_decref(host);
		json_decref(exposed);
		json_decref(bindings);
		return NULL;
	}
	int r = 0;
	for (size_t i = 0; i < spec->nports; i++) {
		char key[32];
		snprintf(key, sizeof(key), "%d/tcp", spec->ports[i]);
		r |= json_object_set_new(exposed, key, json_object());
		r |= json_object_set_new(
		    bindings, key,
		    json_pack("[{s:s, s:s}]", "HostIp", "127.0.0.1", "HostPort", "0"));
	}
	json_t *binds = json_array();
	if (!binds)
		r = -1;
	if (binds && dk_net_allow(spec)) {
		/* loopback only; the proxy's directory bound in (netpolicy.c),
		 * read-only: connecting to a socket needs no write access to
		 * its filesystem, and the container's root must not plant a
		 * symlink or fill the state disk there */
		char dir[4200], bind[4300];
		if (dk_net_dir(sb, dir, sizeof(dir), NULL) < 0) {
			r = -1;
		} else {
			if (sfs_pathf(bind, sizeof(bind), "%s:/run/sandboxfs:ro", dir) < 0)
				r = -1;
			r |= json_object_set_new(host, "NetworkMode", json_string("none"));
			r |= json_array_append_new(binds, json_string(bind));
		}
	} else if (spec->network[0]) {
		r |= json_object_set_new(host, "NetworkMode", json_string(spec->network));
	}
	if (spec->cpus > 0)
		r |= json_object_set_new(host, "NanoCpus",
					 json_integer((json_int_t)(spec->cpus * 1e9)));
	if (spec->memory > 0)
		r |= json_object_set_new(host, "Memory", json_integer(spec->memory));
	if (binds && spec->hostdir[0]) {
		/* a base workspace: the host's merged view is the workdir */
		char bind[sizeof(spec->hostdir) + sizeof(spec->workdir) + 2];
		if (sfs_pathf(bind, sizeof(bind), "%s:%s", spec->hostdir, spec->workdir) < 0)
			r = -1;
		r |= json_array_append_new(binds, json_string(bind));
	}
	/* one list for both: a second "Binds" replaced the proxy's */
	if (json_array_size(binds))
		r |= json_object_set(host, "Binds", binds);
	json_decref(binds);
	r |= json_object_set_new(host, "PortBindings", bindings);
	r |= json_object_set_new(body, "ExposedPorts", exposed);
	r |= json_object_set_new(body, "HostConfig", host);
	if (r) {
		json_decref(body);
		return NULL;
	}
	return body;
}

int dk_container_new(struct sfs_sandbox *sb, const struct dk_spec *spec, const char *image,
		     char *cid, size_t cidlen, struct sfs_err *err)
{
	if (!image)
		image = spec->image;
	char rnd[8], name[128], path[256];
	int r = sfs_random_hex(rnd, 6);
	if (r)
		return sfs_errf(err, r, "random: %s", strerror(-r));
	if (sfs_pathf(name, sizeof(name), "sandboxfs-%s-%s", sb->name, rnd) < 0 ||
	    sfs_pathf(path, sizeof(path), "/containers/create?name=%s", name) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: container name too long");
	json_t *body = create_body(sb, spec, image);
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	dk_progress(sb, "creating container from %s", image);
	json_t *reply;
	char what[300];
	snprintf(what, sizeof(what), "creating a container from %s",
		 image); /* message: may be cut */
	r = dk_json("POST", path, body, 120, &reply, what, err);
	json_decref(body);
	if (r < 0) {
		dk_progress(sb, NULL);
		return r;
	}
	const char *id = json_string_value(json_object_get(reply, "Id"));
	if (!id || strlen(id) >= cidlen) {
		json_decref(reply);
		dk_progress(sb, NULL);
		return sfs_errf(err, -EIO, "docker: %s: no container id in the reply", what);
	}
	memcpy(cid, id, strlen(id) + 1); /* its length checked above */
	json_decref(reply);

	/* from here on, a failure removes the container: nothing half-done */
	dk_progress(sb, "starting container %.12s", cid);
	r = dk_container_start(cid, err);
	if (!r) {
		const char *args[] = {spec->workdir, NULL};
		r = dk_sh(cid,
			  "mkdir -p " DK_RUNS_DIR " && chmod 1777 " DK_RUNS_DIR " && "
			  "mkdir -p \"$1\"",
			  args, NULL, 0, err);
		if (r && err && strstr(err->msg, "exited 127"))
			r = sfs_errf(err, -EINVAL, "docker: image %s cannot run /bin/sh: %s", image,
				     err->msg);
	}
	dk_progress(sb, NULL);
	if (r) {
		struct sfs_err ignored = {0};
		dk_container_remove(cid, &ignored);
		cid[0] = '\0';
	}
	return r;
}

int dk_commit(const char *cid, const char *repo, const char *tag, char *image_id, size_t len,
	      struct sfs_err *err)
{
	char *erepo = sfs_http_escape_component(repo), *etag = sfs_http_escape_component(tag);
	char path[600];
	int pr = erepo && etag
		     ? sfs_pathf(path, sizeof(path),
				 "/commit?container=%s&repo=%s&tag=%s&pause=true", cid, erepo, etag)
		     : 0;
	free(erepo);
	free(etag);
	if (!erepo || !etag)
		return sfs_errf(err, -ENOMEM, "out of memory");
	if (pr < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: commit: repository or tag too long");
	char what[96];
	snprintf(what, sizeof(what), "committing container %.12s", cid);
	json_t *empty = json_object(), *reply;
	if (!empty)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = dk_json("POST", path, empty, 600, &reply, what, err);
	json_decref(empty);
	if (r == -ENOENT)
		return dk_gone(cid, err);
	if (r < 0)
		return r;
	const char *id = json_string_value(json_object_get(reply, "Id"));
	if (!id || strlen(id) >= len) {
		json_decref(reply);
		return sfs_errf(err, -EIO, "docker: %s: no image id in the reply", what);
	}
	memcpy(image_id, id, strlen(id) + 1); /* its length checked above */
	json_decref(reply);
	return 0;
}
