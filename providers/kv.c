#include "kv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *sfs_kv_get(const struct sfs_kvlist *l, const char *key)
{
	for (size_t i = 0; i < l->n; i++)
		if (strcmp(l->v[i].key, key) == 0)
			return l->v[i].val;
	return NULL;
}

int sfs_kv_set(struct sfs_kvlist *l, const char *key, const char *val)
{
	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(l->v[i].key, key) == 0) {
			char *v = strdup(val);
			if (!v)
				return -ENOMEM;
			free(l->v[i].val);
			l->v[i].val = v;
			return 0;
		}
	}
	return sfs_kv_add(l, key, val);
}

int sfs_kv_add(struct sfs_kvlist *l, const char *key, const char *val)
{
	char *v = strdup(val);
	if (!v)
		return -ENOMEM;
	char *k = strdup(key);
	struct sfs_kv *nv = realloc(l->v, (l->n + 1) * sizeof(*nv));
	if (!k || !nv) {
		free(k);
		free(v);
		if (nv)
			l->v = nv;
		return -ENOMEM;
	}
	l->v = nv;
	l->v[l->n].key = k;
	l->v[l->n].val = v;
	l->n++;
	return 0;
}

int sfs_kv_del(struct sfs_kvlist *l, const char *key)
{
	for (size_t i = 0; i < l->n; i++) {
		if (strcmp(l->v[i].key, key) == 0) {
			free(l->v[i].key);
			free(l->v[i].val);
			memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(l->v[0]));
			l->n--;
			return 1;
		}
	}
	return 0;
}

int sfs_kv_copy(struct sfs_kvlist *dst, const struct sfs_kvlist *src)
{
	for (size_t i = 0; i < src->n; i++) {
		int r = sfs_kv_set(dst, src->v[i].key, src->v[i].val);
		if (r)
			return r;
	}
	return 0;
}

void sfs_kv_free(struct sfs_kvlist *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].key);
		free(l->v[i].val);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}
