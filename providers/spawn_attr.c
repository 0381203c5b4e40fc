#include "spawn_attr.h"

#include <signal.h>

int sfs_spawn_attr_clean(posix_spawnattr_t *attr, short flags)
{
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	int r = posix_spawnattr_init(attr);
	if (r)
		return r;
	r = posix_spawnattr_setflags(attr, flags | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	if (!r && (flags & POSIX_SPAWN_SETPGROUP))
		r = posix_spawnattr_setpgroup(attr, 0);
	if (!r)
		r = posix_spawnattr_setsigmask(attr, &none);
	if (!r)
		r = posix_spawnattr_setsigdefault(attr, &all);
	if (r)
		posix_spawnattr_destroy(attr);
	return r;
}
