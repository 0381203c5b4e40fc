/*
 * The one contract every provider implements.
 *
 * A provider turns generic sandbox records into real places where commands
 * run.  Nothing outside providers/ knows a provider by name: the rest of the
 * daemon looks providers up in the table (providers.c) and checks caps before
 * calling an optional op.  Optional ops may be NULL, which callers treat as
 * -EOPNOTSUPP.  Every op returns 0 or a negative errno and fills err.
 *
 * Ops may block (network, docker); callers never hold the tree lock across
 * one.  Ops on one sandbox are serialised by the caller (sb->op_mutex).
 */
#ifndef SFS_PROVIDER_H
#define SFS_PROVIDER_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "kv.h"

/* SPEC §4, in this order. */
enum sfs_cap {
	SFS_CAP_FS,
	SFS_CAP_EXEC,
	SFS_CAP_ENV,
	SFS_CAP_PORTS,
	SFS_CAP_BACKGROUND,
	SFS_CAP_WRITABLE_STDIN,
	SFS_CAP_KILLABLE,
	SFS_CAP_SNAPSHOTS,
	SFS_CAP_NETWORK_POLICY,
	SFS_CAP_DURABLE_FS,
	SFS_CAP_FORK,
	SFS_CAP_COUNT
};

extern const char *const sfs_cap_names[SFS_CAP_COUNT];

enum sfs_sb_state {
	SFS_SB_CREATING,
	SFS_SB_RUNNING,
	SFS_SB_STOPPED,
	SFS_SB_DESTROYED,
	SFS_SB_ERROR
};
const char *sfs_sb_state_name(enum sfs_sb_state s);
int sfs_sb_state_parse(const char *s);

enum sfs_run_state { SFS_RUN_RUNNING, SFS_RUN_EXITED, SFS_RUN_KILLED, SFS_RUN_LOST };

struct sfs_opt;	  /* options.h: one row of an option table */
struct journal;	  /* journal/journal.h: readers, waiters, follow/poll state */
struct sfs_audit; /* ctl/audit.h: a sandbox's audit writer */

struct sfs_run {
	int n;			  /* 1, 2, 3 ... in start order */
	char *cmd;		  /* the command line as written after `exec` */
	char *dir;		  /* daemon-owned directory for this run's files */
	enum sfs_run_state state; /* written by provider run_refresh */
	int code;		  /* exit code, or signal number when killed */
	int64_t started;	  /* unix seconds */
	struct journal *journal;  /* owned by journal/ */
};

/* Writes "running", "exited 3", "killed TERM" or "lost" (SPEC §2). */
void sfs_run_status_text(const struct sfs_run *run, char *buf, size_t len);

struct sfs_provider;

/* A remote file's attributes (remote workspace access). */
struct sfs_rstat {
	mode_t mode; /* type and permission bits */
	off_t size;
	int64_t mtime; /* unix seconds */
	char *link;    /* symlink target (malloc'd), or NULL */
};

struct sfs_rdirent {
	char *name;
	struct sfs_rstat st;
};

void sfs_rdirents_free(struct sfs_rdirent *ents, size_t n);
/* What a listing of an object store's prefix P (GCS, S3) shows for the object
 * P+rest (prefix false) or the common prefix P+rest (prefix true, rest ends
 * in '/'): 1 with *len the length of the entry's name; 0 for no entry (the
 * directory's own marker, a sub-directory's marker among the objects);
 * -1 for a name that cannot be a file name here (untrusted/name.h), left
 * out of the listing: ".", "..", "./", "../", "/" (the empty name of a key
 * holding "//") or one over NAME_MAX. */
int sfs_store_entry(const char *rest, bool prefix, size_t *len);
/* One warning for a listing of scheme://bucket/prefix that left names out
 * (none when d->n is 0).  Keys like ROOT/../x or ROOT//x are made by
 * something else, never by us: they are not file names, and nothing
 * reaches outside ROOT through them. */
struct sfs_name_drops;
void sfs_store_left_out(const char *provider, const char *sandbox, const char *scheme,
			const char *bucket, const char *prefix, const struct sfs_name_drops *d);
/* A provider's JSON array of entries as a listing: each element's "name"
 * with conv's attributes of it.  A name that cannot be a file name
 * (untrusted/name.h: empty, ".", "..", holding '/' or NUL, over NAME_MAX)
 * is left out and counted in drops (may be NULL); an element without a
 * string name is skipped.  0, or -ENOMEM (nothing allocated is left). */
struct sfs_name_drops;
int sfs_rdirents_from_json(json_t *arr, int (*conv)(json_t *o, struct sfs_rstat *st),
			   struct sfs_rdirent **ents, size_t *n, struct sfs_name_drops *drops);

struct sfs_snapshot {
	char *id;
	char *label;
	int64_t created;
	uint32_t serial; /* per sandbox, never reused while the daemon runs: its
			    inode number (a Plan 9 qid path), whatever is deleted */
	char *commit;	 /* a workspace snapshot's commit in the object store
			    (fs/snapshots, ctl/wsnap.c); NULL for a native one */
	bool layer;	 /* no commit: the start of a copy-on-write base, whose
			    diff the workspace's changed-paths hook gives */
};

struct sfs_port {
	int port;
	char *url;
};

/*
 * A sandbox record.  Its one owner is ctl/ (ctl/sandbox.c builds and frees
 * it); the fields a reader can see (status, the registry, readdir) change
 * only through the owner functions below, under sfs_records_mu, and only by
 * the thread that holds sb->op_mutex (or before the record is listed).  So
 * the op holder may read them bare (state excepted: see sfs_sb_set_failed);
 * every other thread reads them under sfs_records_mu or through a copying
 * accessor (sfs_sb_dup_*, sfs_sb_copy_name, sfs_sb_get_state).
 */
struct sfs_sandbox {
	/* Persisted in the registry. */
	char name[64]; /* the local name; `mv` changes only this */
	char key[40];  /* stable local key: names the state directory */
	const struct sfs_provider *provider;
	char *id; /* the provider's own id */
	enum sfs_sb_state state;
	char created[40]; /* RFC 3339 */
	char *image;
	char *workspace;       /* workspace root inside the sandbox */
	struct sfs_kvlist env; /* environment for later runs */
	/* SPEC §12: NAME -> reference ("env:VAR" | "file:PATH"); only the
	 * reference is saved, never the value (ctl/secrets.c) */
	struct sfs_kvlist secrets;
	bool redact_journal; /* `redact=journal`: journal reads hide secret values */
	struct sfs_snapshot *snapshots;
	size_t nsnapshots;
	struct sfs_port *ports;
	size_t nports;

	/* Runtime only. */
	char *statedir;		  /* STATE/sandboxes/KEY */
	char *error;		  /* last failure (redacted), or NULL */
	char *progress;		  /* long work in progress, or NULL */
	uint32_t serial;	  /* never reused while the daemon runs: part of inode numbers */
	int refs;		  /* guarded by the tree lock */
	pthread_mutex_t op_mutex; /* serialises provider ops on this sandbox */
	struct sfs_run **runs;	  /* runs[i]->n == i + 1; guarded by the tree lock */
	size_t nruns;
	char *last_result; /* result of the last ctl command */
	/* NAME -> value read from the reference when the sandbox was made,
	 * loaded or the secret set; a NAME missing here could not be read and
	 * makes every run fail until it is set again (sfs_sb_run_env) */
	struct sfs_kvlist secret_vals;
	struct sfs_audit *audit;       /* SANDBOX/audit's writer (ctl/audit.c), or NULL */
	uint32_t last_snapshot_serial; /* the last sfs_snapshot.serial handed out */
	/* rmdir went on without waiting for the runs (ctl/tree.c): hidden from
	 * lookups, refuses verbs; guarded by the tree lock */
	bool destroying;
	/* made by new or fork (not resume): listed in the registry while it is
	 * still creating, so a daemon killed meanwhile leaves a record the
	 * next one can act on (ctl/tree.c); set before it is listed */
	bool saved_while_creating;
	/* under op_mutex: sfs_now_ms of the last exec, and how long the last
	 * making of the next run's directory took (ctl/tree.c) */
	int64_t last_exec_ms, spare_make_ms;
	void *priv; /* the provider's own state (state_load/state_free), under its
		       own leaf lock */
};

struct sfs_provider_ops {
	/* Required. */
	int (*create)(struct sfs_sandbox *sb, const struct sfs_kvlist *opts, struct sfs_err *err);
	/* Reattach to sb->id after a restart or for `resume`: start it if stopped. */
	int (*resume)(struct sfs_sandbox *sb, struct sfs_err *err);
	int (*destroy)(struct sfs_sandbox *sb, struct sfs_err *err);
	/* Start run->cmd detached under the journal wrapper and return at once. */
	int (*run_start)(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
	/* Update run->state/code from what the wrapper recorded. */
	int (*run_refresh)(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
	/* Optional: makes in dir (a run directory made ahead of its run,
	 * ctl/runs.h) the files run_start would create there, empty; 0 or
	 * -errno. */
	int (*run_prepare_dir)(struct sfs_sandbox *sb, const char *dir);

	/* Journal access.  A provider whose journal file is on this host gives
	 * its path; otherwise it gives bounded reads (poll) and, when killable,
	 * a follower stream (follow). */
	int (*journal_local_path)(struct sfs_sandbox *sb, struct sfs_run *run, char *buf,
				  size_t len);
	ssize_t (*journal_read)(struct sfs_sandbox *sb, struct sfs_run *run, off_t off, void *buf,
				size_t max, struct sfs_err *err);
	/* Optional, with journal_local_path: adds an inotify watch (mask) on
	 * inotify_fd for the host directory that holds the run's journal and
	 * status, whose events are the run changing; returns the watch
	 * descriptor or -errno.  Without it the engine watches the directory
	 * of journal_local_path's path (a provider whose path is
	 * /proc/self/fd/N needs this, or its journal is woken by the tick). */
	int (*journal_watch)(struct sfs_sandbox *sb, struct sfs_run *run, int inotify_fd,
			     uint32_t mask);
	/* Follow (killable providers without a local journal file): start one
	 * streaming reader of the journal from byte `from`.  *fd is a readable
	 * fd whose bytes are the journal's from that offset, ending (EOF) when
	 * the follower ends; *follower is the provider's handle.  The engine
	 * calls journal_unfollow when the run ends or the last reader goes; it
	 * must stop the reader inside the sandbox and leave no process.
	 * A follow provider also gives journal_read: once the run has ended the
	 * engine stops the follower and fetches the remainder with it. */
	int (*journal_follow)(struct sfs_sandbox *sb, struct sfs_run *run, off_t from, int *fd,
			      void **follower, struct sfs_err *err);
	void (*journal_unfollow)(struct sfs_sandbox *sb, void *follower);

	/* An O_PATH|O_DIRECTORY fd of the workspace root on this host, served
	 * by the fd-based passthrough; -EOPNOTSUPP for remote file access. */
	int (*workspace_root_fd)(struct sfs_sandbox *sb, int *fd, struct sfs_err *err);
	/* The host uid and gid sb's runs have when they are not the daemon's
	 * (an isolated local sandbox): what the daemon writes into its
	 * workspace is written as them (providers/untrusted/creds.h).  0, or
	 * -ENOENT when runs have the daemon's own. */
	int (*run_ids)(struct sfs_sandbox *sb, uid_t *uid, gid_t *gid);

	/*
	 * Remote file access, for providers whose workspace is not on this host
	 * (workspace_root_fd gives -EOPNOTSUPP).  Paths are relative to the
	 * workspace root ("" is the root itself, no leading '/', never "..").
	 * fs/cache/ caches on top of these (SPEC §5 close-to-open); each
	 * call should be one round trip where the provider's API allows.
	 */
	int (*fs_stat)(struct sfs_sandbox *sb, const char *path, struct sfs_rstat *st,
		       struct sfs_err *err); /* never follows a symlink; -ENOENT if missing */
	int (*fs_list)(struct sfs_sandbox *sb, const char *path, struct sfs_rdirent **ents,
		       size_t *n, struct sfs_err *err); /* with attributes: one call */
	int (*fs_read)(struct sfs_sandbox *sb, const char *path, int fd, struct sfs_err *err);
	/* Optional: the contents of several regular files in one call (a bulk
	 * download).  on_file gets each file that could be read (its path as
	 * given, data borrowed for the call); one that could not is left out.
	 * A non-zero return of on_file ends the call with it. */
	int (*fs_read_many)(struct sfs_sandbox *sb, const char *const *paths, size_t n,
			    int (*on_file)(const char *path, const void *data, size_t len,
					   void *arg),
			    void *arg, struct sfs_err *err);
	/* Files one fs_read_many call is given at most; 0: 256.  More suits an
	 * API's own bulk download (daytona); a tar made by a command in the
	 * sandbox (the shell kit) takes long enough for many files that the
	 * listing it was chosen from expires meanwhile. */
	size_t fs_read_many_max;
	int (*fs_write)(
	    struct sfs_sandbox *sb, const char *path, int fd, mode_t mode,
	    struct sfs_err *err); /* whole file from fd (offset 0), created or replaced */
	int (*fs_mkdir)(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
	int (*fs_remove)(struct sfs_sandbox *sb, const char *path, bool dir, struct sfs_err *err);
	int (*fs_rename)(struct sfs_sandbox *sb, const char *from, const char *to,
			 struct sfs_err *err);
	int (*fs_chmod)(struct sfs_sandbox *sb, const char *path, mode_t mode, struct sfs_err *err);
	int (*fs_symlink)(struct sfs_sandbox *sb, const char *target, const char *path,
			  struct sfs_err *err);
	/* Optional: the entries of a tar archive (fd at offset 0, size bytes)
	 * unpacked at the workspace root in one transfer: how a remote
	 * workspace gets a checked-out source tree (ctl/source.c). */
	int (*fs_put_tree)(struct sfs_sandbox *sb, int fd, off_t size, struct sfs_err *err);

	/* Optional: NULL means -EOPNOTSUPP. */
	int (*run_kill)(struct sfs_sandbox *sb, struct sfs_run *run, int sig, bool escalate,
			struct sfs_err *err);
	int (*run_stdin_write)(struct sfs_sandbox *sb, struct sfs_run *run, const void *buf,
			       size_t len, struct sfs_err *err);
	int (*run_stdin_close)(struct sfs_sandbox *sb, struct sfs_run *run, struct sfs_err *err);
	int (*snapshot)(struct sfs_sandbox *sb, const char *label, char **id, struct sfs_err *err);
	int (*restore)(struct sfs_sandbox *sb, const char *snapshot_id, struct sfs_err *err);
	int (*snapshot_delete)(struct sfs_sandbox *sb, const char *snapshot_id,
			       struct sfs_err *err);
	/* dst is a fresh record (name, key, statedir set); from may be NULL. */
	int (*fork)(struct sfs_sandbox *src, struct sfs_sandbox *dst, const char *from,
		    struct sfs_err *err);
	int (*expose)(struct sfs_sandbox *sb, int port, char **url, struct sfs_err *err);
	int (*stop)(struct sfs_sandbox *sb, struct sfs_err *err);
	int (*start)(struct sfs_sandbox *sb, struct sfs_err *err);

	/* Periodic housekeeping from the journal engine's thread (reaping). */
	void (*tick)(void);
	/* At unmount, after the journal engine stopped: close pooled
	 * connections and cached fds (sandboxes and runs go on). */
	void (*shutdown)(void);

	/* Optional: provider state kept behind the provider's own leaf lock in
	 * sb->priv (the registry entry's "pdata").  state_save returns a new
	 * JSON object for the registry (or NULL for none); it is called with
	 * sfs_records_mu held, so it may take only a leaf lock of its own and
	 * must not block.  state_load gets the registry's saved object (NULL
	 * when there is none) once, before any other op on sb.  state_free
	 * releases sb->priv when the record is freed. */
	json_t *(*state_save)(const struct sfs_sandbox *sb);
	int (*state_load)(struct sfs_sandbox *sb, json_t *saved, struct sfs_err *err);
	void (*state_free)(struct sfs_sandbox *sb);

	/* Optional: more `key value` lines for the sandbox's status file
	 * (local: isolation, network).  Called with sfs_records_mu held: a
	 * leaf lock at most, never blocking. */
	void (*status_lines)(const struct sfs_sandbox *sb, char *buf, size_t len);
	/* Optional: a sandbox's own value of a capability flag, when it
	 * differs by sandbox (dflt is the provider's); leaf locks only. */
	bool (*sandbox_cap)(struct sfs_sandbox *sb, enum sfs_cap cap, bool dflt);
	/* Optional (`policy network P`): the network policy of later runs,
	 * P already checked by providers/netpolicy; -EOPNOTSUPP when the
	 * sandbox cannot have it. */
	int (*set_network)(struct sfs_sandbox *sb, const char *policy, struct sfs_err *err);

	/* Whether the provider can be used here; writes why not. */
	bool (*configured)(char *why, size_t len);
};

struct sfs_provider {
	const char *name;
	bool caps[SFS_CAP_COUNT];
	/* The sandbox's filesystem is the host's (local): symlink targets are
	 * shown raw.  Otherwise they are rewritten per SPEC §5. */
	bool host_fs;
	/* Environment variables that hold this provider's credentials: never
	 * passed on to a local run (NULL-terminated, or NULL). */
	const char *const *credential_env;
	const struct sfs_provider_ops *ops;
	/* Its -o NAME.KEY rows (providers/options.h), ended by a NULL key. */
	const struct sfs_opt *options;
};

/*
 * Guards the fields of every sandbox record and the list of them (which
 * ctl/tree.c keeps); short, never held across a provider call.
 *
 * Lock order (docs/architecture.md), outermost first:
 *   0. a ctl file's write lock (ctl/commands.h struct ctl_file: one write at
 *      a time, held while its lines run)
 *   1. sb->op_mutex          one sandbox's provider ops (long; never two at once,
 *                            except a fork's source while its new record is
 *                            not yet listed)
 *   2. fs/ and journal/ locks (node tables, handles, the journal engine)
 *   3. the registry's save lock (ctl/tree.c tree_save_mu): one registry write at
 *      a time, held across its write and fsync, never across a provider call
 *   4. sfs_records_mu        records and the list (short)
 *   5. leaves: a provider's private state lock (daytona's dt_state_mu,
 *      docker's dk_mu), the redactor's secrets lock, the HTTP handle pool,
 *      an audit writer's buffer lock (ctl/audit.c).
 * A thread holding a lock never takes one of a lower number; a leaf takes
 * nothing.  Provider calls happen only under op_mutex, never under 3, 4 or 5.
 */
extern pthread_mutex_t sfs_records_mu;
/* The state directory (STATE), set once at startup. */
extern const char *sfs_state_dir;
/* The mount point (a real path), set once at startup; NULL in unit tests. */
extern const char *sfs_mount_dir;
/* True once this daemon's mount is on sfs_mount_dir (__atomic loads):
 * before, a file there is the host's, never one this daemon serves. */
extern bool sfs_mount_live;

/* ---- the record's owner functions (each takes sfs_records_mu) ---------- */

/* Records sb's last error (redacted) for its status file; NULL clears it. */
void sfs_sb_set_error(struct sfs_sandbox *sb, const char *msg);
/* Publishes the provider's id, image and workspace root: each non-NULL
 * argument replaces its field, all or none (-ENOMEM changes nothing). */
int sfs_sb_publish(struct sfs_sandbox *sb, const char *id, const char *image, const char *workspace,
		   struct sfs_err *err);
/* Long work in progress for the status file ("pulling image..."); NULL clears. */
void sfs_sb_set_progress(struct sfs_sandbox *sb, const char *text);
void sfs_sb_set_state(struct sfs_sandbox *sb, enum sfs_sb_state state);
enum sfs_sb_state sfs_sb_get_state(struct sfs_sandbox *sb);
/* The environment of a new run: sb->env, then every secret's value under
 * its name (a secret wins over an env of the same name).  -EIO with a
 * message naming the secret when one could not be read (a variable the
 * restarted daemon does not have, a file that is gone).  The caller holds
 * sb->op_mutex; out is a new list the caller frees (sfs_kv_free). */
int sfs_sb_run_env(struct sfs_sandbox *sb, struct sfs_kvlist *out, struct sfs_err *err);
/* Copies of sb->id / sb->workspace for threads that do not hold
 * sb->op_mutex (NULL when unset or on ENOMEM); free() them. */
char *sfs_sb_dup_id(struct sfs_sandbox *sb);
/* Copies sb->name (`mv` changes it) for a thread that does not hold
 * sb->op_mutex; returns name. */
char *sfs_sb_copy_name(struct sfs_sandbox *sb, char name[64]);
char *sfs_sb_dup_workspace(struct sfs_sandbox *sb);
/* What sb stands for is gone (its container was removed): state error and
 * msg as its error.  A destroyed sandbox stays destroyed.  The one owner
 * function a thread without sb->op_mutex may call (a provider's watcher), so
 * sb->state is read through sfs_sb_get_state() even by the op holder. */
void sfs_sb_set_failed(struct sfs_sandbox *sb, const char *msg);
/* Lists a snapshot the provider found but sb did not list (a daemon died
 * between the provider's snapshot and its record): appended with the next
 * serial, label may be NULL.  0, or -EEXIST, -ENOMEM, -ENOSPC (nothing
 * changed).  Only the op holder calls it. */
int sfs_sb_snapshot_adopt(struct sfs_sandbox *sb, const char *id, const char *label,
			  int64_t created);
/* Deletes every snapshot sb lists through its provider's snapshot_delete,
 * a failure a warning only: what destroy does last where snapshots outlive
 * the sandbox.  Only the op holder calls it. */
void sfs_sb_delete_snapshots(struct sfs_sandbox *sb);
/* Whether a sandbox of provider p with local key `key` is in the tree (its
 * owner, ctl/tree.c, installs the lookup at startup). */
bool sfs_sandbox_known(const struct sfs_provider *p, const char *key);
void sfs_set_sandbox_lookup(bool (*fn)(const struct sfs_provider *p, const char *key));
/* Installed by the same owner: called by sfs_sb_publish once it gave sb an
 * id, holding none of its locks, so that a sandbox still being made is
 * saved with its id at once (a daemon killed later in the provider's create
 * leaves a record rmdir can destroy). */
void sfs_set_id_published_hook(void (*fn)(struct sfs_sandbox *sb));

/* The built-in table; the first entry is the default provider. */
extern const struct sfs_provider *const sfs_providers[];
extern const size_t sfs_nproviders;
const struct sfs_provider *sfs_provider_find(const char *name);

/* When argv asks for a provider's helper mode (e.g. the local run wrapper),
 * runs it and returns its exit status; otherwise -1. */
int sfs_provider_helper_main(int argc, char **argv);

/* The journal strategy SPEC §6 picks from caps: "follow" or "poll". */
const char *sfs_provider_journal_mode(const struct sfs_provider *p);

/* Fails with -EOPNOTSUPP and a message naming the flag when cap is false. */
int sfs_provider_require(const struct sfs_provider *p, enum sfs_cap cap, struct sfs_err *err);

#endif
