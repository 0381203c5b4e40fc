/*
 * The aws provider's state per sandbox (sb->priv, the registry's "pdata"):
 * the job settings `new` gave (saved in the registry), and per run its ECS
 * task, its log stream and the journal position reached in it (a run's
 * task is also in RUNDIR/aws, runs.c).  One leaf lock for all of it.
 */
#include "state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../provider.h"

pthread_mutex_t aws_state_mu = PTHREAD_MUTEX_INITIALIZER;

struct aws_state *aws_state_get_locked(struct sfs_sandbox *sb)
{
	if (!sb->priv)
		sb->priv = calloc(1, sizeof(struct aws_state));
	return sb->priv;
}

struct aws_runst *aws_runst_locked(struct aws_state *st, int n, bool add)
{
	for (size_t i = 0; st && i < st->nruns; i++)
		if (st->runs[i].n == n)
			return &st->runs[i];
	if (!st || !add)
		return NULL;
	struct aws_runst *v = realloc(st->runs, (st->nruns + 1) * sizeof(*v));
	if (!v)
		return NULL;
	st->runs = v;
	memset(&v[st->nruns], 0, sizeof(*v));
	v[st->nruns].n = n;
	return &v[st->nruns++];
}

void aws_runst_clear(struct aws_runst *r)
{
	int n = r->n;
	free(r->cluster);
	free(r->project);
	free(r->task);
	free(r->group);
	free(r->stream);
	free(r->job_key);
	free(r->token);
	sfs_buf_free(&r->pending);
	memset(r, 0, sizeof(*r));
	r->n = n;
}

int aws_state_set_job(struct sfs_sandbox *sb, const char *key, const char *value)
{
	pthread_mutex_lock(&aws_state_mu);
	struct aws_state *st = aws_state_get_locked(sb);
	int rc = st ? sfs_kv_set(&st->job, key, value) : -ENOMEM;
	pthread_mutex_unlock(&aws_state_mu);
	return rc;
}

char *aws_state_job_dup(struct sfs_sandbox *sb, const char *key)
{
	pthread_mutex_lock(&aws_state_mu);
	struct aws_state *st = sb->priv;
	const char *v = st ? sfs_kv_get(&st->job, key) : NULL;
	char *copy = v ? strdup(v) : NULL;
	pthread_mutex_unlock(&aws_state_mu);
	return copy;
}

/* Only the job settings: a run's task is in its own directory (runs.c),
 * which outlives the registry's next save. */
json_t *aws_state_save(const struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&aws_state_mu);
	const struct aws_state *st = sb->priv;
	json_t *o = NULL;
	if (st && st->job.n) {
		json_t *job = json_object();
		for (size_t i = 0; job && i < st->job.n; i++)
			json_object_set_new(job, st->job.v[i].key, json_string(st->job.v[i].val));
		o = job ? json_pack("{s:o}", "job", job) : NULL;
	}
	pthread_mutex_unlock(&aws_state_mu);
	return o;
}

int aws_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err)
{
	if (!saved)
		return 0;
	pthread_mutex_lock(&aws_state_mu);
	struct aws_state *st = aws_state_get_locked(sb);
	int rc = st ? 0 : -ENOMEM;
	const char *k;
	json_t *v;
	json_object_foreach(json_object_get(saved, "job"), k, v)
	{
		if (!rc && json_is_string(v))
			rc = sfs_kv_set(&st->job, k, json_string_value(v));
	}
	pthread_mutex_unlock(&aws_state_mu);
	return rc ? sfs_errf(err, rc, "out of memory") : 0;
}

void aws_state_free(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&aws_state_mu);
	struct aws_state *st = sb->priv;
	sb->priv = NULL;
	pthread_mutex_unlock(&aws_state_mu);
	if (!st)
		return;
	for (size_t i = 0; i < st->nruns; i++)
		aws_runst_clear(&st->runs[i]);
	free(st->runs);
	sfs_kv_free(&st->job);
	free(st);
}
