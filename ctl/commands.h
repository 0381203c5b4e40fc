/*
 * The ctl verbs (SPEC §3): what a write to the mount's ctl, a sandbox's ctl
 * or a run's ctl does.  A write is parsed whole first, so a syntax error in
 * any line runs nothing; then the lines run in order and the write fails at
 * the first that fails.  Results and errors come back as text for the next
 * read of the same open file.
 */
#ifndef SFS_COMMANDS_H
#define SFS_COMMANDS_H

#include <stddef.h>

#include "../providers/provider.h"

/* Each returns 0 or -errno; *result (malloc'd, may be NULL) is the text a
 * read of the same fd returns: the results of the lines, or "error: ...". */
int ctl_mount_write(const char *buf, size_t len, char **result);
int ctl_sandbox_write(struct sfs_sandbox *sb, const char *buf, size_t len, char **result);
int ctl_run_write(struct sfs_sandbox *sb, struct sfs_run *run, const char *buf, size_t len,
		  char **result);

/* What a plain read of each ctl returns (malloc'd). */
char *ctl_mount_read_text(void);
char *ctl_sandbox_read_text(struct sfs_sandbox *sb);
char *ctl_run_read_text(struct sfs_sandbox *sb, struct sfs_run *run);

#endif
