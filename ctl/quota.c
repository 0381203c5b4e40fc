#include "quota.h"

#include "../providers/spawn_attr.h"
#include "../providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* Below this much room (or with no inode left) status says the quota is
 * full: ext4 refuses a write before its last block is gone. */
#define QUOTA_FULL_BELOW ((uint64_t)1 << 20)

static int image_path(const char *statedir, const char *key, char *buf, size_t len)
{
	return sfs_pathf(buf, len, "%s/quotas/%s.img", statedir, key);
}

int quota_parse(const char *text, uint64_t *bytes, struct sfs_err *err)
{
	int r = sfs_parse_size(text, bytes);
	if (r || *bytes < QUOTA_MIN)
		return sfs_errf(err, -EINVAL,
				"quota=%s: expected a size of at least 16M (bytes, or with K, M, "
				"G or T)",
				text);
	return 0;
}

static bool is_mount_root(const char *dir)
{
	struct statx stx;
	return statx(AT_FDCWD, dir, AT_SYMLINK_NOFOLLOW, 0, &stx) == 0 &&
	       (stx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	       (stx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

/* A free loop device bound to imgfd, autocleared: it goes when the last
 * of the returned fd and the mount made from it goes.  The fd, or a
 * negative errno. */
static int loop_bind(int imgfd, char dev[32], struct sfs_err *err)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return sfs_errf(err, -errno, "quota: /dev/loop-control: %s", strerror(errno));
	int r = -EBUSY;
	/* another process may take the free device first: ask again */
	for (int tries = 0; tries < 16 && r == -EBUSY; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			r = -errno;
			break;
		}
		snprintf(dev, 32, "/dev/loop%d", n);
		int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0) {
			r = -errno;
			break;
		}
		struct loop_config cfg = {.fd = (unsigned)imgfd,
					  .info = {.lo_flags = LO_FLAGS_AUTOCLEAR}};
		if (ioctl(lfd, LOOP_CONFIGURE, &cfg) == 0) {
			close(ctl);
			return lfd;
		}
		r = -errno;
		close(lfd);
	}
	close(ctl);
	return sfs_errf(err, r, "quota: no loop device: %s", strerror(-r));
}

/* Mounts the ext4 image open as imgfd on sbdir, then leaves its root as
 * the state directory it covers: 0700, no lost+found (the daemon's scans
 * of a sandbox's dir know its own names only). */
static int mount_image(int imgfd, const char *sbdir, struct sfs_err *err)
{
	char dev[32];
	int lfd = loop_bind(imgfd, dev, err);
	if (lfd < 0)
		return lfd;
	int r = 0;
	if (mount(dev, sbdir, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, "discard") < 0)
		r = sfs_errf(err, -errno, "quota: mount %s on %s: %s", dev, sbdir, strerror(errno));
	close(lfd); /* the mount holds the device now; a failed one frees it */
	if (r)
		return r;
	int dfd = open(sbdir, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd >= 0) {
		if (fchmod(dfd, 0700) < 0)
			r = -errno;
		unlinkat(dfd, "lost+found", AT_REMOVEDIR);
		close(dfd);
	} else
		r = -errno;
	if (r) {
		umount2(sbdir, MNT_DETACH);
		return sfs_errf(err, r, "quota: %s: %s", sbdir, strerror(-r));
	}
	return 0;
}

/* mkfs.ext4 on path; its first line of complaint in the message. */
static int make_fs(const char *path, struct sfs_err *err)
{
	int efd = memfd_create("mkfs-stderr", MFD_CLOEXEC);
	/* no reserved blocks (-m 0): the quota is the sandbox's own */
	char *argv[] = {"mkfs.ext4",	  "-q", "-F",	     "-m",	   "0", "-E",
			"root_owner=0:0", "-L", "sandboxfs", (char *)path, NULL};
	int r = sfs_spawn_tool(argv, efd);
	if (r) {
		char msg[256] = "";
		ssize_t n = efd >= 0 ? pread(efd, msg, sizeof(msg) - 1, 0) : -1;
		if (n > 0) {
			msg[n] = '\0';
			msg[strcspn(msg, "\n")] = '\0';
		}
		sfs_errf(err, r, "quota: mkfs.ext4: %s",
			 r == -ENOENT ? "not installed (e2fsprogs)"
			 : msg[0]     ? msg
				      : strerror(-r));
	}
	if (efd >= 0)
		close(efd);
	return r;
}

int quota_make(const char *statedir, const char *key, const char *sbdir, uint64_t bytes,
	       struct sfs_err *err)
{
	if (geteuid() != 0)
		return sfs_errf(err, -EPERM,
				"quota=: a sandbox's quota is a file system of its own, which "
				"only a daemon running as root can mount");
	char dir[4200], path[4300];
	if (sfs_pathf(dir, sizeof(dir), "%s/quotas", statedir) < 0 ||
	    image_path(statedir, key, path, sizeof(path)) < 0)
		return sfs_errf(err, -ENAMETOOLONG, "quota: %s/quotas: path too long", statedir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return sfs_errf(err, -errno, "quota: %s: %s", dir, strerror(errno));
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sfs_errf(err, -errno, "quota: %s: %s", path, strerror(errno));
	/* sparse: the state disk gives blocks as they are written */
	int r = ftruncate(fd, (off_t)bytes) < 0
		    ? sfs_errf(err, -errno, "quota: %s: %s", path, strerror(errno))
		    : make_fs(path, err);
	if (!r)
		r = mount_image(fd, sbdir, err);
	close(fd);
	if (r)
		unlink(path);
	return r;
}

int quota_attach(const char *statedir, const char *key, const char *sbdir, struct sfs_err *err)
{
	char path[4300];
	if (image_path(statedir, key, path, sizeof(path)) < 0)
		return 0;
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT
			   ? 0
			   : sfs_errf(err, -errno, "quota: %s: %s", path, strerror(errno));
	int r = 0;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())
		r = sfs_errf(err, -EPERM, "quota: %s: not an image this daemon made", path);
	else if (mkdir(sbdir, 0700) < 0 && errno != EEXIST)
		r = sfs_errf(err, -errno, "quota: %s: %s", sbdir, strerror(errno));
	else if (!is_mount_root(sbdir))
		r = mount_image(fd, sbdir, err);
	close(fd);
	return r;
}

uint64_t quota_bytes(const char *statedir, const char *key)
{
	char path[4300];
	struct stat st;
	if (image_path(statedir, key, path, sizeof(path)) < 0 || lstat(path, &st) < 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	return (uint64_t)st.st_size;
}

void quota_release(const char *statedir, const char *key, const char *sbdir)
{
	char path[4300];
	if (image_path(statedir, key, path, sizeof(path)) < 0 || access(path, F_OK) < 0)
		return;
	/* lazily: the image's blocks go when the last process in it does */
	if (is_mount_root(sbdir) && umount2(sbdir, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
		sfs_log(SFS_LOG_WARN, "quota: umount %s: %s", sbdir, strerror(errno));
	else if (unlink(path) < 0)
		sfs_log(SFS_LOG_WARN, "quota: %s: %s", path, strerror(errno));
}

void quota_status(struct sfs_buf *t, const char *statedir, const char *key, const char *sbdir)
{
	uint64_t bytes = quota_bytes(statedir, key);
	if (!bytes)
		return;
	sfs_buf_printf(t, "quota %llu\n", (unsigned long long)bytes);
	struct statvfs vfs;
	if (!is_mount_root(sbdir) || statvfs(sbdir, &vfs) < 0) {
		sfs_buf_printf(t, "quota_used -\nquota_free -\n");
		return;
	}
	uint64_t used = (uint64_t)(vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize;
	uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	sfs_buf_printf(t, "quota_used %llu\nquota_free %llu\n", (unsigned long long)used,
		       (unsigned long long)avail);
	if (avail < QUOTA_FULL_BELOW || vfs.f_favail == 0)
		sfs_buf_printf(t, "quota_full yes\n");
}
