/* A small string-keyed hash map (open addressing, linear probing, FNV-1a):
 * the stat cache's index and a snapshot's modes. */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static size_t slot(const struct pmap *m, const char *key)
{
	size_t i = hash(key) & (m->cap - 1);
	while (m->keys[i] && strcmp(m->keys[i], key) != 0)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int grow(struct pmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 64;
	struct pmap g = {calloc(cap, sizeof(char *)), calloc(cap, sizeof(uint64_t)), cap, m->n,
			 m->borrow};
	if (!g.keys || !g.vals) {
		free(g.keys);
		free(g.vals);
		return -ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->keys[i])
			continue;
		size_t j = slot(&g, m->keys[i]);
		g.keys[j] = m->keys[i];
		g.vals[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	*m = g;
	return 0;
}

int pmap_put(struct pmap *m, const char *key, uint64_t val)
{
	if ((m->n + 1) * 2 > m->cap && grow(m))
		return -ENOMEM;
	size_t i = slot(m, key);
	if (!m->keys[i]) {
		if (!(m->keys[i] = m->borrow ? (char *)key : strdup(key)))
			return -ENOMEM;
		m->n++;
	}
	m->vals[i] = val;
	return 0;
}

bool pmap_get(const struct pmap *m, const char *key, uint64_t *val)
{
	if (!m->cap)
		return false;
	size_t i = slot(m, key);
	if (!m->keys[i])
		return false;
	*val = m->vals[i];
	return true;
}

void pmap_free(struct pmap *m)
{
	for (size_t i = 0; !m->borrow && i < m->cap; i++)
		free(m->keys[i]);
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}
