/*
 * The synthetic tree as tables (acme's Dirtab): which names a directory has,
 * what each node is, and the text of the read-only files.
 */
#ifndef SFS_SYNTH_H
#define SFS_SYNTH_H

#include "fs.h"
#include "ino.h"

#include "../providers/provider.h"

#include <sys/stat.h>

/* A resolved synthetic inode. */
struct synth {
	unsigned kind;
	uint32_t serial, aux;
	struct sfs_sandbox *sb; /* for kinds under a sandbox */
	struct sfs_run *run;	/* for kinds under a run */
	const struct sfs_provider *provider;
};

struct synth_entry {
	char name[64];
	fuse_ino_t ino; /* 0 for "workspace" (served by fs/workspace/) */
	mode_t mode;
};

/* 0 or -ENOENT (the object behind the inode is gone). */
int synth_resolve(fuse_ino_t ino, struct synth *s);
void synth_release(struct synth *s);

/* Children of a directory; *out malloc'd. */
int synth_list(const struct synth *dir, struct synth_entry **out, size_t *n);
int synth_stat(const struct synth *s, struct stat *st);
/* Text of a read-only synthetic file (caps, status, cmd ...): malloc'd. */
int synth_text(const struct synth *s, char **text, size_t *len);

#endif
