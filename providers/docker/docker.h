/*
 * The docker provider's shared declarations.
 *
 * A sandbox is a container kept alive by a tiny sh loop; runs are detached
 * execs of the shell kit's wrapper script (providers/sh) that keeps its files in the
 * container, so nothing is lost when the daemon restarts.  When the
 * container's overlay merged directory is reachable from here (a local
 * engine, overlay2, root), workspace/ and journals are plain host files
 * reached without following any symlink; otherwise (or with
 * -o docker.fs=archive) journals are followed with `tail -f` execs.
 *
 * Runtime state lives in tables keyed by the sandbox pointer (sandboxes are
 * never freed while the daemon runs) and the run number, guarded by one
 * mutex that is never held across a call to the engine.  What the registry
 * keeps (container, spec, fork image, doomed images) is sb->priv behind its
 * own leaf lock (saved.c); the two locks are never held together.
 */
#ifndef SFS_DOCKER_H
#define SFS_DOCKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../options.h"
#include "../provider.h"

#define DK_ID_MAX 80

/* Where runs keep their files inside the container (see providers/sh/sh.h). */
#define DK_DIR "/.sandboxfs"
#define DK_RUNS_DIR DK_DIR "/runs"

/* What a container is made from: kept (saved.c) for restore and fork. */
#define DK_MAX_PORTS 16
struct dk_spec {
	char image[256];
	char workdir[1024];
	char network[1024]; /* "" = the engine's default; allow:... (netpolicy.c) */
	double cpus;	    /* 0 = no limit */
	int64_t memory;	    /* bytes, 0 = no limit */
	int ports[DK_MAX_PORTS];
	size_t nports;
	char hostdir[4096]; /* "" or a host dir bound at workdir (base=: the cow view) */
};

struct dk_info {
	char id[DK_ID_MAX];
	bool running;
	char status[32];
	char started[64];
	char merged[1024]; /* overlay2 MergedDir, or "" */
	char user[64];
	json_t *raw; /* the whole inspect reply */
};

/* ---- container.c: containers and images ---- */
/* -ENOENT: "docker: container X is gone (removed outside sandboxfs?)". */
int dk_gone(const char *cid, struct sfs_err *err);
/* After a failed op: a vanished container is recorded as sb's error. */
int dk_failed(struct sfs_sandbox *sb, int r, const struct sfs_err *err);
int dk_spec_from_opts(const struct sfs_kvlist *opts, struct dk_spec *spec, struct sfs_err *err);
json_t *dk_spec_to_json(const struct dk_spec *spec);
int dk_spec_from_json(json_t *j, struct dk_spec *spec);
int dk_inspect(const char *cid, struct dk_info *info, struct sfs_err *err);
void dk_info_free(struct dk_info *info);
/* Pulls image unless present, with progress in sb->progress. */
int dk_ensure_image(struct sfs_sandbox *sb, const char *image, struct sfs_err *err);
/* Creates and starts a container for sb from image (spec->image when NULL),
 * ready for runs; on failure nothing is left. */
int dk_container_new(struct sfs_sandbox *sb, const struct dk_spec *spec, const char *image,
		     char *cid, size_t cidlen, struct sfs_err *err);
int dk_container_remove(const char *cid, struct sfs_err *err);
int dk_container_start(const char *cid, struct sfs_err *err);
/* Commits cid to repo:tag; *image_id gets "sha256:...". */
int dk_commit(const char *cid, const char *repo, const char *tag, char *image_id, size_t len,
	      struct sfs_err *err);
/* Runs a short script in the container as root: `sh -c SCRIPT sandboxfs ARGS`. */
int dk_sh(const char *cid, const char *script, const char *const *args, char *out, size_t outlen,
	  struct sfs_err *err);
/* Runs a command of the shell kit the same way; out gets its stdout without
 * trailing white space, a non-zero exit is -EIO with its stderr. */
struct sfs_sh_cmd;
int dk_sh_cmd(const char *cid, const struct sfs_sh_cmd *cmd, char *out, size_t outlen,
	      struct sfs_err *err);
/* The sandbox's exec environment: PATH, HOME, then sb->env and its
 * secrets (sfs_sb_run_env); NULL with err set. */
json_t *dk_exec_env(struct sfs_sandbox *sb, int run, struct sfs_err *err);

/* ---- state.c: runtime tables and the host view of a container ---- */
struct dk_run {
	struct dk_run *next;
	int n;
	char cid[DK_ID_MAX];   /* the container the run started in */
	char eid[DK_ID_MAX];   /* the wrapper's exec */
	char started[64];      /* that container's StartedAt then */
	int jfd;	       /* the journal file on this host, or -1 */
	bool loaded;	       /* the fields above are known */
	int64_t next_check_ms; /* rate limit for checks that cost an engine call */
};

struct dk_sb {
	struct dk_sb *next;
	struct sfs_sandbox *sb;
	char cid[DK_ID_MAX];
	char started[64];
	char merged[1024];
	bool running, root_user, known;
	bool gone;     /* its container cid was removed behind our back */
	int merged_fd; /* O_PATH of merged, or -1; checked against merged before use */
	dev_t merged_dev;
	ino_t merged_ino;
	struct dk_run *runs;
};

/* Runtime state; all of it guarded by dk_mu. */
extern pthread_mutex_t dk_mu;
/* The record for sb (created empty when new); NULL on ENOMEM.  Call with dk_mu. */
struct dk_sb *dk_sb_locked(struct sfs_sandbox *sb);
struct dk_run *dk_run_locked(struct dk_sb *d, int n);
/* The container sb runs in now, or "" (copied under dk_mu). */
void dk_current(struct sfs_sandbox *sb, char *cid, size_t len);
/* ---- netpolicy.c: network=allow: through the daemon's proxy ---- */
bool dk_net_allow(const struct dk_spec *spec);
/* STATE/sandboxes/KEY/net (made): bound at /run/sandboxfs in the container. */
int dk_net_dir(struct sfs_sandbox *sb, char *buf, size_t len, struct sfs_err *err);
/* The proxy's listeners for sb's container (again when it restarted). */
int dk_net_attach(struct sfs_sandbox *sb, const char *cid, struct sfs_err *err);
/* `policy network allow:...` on an allow: sandbox (other changes:
 * -EOPNOTSUPP, the container's network mode is fixed). */
int dk_net_set(struct sfs_sandbox *sb, const char *policy, struct sfs_err *err);
/* The proxy variables for a run of an allow: sandbox. */
int dk_net_env(struct sfs_sandbox *sb, json_t *env);

/* Records sb's container from an inspect (merged dir, StartedAt...). */
void dk_note_container(struct sfs_sandbox *sb, const struct dk_info *info);
/* Forgets sb's container (destroyed) and closes what refers to it. */
void dk_forget(struct sfs_sandbox *sb);
/* The container cid was removed behind our back: marks the sandbox whose
 * container it is and returns it (NULL when none). */
struct sfs_sandbox *dk_mark_gone(const char *cid);
/* Whether a sandbox in the tree has container cid (full id), e.g. one
 * adopted with `resume` whose labels name an earlier local id. */
bool dk_cid_owned(const char *cid);
/* Whether sb's container was removed behind our back. */
bool dk_is_gone(struct sfs_sandbox *sb);
/* Copies up to max sandboxes with a container (and their ids); returns how many. */
size_t dk_list(struct sfs_sandbox **sbs, char (*cids)[DK_ID_MAX], size_t max);
/* At unmount: frees the runtime tables and closes their fds. */
void dk_state_shutdown(void);
/* At unmount: closes the pooled engine connections. */
void dk_engine_shutdown(void);
/* Publishes sb's new container cid (sb->id, image, workspace: the owner's
 * sfs_sb_publish) and saves it with the spec and fork image it came from. */
int dk_publish(struct sfs_sandbox *sb, const char *cid, const char *image,
	       const struct dk_spec *spec, const char *fork_image, struct sfs_err *err);
/* Sets or clears sb->progress under the tree lock. */
void dk_progress(struct sfs_sandbox *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* True when -o docker.fs=archive forbids host access to container files. */
bool dk_fs_archive_only(void);
/* An fd (O_PATH|O_DIRECTORY, or opened with flags for a file) of path inside
 * sb's container, resolved from the merged dir without following symlinks.
 * -EOPNOTSUPP when the merged dir is not reachable from here. */
int dk_host_open(struct sfs_sandbox *sb, const char *path, int flags, mode_t mode, int *fd,
		 struct sfs_err *err);
int64_t dk_now_ms(void);

/* ---- saved.c: what the registry keeps (sb->priv, its own leaf lock) ---- */
json_t *dk_state_save(const struct sfs_sandbox *sb);
int dk_state_load(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err);
void dk_state_free(struct sfs_sandbox *sb);
/* Copies the saved container id ("" when none). */
void dk_saved_container(struct sfs_sandbox *sb, char *cid, size_t len);
/* Copies the saved spec; -EINVAL when there is none. */
int dk_saved_spec(struct sfs_sandbox *sb, struct dk_spec *spec);
/* Copies the image sb was forked from ("" when none). */
void dk_saved_fork_image(struct sfs_sandbox *sb, char *id, size_t len);
/* Saves a new container with its spec and fork image (doomed images stay);
 * -ENOMEM changes nothing. */
int dk_saved_set(struct sfs_sandbox *sb, const char *cid, const struct dk_spec *spec,
		 const char *fork_image);
/* Snapshot images deleted while a container still used them ("doomed"):
 * added here, copied out (an array, or NULL), and taken off once deleted. */
int dk_saved_doom(struct sfs_sandbox *sb, const char *image_id);
json_t *dk_saved_doomed(struct sfs_sandbox *sb);
void dk_saved_undoom(struct sfs_sandbox *sb, json_t *deleted);

/* ---- images.c: snapshot images ---- */
/* At destroy, after the container went: deletes sb's snapshot images and
 * doomed images; one a fork's container still uses goes on that fork's
 * doomed list instead. */
void dk_release_snapshots(struct sfs_sandbox *sb);
/* The doomed images alone (after a restore replaced the container). */
void dk_release_doomed(struct sfs_sandbox *sb);
/* At resume: snapshot images of sb (tagged with container cid, or labelled
 * with sb's key) that snapshots/ does not list, left by a daemon that died
 * between commit and record, are listed again; returns how many. */
int dk_adopt_snapshots(struct sfs_sandbox *sb, const char *cid);

/* ---- run.c, follow.c ---- */
int dk_run_start(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int dk_run_refresh(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
int dk_run_kill(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
		struct sfs_err *err);
int dk_journal_local_path(struct sfs_sandbox *sb, struct sfs_run *run, char *buf, size_t len);
/* agent.c: the run agent in the container (see there).  Whether this
 * sandbox's runs may use it; start run (its run dir prepared from the host,
 * env the exec API's "K=V" array) or kill through it: 0, or -errno and the
 * caller takes the per-exec path (nothing was started). */
struct sfs_sh_cmd;
bool dk_agent_enabled(struct sfs_sandbox *sb);
int dk_agent_run(struct sfs_sandbox *sb, const char *cid, struct sfs_run *run, json_t *env);
int dk_agent_kill(struct sfs_sandbox *sb, const char *cid, int n, const struct sfs_sh_cmd *kill,
		  double wait_s, char *out, size_t outlen);
/* Whether run n's wrapper lives, from the container's /proc seen from this
 * host (inspect: the container's inspect reply): 1, 0, or -errno. */
int dk_agent_wrapper_alive(struct sfs_sandbox *sb, json_t *inspect, int n);
/* inotify.c: an O_PATH fd of run n's directory reached through the merged
 * dir (no symlink followed), or -errno; a watch on it; -errno. */
int dk_run_dir_open(struct sfs_sandbox *sb, int n);
int dk_journal_watch(struct sfs_sandbox *sb, struct sfs_run *run, int inotify_fd, uint32_t mask);
ssize_t dk_journal_read(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
			size_t max, struct sfs_err *err);
int dk_journal_follow(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
		      void **follower, struct sfs_err *err);
void dk_journal_unfollow(struct sfs_sandbox *sb, void *follower);
/* The in-container directory of run n. */
void dk_run_dir(int n, char *buf, size_t len);

/* ---- files.c: the fs_* ops (providers/provider.h) ---- */
int dk_fs_stat(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st, struct sfs_err *err);
int dk_fs_list(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents, size_t *n,
	       struct sfs_err *err);
int dk_fs_read(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err);
/* The archive API's URL (/containers/ID/archive?path=...) of a workspace path. */
int dk_archive_url(struct sfs_sandbox *sb, const char *path, char *url, size_t len,
		   struct sfs_err *err);
/* fs_read_many: the small files of one directory in one archive GET (bulk.c). */
int dk_fs_read_many(struct sfs_sandbox *sb, const char *const *paths, size_t n,
		    int (*on_file)(const char *path, const void *data, size_t len, void *arg),
		    void *arg, struct sfs_err *err);
int dk_fs_write(struct sfs_sandbox *sb, const char *path, int fd, mode_t mode, struct sfs_err *err);
int dk_fs_put_tree(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err);
int dk_fs_mkdir(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int dk_fs_remove(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err);
int dk_fs_rename(struct sfs_sandbox *sb, const char *from, const char *to, struct sfs_err *err);
int dk_fs_chmod(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
int dk_fs_symlink(struct sfs_sandbox *sb, const char *target, const char *path,
		  struct sfs_err *err);

/* ---- events.c: what happens to our containers while the daemon runs ---- */
/* From the provider's tick: starts the watcher once docker sandboxes exist. */
void dk_events_tick(void);
/* At unmount: stops the watcher. */
void dk_events_stop(void);
/* cid was found removed (an event, or an inspect answering 404): unless we
 * removed it ourselves, its sandbox goes to state error with the reason. */
void dk_container_gone(const char *cid);
/* We are removing cid ourselves: its destroy event is no news. */
void dk_events_expect_removal(const char *cid);
/* How sb's status shows that the engine cannot be reached. */
#define DK_OUTAGE_TEXT "the engine connection is down"

/* ---- follow.c ---- */
/* Kills followers that could not be stopped while the engine was out of
 * reach (in container cid, or in every container when cid is NULL). */
void dk_followers_reap(const char *cid);
/* At unmount: forgets them. */
void dk_followers_shutdown(void);

/* ---- archive.c ---- */
/* Reads a small regular file from the container through the archive API
 * (works on stopped containers too).  -ENOENT when it does not exist. */
int dk_archive_read(const char *cid, const char *path, char **data, size_t *len,
		    struct sfs_err *err);

/* Decodes the archive API's X-Docker-Container-Path-Stat header (pathstat.c). */
int dk_path_stat_decode(const char *header, struct sfs_rstat *st, struct sfs_err *err);

/* options.c: the -o docker.KEY rows (providers/options.h). */
extern const struct sfs_opt sfs_docker_options[];

#endif
