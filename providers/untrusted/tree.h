/*
 * The one door to a tree a sandbox controls (a workspace, a cow layer, a
 * remote mirror).  Whatever is in such a tree may change between two calls:
 * a file becomes a symlink to /etc/shadow, a FIFO, a file truncated to
 * nothing.  So every path is resolved beneath a root fd without following
 * a symlink or crossing a mount, every open is O_NONBLOCK|O_NOFOLLOW and
 * its type checked with fstat on the fd it returned, bytes are read with
 * pread (never mmap: a truncation would be a SIGBUS in the daemon), and
 * modes and owners change through the fd that was opened, never through a
 * name looked up again.  No set-user-ID or set-group-ID bit is ever
 * written from such a tree.
 *
 * Functions return 0 (or an fd) or a negative errno.
 */
#ifndef SFS_UNTRUSTED_TREE_H
#define SFS_UNTRUSTED_TREE_H

#include "../err.h"

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* The permission bits that may be written from a sandbox's tree: no
 * set-user-ID, no set-group-ID (the sticky bit stays). */
#define UNTRUSTED_PERM_MASK ((mode_t)01777)
static inline mode_t untrusted_perm(mode_t mode)
{
	return mode & UNTRUSTED_PERM_MASK;
}

/* rel ("a/b", or "" for rootfd itself) opened beneath rootfd with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV); flags get O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, and
 * O_NONBLOCK unless O_PATH.  A symlink anywhere in rel is -ELOOP (with
 * O_PATH | O_NOFOLLOW the last one is opened itself, as a link). */
int untrusted_open(int rootfd, const char *rel, int flags);

/* A regular file for reading: -EAGAIN when rel is anything else (a FIFO,
 * a device, a symlink, a directory) at the moment it is opened; *st is
 * the fstat of the fd returned. */
int untrusted_open_file(int rootfd, const char *rel, struct stat *st);

/* The lstat of rel beneath rootfd, taken on an O_PATH fd of it: no
 * symlink on the way is followed (-ELOOP), the last one is stat'ed itself. */
int untrusted_lstat(int rootfd, const char *rel, struct stat *st);

/* A directory for reading (fdopendir): -ENOTDIR when it is not one. */
int untrusted_open_dir(int rootfd, const char *rel);

/* Reads the first size bytes of fd with pread, chunk by chunk, into fn
 * (which returns 0 or a negative errno to stop).  -EAGAIN when the file
 * ends before size (it was truncated meanwhile); bytes added past size are
 * not read. */
typedef int (*untrusted_chunk_fn)(void *ctx, const void *data, size_t len);
int untrusted_read_each(int fd, uint64_t size, untrusted_chunk_fn fn, void *ctx);

/* The git blob id (SHA-1 of "blob SIZE\0" and the bytes) of the regular
 * file open as fd, size bytes long: out is 20 bytes.  -EAGAIN as above. */
int untrusted_blob_sha1(int fd, uint64_t size, unsigned char out[20]);

/* Sets mode's permission bits, without 06000, on what fd is (any fd, O_PATH
 * included): -ELOOP for a symlink, checked with fstat on fd. */
int untrusted_fchmod(int fd, mode_t mode);
/* The owner of what fd is (a symlink included), never through a name. */
int untrusted_fchown(int fd, uid_t uid, gid_t gid);

/* rel beneath rootfd opened O_PATH (a symlink is never followed), its
 * type checked to be type (S_IFREG, S_IFDIR; 0 for any but a symlink),
 * then untrusted_fchmod: -EAGAIN when it is of another type. */
int untrusted_chmod(int rootfd, const char *rel, mode_t type, mode_t mode);

/* Clears set-user-ID and set-group-ID on every file and directory below
 * (and of) the directory open as rootfd, through fds: for a copy made of a
 * sandbox's tree before anything runs in it.  Symlinks are not followed,
 * nor mounts crossed. */
int untrusted_strip_setid(int rootfd);

/* How many directory levels a walk of a sandbox's tree goes down (copy,
 * remove); deeper is -ENAMETOOLONG.  Each level holds an fd or two; cp -a
 * and nftw, which these walks replace, stopped at PATH_MAX (2048 levels of
 * one-letter names). */
#define UNTRUSTED_DEPTH_MAX 2048

/* Removes rel beneath rootfd, a whole tree when it is a directory (rm -rf
 * by fds): a symlink is removed itself (never followed, anywhere on the
 * way), a directory is emptied through an fd of it opened beneath its
 * parent's (no mount crossed: a mount inside is -EXDEV and stays).  0 when
 * rel is gone, also when it was not there; -EINVAL for "", "." or ".."
 * (never rootfd itself, nothing above it). */
int untrusted_remove(int rootfd, const char *rel);

/* What untrusted_copy_tree copied and what it left out. */
struct untrusted_copy_stats {
	uint64_t files, dirs, symlinks; /* made in the copy */
	uint64_t links;			/* hard links kept (one file, another name) */
	uint64_t bytes;			/* of the regular files, as read */
	uint64_t special;		/* FIFOs, sockets, devices: never opened, left out */
	uint64_t mounts;		/* directories another filesystem is mounted on: left out */
	uint64_t changed;		/* gone, or of another type, by the time they were opened */
};

/*
 * Copies what is below the directory srcroot (a sandbox's tree; any fd of
 * it, O_PATH included) into the directory dstroot (made empty by the
 * caller), which takes srcroot's mode, owner and times (as cp -a SRC/. DST
 * did).  Copied: regular files (reflinked, else copy_file_range, else
 * pread/pwrite; holes kept; a file that shrinks is copied as far as it
 * goes, one that grows only up to the size it had when opened),
 * directories, symlinks (the target text: never followed), hard links
 * between files of the tree, POSIX ACLs (no other extended attribute), owners,
 * atimes and mtimes; modes without set-user-ID or set-group-ID.  Every
 * entry is opened O_PATH beneath its directory (no symlink followed, no
 * mount crossed) and its type taken with fstat on that fd; only a regular
 * file is opened for reading, and a directory with O_DIRECTORY: a FIFO or
 * device is never opened.  Deeper than UNTRUSTED_DEPTH_MAX is -ENAMETOOLONG.
 * Returns 0 or a negative errno with err's message naming the entry
 * ("copying a/b: No space left on device"); the copy is then partial and
 * the caller removes it.  stats (may be NULL) is filled in either way.
 */
int untrusted_copy_tree(int srcroot, int dstroot, struct untrusted_copy_stats *stats,
			struct sfs_err *err);

#endif
