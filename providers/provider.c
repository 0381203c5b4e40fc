#include "provider.h"
#include "redact.h"
#include "untrusted/name.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const sfs_cap_names[SFS_CAP_COUNT] = {
    "fs",
    "exec",
    "env",
    "ports",
    "backgroundProcesses",
    "writableStdin",
    "killableProcesses",
    "snapshots",
    "networkPolicy",
    "durableFilesystem",
    "fork",
};

static const char *const sb_state_names[] = {"creating", "running", "stopped", "destroyed",
					     "error"};

const char *sfs_sb_state_name(enum sfs_sb_state s)
{
	return (unsigned)s < sizeof(sb_state_names) / sizeof(sb_state_names[0]) ? sb_state_names[s]
										: "error";
}

int sfs_sb_state_parse(const char *s)
{
	for (size_t i = 0; i < sizeof(sb_state_names) / sizeof(sb_state_names[0]); i++)
		if (strcmp(s, sb_state_names[i]) == 0)
			return (int)i;
	return -EINVAL;
}

void sfs_run_status_text(const struct sfs_run *run, char *buf, size_t len)
{
	switch (run->state) {
	case SFS_RUN_RUNNING:
		snprintf(buf, len, "running");
		break;
	case SFS_RUN_EXITED:
		snprintf(buf, len, "exited %d", run->code);
		break;
	case SFS_RUN_KILLED: {
		const char *name = sigabbrev_np(run->code);
		if (name)
			snprintf(buf, len, "killed %s", name); /* message: may be cut */
		else
			snprintf(buf, len, "killed %d", run->code);
		break;
	}
	case SFS_RUN_LOST:
	default:
		snprintf(buf, len, "lost");
		break;
	}
}

const struct sfs_provider *sfs_provider_find(const char *name)
{
	for (size_t i = 0; i < sfs_nproviders; i++)
		if (strcmp(sfs_providers[i]->name, name) == 0)
			return sfs_providers[i];
	return NULL;
}

const char *sfs_provider_journal_mode(const struct sfs_provider *p)
{
	return p->caps[SFS_CAP_BACKGROUND] && p->caps[SFS_CAP_KILLABLE] ? "follow" : "poll";
}

int sfs_provider_require(const struct sfs_provider *p, enum sfs_cap cap, struct sfs_err *err)
{
	if (p->caps[cap])
		return 0;
	return sfs_errf(err, -EOPNOTSUPP, "provider %s does not support this: caps %s is false",
			p->name, sfs_cap_names[cap]);
}

void sfs_rdirents_free(struct sfs_rdirent *ents, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(ents[i].name);
		free(ents[i].st.link);
	}
	free(ents);
}

int sfs_store_entry(const char *rest, bool prefix, size_t *len)
{
	const char *slash = strchr(rest, '/');
	size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
	*len = n;
	if (prefix ? !slash || slash[1] : slash || !n)
		return 0;
	return sfs_name_ok(rest, n) ? 1 : -1;
}

void sfs_store_left_out(const char *provider, const char *sandbox, const char *scheme,
			const char *bucket, const char *prefix, const struct sfs_name_drops *d)
{
	if (!d->n)
		return;
	char *where = NULL;
	if (asprintf(&where, "%s://%s/%s", scheme, bucket, prefix ? prefix : "") < 0)
		where = NULL;
	sfs_name_drops_log(d, provider, sandbox, where ? where : bucket);
	free(where);
}

int sfs_rdirents_from_json(json_t *arr, int (*conv)(json_t *o, struct sfs_rstat *st),
			   struct sfs_rdirent **ents, size_t *n, struct sfs_name_drops *drops)
{
	size_t count = json_array_size(arr);
	struct sfs_rdirent *v = calloc(count ? count : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	size_t k = 0;
	for (size_t i = 0; i < count; i++) {
		json_t *e = json_array_get(arr, i);
		json_t *jn = json_object_get(e, "name");
		const char *name = json_string_value(jn);
		if (!name)
			continue; /* not an entry */
		/* the length, not strlen: "a\u0000/../x" is not "a" */
		size_t len = json_string_length(jn);
		if (!sfs_name_ok(name, len)) {
			sfs_name_drop(drops, name, len);
			continue;
		}
		int bad = !(v[k].name = strdup(name)) || conv(e, &v[k].st);
		k++;
		if (bad) {
			sfs_rdirents_free(v, k);
			return -ENOMEM;
		}
	}
	*ents = v;
	*n = k;
	return 0;
}

pthread_mutex_t sfs_records_mu = PTHREAD_MUTEX_INITIALIZER;
const char *sfs_state_dir;
const char *sfs_mount_dir;
bool sfs_mount_live;

void sfs_sb_set_error(struct sfs_sandbox *sb, const char *msg)
{
	char *copy = NULL;
	if (msg) {
		size_t cap = strlen(msg) + 64;
		copy = malloc(cap);
		if (copy) {
			memcpy(copy, msg, cap - 63); /* msg and its NUL */
			sfs_redact(copy, cap);
		}
	}
	pthread_mutex_lock(&sfs_records_mu);
	free(sb->error);
	sb->error = copy;
	pthread_mutex_unlock(&sfs_records_mu);
}

static void (*id_published)(struct sfs_sandbox *sb);

/* Copies the non-NULL arguments first so that the swap under the lock
 * cannot fail half-way. */
int sfs_sb_publish(struct sfs_sandbox *sb, const char *id, const char *image, const char *workspace,
		   struct sfs_err *err)
{
	char *idc = id ? strdup(id) : NULL;
	char *imgc = image ? strdup(image) : NULL;
	char *wsc = workspace ? strdup(workspace) : NULL;
	if ((id && !idc) || (image && !imgc) || (workspace && !wsc)) {
		free(idc);
		free(imgc);
		free(wsc);
		return sfs_errf(err, -ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&sfs_records_mu);
	char *old[3] = {NULL, NULL, NULL};
	if (idc) {
		old[0] = sb->id;
		sb->id = idc;
	}
	if (imgc) {
		old[1] = sb->image;
		sb->image = imgc;
	}
	if (wsc) {
		old[2] = sb->workspace;
		sb->workspace = wsc;
	}
	pthread_mutex_unlock(&sfs_records_mu);
	for (int i = 0; i < 3; i++)
		free(old[i]);
	if (idc && id_published)
		id_published(sb);
	return 0;
}

void sfs_sb_set_progress(struct sfs_sandbox *sb, const char *text)
{
	char *copy = text ? strdup(text) : NULL;
	if (text && !copy)
		return; /* progress is only a courtesy */
	pthread_mutex_lock(&sfs_records_mu);
	char *old = sb->progress;
	sb->progress = copy;
	pthread_mutex_unlock(&sfs_records_mu);
	free(old);
}

void sfs_sb_set_state(struct sfs_sandbox *sb, enum sfs_sb_state state)
{
	pthread_mutex_lock(&sfs_records_mu);
	sb->state = state;
	pthread_mutex_unlock(&sfs_records_mu);
}

enum sfs_sb_state sfs_sb_get_state(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&sfs_records_mu);
	enum sfs_sb_state s = sb->state;
	pthread_mutex_unlock(&sfs_records_mu);
	return s;
}

static char *dup_locked_field(char *const *field)
{
	pthread_mutex_lock(&sfs_records_mu);
	char *copy = *field ? strdup(*field) : NULL;
	pthread_mutex_unlock(&sfs_records_mu);
	return copy;
}

char *sfs_sb_dup_id(struct sfs_sandbox *sb)
{
	return dup_locked_field(&sb->id);
}

char *sfs_sb_copy_name(struct sfs_sandbox *sb, char name[64])
{
	pthread_mutex_lock(&sfs_records_mu);
	memcpy(name, sb->name, sizeof(sb->name));
	pthread_mutex_unlock(&sfs_records_mu);
	return name;
}

char *sfs_sb_dup_workspace(struct sfs_sandbox *sb)
{
	return dup_locked_field(&sb->workspace);
}

void sfs_sb_set_failed(struct sfs_sandbox *sb, const char *msg)
{
	sfs_sb_set_error(sb, msg);
	pthread_mutex_lock(&sfs_records_mu);
	if (sb->state != SFS_SB_DESTROYED)
		sb->state = SFS_SB_ERROR;
	pthread_mutex_unlock(&sfs_records_mu);
}

static bool (*sandbox_lookup)(const struct sfs_provider *p, const char *key);

void sfs_set_sandbox_lookup(bool (*fn)(const struct sfs_provider *p, const char *key))
{
	sandbox_lookup = fn;
}

bool sfs_sandbox_known(const struct sfs_provider *p, const char *key)
{
	return sandbox_lookup && sandbox_lookup(p, key);
}

void sfs_set_id_published_hook(void (*fn)(struct sfs_sandbox *sb))
{
	id_published = fn;
}

void sfs_sb_delete_snapshots(struct sfs_sandbox *sb)
{
	for (size_t i = 0; i < sb->nsnapshots; i++) {
		struct sfs_err e = {0};
		if (sb->provider->ops->snapshot_delete(sb, sb->snapshots[i].id, &e))
			sfs_log(SFS_LOG_WARN, "%s: %s", sb->name, e.msg);
	}
}
