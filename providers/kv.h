/* An ordered list of key=value strings: options, environments, config. */
#ifndef SFS_KV_H
#define SFS_KV_H

#include <stddef.h>

struct sfs_kv {
	char *key;
	char *val;
};

struct sfs_kvlist {
	struct sfs_kv *v;
	size_t n;
};

const char *sfs_kv_get(const struct sfs_kvlist *l, const char *key);
/* Replaces an existing key in place, else appends.  0 or -ENOMEM. */
int sfs_kv_set(struct sfs_kvlist *l, const char *key, const char *val);
/* Appends even when key is there (repeatable options).  0 or -ENOMEM. */
int sfs_kv_add(struct sfs_kvlist *l, const char *key, const char *val);
/* 1 when removed, 0 when absent. */
int sfs_kv_del(struct sfs_kvlist *l, const char *key);
int sfs_kv_copy(struct sfs_kvlist *dst, const struct sfs_kvlist *src);
void sfs_kv_free(struct sfs_kvlist *l);

#endif
