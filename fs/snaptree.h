/*
 * snapshots/ID/tree/: a workspace snapshot's files, read-only, served from
 * the object store (fs/snapshots) without a checkout.  Inodes are kind
 * SFS_K_STREE with a 48-bit id into a table of (sandbox serial, snapshot
 * serial, path), handed out once per path and kept while the daemon runs
 * (a snapshot never changes, so neither does what a number names); a
 * number whose snapshot was deleted resolves to ENOENT.
 */
#ifndef SFS_SNAPTREE_H
#define SFS_SNAPTREE_H

#include "fs.h"

#include <sys/stat.h>

/* The inode of a snapshot's tree/ (0 when out of memory). */
fuse_ino_t stree_root_ino(uint32_t sb_serial, uint32_t snap_serial);
int stree_stat(fuse_ino_t ino, struct stat *st);
void stree_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void stree_readlink(fuse_req_t req, fuse_ino_t ino);
/* A regular file's bytes (malloc'd). */
int stree_read_all(fuse_ino_t ino, char **data, size_t *len);
void stree_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void stree_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi, bool plus);
void stree_releasedir(fuse_req_t req, struct fuse_file_info *fi);

#endif
