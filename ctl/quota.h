/*
 * A sandbox's state quota (`new NAME quota=SIZE`, or the mount's `-o quota=`
 * for every new sandbox).  Its state directory, STATE/sandboxes/KEY (the
 * local workspace, every run's journal and files, its audit), is then an
 * ext4 file system of its own: a sparse image STATE/quotas/KEY.img, made
 * once, mounted over a loop device with nosuid,nodev.  A run that fills its
 * workspace or its journal gets ENOSPC from the kernel, whatever writes; the
 * other sandboxes and the registry, on the state disk, keep their room.
 * Blocks freed inside go back to the state disk (discard).
 *
 * The image outlives the daemon, as the runs do: it stays mounted when the
 * daemon stops, a start mounts it again if it is not (a reboot), and it goes
 * with the sandbox's destruction.  Making and mounting it needs root
 * (CAP_SYS_ADMIN) and loop devices; without them `quota=` is refused.
 */
#ifndef SFS_CTL_QUOTA_H
#define SFS_CTL_QUOTA_H

#include "../providers/err.h"
#include "../providers/strbuf.h"

#include <stdint.h>

/* The smallest quota: ext4 keeps part of an image for itself. */
#define QUOTA_MIN ((uint64_t)16 << 20)

/* SIZE of quota=SIZE ("512M", "2G", bytes; at least QUOTA_MIN): 0 or
 * -EINVAL with a message. */
int quota_parse(const char *text, uint64_t *bytes, struct sfs_err *err);

/* Makes the image for sandbox key, of bytes bytes, and mounts it on sbdir
 * (an empty directory): 0 or a negative errno, and then nothing is left. */
int quota_make(const char *statedir, const char *key, const char *sbdir, uint64_t bytes,
	       struct sfs_err *err);

/* Mounts key's image on sbdir unless it is mounted already; 0 also when
 * key has no image (no quota). */
int quota_attach(const char *statedir, const char *key, const char *sbdir, struct sfs_err *err);

/* The quota of key in bytes (the image's size), 0 when it has none. */
uint64_t quota_bytes(const char *statedir, const char *key);

/* Unmounts sbdir (lazily: a process still in it keeps it until it goes)
 * and removes key's image with everything in it.  Nothing when key has
 * no image. */
void quota_release(const char *statedir, const char *key, const char *sbdir);

/* The status lines of a sandbox with a quota: `quota BYTES`, `quota_used
 * BYTES`, `quota_free BYTES`, and `quota_full yes` once writes fail for
 * room (ENOSPC).  Nothing without one. */
void quota_status(struct sfs_buf *t, const char *statedir, const char *key, const char *sbdir);

#endif
