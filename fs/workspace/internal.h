/* fs/workspace/internal.h: what the files of the workspace passthrough share. */
#ifndef SFS_WS_INTERNAL_H
#define SFS_WS_INTERNAL_H

#include "fs/workspace.h"

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * The workspace passthrough (see fs/workspace.h) in files: nodes.c (node
 * table), handles.c (node fds), watcher.c (coherence), creds.c (caller
 * credentials), entries.c, files.c, dirs.c, xattr.c (handlers), module.c
 * (init, shutdown, ws_ops).
 *
 * Node table.  Every workspace object the kernel knows about is a struct
 * ws_node, found by id (the FUSE ino is SFS_INO_WS(id)) and by (sandbox
 * serial, st_dev, st_ino), so hard links share a node.  A node lives while
 * the kernel holds lookups on it (nlookup) or a handler is using it (users);
 * ids are never reused.
 *
 * Node fds.  A node is held by its file handle (name_to_handle_at) and has
 * an O_PATH|O_NOFOLLOW fd only while it is in use or among the recently
 * used: past a budget (ws.fd_budget, below the fd limit by a reserve for the
 * daemon's own work) the least recently used idle fds are closed, and the
 * next handler to pin the node reopens it by handle (ws_get).  A node
 * without a usable handle (overlayfs without nfs_export, a daemon without
 * CAP_DAC_READ_SEARCH), or with files open through the mount (an unlinked
 * open file cannot be reopened by handle), keeps its fd.  Every fd the
 * workspace keeps (node fds, files and directories open through the mount,
 * mount fds), and every one about to be opened, counts in ws.nfds.
 *
 * Locking.  One mutex, ws.lock, guards the maps, next_id, the gone-serial
 * list, the sandbox infos, the mount fds, the LRU list, the inotify watches
 * and every node's nlookup, users, nopen, gone and fd.  It is a leaf lock:
 * while it is held no other lock is taken, nothing is sent to the kernel
 * and nothing blocks (fds are opened before and closed after it), so
 * callers of ws_* may hold locks of their own.  The coherence watcher's
 * expectation table has a leaf lock of its own (wx.lock), never nested with
 * ws.lock.
 * A handler pins the nodes it uses (ws_get/ws_put), which gives them an fd
 * that stays open until the unpin, and unpins them before it replies: after
 * a reply the kernel may forget the node at once.
 */

#define WS_PROC_PATH_MAX 32
#define WS_FALLBACK_TIMEOUT 1.0 /* TTL cap while changes might not be seen (no inotify) */

enum { WS_BY_ID, WS_BY_KEY, WS_BY_WD, WS_NMAPS };

struct file_handle; /* <fcntl.h> with _GNU_SOURCE */

struct ws_node {
	struct ws_node *next[WS_NMAPS]; /* hash chains: by id, by (serial, dev, ino), by wd */
	uint64_t id;
	uint32_t serial;
	int fd;			/* O_PATH|O_NOFOLLOW; -1 when evicted, or once gone and unused */
	struct file_handle *fh; /* NULL: no usable handle, the fd stays open */
	int mnt_id;		/* the mount fh is reopened on (struct ws_mount) */
	struct ws_node *lru_prev, *lru_next; /* while in_lru: fd open, fh, not gone */
	bool in_lru;
	unsigned nopen; /* files and directories of it open through the mount */
	dev_t dev;
	ino_t ino;
	mode_t type;	  /* S_IFMT bits: an inode never changes type */
	uint64_t nlookup; /* the kernel's lookup count */
	unsigned users;	  /* handlers using fd right now */
	bool gone;	  /* sandbox destroyed: every op but forget/release fails */
	bool in_map[WS_NMAPS];
	int wd;		    /* inotify watch of a directory node, or -1 */
	uint64_t parent_id; /* the directory it was last looked up in (symlink depth) */
	/* Coherence (see "Coherence" in watcher.c); atomics, not under ws.lock. */
	uint64_t known_ctime; /* ctime (ns) the kernel's caches are known to match */
	unsigned self_busy;   /* handlers changing it right now */
	/* Open files by I/O mode (iomode.c), under its lock. */
	unsigned pt_files, cached_files;
	int pt_id;     /* the backing id while pt_files > 0 */
	uid_t pt_uid;  /* the opener it was registered as */
	bool pt_stale; /* pages the kernel caches may predate passthrough writes */
};

struct ws_map {
	struct ws_node **buckets;
	size_t nbuckets; /* a power of two */
	size_t count;
};

/* fi->fh of an open file / directory.  The node outlives the handle: the
 * kernel cannot forget an inode that has an open file. */
struct ws_file {
	int fd;
	struct ws_node *node;
	int backing_id; /* > 0: open passthrough on it (iomode.c) */
};

struct ws_dir {
	DIR *dp;
	struct dirent *entry; /* read but not yet returned (did not fit) */
	off_t offset;
	struct ws_node *node;
};

/* Per-sandbox facts from ws_lookup_root, kept until shutdown. */
struct ws_sandbox_info {
	uint32_t serial;
	bool rewrite_symlinks;
	char *root_path; /* the workspace root inside the sandbox; never freed while mounted */
	dev_t root_dev;
	ino_t root_ino;
};

/* An fd on a mount that nodes' handles are reopened on, per (sandbox,
 * mount id); held until the sandbox is retired and no reopen uses it. */
struct ws_mount {
	struct ws_mount *next;
	uint32_t serial;
	int mnt_id;
	int fd;		/* O_RDONLY directory (open_by_handle_at needs one); -1: no handles */
	unsigned users; /* reopens using fd right now */
	bool dead;	/* its sandbox was retired: closed when unused */
};

struct ws_state {
	pthread_mutex_t lock;
	struct ws_map map[WS_NMAPS];
	/* Node fds (see "Node fds" above).  nfds is atomic: a lookup counts
	 * its fd without the lock. */
	size_t nfds, fd_budget;
	bool handles; /* open_by_handle_at may work: false once it gave EPERM */
	struct ws_node *lru_head, *lru_tail; /* most recently used first */
	struct ws_mount *mounts;
	uint64_t next_id;
	uint32_t *gone_serials;
	size_t ngone, gone_cap;

	struct ws_options opt;
	struct fuse_session *se;
	bool symlinks_raw; /* -o symlinks=raw: never rewrite */
	struct ws_sandbox_info *sandboxes;
	size_t nsandboxes, sandboxes_cap;

	/* Coherence: one inotify fd and the thread that reads it. */
	int ifd, evfd;
	bool watching, coherent, stop;
	bool explicit_inval; /* the kernel leaves page invalidation to us */
	bool posix_acl;	     /* the kernel enforces ACLs (FUSE_CAP_POSIX_ACL) */
	bool dont_mask;	     /* the kernel leaves the caller's umask to us (FUSE_CAP_DONT_MASK) */
	pthread_t watcher;
	bool root; /* euid 0: creations take the caller's fsuid/fsgid */
	uid_t fsuid;
	gid_t fsgid;
};
extern struct ws_state ws;

enum ws_event_class { WS_EV_CREATE = 1, WS_EV_DELETE, WS_EV_MOVED_FROM, WS_EV_MOVED_TO };

static inline struct ws_file *ws_file(const struct fuse_file_info *fi)
{
	return (struct ws_file *)(uintptr_t)fi->fh;
}

static inline struct ws_dir *ws_dir(const struct fuse_file_info *fi)
{
	return (struct ws_dir *)(uintptr_t)fi->fh;
}

static inline bool ws_is_gone(const struct ws_node *n)
{
	return __atomic_load_n(&n->gone, __ATOMIC_ACQUIRE);
}

/* nodes.c */
void ws_bug(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
void ws_reply_err(fuse_req_t req, int err);
bool ws_name_ok(const char *name);
void ws_proc_path(char buf[WS_PROC_PATH_MAX], int fd);
uint64_t ws_mix(uint64_t x);
int ws_map_init(struct ws_map *m);
void ws_map_remove(int which, struct ws_node *n);
struct ws_node *ws_find_key_locked(uint32_t serial, dev_t dev, ino_t ino);
struct ws_node *ws_find_id_locked(uint64_t id);
struct ws_node *ws_find_wd_locked(int wd);
struct ws_sandbox_info *ws_sandbox_info_locked(uint32_t serial);
uint64_t ws_ctime_ns(const struct stat *st);
struct ws_node *ws_get(fuse_req_t req, fuse_ino_t ino);
void ws_put(struct ws_node *n);
/* Pins n (not gone, under ws.lock); true when its fd was evicted and
 * ws_node_reopen must give it one before use (outside the lock). */
bool ws_hold_locked(struct ws_node *n);
/* 0, or an errno with n still pinned; with force, never fails for the
 * budget (the daemon's own bounded work: watcher, audit). */
int ws_node_reopen(struct ws_node *n, bool force);
/* Counts one more node fd about to be opened (closing idle ones past the
 * budget): 0, or ENFILE when every node fd is in use.  ws_fd_unreserve
 * gives the count back for an fd that was not opened or kept. */
int ws_fd_reserve(bool force);
void ws_fd_unreserve(void);
/* A file or directory of the pinned node n was opened / one was closed. */
void ws_node_opened(struct ws_node *n);
void ws_node_closed(struct ws_node *n);
void ws_fds_init(void);
void ws_fds_shutdown_locked(void);
/* handles.c: the handle of the object fd (attributes st) if it can be
 * reopened later, else NULL (the node keeps its fd); *mnt_id its mount. */
struct file_handle *ws_handle_take(uint32_t serial, int fd, const struct stat *st, int *mnt_id);
bool ws_handle_same(const struct file_handle *a, const struct file_handle *b);
void ws_lru_add_locked(struct ws_node *n);
void ws_lru_touch_locked(struct ws_node *n);
void ws_lru_remove_locked(struct ws_node *n);
struct ws_mount *ws_mounts_retire_locked(uint32_t serial);
void ws_mounts_free(struct ws_mount *list);
void ws_unref(fuse_ino_t ino, uint64_t count);
int ws_adopt(uint32_t serial, const struct ws_node *parent, int fd, const struct stat *st,
	     fuse_ino_t *ino, struct ws_node **node);
double ws_attr_ttl(void);
void ws_entry_init(struct fuse_entry_param *e);
int ws_do_lookup(struct ws_node *parent, const char *name, struct fuse_entry_param *e,
		 struct ws_node **node);
void ws_reply_entry(fuse_req_t req, const struct fuse_entry_param *e);
int ws_note_sandbox(uint32_t serial, const struct stat *root, bool rewrite, const char *root_path);

/* watcher.c */
uint64_t ws_expect(const struct ws_node *parent, const char *name, enum ws_event_class cls);
void ws_expect_withdraw(uint64_t seq, const struct ws_node *parent, const char *name);
void ws_inval_range_later(const struct ws_node *n, off_t off, off_t len);
/* Clears set-user-ID, and set-group-ID when group execute is set (fd open on
 * the file, or its O_PATH fd when opath): 1 if the mode changed, 0 if there
 * was nothing to clear (or the daemon may not: then the host clears them on
 * its own write), -1 with errno (files.c). */
int ws_kill_suidgid(fuse_req_t req, int fd, bool opath);
void ws_self_begin(struct ws_node *n);
void ws_self_end(struct ws_node *n, int fd, const struct stat *st);

/* creds.c */
void ws_thread_set_umask(fuse_req_t req);
/* What ws_creds_end undoes, called after either begin whatever it returned. */
struct ws_creds {
	bool ids;	  /* fsuid/fsgid switched to the caller's */
	uint32_t dropped; /* capabilities dropped (low word) */
};
/* Makes this thread create files as the request's caller: its fsuid/fsgid,
 * and for a caller other than root no CAP_SYS_RESOURCE, so that a user of
 * the mount cannot fill root's reserved blocks.  The permission checks are
 * the kernel's, done before the request: the fs capabilities stay. */
int ws_creds_begin(fuse_req_t req, struct ws_creds *c);
void ws_creds_end(const struct ws_creds *c);
/* The same for a write, fallocate or copy, and the registration of a
 * passthrough backing file; with drop_fsetid, no CAP_FSETID either. */
int ws_io_creds_begin(fuse_req_t req, bool drop_fsetid, struct ws_creds *c);

/* entries.c */
void ws_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void ws_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void ws_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void ws_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ws_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		struct fuse_file_info *fi);
void ws_readlink(fuse_req_t req, fuse_ino_t ino);
void ws_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void ws_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void ws_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name);
void ws_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void ws_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void ws_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
	       const char *newname, unsigned int flags);
void ws_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);

/* files.c */
void ws_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ws_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	       struct fuse_file_info *fi);
void ws_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void ws_write_buf(fuse_req_t req, fuse_ino_t ino, struct fuse_bufvec *in, off_t off,
		  struct fuse_file_info *fi);
void ws_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ws_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ws_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void ws_flock(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int op);
void ws_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
		  struct fuse_file_info *fi);
void ws_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			struct fuse_file_info *fi_out, size_t len, int flags);
void ws_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);

/* dirs.c */
void ws_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ws_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void ws_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi);
void ws_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void ws_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void ws_statfs(fuse_req_t req, fuse_ino_t ino);
/* SPEC §5: a symlink's st_size is the length of the target readlink shows
 * (rewritten); fd is its O_PATH fd, parent_id its directory's node. */
void ws_link_size(uint32_t serial, uint64_t parent_id, int fd, struct stat *st);

/* xattr.c */
void ws_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
		 int flags);
void ws_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
void ws_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void ws_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);

/* iomode.c */
void ws_io_begin(fuse_req_t req, struct ws_file *h, int fd, struct fuse_file_info *fi);
void ws_io_end(struct ws_file *h);

#endif
