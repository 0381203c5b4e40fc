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

#include "ctl.h"
#include "../providers/provider.h"

#include <pthread.h>

/* Each returns 0 or -errno; *result (malloc'd, may be NULL) is the text a
 * read of the same fd returns: the results of the lines, or "error: ...". */
int ctl_mount_write(const char *buf, size_t len, char **result);
int ctl_sandbox_write(struct sfs_sandbox *sb, const char *buf, size_t len, char **result);
int ctl_run_write(struct sfs_sandbox *sb, struct sfs_run *run, const char *buf, size_t len,
		  char **result);

/*
 * An open ctl file.  Writes are taken as a stream of lines: a line runs once
 * its newline has arrived, whatever pieces the kernel cut the write(2) into;
 * the unfinished last line is held (at most CTL_LINE_MAX bytes) and runs at
 * the last close if no newline ever comes.  "A write is checked whole"
 * means: the lines one write completes (a held beginning, then the write up
 * to its last newline) are parsed and checked together before any of them
 * runs.  A failed write drops the line it ended in, to that line's newline.
 */
enum ctl_file_kind { CTL_FILE_MOUNT, CTL_FILE_SANDBOX, CTL_FILE_RUN };

struct ctl_file {
	enum ctl_file_kind kind;
	struct sfs_sandbox *sb;
	struct sfs_run *run;
	pthread_mutex_t mu; /* one write at a time, in arrival order */
	struct ctl_linebuf lb;
};

void ctl_file_init(struct ctl_file *f, enum ctl_file_kind kind, struct sfs_sandbox *sb,
		   struct sfs_run *run);
/* 0 or -errno; *result as for ctl_*_write, NULL when nothing ran (the write
 * only brought part of a line). */
int ctl_file_write(struct ctl_file *f, const char *buf, size_t len, char **result);
/* The last close: runs a held line that never got its newline, then frees. */
void ctl_file_close(struct ctl_file *f);

/* What a plain read of each ctl returns (malloc'd). */
char *ctl_mount_read_text(void);
char *ctl_sandbox_read_text(struct sfs_sandbox *sb);
char *ctl_run_read_text(struct sfs_sandbox *sb, struct sfs_run *run);

#endif
