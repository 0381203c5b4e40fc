/*
 * The one tar reader (and the header writer its users need), for archives
 * that come from outside: docker's archive API today, tar uploads and
 * downloads of later providers.  Nothing in an archive is trusted:
 *   - every header's checksum is checked;
 *   - numbers are strict octal or GNU base-256, and sizes must fit in 63
 *     bits (and under ops->max_size for regular files when set);
 *   - GNU long names ('L', 'K') and pax headers ('x'; 'g' is skipped) are
 *     held in memory only up to SFS_TAR_META_MAX bytes, and a pax record
 *     must be well formed (its length, "key=value\n", no NUL in a path);
 *   - names lose leading '/' and trailing '/'; a name or hard-link target
 *     with a ".." component is refused (-EINVAL), as is an empty one;
 *   - an archive that ends inside a header, an entry or its padding is
 *     truncated (-EIO); one that ends on a header boundary without the
 *     zero blocks is accepted, as GNU tar does.
 * The reader is a push parser (feed it bytes as they arrive); sfs_tar_walk
 * is the same over one memory buffer, a pure function for fuzzing.
 */
#ifndef SFS_TAR_H
#define SFS_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "strbuf.h"

#define SFS_TAR_BLOCK 512
#define SFS_TAR_META_MAX (1u << 20)

struct sfs_tar_entry {
	const char *name;     /* cleaned path, never empty ("." for the root) */
	const char *linkname; /* symlink target or hard-link name, else "" */
	char type;	      /* '0' regular ('\0' and '7' too), '1' hard link, '2' symlink,
				 '3' char dev, '4' block dev, '5' dir, '6' fifo; other
				 letters are passed on as they are */
	unsigned mode;	      /* permission bits (07777) */
	uint64_t size;	      /* bytes of data that follow */
	int64_t mtime;
	uint64_t uid, gid;
	uint64_t offset; /* the header's offset in the archive */
};

/* Return values of the callbacks besides 0 and a negative errno. */
#define SFS_TAR_SKIP 1 /* entry(): do not deliver this entry's data */
#define SFS_TAR_STOP 2 /* any: end the walk here (the reader returns 1) */

struct sfs_tar_ops {
	/* Each entry, before its data. */
	int (*entry)(void *ctx, const struct sfs_tar_entry *e);
	/* Pieces of its data, in order (may be NULL: data is skipped). */
	int (*data)(void *ctx, const struct sfs_tar_entry *e, const void *p, size_t n);
	/* After the last piece of an entry that was not skipped (may be NULL). */
	int (*end)(void *ctx, const struct sfs_tar_entry *e);
	/* Regular files larger than this are refused (-EFBIG); 0: no limit. */
	uint64_t max_size;
};

struct sfs_tar_reader {
	const struct sfs_tar_ops *ops;
	void *ctx;
	int state;
	unsigned char hdr[SFS_TAR_BLOCK];
	size_t hlen;
	uint64_t left, pad, pos, hdr_off;
	char meta_type;		  /* 'L', 'K', 'x' or 'g' while one is read */
	struct sfs_buf meta;	  /* its bytes */
	struct sfs_buf long_name; /* pending for the next entry */
	struct sfs_buf long_link;
	struct sfs_buf pax_path, pax_link;
	bool pax_has_path, pax_has_link, pax_has_size, has_long_name, has_long_link;
	uint64_t pax_size;
	struct sfs_buf name, link; /* the current entry's */
	struct sfs_tar_entry cur;
	bool deliver, stopped;
};

void sfs_tar_init(struct sfs_tar_reader *r, const struct sfs_tar_ops *ops, void *ctx);
/* 0: give me more; 1: the archive ended or a callback said STOP (further
 * bytes are ignored); a negative errno with a message. */
int sfs_tar_feed(struct sfs_tar_reader *r, const void *buf, size_t len, struct sfs_err *err);
/* At the end of input: 0 when the archive was whole (or stopped), -EIO
 * when it was cut short. */
int sfs_tar_finish(struct sfs_tar_reader *r, struct sfs_err *err);
void sfs_tar_free(struct sfs_tar_reader *r);

/* The whole archive in memory: 0 at its end, 1 when a callback stopped the
 * walk, or a negative errno with a message. */
int sfs_tar_walk(const void *buf, size_t len, const struct sfs_tar_ops *ops, void *ctx,
		 struct sfs_err *err);

/* A ustar header block for an entry (name cut at 99 bytes: longer names
 * need a GNU 'L' entry first, see sfs_tar_long_name). */
void sfs_tar_header(unsigned char h[SFS_TAR_BLOCK], const char *name, char type, uint64_t size,
		    unsigned mode, int64_t mtime);
/* For a name of 100 bytes or more: the 'L' header and the name's block(s)
 * into out (room for 1 + ceil((len+1)/512) blocks); returns bytes written,
 * 0 when the name is short enough, or -ENAMETOOLONG past limit. */
long sfs_tar_long_name(unsigned char *out, size_t cap, const char *name);

/* Writes dir's tree (regular files, directories, symlinks; names relative to
 * dir) to out as a tar archive with its end blocks (tar_write.c). */
int sfs_tar_write_dir(const char *dir, int out, struct sfs_err *err);

#endif
