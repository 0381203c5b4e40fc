#include "registry.h"
#include "sandbox.h"

#include "../providers/redact.h"
#include "../providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static json_t *sandbox_to_json(const struct sfs_sandbox *sb)
{
	json_t *env = json_object(), *snaps = json_array(), *ports = json_array();
	for (size_t i = 0; env && i < sb->env.n; i++)
		json_object_set_new(env, sb->env.v[i].key, json_string(sb->env.v[i].val));
	/* secrets: the references only.  Not an object keyed by NAME: the
	 * redactor would hide the reference of a name like API_TOKEN, and no
	 * key of the entry may hold "secret" (its value would be hidden too) */
	json_t *refs = sb->secrets.n ? json_array() : NULL;
	for (size_t i = 0; refs && i < sb->secrets.n; i++)
		json_array_append_new(refs, json_pack("{s:s, s:s}", "name", sb->secrets.v[i].key,
						      "from", sb->secrets.v[i].val));
	for (size_t i = 0; snaps && i < sb->nsnapshots; i++)
		json_array_append_new(snaps, json_pack("{s:s, s:s?, s:I, s:s?, s:s?}", "id",
						       sb->snapshots[i].id, "label",
						       sb->snapshots[i].label, "created",
						       (json_int_t)sb->snapshots[i].created,
						       "commit", sb->snapshots[i].commit, "kind",
						       sb->snapshots[i].layer ? "layer" : NULL));
	for (size_t i = 0; ports && i < sb->nports; i++)
		json_array_append_new(ports, json_pack("{s:i, s:s}", "port", sb->ports[i].port,
						       "url", sb->ports[i].url));
	/* a provider's own state (sb->priv) is saved as "pdata" */
	json_t *pdata = sb->provider->ops->state_save ? sb->provider->ops->state_save(sb) : NULL;
	json_t *o = json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:s?, s:s?, s:o, s:o?, s:o, s:o}",
			      "name", sb->name, "local_id", sb->key, "provider", sb->provider->name,
			      "id", sb->id, "state", sfs_sb_state_name(sb->state), "created",
			      sb->created, "image", sb->image, "workspace", sb->workspace, "env",
			      env, "pdata", pdata, "snapshots", snaps, "ports", ports);
	if (o && refs)
		json_object_set_new(o, "env_from", refs);
	else
		json_decref(refs);
	if (o && sb->redact_journal)
		json_object_set_new(o, "redact", json_string("journal"));
	/* why it is in state error: a second restart must still say so */
	if (o && sb->state == SFS_SB_ERROR && sb->error)
		json_object_set_new(o, "error", json_string(sb->error));
	return o;
}

int registry_dump(struct sfs_sandbox *const *sbs, size_t n, json_t *kept, json_t **out,
		  struct sfs_err *err)
{
	*out = NULL;
	json_t *arr = json_array();
	if (!arr)
		return sfs_errf(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		/* not usable yet; one new or fork makes is saved all the same,
		 * so a crash meanwhile is found at the next start (tree_init) */
		if (sbs[i]->state == SFS_SB_CREATING && !sbs[i]->saved_while_creating)
			continue;
		json_t *o = sandbox_to_json(sbs[i]);
		if (!o || json_array_append_new(arr, o)) {
			json_decref(arr);
			return sfs_errf(err, -ENOMEM, "out of memory");
		}
	}
	/* copied: `kept` stays the tree's, and the copy is written unlocked */
	json_t *k = kept ? json_deep_copy(kept) : NULL;
	if ((kept && !k) || (k && json_array_extend(arr, k))) {
		json_decref(k);
		json_decref(arr);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	json_decref(k);
	*out = json_pack("{s:i, s:o}", "version", 1, "sandboxes", arr);
	return *out ? 0 : sfs_errf(err, -ENOMEM, "out of memory");
}

int registry_write(const char *statedir, json_t *root, bool durable, struct sfs_err *err)
{
	char *text = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
	if (!text)
		return sfs_errf(err, -ENOMEM, "out of memory");
	/* the registry holds provider state: hide every registered secret
	 * value before it hits disk (markers may be longer than what they
	 * hide, so the text grows).  Values are not hidden for their key's
	 * name: `env.TOKENIZERS_PARALLELISM=false` must survive a restart, and
	 * a secret is given as secret.NAME=, which is saved as a reference. */
	char *red = sfs_redact_values_dup(text);
	free(text);
	if (!red)
		return sfs_errf(err, -ENOMEM, "out of memory");
	char path[4200];
	int r = sfs_pathf(path, sizeof(path), "%s/registry.json", statedir);
	if (r)
		sfs_errf(err, r, "%s/registry.json: path too long", statedir);
	else
		r = sfs_write_file_replace(path, red, strlen(red), durable, err);
	if (!r)
		sfs_log(SFS_LOG_DEBUG, "registry: saved %zu bytes", strlen(red));
	free(red);
	return r;
}

int registry_save(const char *statedir, struct sfs_sandbox *const *sbs, size_t n, json_t *kept,
		  struct sfs_err *err)
{
	json_t *root;
	int r = registry_dump(sbs, n, kept, &root, err);
	if (!r)
		r = registry_write(statedir, root, true, err);
	json_decref(root);
	return r;
}

static struct sfs_sandbox *sandbox_from_json(const char *statedir, json_t *o)
{
	const char *name = json_string_value(json_object_get(o, "name"));
	const char *key = json_string_value(json_object_get(o, "local_id"));
	const char *pname = json_string_value(json_object_get(o, "provider"));
	const struct sfs_provider *p = pname ? sfs_provider_find(pname) : NULL;
	if (!name || !key || !p) {
		sfs_log(SFS_LOG_ERR,
			"registry: keeping aside an entry without name, local_id or a known "
			"provider (%s)",
			pname ? pname : "none");
		return NULL;
	}
	struct sfs_sandbox *sb = sandbox_new(statedir, name, key, p);
	if (!sb)
		return NULL;
	const char *state = json_string_value(json_object_get(o, "state"));
	int st = state ? sfs_sb_state_parse(state) : SFS_SB_RUNNING;
	sb->state = st < 0 ? SFS_SB_ERROR : (enum sfs_sb_state)st;
	const char *created = json_string_value(json_object_get(o, "created"));
	snprintf(sb->created, sizeof(sb->created), "%s",
		 created ? created : ""); /* message: may be cut */
	int r = sandbox_set_str(&sb->id, json_string_value(json_object_get(o, "id")));
	r |= sandbox_set_str(&sb->image, json_string_value(json_object_get(o, "image")));
	r |= sandbox_set_str(&sb->workspace, json_string_value(json_object_get(o, "workspace")));
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(o, "env"), k, v)
	{
		/* a value hidden on disk (a registered secret's, or one of a
		 * secret-looking name from an older registry) is not one */
		if (json_is_string(v) && strcmp(json_string_value(v), SFS_REDACTED) != 0)
			r |= sfs_kv_set(&sb->env, k, json_string_value(v));
	}
	size_t ri;
	json_t *ref;
	json_array_foreach(json_object_get(o, "env_from"), ri, ref)
	{
		const char *rn = json_string_value(json_object_get(ref, "name"));
		const char *rf = json_string_value(json_object_get(ref, "from"));
		if (rn && rf) /* the values are read by tree_init (secrets_load) */
			r |= sfs_kv_set(&sb->secrets, rn, rf);
	}
	const char *red = json_string_value(json_object_get(o, "redact"));
	sb->redact_journal = red && !strcmp(red, "journal");
	const char *why = json_string_value(json_object_get(o, "error"));
	if (why && sb->state == SFS_SB_ERROR)
		r |= sandbox_set_str(&sb->error, why);
	json_t *pd = json_object_get(o, "pdata");
	if (p->ops->state_load) {
		struct sfs_err lerr = {0};
		if (p->ops->state_load(sb, json_is_object(pd) ? pd : NULL, &lerr) < 0) {
			sfs_log(SFS_LOG_ERR, "registry: %s: %s", name, lerr.msg);
			r = -EINVAL;
		}
	}
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(o, "snapshots"), i, s)
	{
		const char *sid = json_string_value(json_object_get(s, "id"));
		const char *slabel = json_string_value(json_object_get(s, "label"));
		char *idc = sid ? strdup(sid) : NULL, *labc = slabel ? strdup(slabel) : NULL;
		int sr =
		    !sid ? 0
		    : !idc || (slabel && !labc)
			? -ENOMEM
			: sandbox_snapshot_add_locked(
			      sb, idc, labc, json_integer_value(json_object_get(s, "created")));
		if (sr || !sid) {
			free(idc);
			free(labc);
		}
		/* a workspace snapshot (fs/snapshots): its commit in the store */
		const char *scommit = json_string_value(json_object_get(s, "commit"));
		if (!sr && sid && scommit &&
		    !(sb->snapshots[sb->nsnapshots - 1].commit = strdup(scommit)))
			sr = -ENOMEM;
		const char *skind = json_string_value(json_object_get(s, "kind"));
		if (!sr && sid && skind && strcmp(skind, "layer") == 0)
			sb->snapshots[sb->nsnapshots - 1].layer = true;
		if (sr) {
			r = sr;
			break;
		}
	}
	json_array_foreach(json_object_get(o, "ports"), i, s)
	{
		struct sfs_port *grown = realloc(sb->ports, (sb->nports + 1) * sizeof(*grown));
		if (!grown) {
			r = -ENOMEM;
			break;
		}
		sb->ports = grown;
		struct sfs_port *port = &sb->ports[sb->nports++];
		port->port = (int)json_integer_value(json_object_get(s, "port"));
		port->url = NULL;
		r |= sandbox_set_str(&port->url, json_string_value(json_object_get(s, "url")));
	}
	if (r) {
		sandbox_free(sb);
		return NULL;
	}
	return sb;
}

int registry_load(const char *statedir, struct sfs_sandbox ***out, size_t *n, json_t **kept,
		  struct sfs_err *err)
{
	*out = NULL;
	*n = 0;
	*kept = NULL;
	char path[4200];
	if (sfs_pathf(path, sizeof(path), "%s/registry.json", statedir) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "%s/registry.json: path too long", statedir);
	json_error_t jerr;
	/* never a symlink followed as root, nor a FIFO waited on */
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT)
		return 0; /* first start */
	struct stat st;
	int e = fd < 0 || fstat(fd, &st) < 0 ? errno : !S_ISREG(st.st_mode) ? ELOOP : 0;
	if (e) {
		if (fd >= 0)
			close(fd);
		return sfs_errf(err, -e,
				"registry %s: %s: nothing was loaded and it is left as it is; "
				"move it away to start with no sandboxes",
				path, e == ELOOP ? "not a regular file" : strerror(e));
	}
	json_t *root = json_loadfd(fd, 0, &jerr);
	close(fd);
	json_t *arr = root ? json_object_get(root, "sandboxes") : NULL;
	if (!json_is_array(arr)) {
		/* refuse rather than start empty: the next save would overwrite
		 * the only list of the sandboxes */
		if (root)
			snprintf(jerr.text, sizeof(jerr.text), "no \"sandboxes\" array");
		int r = sfs_errf(err, -EINVAL,
				 "registry %s is not readable (line %d: %s): nothing was loaded "
				 "and the file is left as it is; repair it, or move it away to "
				 "start with no sandboxes",
				 path, root ? 1 : jerr.line, jerr.text);
		json_decref(root);
		return r;
	}
	struct sfs_sandbox **sbs = calloc(json_array_size(arr) + 1, sizeof(*sbs));
	json_t *skipped = json_array();
	if (!sbs || !skipped) {
		free(sbs);
		json_decref(skipped);
		json_decref(root);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	size_t i;
	json_t *o;
	json_array_foreach(arr, i, o)
	{
		struct sfs_sandbox *sb = sandbox_from_json(statedir, o);
		if (sb)
			sbs[(*n)++] = sb;
		else if (json_array_append(skipped, o))
			sfs_log(SFS_LOG_ERR, "registry: out of memory: entry %zu will be dropped",
				i);
	}
	json_decref(root);
	*out = sbs;
	*kept = skipped;
	return 0;
}
