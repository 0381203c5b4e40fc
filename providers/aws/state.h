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
	char *cluster, *task; /* the task's cluster and ARN (a build: NULL, its id) */
	char *project;	      /* a CodeBuild build's project, NULL for an ECS task */
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
/* Frees what r holds; r keeps only its run number. */
void aws_runst_clear(struct aws_runst *r);
/* A job setting new gave, malloc'd, or NULL. */
char *aws_state_job_dup(struct sfs_sandbox *sb, const char *key);

/* runs.c, for codebuild.c: a job setting (new's, else aws.KEY), the run's
 * script put beside the prefix (its key and presigned GET URL), deleting it;
 * a run's state under aws_state_mu (loaded from RUNDIR/aws after a restart). */
char *aws_setting(struct sfs_sandbox *sb, const char *key);
struct sfs_run;
int aws_put_job(struct sfs_sandbox *sb, struct sfs_run *run, struct aws_ws *w, const char *workdir,
		char **job_key, char **job_url, struct sfs_err *err);
int aws_delete_job(struct sfs_sandbox *sb, const char *key);
struct aws_runst *aws_run_locked(struct sfs_sandbox *sb, const struct sfs_run *run);
/* Keeps a started run's task (cluster) or build (project): its id, log
 * stream and script (*job_key is taken), in memory and in RUNDIR/aws;
 * the run is then running. */
int aws_run_keep(struct sfs_sandbox *sb, struct sfs_run *run, const char *cluster,
		 const char *project, const char *task, const char *group, const char *stream,
		 char **job_key, struct sfs_err *err);

/* codebuild.c: runs as CodeBuild builds (aws.runner=codebuild) */
int aws_cb_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int aws_cb_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int aws_cb_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, struct sfs_err *err);

#endif
