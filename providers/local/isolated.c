/*
 * isolation= and network= of a local sandbox: its options, its holder's
 * life (started at create, started again at the next run when it died or a
 * kill ended the namespace), and where it is recorded.
 */
#include "local.h"

#include "../config.h"
#include "../options.h"
#include "../kv.h"
#include "../netpolicy/policy.h"
#include "../netpolicy/proxy.h"
#include "../provider.h"
#include "../util.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int sfs_local_umask_parse(const char *text, mode_t *mask, struct sfs_err *err)
{
	size_t n = strlen(text);
	unsigned long v = 0;
	bool ok = n > 0 && n <= 4;
	for (size_t i = 0; ok && i < n; i++) {
		ok = text[i] >= '0' && text[i] <= '7';
		v = v * 8 + (unsigned long)(text[i] - '0');
	}
	if (!ok || v > 0777)
		return sfs_errf(err, -EINVAL,
				"local: umask=%s: expected octal digits, at most 0777", text);
	*mask = (mode_t)v;
	return 0;
}

mode_t sfs_local_umask_default(bool isolated)
{
	const char *conf = sfs_opt_get("local.umask");
	mode_t m;
	/* the row checked it at startup */
	if (conf && sfs_local_umask_parse(conf, &m, NULL) == 0)
		return m;
	return isolated ? 077 : 022;
}

int sfs_local_iso_options(const struct sfs_kvlist *opts, struct local_iso *iso, struct sfs_err *err)
{
	memset(iso, 0, sizeof(*iso));
	const char *mode = sfs_kv_get(opts, "isolation");
	if (!mode)
		mode = sfs_opt_get("local.isolation");
	if (strcmp(mode, "bwrap") == 0)
		iso->bwrap = true;
	else if (strcmp(mode, "none") != 0)
		return sfs_errf(err, -EINVAL, "local: isolation=%s: expected none or bwrap", mode);
	const char *net = sfs_kv_get(opts, "network");
	if (!net)
		net = iso->bwrap ? sfs_opt_get("local.network") : "host";
	struct sfs_netpolicy p;
	int r = sfs_netpolicy_parse(net, &p, err);
	if (r)
		return r;
	enum sfs_net_mode m = p.mode;
	sfs_netpolicy_free(&p);
	if (!iso->bwrap && m != SFS_NET_HOST)
		return sfs_errf(err, -EOPNOTSUPP,
				"local: network=%s needs isolation=bwrap (without it runs share "
				"the host's network)",
				net);
	if (snprintf(iso->network, sizeof(iso->network), "%s", net) >= (int)sizeof(iso->network))
		return sfs_errf(err, -EINVAL, "local: network= is too long");
	const char *mask = sfs_kv_get(opts, "umask");
	if (mask) {
		r = sfs_local_umask_parse(mask, &iso->umask, err);
		if (r)
			return r;
	} else {
		iso->umask = sfs_local_umask_default(iso->bwrap);
	}
	if (iso->bwrap)
		return sfs_holder_check(sfs_opt_get("local.bwrap"), err);
	return 0;
}

static bool net_unshared(const struct local_iso *iso)
{
	return strcmp(iso->network, "host") != 0;
}

/* STATE/sandboxes/KEY/NAME into buf; "" (no file) if it does not fit. */
static const char *state_path(struct sfs_sandbox *sb, const char *name, char *buf, size_t len)
{
	if (sfs_pathf(buf, len, "%s/%s", sb->statedir, name) < 0)
		sfs_log(SFS_LOG_ERR, "local: %s: state path too long", sb->name);
	return buf;
}

static int start_holder(struct sfs_sandbox *sb, const char *dir, struct local_iso *iso,
			struct sfs_err *err)
{
	char logp[4200], netdir[4200], name[64];
	struct sfs_holder_spec spec = {
	    .bwrap = sfs_opt_get("local.bwrap"),
	    .workspace = dir,
	    .proxy_dir = state_path(sb, "net", netdir, sizeof(netdir)),
	    .log_path = state_path(sb, "holder.log", logp, sizeof(logp)),
	    .hostname = sfs_sb_copy_name(sb, name),
	    .unshare_net = net_unshared(iso),
	    .uid = iso->uid,
	    .gid = iso->gid,
	};
	struct sfs_holder h;
	int r = sfs_holder_start(&spec, &h, err);
	if (r)
		return r;
	iso->holder = h;
	sfs_local_iso_save_holder(sb, iso);
	sfs_log(SFS_LOG_INFO, "%s: namespace holder started (pid %d, uid %u, network %s)", name,
		(int)h.target, (unsigned)h.uid, iso->network);
	return sfs_proxy_attach_sandbox(sb->key, name, &iso->holder, netdir, iso->network, err);
}

int sfs_local_iso_create(struct sfs_sandbox *sb, const char *dir, bool owned, struct local_iso *iso,
			 struct sfs_err *err)
{
	/* ids of its own: a uid shared with another sandbox (or anything else
	 * on the host) could read its runs' /proc/PID/environ */
	int r = sfs_local_ids_take(sb->key, &iso->uid, &iso->gid, err);
	if (r)
		return r;
	/* a workspace the daemon made belongs to the sandbox's uid, so runs can
	 * write it; an adopted dir= keeps its owner */
	if (owned && chown(dir, iso->uid, iso->gid) < 0) {
		r = sfs_errf(err, -errno, "local: chown %s: %s", dir, strerror(errno));
		goto fail;
	}
	char netdir[4200];
	state_path(sb, "net", netdir, sizeof(netdir));
	/* the proxy socket's directory stays the daemon's (only the socket is
	 * the sandbox's): a sandbox that could write there could swap the
	 * socket for a symlink while the daemon makes it again and chowns it */
	if ((mkdir(netdir, 0755) < 0 && errno != EEXIST) ||
	    chown(netdir, geteuid(), getegid()) < 0 || chmod(netdir, 0755) < 0) {
		r = sfs_errf(err, -errno, "local: %s: %s", netdir, strerror(errno));
		goto fail;
	}
	r = start_holder(sb, dir, iso, err);
	if (!r)
		return 0;
fail:
	sfs_local_ids_release(sb->key, iso->uid);
	return r;
}

void sfs_local_iso_release(struct sfs_sandbox *sb, const struct local_iso *iso)
{
	if (iso->bwrap)
		sfs_local_ids_release(sb->key, iso->uid);
}

/* nftw has no user pointer: the one walk at a time (under adopt_mu). */
static pthread_mutex_t adopt_mu = PTHREAD_MUTEX_INITIALIZER;
static uid_t adopt_from_uid, adopt_to_uid;
static gid_t adopt_from_gid, adopt_to_gid;
static int adopt_errno;

static int adopt_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)type;
	(void)ftw;
	uid_t u = st->st_uid == adopt_from_uid ? adopt_to_uid : (uid_t)-1;
	gid_t g = st->st_gid == adopt_from_gid ? adopt_to_gid : (gid_t)-1;
	/* lchown: a symlink is changed itself, never what it names */
	if ((u != (uid_t)-1 || g != (gid_t)-1) && lchown(path, u, g) < 0 && !adopt_errno)
		adopt_errno = errno;
	return 0;
}

int sfs_local_iso_adopt_copy(const struct local_iso *from, const struct local_iso *iso,
			     const char *dir, struct sfs_err *err)
{
	if (!iso->bwrap || (from->uid == iso->uid && from->gid == iso->gid))
		return 0;
	/* the copy is the new sandbox's alone (no run yet), walked without
	 * following symlinks or leaving its file system */
	pthread_mutex_lock(&adopt_mu);
	adopt_from_uid = from->uid;
	adopt_from_gid = from->gid;
	adopt_to_uid = iso->uid;
	adopt_to_gid = iso->gid;
	adopt_errno = 0;
	int r = nftw(dir, adopt_one, 32, FTW_PHYS | FTW_MOUNT) < 0 ? errno : adopt_errno;
	pthread_mutex_unlock(&adopt_mu);
	if (r)
		return sfs_errf(err, -r, "local: fork: giving %s to uid %u: %s", dir,
				(unsigned)iso->uid, strerror(r));
	return 0;
}

int sfs_local_iso_ensure(struct sfs_sandbox *sb, const char *dir, struct local_iso *iso,
			 bool *changed, struct sfs_err *err)
{
	*changed = false;
	if (!iso->bwrap)
		return 0;
	if (sfs_holder_alive(&iso->holder) && iso->holder.unshare_net == net_unshared(iso)) {
		char netdir[4200], name[64];
		state_path(sb, "net", netdir, sizeof(netdir));
		/* the proxy's listeners of this holder (again after a restart) */
		return sfs_proxy_attach_sandbox(sb->key, sfs_sb_copy_name(sb, name), &iso->holder,
						netdir, iso->network, err);
	}
	/* gone (killed with its namespace, host rebooted) or its network
	 * namespace no longer fits the policy: a new one */
	if (sfs_holder_alive(&iso->holder))
		sfs_holder_kill(&iso->holder);
	*changed = true;
	return start_holder(sb, dir, iso, err);
}

int sfs_local_iso_set_network(struct sfs_sandbox *sb, const char *dir, struct local_iso *iso,
			      const char *policy, struct sfs_err *err)
{
	if (!iso->bwrap && strcmp(policy, "host") != 0)
		return sfs_errf(err, -EOPNOTSUPP,
				"policy network %s: needs a sandbox made with isolation=bwrap",
				policy);
	if (!iso->bwrap)
		return 0;
	struct local_iso next = *iso;
	if (snprintf(next.network, sizeof(next.network), "%s", policy) >= (int)sizeof(next.network))
		return sfs_errf(err, -EINVAL, "policy network: too long");
	if (sfs_holder_alive(&next.holder) && next.holder.unshare_net == net_unshared(&next)) {
		char netdir[4200], name[64];
		state_path(sb, "net", netdir, sizeof(netdir));
		int r = sfs_proxy_attach_sandbox(sb->key, sfs_sb_copy_name(sb, name), &next.holder,
						 netdir, next.network, err);
		if (r)
			return r;
	}
	*iso = next;
	sfs_local_iso_save_holder(sb, iso);
	return 0;
}

int sfs_local_iso_end(struct sfs_sandbox *sb, struct local_iso *iso, struct sfs_err *err)
{
	if (!iso->bwrap)
		return 0;
	sfs_proxy_detach_sandbox(sb->key);
	int r = sfs_holder_kill(&iso->holder);
	if (r)
		return sfs_errf(err, r, "local: the sandbox's namespace (pid %d) survived SIGKILL",
				(int)iso->holder.init);
	return 0;
}

int sfs_local_iso_env(const struct local_iso *iso, struct sfs_kvlist *env)
{
	int r =
	    sfs_kv_set(env, "PATH", "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin");
	if (!r)
		r = sfs_kv_set(env, "HOME", "/tmp");
	if (!r && strncmp(iso->network, "allow:", 6) == 0) {
		/* both cases: curl reads only http_proxy, others the upper case */
		static const char *const names[] = {"http_proxy", "HTTP_PROXY", "https_proxy",
						    "HTTPS_PROXY"};
		char url[64];
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", SFS_PROXY_PORT);
		for (size_t i = 0; !r && i < sizeof(names) / sizeof(names[0]); i++)
			r = sfs_kv_set(env, names[i], url);
		if (!r)
			r = sfs_kv_set(env, "no_proxy", "localhost,127.0.0.1,::1");
		if (!r)
			r = sfs_kv_set(env, "NO_PROXY", "localhost,127.0.0.1,::1");
	}
	return r;
}

json_t *sfs_local_iso_json(const struct local_iso *iso)
{
	const struct sfs_holder *h = &iso->holder;
	return json_pack("{s:s, s:s, s:I, s:I, s:{s:i, s:i, s:I, s:i, s:i, s:b}}", "isolation",
			 iso->bwrap ? "bwrap" : "none", "network", iso->network, "uid",
			 (json_int_t)iso->uid, "gid", (json_int_t)iso->gid, "holder", "init",
			 (int)h->init, "target", (int)h->target, "start", (json_int_t)h->start,
			 "uid", (int)h->uid, "gid", (int)h->gid, "net", h->unshare_net);
}

void sfs_local_iso_from_json(json_t *o, struct local_iso *iso)
{
	memset(iso, 0, sizeof(*iso));
	iso->bwrap = json_is_string(json_object_get(o, "isolation")) &&
		     strcmp(json_string_value(json_object_get(o, "isolation")), "bwrap") == 0;
	const char *net = json_string_value(json_object_get(o, "network"));
	if (sfs_pathf(iso->network, sizeof(iso->network), "%s", net ? net : "host") < 0)
		snprintf(iso->network, sizeof(iso->network), "none"); /* never a cut policy */
	json_t *h = json_object_get(o, "holder");
	if (json_is_object(h)) {
		iso->holder.init = (pid_t)json_integer_value(json_object_get(h, "init"));
		iso->holder.target = (pid_t)json_integer_value(json_object_get(h, "target"));
		iso->holder.start = (uint64_t)json_integer_value(json_object_get(h, "start"));
		iso->holder.uid = (uid_t)json_integer_value(json_object_get(h, "uid"));
		iso->holder.gid = (gid_t)json_integer_value(json_object_get(h, "gid"));
		iso->holder.unshare_net = json_is_true(json_object_get(h, "net"));
	}
	json_t *uid = json_object_get(o, "uid"), *gid = json_object_get(o, "gid");
	if (json_is_integer(uid) && json_is_integer(gid)) {
		iso->uid = (uid_t)json_integer_value(uid);
		iso->gid = (gid_t)json_integer_value(gid);
	} else if (iso->holder.uid) {
		/* a record from before sandboxes had ids of their own: the
		 * shared uid its workspace belongs to */
		iso->uid = iso->holder.uid;
		iso->gid = iso->holder.gid;
	} else {
		iso->uid = geteuid() == 0 ? 65534 : getuid();
		iso->gid = geteuid() == 0 ? 65534 : getgid();
	}
}

void sfs_local_iso_save_holder(struct sfs_sandbox *sb, const struct local_iso *iso)
{
	char path[4200];
	json_t *o = sfs_local_iso_json(iso);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (text && sfs_write_file_atomic(state_path(sb, "holder", path, sizeof(path)), text,
					  strlen(text), NULL) < 0)
		sfs_log(SFS_LOG_ERR, "%s: cannot record the namespace holder in %s", sb->name,
			path);
	free(text);
}

/* Allow-list sandboxes found at load time, which runs before the daemon
 * forks into the background (no thread may start then): the first tick,
 * on the journal engine's thread, gives them their proxy listeners, so a
 * process left running across a daemon restart reaches the proxy again
 * without waiting for the next run. */
struct pending_attach {
	char key[40], name[64], netdir[4200], network[1024];
	struct sfs_holder holder;
	struct pending_attach *next;
};
static pthread_mutex_t pending_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pending_attach *pending;

void sfs_local_iso_loaded(struct sfs_sandbox *sb, const struct local_iso *iso)
{
	if (iso->bwrap)
		sfs_local_ids_keep(sb->key, iso->uid);
	if (!iso->bwrap || strncmp(iso->network, "allow:", 6) != 0 ||
	    !sfs_holder_alive(&iso->holder))
		return;
	struct pending_attach *p = calloc(1, sizeof(*p));
	if (!p)
		return; /* the next run attaches it */
	if (sfs_pathf(p->key, sizeof(p->key), "%s", sb->key) < 0 ||
	    sfs_pathf(p->name, sizeof(p->name), "%s", sb->name) < 0 ||
	    !*state_path(sb, "net", p->netdir, sizeof(p->netdir)) ||
	    sfs_pathf(p->network, sizeof(p->network), "%s", iso->network) < 0) {
		free(p);
		return; /* the next run attaches it */
	}
	p->holder = iso->holder;
	pthread_mutex_lock(&pending_mu);
	p->next = pending;
	pending = p;
	pthread_mutex_unlock(&pending_mu);
}

void sfs_local_iso_tick(void)
{
	pthread_mutex_lock(&pending_mu);
	struct pending_attach *list = pending;
	pending = NULL;
	pthread_mutex_unlock(&pending_mu);
	while (list) {
		struct pending_attach *p = list;
		list = p->next;
		struct sfs_err err = {0};
		if (sfs_proxy_attach_sandbox(p->key, p->name, &p->holder, p->netdir, p->network,
					     &err) < 0)
			sfs_log(SFS_LOG_WARN, "%s: network: the proxy is back at the next run: %s",
				p->name, err.msg);
		free(p);
	}
}

void sfs_local_iso_load_holder(struct sfs_sandbox *sb, struct local_iso *iso)
{
	char path[4200], *text = NULL;
	if (sfs_read_file(state_path(sb, "holder", path, sizeof(path)), &text, NULL) < 0)
		return;
	json_t *o = json_loads(text, 0, NULL);
	free(text);
	if (!o)
		return;
	struct local_iso file;
	sfs_local_iso_from_json(o, &file);
	json_decref(o);
	/* the file is written on every change, the registry only when saved */
	iso->holder = file.holder;
}
