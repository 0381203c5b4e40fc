/* The E2B provider: lifecycle, snapshots, forks, ports, and the op table. */
#include "e2b.h"

#include "../config.h"
#include "../util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char create_keys[] = "provider template timeout metadata.K=";

/* The POST /sandboxes body for `new ... provider=e2b` options (opts may be
 * NULL: a restore or fork from a snapshot, whose id is the template). */
static int create_body(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, const char *tpl,
		       json_t **out, struct sfs_err *err)
{
	json_t *body = json_object(), *env = json_object(), *meta = json_object();
	int r = (!body || !env || !meta) ? -ENOMEM : 0;
	long timeout = e2b_sandbox_timeout();
	for (size_t i = 0; !r && i < sb->env.n; i++)
		r = json_object_set_new(env, sb->env.v[i].key, json_string(sb->env.v[i].val));
	if (!r)
		r = json_object_set_new(meta, "sandboxfs.name", json_string(sb->name));
	if (!r)
		r = json_object_set_new(meta, "sandboxfs.key", json_string(sb->key));
	if (r) {
		r = sfs_errf(err, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; opts && i < opts->n && !r; i++) {
		const char *k = opts->v[i].key, *v = opts->v[i].val;
		if (!strcmp(k, "provider")) {
			continue;
		} else if (!strcmp(k, "template")) {
			if (!*v)
				r = sfs_errf(err, -EINVAL,
					     "e2b: template=: expected a template name");
			tpl = v;
		} else if (!strcmp(k, "timeout")) {
			char *end;
			long n = strtol(v, &end, 10);
			if (!*v || *end || n < 1 || n > 86400)
				r = sfs_errf(err, -EINVAL,
					     "e2b: timeout=%s: expected seconds from 1 to 86400",
					     v);
			timeout = n;
		} else if (!strncmp(k, "metadata.", 9) && k[9]) {
			r = json_object_set_new(meta, k + 9, json_string(v)) ? -ENOMEM : 0;
		} else {
			r = sfs_errf(err, -EINVAL, "e2b: unknown option \"%s\" (known: %s)", k,
				     create_keys);
		}
		if (r == -ENOMEM)
			r = sfs_errf(err, -ENOMEM, "out of memory");
	}
	if (!r &&
	    (json_object_set_new(body, "templateID", json_string(tpl ? tpl : "base")) ||
	     json_object_set_new(body, "timeout", json_integer(timeout)) ||
	     json_object_set(body, "envVars", env) || json_object_set(body, "metadata", meta)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
out:
	json_decref(env);
	json_decref(meta);
	if (r) {
		json_decref(body);
		return r;
	}
	*out = body;
	return 0;
}

static void kill_remote(const char *id)
{
	char path[256];
	struct sfs_err err = {0};
	if (sfs_pathf(path, sizeof(path), "/sandboxes/%s", id) < 0)
		return; /* never a DELETE of a cut id */
	int r = e2b_api("DELETE", path, NULL, NULL, NULL, &err);
	if (r && r != -ENOENT)
		sfs_log(SFS_LOG_WARN, "e2b: could not kill sandbox %s: %s", id, err.msg);
}

/* Adopts a new sandbox's answer o and finds its home; on any failure the
 * new sandbox is killed again. */
static int take_new(struct sfs_sandbox *sb, json_t *o, const char *image, struct sfs_err *err)
{
	int r = e2b_adopt(sb, o, err);
	if (!r)
		r = e2b_fetch_workdir(sb, err);
	if (!r)
		r = sfs_sb_publish(sb, NULL, image, NULL, err);
	if (r && sb->id)
		kill_remote(sb->id);
	return r;
}

static int make_sandbox(struct sfs_sandbox *sb, json_t *body, const char *image,
			struct sfs_err *err)
{
	json_t *o = NULL;
	int r = e2b_api("POST", "/sandboxes", body, &o, NULL, err);
	if (!r)
		r = take_new(sb, o, image, err);
	json_decref(o);
	return r;
}

static int e2b_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	json_t *body = NULL;
	int r = create_body(sb, opts, NULL, &body, err);
	if (r)
		return r;
	const char *tpl = json_string_value(json_object_get(body, "templateID"));
	r = make_sandbox(sb, body, tpl, err);
	json_decref(body);
	return r;
}

/* connect: resumes a paused sandbox (201) or finds it running (200). */
static int connect_sandbox(struct sfs_sandbox *sb, struct sfs_err *err)
{
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandboxes/%s/connect", sb->id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "e2b: sandbox id too long");
	json_t *body = json_pack("{s:I}", "timeout", (json_int_t)e2b_sandbox_timeout());
	if (!body)
		return sfs_errf(err, -ENOMEM, "out of memory");
	json_t *o = NULL;
	int r = e2b_api("POST", path, body, &o, NULL, err);
	json_decref(body);
	if (r == -ENOENT)
		r = sfs_errf(err, -ENOENT, "e2b: sandbox %s is gone", sb->id);
	if (!r && json_object_get(o, "sandboxID"))
		r = e2b_adopt(sb, o, err);
	json_decref(o);
	return r;
}

static int e2b_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return sfs_errf(err, -EINVAL, "e2b: no sandbox id to resume");
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandboxes/%s", sb->id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "e2b: sandbox id too long");
	json_t *o = NULL;
	int r = e2b_api("GET", path, NULL, &o, NULL, err);
	if (r == -ENOENT)
		return sfs_errf(err, -ENOENT, "e2b: sandbox %s is gone", sb->id);
	if (r)
		return r;
	const char *tpl = json_string_value(json_object_get(o, "templateID"));
	char image[128];
	if (sfs_pathf(image, sizeof(image), "%s", tpl ? tpl : "base") < 0) {
		json_decref(o);
		return sfs_errf(err, -EIO, "e2b: sandbox %s: its template id is too long", sb->id);
	}
	r = e2b_adopt(sb, o, err);
	json_decref(o);
	if (!r)
		r = connect_sandbox(sb, err);
	if (!r && !sb->workspace)
		r = e2b_fetch_workdir(sb, err);
	if (!r && !sb->image)
		r = sfs_sb_publish(sb, NULL, image, NULL, err);
	return r;
}

static int e2b_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (!sb->id)
		return 0;
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandboxes/%s", sb->id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "e2b: sandbox id too long");
	int r = e2b_api("DELETE", path, NULL, NULL, NULL, err);
	if (r == -ENOENT)
		r = 0; /* already gone is what we wanted */
	if (!r)
		sfs_sb_delete_snapshots(sb);
	return r;
}

static int e2b_stop(struct sfs_sandbox *sb, struct sfs_err *err)
{
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandboxes/%s/pause", sb->id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "e2b: sandbox id too long");
	json_t *body = json_object();
	int r = body ? e2b_api("POST", path, body, NULL, NULL, err)
		     : sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(body);
	return r;
}

static int e2b_start(struct sfs_sandbox *sb, struct sfs_err *err)
{
	return connect_sandbox(sb, err);
}

static int e2b_snapshot(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err)
{
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandboxes/%s/snapshots", sb->id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "e2b: sandbox id too long");
	json_t *body = json_object(), *o = NULL;
	/* a name is a template alias: only what E2B allows in one */
	if (body && label && *label) {
		char name[64];
		size_t k = 0;
		for (const char *p = label; *p && k < sizeof(name) - 1; p++)
			name[k++] = (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ? *p : '-';
		name[k] = '\0';
		json_object_set_new(body, "name", json_string(name));
	}
	int r = body ? e2b_api("POST", path, body, &o, NULL, err)
		     : sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(body);
	const char *sid = json_string_value(json_object_get(o, "snapshotID"));
	if (!r && !sid)
		r = sfs_errf(err, -EPROTO, "e2b: the snapshot answer has no snapshotID");
	if (!r && !(*id = strdup(sid)))
		r = sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(o);
	return r;
}

/* A fresh record (for restore) carrying sb's name, key and env. */
static void fresh_from(struct sfs_sandbox *fresh, struct sfs_sandbox *sb)
{
	memset(fresh, 0, sizeof(*fresh));
	memcpy(fresh->name, sb->name, sizeof(fresh->name));
	memcpy(fresh->key, sb->key, sizeof(fresh->key));
	fresh->provider = sb->provider;
	fresh->env = sb->env;
}

static int e2b_restore(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	/* a new sandbox from the snapshot (a template) takes this one's place */
	struct sfs_sandbox fresh;
	fresh_from(&fresh, sb);
	json_t *body = NULL;
	int r = create_body(&fresh, NULL, snapshot_id, &body, err);
	if (!r)
		r = make_sandbox(&fresh, body, snapshot_id, err);
	json_decref(body);
	bool made = !r;
	char *old = r ? NULL : (sb->id ? strdup(sb->id) : NULL);
	if (!r && sb->id && !old)
		r = sfs_errf(err, -ENOMEM, "out of memory");
	if (!r)
		r = sfs_sb_publish(sb, fresh.id, fresh.image, fresh.workspace, err);
	if (r) {
		if (made && fresh.id)
			kill_remote(fresh.id);
	} else {
		e2b_state_take(sb, &fresh);
	}
	free(fresh.id);
	free(fresh.workspace);
	free(fresh.image);
	e2b_state_free(&fresh);
	if (old)
		kill_remote(old);
	free(old);
	return r;
}

static int e2b_snapshot_delete(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	(void)sb;
	char path[512];
	if (sfs_pathf(path, sizeof(path), "/templates/%s", snapshot_id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "e2b: snapshot id too long");
	int r = e2b_api("DELETE", path, NULL, NULL, NULL, err);
	return r == -ENOENT ? 0 : r;
}

static int e2b_fork(struct sfs_sandbox *src, struct sfs_sandbox *dst, const char *from,
		    struct sfs_err *err)
{
	json_t *body = NULL, *o = NULL;
	int r;
	if (from) {
		r = create_body(dst, NULL, from, &body, err);
		if (!r)
			r = make_sandbox(dst, body, from, err);
		json_decref(body);
		return r;
	}
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/sandboxes/%s/fork", src->id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "e2b: sandbox id too long");
	body = json_pack("{s:I, s:i}", "timeout", (json_int_t)e2b_sandbox_timeout(), "count", 1);
	r = body ? e2b_api("POST", path, body, &o, NULL, err)
		 : sfs_errf(err, -ENOMEM, "out of memory");
	json_decref(body);
	json_t *first = json_array_get(o, 0);
	json_t *sbx = json_object_get(first, "sandbox");
	if (!r && !sbx) {
		const char *msg =
		    json_string_value(json_object_get(json_object_get(first, "error"), "message"));
		r = sfs_errf(err, -EIO, "e2b: fork of %s: %s", src->name,
			     msg ? msg : "no sandbox in the answer");
	}
	if (!r)
		r = take_new(dst, sbx, src->image ? src->image : "base", err);
	json_decref(o);
	return r;
}

static int e2b_expose(struct sfs_sandbox *sb, int port, char **url, struct sfs_err *err)
{
	/* every port is public at https://PORT-ID.DOMAIN (provider-apis.md §5.6) */
	json_t *st = e2b_state_save(sb);
	const char *dom = json_string_value(json_object_get(st, "domain"));
	const char *envdom = getenv("E2B_DOMAIN");
	int n = asprintf(url, "https://%d-%s.%s", port, sb->id,
			 dom		     ? dom
			 : envdom && *envdom ? envdom
					     : E2B_DEFAULT_DOMAIN);
	json_decref(st);
	if (n < 0)
		*url = NULL;
	return n < 0 ? sfs_errf(err, -ENOMEM, "out of memory") : 0;
}

static bool e2b_configured(char *why, size_t len)
{
	if (!e2b_api_key()) {
		snprintf(why, len,
			 "no API key: set E2B_API_KEY in the environment or e2b.api_key in the "
			 "config file");
		return false;
	}
	snprintf(why, len, "ready: E2B API key set");
	return true;
}

static const struct sfs_provider_ops e2b_ops = {
    .create = e2b_create,
    .resume = e2b_resume,
    .destroy = e2b_destroy,
    .run_start = e2b_run_start,
    .run_refresh = e2b_run_refresh,
    .journal_read = e2b_journal_read,
    .journal_follow = e2b_journal_follow,
    .journal_unfollow = e2b_journal_unfollow,
    .run_kill = e2b_run_kill,
    .fs_stat = e2b_fs_stat,
    .fs_list = e2b_fs_list,
    .fs_read = e2b_fs_read,
    .fs_read_many = e2b_fs_read_many,
    .fs_write = e2b_fs_write,
    .fs_put_tree = e2b_fs_put_tree,
    .fs_mkdir = e2b_fs_mkdir,
    .fs_remove = e2b_fs_remove,
    .fs_rename = e2b_fs_rename,
    .fs_chmod = e2b_fs_chmod,
    .fs_symlink = e2b_fs_symlink,
    .run_stdin_write = e2b_stdin_write,
    .run_stdin_close = e2b_stdin_close,
    .snapshot = e2b_snapshot,
    .restore = e2b_restore,
    .snapshot_delete = e2b_snapshot_delete,
    .fork = e2b_fork,
    .expose = e2b_expose,
    .stop = e2b_stop,
    .start = e2b_start,
    .state_save = e2b_state_save,
    .state_load = e2b_state_load,
    .state_free = e2b_state_free,
    .configured = e2b_configured,
};

static const char *const e2b_credential_env[] = {"E2B_API_KEY", NULL};

const struct sfs_provider sfs_provider_e2b = {
    .name = "e2b",
    /* Each true is proven by a test in tests/bats/e2b.bats against the
     * emulator (docs/deviations.md says which only the emulator proves).
     * killableProcesses: the kit's kill script signals the run's process
     * group (envd's SendSignal reaches only the wrapper envd started); the
     * conformance kill test sees every process of the sandbox gone, and
     * journals are followed (tail -f through Start, stopped by unfollow).
     * networkPolicy: E2B's network options are not mapped. */
    .caps =
	{
	    [SFS_CAP_FS] = true,
	    [SFS_CAP_EXEC] = true,
	    [SFS_CAP_ENV] = true,
	    [SFS_CAP_PORTS] = true,
	    [SFS_CAP_BACKGROUND] = true,
	    [SFS_CAP_WRITABLE_STDIN] = true,
	    [SFS_CAP_KILLABLE] = true,
	    [SFS_CAP_SNAPSHOTS] = true,
	    [SFS_CAP_NETWORK_POLICY] = false,
	    [SFS_CAP_DURABLE_FS] = true,
	    [SFS_CAP_FORK] = true,
	},
    .host_fs = false,
    .credential_env = e2b_credential_env,
    .ops = &e2b_ops,
    .options = sfs_e2b_options,
};
