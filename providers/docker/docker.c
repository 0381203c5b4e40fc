/* The docker provider: sandbox lifecycle ops and the provider table entry. */
#include "docker.h"
#include "engine.h"
#include "../cow/cow.h"
#include "../netpolicy/proxy.h"
#include "../sh/sh.h"
#include "../util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SNAPSHOT_REPO "sandboxfs-snapshot"
#define FORK_REPO "sandboxfs-fork"

/* Copies sb's saved spec. */
static int get_spec(struct sfs_sandbox *sb, struct dk_spec *spec, struct sfs_err *err)
{
	if (dk_saved_spec(sb, spec))
		return sfs_errf(err, -EINVAL, "docker: sandbox \"%s\" has no container spec",
				sb->name);
	return 0;
}

static int need_container(struct sfs_sandbox *sb, char *cid, size_t len, struct sfs_err *err)
{
	dk_current(sb, cid, len);
	if (!cid[0])
		return sfs_errf(err, -ENOENT, "docker: sandbox \"%s\" has no container", sb->name);
	return 0;
}

/* Inspects the container and records what we learnt. */
static int refresh_container(struct sfs_sandbox *sb, const char *cid, struct dk_info *info,
			     struct sfs_err *err)
{
	int r = dk_inspect(cid, info, err);
	if (r)
		return r;
	dk_note_container(sb, info);
	return 0;
}

/* Makes a new container for sb and publishes it; on failure nothing is left. */
static int adopt_new(struct sfs_sandbox *sb, const struct dk_spec *spec, const char *image,
		     const char *shown_image, const char *fork_image, char *cid, size_t cidlen,
		     struct sfs_err *err)
{
	int r = dk_container_new(sb, spec, image, cid, cidlen, err);
	if (r)
		return r;
	struct dk_info info;
	r = refresh_container(sb, cid, &info, err);
	if (!r) {
		dk_info_free(&info);
		/* images waiting for their last container outlive the swap */
		r = dk_publish(sb, cid, shown_image, spec, fork_image, err);
	}
	if (r) {
		struct sfs_err ignored = {0};
		dk_container_remove(cid, &ignored);
		dk_forget(sb);
	}
	return r;
}

static int docker_create(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err)
{
	struct dk_spec spec;
	int r = dk_spec_from_opts(opts, &spec, err);
	const char *base = sfs_kv_get(opts, "base"), *hide = sfs_kv_get(opts, "hide");
	const char *hide_case = sfs_kv_get(opts, "hide.case");
	if (!r)
		r = sfs_cow_check(base, hide, hide_case, err);
	if (!r)
		r = dk_ensure_image(sb, spec.image, err);
	if (r)
		return r;
	/* base=: the container binds the host's copy-on-write view at its
	 * workdir, and workspace/ serves that view from the host */
	if (base && (r = sfs_cow_create(sb->statedir, base, hide, hide_case, spec.hostdir, err)))
		return r;
	char cid[DK_ID_MAX];
	r = adopt_new(sb, &spec, NULL, spec.image, NULL, cid, sizeof(cid), err);
	if (r && base) {
		struct sfs_err ignored = {0};
		sfs_cow_remove(sb->statedir, &ignored);
	}
	return r;
}

/* After our own restart no follower of ours can be alive; kill what an
 * earlier daemon left (same container life), or just forget stale files. */
static void forget_followers(const char *cid, bool kill_them)
{
	struct sfs_sh_cmd c;
	struct sfs_err err = {0};
	int r = sfs_sh_forget_followers(&c, DK_RUNS_DIR, kill_them, &err);
	if (!r)
		r = dk_sh_cmd(cid, &c, NULL, 0, &err);
	sfs_sh_cmd_free(&c);
	if (r)
		sfs_log(SFS_LOG_WARN, "docker: container %.12s: cleaning followers: %s", cid,
			err.msg);
}

static int resume_op(struct sfs_sandbox *sb, struct sfs_err *err)
{
	if (sfs_cow_present(sb->statedir)) {
		/* the view the container binds, before the container starts */
		char merged[4096];
		int r = sfs_cow_resume(sb->statedir, merged, err);
		if (r)
			return r;
	}
	char want[DK_ID_MAX];
	dk_saved_container(sb, want, sizeof(want));
	bool adopting = !want[0];
	if (adopting) /* the op holder reads its record's fields bare */
		if (sfs_pathf(want, sizeof(want), "%s", sb->id ? sb->id : "") < 0)
			return sfs_errf(err, -ENAMETOOLONG, "docker: id= is too long");
	if (!want[0])
		return sfs_errf(err, -EINVAL, "docker: resume needs id=CONTAINER");
	struct dk_info info;
	int r = dk_inspect(want, &info, err);
	if (r)
		return r;
	bool was_running = info.running;
	if (!info.running && sfs_sb_get_state(sb) != SFS_SB_STOPPED) {
		r = dk_container_start(info.id, err);
		dk_info_free(&info);
		if (!r)
			r = dk_inspect(want, &info, err);
		if (r)
			return r;
	}
	dk_note_container(sb, &info);
	if (adopting) {
		/* `resume NAME provider=docker id=ID`: a container made elsewhere */
		json_t *cfg = json_object_get(info.raw, "Config");
		const char *image = json_string_value(json_object_get(cfg, "Image"));
		const char *wd = json_string_value(json_object_get(cfg, "WorkingDir"));
		struct dk_spec spec = {0};
		if (sfs_pathf(spec.image, sizeof(spec.image), "%s", image ? image : "") < 0 ||
		    sfs_pathf(spec.workdir, sizeof(spec.workdir), "%s", wd && *wd ? wd : "/") < 0)
			r = sfs_errf(err, -ENAMETOOLONG,
				     "docker: its image or workdir is too long");
		const char *net = json_string_value(
		    json_object_get(json_object_get(info.raw, "HostConfig"), "NetworkMode"));
		if (net && strcmp(net, "default") != 0)
			if (!r && sfs_pathf(spec.network, sizeof(spec.network), "%s", net) < 0)
				r = sfs_errf(err, -ENAMETOOLONG, "docker: its network is too long");
		if (!r)
			r = dk_publish(sb, info.id, spec.image, &spec, NULL, err);
	}
	bool running = info.running;
	char id[DK_ID_MAX];
	memcpy(id, info.id, sizeof(id)); /* the same size */
	dk_info_free(&info);
	if (!r && running) {
		const char *args[] = {NULL};
		struct sfs_err ignored = {0};
		if (adopting)
			dk_sh(id, "mkdir -p " DK_RUNS_DIR " && chmod 1777 " DK_RUNS_DIR, args, NULL,
			      0, &ignored);
		forget_followers(id, was_running);
	}
	if (!r)
		dk_adopt_snapshots(sb, id);
	return r;
}

static void remove_fork_image(struct sfs_sandbox *sb)
{
	char id[DK_ID_MAX];
	dk_saved_fork_image(sb, id, sizeof(id));
	if (!id[0])
		return;
	char path[256];
	if (sfs_pathf(path, sizeof(path), "/images/%s", id) < 0)
		return;
	struct sfs_err err = {0};
	/* best effort: another fork of the same commit may still use it */
	dk_json("DELETE", path, NULL, 60, NULL, "removing fork image", &err);
}

static int docker_destroy(struct sfs_sandbox *sb, struct sfs_err *err)
{
	char cid[DK_ID_MAX];
	dk_current(sb, cid, sizeof(cid));
	if (cid[0]) {
		int r = dk_container_remove(cid, err);
		if (r)
			return r;
	}
	dk_forget(sb);
	sfs_proxy_detach_sandbox(sb->key);
	remove_fork_image(sb);
	/* its snapshots and doomed images go too, but for those a fork's
	 * container still runs on: they go with that fork (images.c) */
	dk_release_snapshots(sb);
	/* a base workspace: its upper layer goes, the base stays as it was */
	return sfs_cow_remove(sb->statedir, err);
}

static int docker_workspace_root_fd(struct sfs_sandbox *sb, int *fd, struct sfs_err *err)
{
	struct dk_spec spec;
	if (dk_saved_spec(sb, &spec) == 0 && spec.hostdir[0]) {
		/* a base workspace is on this host whatever docker.fs says */
		*fd = open(spec.hostdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
		return *fd < 0 ? sfs_errf(err, -errno, "docker: workspace %s: %s", spec.hostdir,
					  strerror(errno))
			       : 0;
	}
	if (dk_fs_archive_only())
		return sfs_errf(
		    err, -EOPNOTSUPP,
		    "docker: host access to the container's files is off (docker.fs=archive): "
		    "workspace/ goes through the archive API");
	char ws[1024];
	pthread_mutex_lock(&sfs_records_mu);
	int pr = sfs_pathf(ws, sizeof(ws), "%s", sb->workspace ? sb->workspace : "/");
	pthread_mutex_unlock(&sfs_records_mu);
	if (pr < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: the workspace path is too long");
	return dk_host_open(sb, ws, O_PATH | O_DIRECTORY, 0, fd, err);
}

/* Turns a label into a tag: [A-Za-z0-9_.-], at most 40 chars. */
static void tag_part(const char *label, char *buf, size_t len)
{
	size_t n = 0;
	for (; label && *label && n + 1 < len && n < 40; label++)
		buf[n++] = isalnum((unsigned char)*label) || strchr("_.-", *label) ? *label : '_';
	buf[n] = '\0';
}

static void short_image_id(const char *id, char *buf, size_t len)
{
	const char *hex = strncmp(id, "sha256:", 7) == 0 ? id + 7 : id;
	snprintf(buf, len, "%.12s", hex);
}

/* A base= workspace is a host view bound into the container: an image
 * committed from it would not hold the workspace. */
static int base_refused(struct sfs_sandbox *sb, const char *what, struct sfs_err *err)
{
	return sfs_errf(err, -EOPNOTSUPP,
			"docker: %s of a base= sandbox is not supported (its workspace is a host "
			"view that a container image does not hold)",
			what);
}

static int snapshot_op(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err)
{
	char cid[DK_ID_MAX];
	int r = need_container(sb, cid, sizeof(cid), err);
	struct dk_spec spec;
	if (!r && dk_saved_spec(sb, &spec) == 0 && spec.hostdir[0])
		r = base_refused(sb, "snapshot", err);
	if (r)
		return r;
	char part[48], tag[128], image[DK_ID_MAX];
	tag_part(label, part, sizeof(part));
	snprintf(tag, sizeof(tag), "%.12s-%s%s%lld", cid, part, part[0] ? "-" : "",
		 (long long)time(NULL)); /* may be cut: never, 12 + 48 + 21 < 128 */
	dk_progress(sb, "committing a snapshot");
	r = dk_commit(cid, SNAPSHOT_REPO, tag, image, sizeof(image), err);
	dk_progress(sb, NULL);
	if (r)
		return r;
	char shortid[16];
	short_image_id(image, shortid, sizeof(shortid));
	*id = strdup(shortid);
	return *id ? 0 : sfs_errf(err, -ENOMEM, "out of memory");
}

static int snapshot_delete_op(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	char path[256], what[96];
	if (sfs_pathf(path, sizeof(path), "/images/%s", snapshot_id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: snapshot id too long");
	snprintf(what, sizeof(what), "deleting snapshot %s", snapshot_id); /* message: may be cut */
	int r = dk_json("DELETE", path, NULL, 120, NULL, what, err);
	if (r == -ENOENT)
		return 0; /* already gone: nothing to keep listing */
	if (r != -EBUSY)
		return r < 0 ? r : 0;
	/* in use by the container it was restored into: untag it now, delete
	 * it when that container goes */
	json_t *img;
	if (sfs_pathf(path, sizeof(path), "/images/%s/json", snapshot_id) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: snapshot id too long");
	r = dk_json("GET", path, NULL, 30, &img, what, err);
	if (r < 0)
		return r;
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(img, "RepoTags"), i, t)
	{
		const char *tag = json_string_value(t);
		if (!tag || strncmp(tag, SNAPSHOT_REPO ":", strlen(SNAPSHOT_REPO) + 1) != 0)
			continue;
		char *etag = sfs_http_escape_component(tag);
		if (!etag)
			continue;
		int pr = sfs_pathf(path, sizeof(path), "/images/%s", etag);
		free(etag);
		if (pr < 0)
			continue; /* never untag another image */
		struct sfs_err ignored = {0};
		dk_json("DELETE", path, NULL, 60, NULL, what, &ignored);
	}
	json_decref(img);
	if (dk_saved_doom(sb, snapshot_id))
		sfs_log(SFS_LOG_WARN, "docker: snapshot image %s stays (out of memory)",
			snapshot_id);
	sfs_err_clear(err);
	return 0;
}

/* Replaces sb's container with a new one from image: the new one is ready
 * before the old one goes, so a failure leaves the sandbox as it was. */
static int replace_container(struct sfs_sandbox *sb, const char *image, const char *shown,
			     struct sfs_err *err)
{
	char old[DK_ID_MAX], cid[DK_ID_MAX];
	int r = need_container(sb, old, sizeof(old), err);
	struct dk_spec spec;
	if (!r)
		r = get_spec(sb, &spec, err);
	if (r)
		return r;
	char fork_image[DK_ID_MAX];
	dk_saved_fork_image(sb, fork_image, sizeof(fork_image));
	r = adopt_new(sb, &spec, image, shown, fork_image[0] ? fork_image : NULL, cid, sizeof(cid),
		      err);
	if (r) {
		/* adopt_new forgot the sandbox's container: look at the old one again */
		struct dk_info info;
		struct sfs_err ignored = {0};
		if (dk_inspect(old, &info, &ignored) == 0) {
			dk_note_container(sb, &info);
			dk_info_free(&info);
		}
		return r;
	}
	/* the snapshot holds the old runs' follower files: their pids mean nothing here */
	forget_followers(cid, false);
	struct sfs_err rerr = {0};
	if (dk_container_remove(old, &rerr))
		sfs_log(SFS_LOG_WARN, "%s: the replaced container %.12s stays: %s", sb->name, old,
			rerr.msg);
	else
		dk_release_doomed(sb);
	return 0;
}

static int restore_op(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	char shown[128];
	snprintf(shown, sizeof(shown), "%s@%s", SNAPSHOT_REPO,
		 snapshot_id); /* message: may be cut */
	return replace_container(sb, snapshot_id, shown, err);
}

static int fork_op(struct sfs_sandbox *src, struct sfs_sandbox *dst, const char *from,
		   struct sfs_err *err)
{
	char cid[DK_ID_MAX], image[DK_ID_MAX], shown[160], fork_image[DK_ID_MAX] = "";
	int r = need_container(src, cid, sizeof(cid), err);
	struct dk_spec spec;
	if (!r)
		r = get_spec(src, &spec, err);
	if (!r && spec.hostdir[0])
		r = base_refused(src, "fork", err);
	if (r)
		return r;
	if (from) {
		if (sfs_pathf(image, sizeof(image), "%s", from) < 0)
			return sfs_errf(err, -ENAMETOOLONG, "docker: snapshot id too long");
		snprintf(shown, sizeof(shown), "%s@%s", SNAPSHOT_REPO,
			 from); /* message: may be cut */
	} else {
		char tag[64];
		snprintf(tag, sizeof(tag), "%.12s-%lld", cid, (long long)time(NULL));
		dk_progress(src, "committing for fork %s", dst->name);
		r = dk_commit(cid, FORK_REPO, tag, image, sizeof(image), err);
		dk_progress(src, NULL);
		if (r)
			return r;
		memcpy(fork_image, image, sizeof(fork_image)); /* the same size */
		char shortid[16];
		short_image_id(image, shortid, sizeof(shortid));
		snprintf(shown, sizeof(shown), "%s@%s", FORK_REPO,
			 shortid); /* message: may be cut */
	}
	char ncid[DK_ID_MAX];
	r = adopt_new(dst, &spec, image, shown, fork_image[0] ? fork_image : NULL, ncid,
		      sizeof(ncid), err);
	if (r) {
		if (fork_image[0]) {
			char path[256];
			struct sfs_err ignored = {0};
			if (sfs_pathf(path, sizeof(path), "/images/%s", fork_image) == 0)
				dk_json("DELETE", path, NULL, 60, NULL, "removing fork image",
					&ignored);
		}
		return r;
	}
	/* the copy starts with no runs: the source's run files are not its own */
	const char *args[] = {NULL};
	struct sfs_err ignored = {0};
	dk_sh(ncid, "rm -rf " DK_RUNS_DIR "/* ", args, NULL, 0, &ignored);
	return 0;
}

static int expose_op(struct sfs_sandbox *sb, int port, char **url, struct sfs_err *err)
{
	char cid[DK_ID_MAX];
	int r = need_container(sb, cid, sizeof(cid), err);
	struct dk_spec spec;
	if (!r)
		r = get_spec(sb, &spec, err);
	if (r)
		return r;
	bool published = false;
	for (size_t i = 0; i < spec.nports; i++)
		published |= spec.ports[i] == port;
	if (!published)
		return sfs_errf(err, -EOPNOTSUPP,
				"docker: port %d was not published: Docker publishes ports only "
				"when a container is created; make the sandbox with `new NAME "
				"provider=docker ports=%d,...`",
				port, port);
	struct dk_info info;
	r = refresh_container(sb, cid, &info, err);
	if (r)
		return r;
	char key[32];
	snprintf(key, sizeof(key), "%d/tcp", port);
	json_t *b = json_array_get(
	    json_object_get(json_object_get(json_object_get(info.raw, "NetworkSettings"), "Ports"),
			    key),
	    0);
	const char *hp = json_string_value(json_object_get(b, "HostPort"));
	const char *ip = json_string_value(json_object_get(b, "HostIp"));
	if (!hp || !*hp) {
		r = sfs_errf(err, -EIO, "docker: port %d has no host port (is the container %s?)",
			     port, info.status);
		dk_info_free(&info);
		return r;
	}
	r = asprintf(url, "http://%s:%s",
		     ip && *ip && strcmp(ip, "0.0.0.0") != 0 ? ip : "127.0.0.1", hp) < 0
		? sfs_errf(err, -ENOMEM, "out of memory")
		: 0;
	dk_info_free(&info);
	return r;
}

static int stop_op(struct sfs_sandbox *sb, struct sfs_err *err)
{
	char cid[DK_ID_MAX], path[256], what[96];
	int r = need_container(sb, cid, sizeof(cid), err);
	if (r)
		return r;
	if (sfs_pathf(path, sizeof(path), "/containers/%s/stop?t=10", cid) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "docker: container id too long");
	snprintf(what, sizeof(what), "stopping container %.12s", cid);
	r = dk_json("POST", path, NULL, 60, NULL, what, err);
	if (r == -ENOENT)
		return dk_gone(cid, err);
	if (r < 0)
		return r;
	struct dk_info info;
	struct sfs_err ignored = {0};
	if (dk_inspect(cid, &info, &ignored) == 0) {
		dk_note_container(sb, &info);
		dk_info_free(&info);
	}
	return 0;
}

static int start_op(struct sfs_sandbox *sb, struct sfs_err *err)
{
	char cid[DK_ID_MAX];
	int r = need_container(sb, cid, sizeof(cid), err);
	if (!r)
		r = dk_container_start(cid, err);
	struct dk_info info;
	if (!r)
		r = refresh_container(sb, cid, &info, err);
	if (r)
		return r;
	dk_info_free(&info);
	/* a new container life: the old follower files name dead pids */
	forget_followers(cid, false);
	return 0;
}

extern const struct sfs_provider sfs_provider_docker;

/* Containers this state dir's daemon made (by label) that no sandbox in the
 * tree owns any more: left by a crash between create and registry write, or
 * by `forget`.  Appends "; orphans N: ID ..." to why. */
static void append_orphans(char *why, size_t len)
{
	struct sfs_err err = {0};
	char *filter = sfs_http_escape_component("{\"label\":[\"sandboxfs.managed=1\"]}");
	char path[512];
	json_t *arr = NULL;
	if (!filter)
		return;
	int pr = sfs_pathf(path, sizeof(path), "/containers/json?all=true&filters=%s", filter);
	free(filter);
	if (pr < 0 || dk_json("GET", path, NULL, 10, &arr, "list containers", &err) < 0 ||
	    !json_is_array(arr)) {
		json_decref(arr);
		return;
	}
	int n = 0;
	char ids[128] = "";
	size_t i;
	json_t *c;
	json_array_foreach(arr, i, c)
	{
		json_t *labels = json_object_get(c, "Labels");
		const char *st = json_string_value(json_object_get(labels, "sandboxfs.state"));
		const char *key = json_string_value(json_object_get(labels, "sandboxfs.local_id"));
		const char *id = json_string_value(json_object_get(c, "Id"));
		if (!st || !key || !id || !sfs_state_dir || strcmp(st, sfs_state_dir) != 0)
			continue; /* another daemon's */
		bool owned = sfs_sandbox_known(&sfs_provider_docker, key) || dk_cid_owned(id);
		if (owned)
			continue;
		if (n++ < 5) {
			size_t l = strlen(ids);
			snprintf(ids + l, sizeof(ids) - l, " %.12s", id);
		}
	}
	json_decref(arr);
	size_t l = strlen(why);
	if (n)
		snprintf(why + l, len - l, "; orphans %d:%s%s", n, ids,
			 n > 5 ? " ..." : ""); /* message: may be cut */
}

static bool docker_configured(char *why, size_t len)
{
	struct dk_resp resp;
	struct sfs_err err = {0};
	if (dk_request("GET", "/_ping", NULL, NULL, 0, 5, &resp, &err)) {
		snprintf(why, len, "%s", err.msg); /* message: may be cut */
		return false;
	}
	bool ok = resp.status == 200;
	if (ok) {
		snprintf(why, len, "ready: Docker Engine API v1.41 at %s",
			 dk_where()); /* message: may be cut */
		append_orphans(why, len);
	} else
		snprintf(why, len, "docker: %s answers /_ping with HTTP %ld%s%.100s", dk_where(),
			 resp.status, resp.len ? ": " : "", resp.body); /* message: may be cut */
	dk_resp_free(&resp);
	return ok;
}

/* The ops that reach the container record its disappearance in status. */
static int docker_resume(struct sfs_sandbox *sb, struct sfs_err *err)
{
	return dk_failed(sb, resume_op(sb, err), err);
}

static int docker_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err)
{
	return dk_failed(sb, dk_run_start(sb, run, err), err);
}

static int docker_snapshot(struct sfs_sandbox *sb, const char *label, char **id,
			   struct sfs_err *err)
{
	return dk_failed(sb, snapshot_op(sb, label, id, err), err);
}

static int docker_restore(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err)
{
	return dk_failed(sb, restore_op(sb, snapshot_id, err), err);
}

static int docker_fork(struct sfs_sandbox *src, struct sfs_sandbox *dst, const char *from,
		       struct sfs_err *err)
{
	return dk_failed(src, fork_op(src, dst, from, err), err);
}

static int docker_expose(struct sfs_sandbox *sb, int port, char **url, struct sfs_err *err)
{
	return dk_failed(sb, expose_op(sb, port, url, err), err);
}

static int docker_stop(struct sfs_sandbox *sb, struct sfs_err *err)
{
	return dk_failed(sb, stop_op(sb, err), err);
}

static int docker_start(struct sfs_sandbox *sb, struct sfs_err *err)
{
	return dk_failed(sb, start_op(sb, err), err);
}

static void docker_shutdown(void)
{
	dk_events_stop();
	dk_followers_shutdown();
	dk_state_shutdown();
	dk_engine_shutdown();
	sfs_proxy_shutdown();
}

static const struct sfs_provider_ops docker_ops = {
    .create = docker_create,
    .resume = docker_resume,
    .destroy = docker_destroy,
    .run_start = docker_run_start,
    .run_refresh = dk_run_refresh,
    .journal_local_path = dk_journal_local_path,
    .journal_watch = dk_journal_watch,
    .journal_read = dk_journal_read,
    .journal_follow = dk_journal_follow,
    .journal_unfollow = dk_journal_unfollow,
    .workspace_root_fd = docker_workspace_root_fd,
    .fs_stat = dk_fs_stat,
    .fs_list = dk_fs_list,
    .fs_read = dk_fs_read,
    .fs_read_many = dk_fs_read_many,
    .fs_write = dk_fs_write,
    .fs_put_tree = dk_fs_put_tree,
    .fs_mkdir = dk_fs_mkdir,
    .fs_remove = dk_fs_remove,
    .fs_rename = dk_fs_rename,
    .fs_chmod = dk_fs_chmod,
    .fs_symlink = dk_fs_symlink,
    .run_kill = dk_run_kill,
    .snapshot = docker_snapshot,
    .restore = docker_restore,
    .snapshot_delete = snapshot_delete_op,
    .fork = docker_fork,
    .expose = docker_expose,
    .stop = docker_stop,
    .start = docker_start,
    .tick = dk_events_tick,
    .shutdown = docker_shutdown,
    .set_network = dk_net_set,
    .state_save = dk_state_save,
    .state_load = dk_state_load,
    .state_free = dk_state_free,
    .configured = docker_configured,
};

const struct sfs_provider sfs_provider_docker = {
    .name = "docker",
    .caps =
	{
	    [SFS_CAP_FS] = true,
	    [SFS_CAP_EXEC] = true,
	    [SFS_CAP_ENV] = true,
	    [SFS_CAP_PORTS] = true,
	    [SFS_CAP_BACKGROUND] = true,
	    [SFS_CAP_WRITABLE_STDIN] = false,
	    [SFS_CAP_KILLABLE] = true,
	    [SFS_CAP_SNAPSHOTS] = true,
	    /* network=none and allow: (netpolicy.c), tests/bats/isolation.bats */
	    [SFS_CAP_NETWORK_POLICY] = true,
	    [SFS_CAP_DURABLE_FS] = true,
	    [SFS_CAP_FORK] = true,
	},
    .ops = &docker_ops,
    .options = sfs_docker_options,
};
