/*
 * Exec in a container: create, start (detached, or attached with the
 * multiplexed stdout/stderr stream), inspect for the exit code.
 */
#ifndef SFS_DOCKER_EXEC_H
#define SFS_DOCKER_EXEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../err.h"
#include "../strbuf.h"

struct dk_exec {
	const char *cid;
	const char *const *argv; /* NULL-terminated */
	json_t *env;		 /* borrowed array of "K=V", or NULL */
	const char *workdir;	 /* NULL: the container's */
	const char *user;	 /* NULL: the container's */
};

/* Collected output; at most max bytes are kept (0: unlimited). */
struct dk_buf {
	struct sfs_buf b; /* b.buf is NUL-terminated once anything was added */
	size_t max;
	bool truncated;
};
void dk_buf_free(struct dk_buf *b);

int dk_exec_create(const struct dk_exec *x, bool attach, char *id, size_t idlen,
		   struct sfs_err *err);
int dk_exec_start_detached(const char *eid, struct sfs_err *err);
/* -ENOENT when the daemon no longer knows the exec. */
int dk_exec_inspect(const char *eid, bool *running, int *code, struct sfs_err *err);
/* Runs x to its end; out and errout (either may be NULL) get its stdout and
 * stderr, *code its exit status. */
int dk_exec_run(const struct dk_exec *x, struct dk_buf *out, struct dk_buf *errout, int *code,
		struct sfs_err *err);

/* The multiplexed stream: 8-byte headers [stream, 0, 0, 0, size BE32]. */
struct dk_demux {
	unsigned char hdr[8];
	size_t hlen;
	uint32_t left;
	int stream;
};
typedef bool (*dk_frame_fn)(void *arg, int stream, const char *data, size_t len);
/* Feeds raw bytes; fn gets each payload piece.  False when fn said stop. */
bool dk_demux_feed(struct dk_demux *d, const char *data, size_t len, dk_frame_fn fn, void *arg);

/* Starts an attached exec and feeds its frames to fn until the process ends
 * or *stop is set.  Returns 0 or a negative errno. */
int dk_exec_stream(const char *eid, dk_frame_fn fn, void *arg, const int *stop,
		   struct sfs_err *err);

#endif
