/* The session's own reads and writes of /dev/fuse: FUSE_HANDLE_KILLPRIV_V2
 * and the kill flags of the request being handled, and FUSE passthrough
 * (fs/kernel_io.c). */
#ifndef SFS_KERNEL_IO_H
#define SFS_KERNEL_IO_H

#include "workspace.h" /* fuse_lowlevel.h at the project's FUSE_USE_VERSION */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>

/* Takes over the mounted session's fd; killpriv_v2 and passthrough ask the
 * kernel for them when it offers them.  0 or a negative errno. */
int kio_install(struct fuse_session *se, bool killpriv_v2, bool passthrough);
/* Whether the kernel agreed to FUSE_HANDLE_KILLPRIV_V2. */
bool kio_killpriv_v2(void);
/* Whether the request this thread handles asks the daemon to clear
 * set-user-ID and set-group-ID (a write, truncate or O_TRUNC open by a
 * caller without CAP_FSETID). */
bool kio_kill_suidgid(void);

/* The bits a write or truncate by a caller without CAP_FSETID clears from a
 * file of this mode, as Linux 6.2 on does (setattr_should_drop_sgid):
 * set-user-ID, and set-group-ID when group execute is set or the caller is
 * not in the file's group (without group execute, set-group-ID marks
 * mandatory locking, which a member may keep); 0 for anything but a
 * regular file. */
mode_t kio_suidgid_to_clear(mode_t mode, bool caller_in_group);
/* The same for the caller of req and a file of this mode and group, its
 * groups read only when they matter. */
mode_t kio_suidgid_to_clear_for(fuse_req_t req, mode_t mode, gid_t gid);

/* Whether the caller of req holds CAP_FSETID (effective), read from
 * /proc/PID/status: for fallocate and copy_file_range, which the kernel
 * does not flag.  A caller gone meanwhile counts by its uid (root: yes). */
bool kio_caller_has_fsetid(fuse_req_t req);

/* Whether the kernel agreed to FUSE passthrough. */
bool kio_passthrough(void);
/* Registers fd's file as a backing file: its id (> 0) or a negative errno
 * (-EPERM without CAP_SYS_ADMIN, -ELOOP on a stacked filesystem).  The
 * kernel keeps the calling thread's credentials and does every passthrough
 * I/O of the file with them: the caller sets them first. */
int kio_backing_open(int fd);
void kio_backing_close(int id);
/* fuse_reply_open and fuse_reply_create, with FOPEN_PASSTHROUGH on a
 * registered backing id when it is > 0; the same results. */
int kio_reply_open(fuse_req_t req, const struct fuse_file_info *fi, int backing_id);
int kio_reply_create(fuse_req_t req, const struct fuse_entry_param *e,
		     const struct fuse_file_info *fi, int backing_id);

/* Drops the kernel's cached attributes of ino, not its pages, at once: for
 * a mode a handler changed that its reply does not carry (a write's).  Safe
 * inside a handler: without pages to drop the kernel takes no lock the
 * request it waits for holds. */
void kio_inval_attr(fuse_ino_t ino);

/* What INIT offers and its reply turns on. */
enum { KIO_INIT_V2 = 1, KIO_INIT_PASSTHROUGH = 2 };

/* Pure parts, for the unit test.  Whether a raw request (len bytes) carries
 * a kill flag; for INIT, *offers gets the KIO_INIT_* the kernel offers
 * (left alone for an INIT too short to say). */
bool kio_request_kills(const void *buf, size_t len, unsigned *offers);
/* Turns on the wanted KIO_INIT_* in a successful INIT reply to unique: the
 * ones it turned on, or -1 for a reply to another request. */
int kio_patch_init_reply(struct iovec *iov, int count, uint64_t unique, unsigned want);
/* Marks a successful open or create reply FOPEN_PASSTHROUGH on
 * backing_id; false (untouched) for an error reply. */
bool kio_patch_open_reply(struct iovec *iov, int count, int backing_id);
/* From the text of a /proc/PID/status: 1 if CapEff holds CAP_FSETID, 0 if
 * not, -1 without a CapEff line. */
int kio_status_has_fsetid(FILE *status);

#endif
