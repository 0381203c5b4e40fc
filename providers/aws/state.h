/* The aws provider's private state per sandbox (state.c), under aws_state_mu (a leaf). */
#ifndef SFS_AWS_STATE_H
#define SFS_AWS_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "../kv.h"
#include "../strbuf.h"
#include "aws.h"

struct aws_runst {
	int n;
	char *cluster, *task; /* the task's cluster and ARN */
	char *group, *stream; /* its CloudWatch Logs stream */
	char *job_key;	      /* the script object, deleted once the run ended */
	int kill_sig;	      /* StopTask was sent for this signal (0: not) */
	/* the journal: bytes up to `off` were handed out; `token` continues
	 * after them, `pending` holds fetched bytes not handed out yet */
	char *token;
	off_t off;
	struct sfs_buf pending;
};

struct aws_state {
	struct sfs_kvlist job; /* cluster, task_definition, subnets, ... from new */
	struct aws_runst *runs;
	size_t nruns;
};

extern pthread_mutex_t aws_state_mu;
struct aws_state *aws_state_get_locked(struct sfs_sandbox *sb);
struct aws_runst *aws_runst_locked(struct aws_state *st, int n, bool add);
/* A job setting new gave, malloc'd, or NULL. */
char *aws_state_job_dup(struct sfs_sandbox *sb, const char *key);

#endif
