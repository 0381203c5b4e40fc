/* A string-keyed hash map (map.c): the stat cache's index, a snapshot's
 * modes, and fs/snaptree.c's inode table. */
#ifndef SFS_SNAPSHOTS_PMAP_H
#define SFS_SNAPSHOTS_PMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pmap {
	char **keys;
	uint64_t *vals;
	size_t cap, n;
	bool borrow; /* keys are the caller's, kept alive by it: not copied */
};
/* 0 or -ENOMEM; the key is copied unless the map borrows. */
int pmap_put(struct pmap *m, const char *key, uint64_t val);
bool pmap_get(const struct pmap *m, const char *key, uint64_t *val);
void pmap_free(struct pmap *m);

#endif
