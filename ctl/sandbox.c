#include "sandbox.h"
#include "audit.h"
#include "tree.h"
#include "../providers/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sandbox_run_free(struct sfs_run *run)
{
	if (!run)
		return;
	free(run->cmd);
	free(run->dir);
	free(run);
}

void sandbox_free(struct sfs_sandbox *sb)
{
	if (!sb)
		return;
	free(sb->id);
	free(sb->image);
	free(sb->workspace);
	sfs_kv_free(&sb->env);
	sfs_kv_free(&sb->secrets);
	for (size_t i = 0; i < sb->secret_vals.n; i++)
		explicit_bzero(sb->secret_vals.v[i].val, strlen(sb->secret_vals.v[i].val));
	sfs_kv_free(&sb->secret_vals);
	if (sb->priv && sb->provider && sb->provider->ops->state_free)
		sb->provider->ops->state_free(sb);
	for (size_t i = 0; i < sb->nsnapshots; i++) {
		free(sb->snapshots[i].id);
		free(sb->snapshots[i].label);
		free(sb->snapshots[i].commit);
	}
	free(sb->snapshots);
	for (size_t i = 0; i < sb->nports; i++)
		free(sb->ports[i].url);
	free(sb->ports);
	free(sb->statedir);
	free(sb->error);
	free(sb->progress);
	for (size_t i = 0; i < sb->nruns; i++)
		sandbox_run_free(sb->runs[i]);
	free(sb->runs);
	free(sb->last_result);
	audit_free(sb);
	pthread_mutex_destroy(&sb->op_mutex);
	free(sb);
}

struct sfs_sandbox *sandbox_new(const char *statedir, const char *name, const char *key,
				const struct sfs_provider *p)
{
	struct sfs_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return NULL;
	if (sfs_pathf(sb->name, sizeof(sb->name), "%s", name) < 0 ||
	    sfs_pathf(sb->key, sizeof(sb->key), "%s", key) < 0) {
		free(sb); /* names and keys are checked before: never */
		return NULL;
	}
	sb->provider = p;
	pthread_mutex_init(&sb->op_mutex, NULL);
	if (asprintf(&sb->statedir, "%s/sandboxes/%s", statedir, key) < 0) {
		sb->statedir = NULL;
		sandbox_free(sb);
		return NULL;
	}
	return sb;
}

int sandbox_set_str(char **dst, const char *src)
{
	char *d = src ? strdup(src) : NULL;
	if (src && !d)
		return -ENOMEM;
	free(*dst);
	*dst = d;
	return 0;
}

/* Serials fill the 24 aux bits of an inode number (fs/ino.h). */
#define SNAPSHOT_SERIAL_MAX 0xffffffu

int sandbox_snapshot_add_locked(struct sfs_sandbox *sb, char *id, char *label, int64_t created)
{
	if (sb->last_snapshot_serial >= SNAPSHOT_SERIAL_MAX)
		return -ENOSPC;
	struct sfs_snapshot *grown = realloc(sb->snapshots, (sb->nsnapshots + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	sb->snapshots = grown;
	sb->snapshots[sb->nsnapshots++] =
	    (struct sfs_snapshot){id, label, created, ++sb->last_snapshot_serial, NULL, false};
	return 0;
}

int sfs_sb_snapshot_adopt(struct sfs_sandbox *sb, const char *id, const char *label,
			  int64_t created)
{
	char *idc = strdup(id), *lab = label ? strdup(label) : NULL;
	int r = !idc || (label && !lab) ? -ENOMEM : 0;
	pthread_mutex_lock(&sfs_records_mu);
	if (!r && sandbox_snapshot_find_locked(sb, id) >= 0)
		r = -EEXIST;
	if (!r)
		r = sandbox_snapshot_add_locked(sb, idc, lab, created);
	pthread_mutex_unlock(&sfs_records_mu);
	if (r) {
		free(idc);
		free(lab);
	}
	return r;
}

int sandbox_snapshot_find_locked(struct sfs_sandbox *sb, const char *id)
{
	for (size_t i = 0; i < sb->nsnapshots; i++)
		if (strcmp(sb->snapshots[i].id, id) == 0)
			return (int)i;
	return -1;
}

int sandbox_snapshot_remove_locked(struct sfs_sandbox *sb, const char *id)
{
	int i = sandbox_snapshot_find_locked(sb, id);
	if (i < 0)
		return -ENOENT;
	free(sb->snapshots[i].id);
	free(sb->snapshots[i].label);
	free(sb->snapshots[i].commit);
	/* the others keep their serials, so their inode numbers stay theirs */
	memmove(&sb->snapshots[i], &sb->snapshots[i + 1],
		(sb->nsnapshots - (size_t)i - 1) * sizeof(sb->snapshots[0]));
	sb->nsnapshots--;
	return 0;
}

int sandbox_add_run_locked(struct sfs_sandbox *sb, struct sfs_run *run)
{
	struct sfs_run **grown = realloc(sb->runs, (sb->nruns + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	sb->runs = grown;
	sb->runs[sb->nruns++] = run;
	return 0;
}

void tree_set_error(struct sfs_sandbox *sb, const char *msg)
{
	sfs_sb_set_error(sb, msg);
}

void tree_set_last_result(struct sfs_sandbox *sb, const char *text)
{
	char *copy = text ? strdup(text) : NULL;
	pthread_mutex_lock(&sfs_records_mu);
	free(sb->last_result);
	sb->last_result = copy;
	pthread_mutex_unlock(&sfs_records_mu);
}
