/* One string as a provider's private state of a sandbox (priv_str.h). */
#include "priv_str.h"

#include "provider.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t priv_mu = PTHREAD_MUTEX_INITIALIZER;

int sfs_priv_str_set(struct sfs_sandbox *sb, const char *s)
{
	char *copy = strdup(s);
	if (!copy)
		return -ENOMEM;
	pthread_mutex_lock(&priv_mu);
	char *old = sb->priv;
	sb->priv = copy;
	pthread_mutex_unlock(&priv_mu);
	free(old);
	return 0;
}

char *sfs_priv_str_dup(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&priv_mu);
	char *copy = sb->priv ? strdup(sb->priv) : NULL;
	pthread_mutex_unlock(&priv_mu);
	return copy;
}

json_t *sfs_priv_str_save(const struct sfs_sandbox *sb, const char *key)
{
	pthread_mutex_lock(&priv_mu);
	json_t *o = sb->priv ? json_pack("{s:s}", key, (const char *)sb->priv) : NULL;
	pthread_mutex_unlock(&priv_mu);
	return o;
}

int sfs_priv_str_load(struct sfs_sandbox *sb, json_t *saved, const char *key, struct sfs_err *err)
{
	const char *s = json_string_value(json_object_get(saved, key));
	if (s && sfs_priv_str_set(sb, s))
		return sfs_errf(err, -ENOMEM, "out of memory");
	return 0;
}

void sfs_priv_str_free(struct sfs_sandbox *sb)
{
	pthread_mutex_lock(&priv_mu);
	char *s = sb->priv;
	sb->priv = NULL;
	pthread_mutex_unlock(&priv_mu);
	free(s);
}

void sfs_priv_str_take(struct sfs_sandbox *dst, struct sfs_sandbox *src)
{
	pthread_mutex_lock(&priv_mu);
	void *old = dst->priv;
	dst->priv = src->priv;
	src->priv = old;
	pthread_mutex_unlock(&priv_mu);
	sfs_priv_str_free(src);
}
