/*
 * network=allow: for docker sandboxes: the container has Docker's `none`
 * network (loopback only), the sandbox's STATE/sandboxes/KEY/net is bound at
 * /run/sandboxfs, and the daemon's allow-list proxy (providers/netpolicy)
 * listens there and on 127.0.0.1:3128 inside the container's network
 * namespace, found through the container's init pid (State.Pid; the engine
 * is on this host).  Runs get the proxy variables.
 */
#include "docker.h"

#include "../netpolicy/proxy.h"
#include "../provider.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

bool dk_net_allow(const struct dk_spec *spec)
{
	return strncmp(spec->network, "allow:", 6) == 0;
}

int dk_net_dir(struct sfs_sandbox *sb, char *buf, size_t len, struct sfs_err *err)
{
	if (snprintf(buf, len, "%s/net", sb->statedir) >= (int)len)
		return sfs_errf(err, -ENAMETOOLONG, "docker: state path too long");
	if (mkdir(buf, 0700) < 0 && errno != EEXIST)
		return sfs_errf(err, -errno, "docker: %s: %s", buf, strerror(errno));
	return 0;
}

int dk_net_attach(struct sfs_sandbox *sb, const char *cid, struct sfs_err *err)
{
	struct dk_spec spec;
	if (dk_saved_spec(sb, &spec) < 0 || !dk_net_allow(&spec))
		return 0;
	struct dk_info info;
	int r = dk_inspect(cid, &info, err);
	if (r)
		return r;
	json_t *pid = json_object_get(json_object_get(info.raw, "State"), "Pid");
	struct sfs_holder h = {.target = (pid_t)json_integer_value(pid)};
	dk_info_free(&info);
	h.start = sfs_proc_start_time(h.target);
	if (h.target <= 0 || !h.start)
		return sfs_errf(err, -EOPNOTSUPP,
				"docker: network=allow: needs the container's process on this host "
				"(a local engine)");
	char dir[4200], name[64];
	r = dk_net_dir(sb, dir, sizeof(dir), err);
	return r ? r
		 : sfs_proxy_attach_sandbox(sb->key, sfs_sb_copy_name(sb, name), &h, dir,
					    spec.network, err);
}

int dk_net_set(struct sfs_sandbox *sb, const char *policy, struct sfs_err *err)
{
	struct dk_spec spec;
	char cid[DK_ID_MAX], fork_image[DK_ID_MAX];
	if (dk_saved_spec(sb, &spec) < 0)
		return sfs_errf(err, -EIO, "docker: sandbox \"%s\" has no saved spec", sb->name);
	/* the container's network mode is fixed when it is made; only the
	 * proxy's allow-list can change under it */
	if (!dk_net_allow(&spec) || strncmp(policy, "allow:", 6) != 0)
		return sfs_errf(
		    err, -EOPNOTSUPP,
		    "policy network %s: a docker container's network is fixed when it is "
		    "made (network=%s); only an allow: list can change to another",
		    policy, spec.network[0] ? spec.network : "default");
	if (strlen(policy) >= sizeof(spec.network))
		return sfs_errf(err, -EINVAL, "policy network: too long");
	struct dk_spec old = spec;
	memcpy(spec.network, policy, strlen(policy) + 1); /* its length checked above */
	dk_current(sb, cid, sizeof(cid));
	dk_saved_fork_image(sb, fork_image, sizeof(fork_image));
	if (dk_saved_set(sb, cid, &spec, fork_image[0] ? fork_image : NULL) < 0)
		return sfs_errf(err, -ENOMEM, "out of memory");
	int r = cid[0] ? dk_net_attach(sb, cid, err) : 0;
	if (r)
		dk_saved_set(sb, cid, &old,
			     fork_image[0] ? fork_image : NULL); /* nothing half-done */
	return r;
}

int dk_net_env(struct sfs_sandbox *sb, json_t *env)
{
	struct dk_spec spec;
	if (dk_saved_spec(sb, &spec) < 0 || !dk_net_allow(&spec))
		return 0;
	static const char *const vars[] = {
	    "http_proxy=http://127.0.0.1:3128",	 "HTTP_PROXY=http://127.0.0.1:3128",
	    "https_proxy=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128",
	    "no_proxy=localhost,127.0.0.1,::1",	 "NO_PROXY=localhost,127.0.0.1,::1"};
	int r = 0;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		r |= json_array_append_new(env, json_string(vars[i]));
	return r ? -ENOMEM : 0;
}
