/*
 * Each isolated sandbox's own host uid and gid (one number for both), from
 * the range local.isolation_ids=FIRST:COUNT, like a subordinate id range.
 *
 * Why one per sandbox: the uid owns the sandbox's user namespace and every
 * process in it, so anything running as that uid (a set-uid file a run
 * left where host users reach it, another sandbox) could read the
 * sandbox's /proc/PID/environ, secrets included.  A lease is a file
 * STATE/isolation-ids/ID holding the sandbox's key, made with O_EXCL, kept
 * across restarts and removed at destroy.  An id is also skipped while a
 * host user or group has it, or a process runs as it (a sandbox of another
 * daemon with another state dir: give daemons distinct ranges).
 */
#include "local.h"

#include "../options.h"
#include "../provider.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IDS_DIR "isolation-ids"

int sfs_local_ids_parse(const char *text, unsigned long long *first, unsigned long long *count,
			struct sfs_err *err)
{
	char *end = NULL;
	errno = 0;
	unsigned long long f = strtoull(text, &end, 10), c = 0;
	bool ok = errno == 0 && end != text && *end == ':' && text[0] >= '0' && text[0] <= '9';
	if (ok) {
		const char *p = end + 1;
		c = strtoull(p, &end, 10);
		ok = errno == 0 && end != p && *end == '\0' && p[0] >= '0' && p[0] <= '9';
	}
	/* never 0 (root), never the overflow ids 65534 or (uid_t)-1 */
	if (!ok || f == 0 || c == 0 || f > 4294967294ULL || c > 4294967294ULL - f + 1 ||
	    (f <= 65534 && f + c > 65534))
		return sfs_errf(err, -EINVAL,
				"local.isolation_ids=%s: expected FIRST:COUNT, FIRST >= 1, the "
				"range below 4294967295 and without 65534",
				text);
	*first = f;
	*count = c;
	return 0;
}

/* The uids of processes now running (the owners of /proc/PID), in *out. */
static size_t running_uids(uid_t **out)
{
	*out = NULL;
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	size_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 256;
			uid_t *v = realloc(*out, ncap * sizeof(*v));
			if (!v)
				break; /* fewer checked: the lease still excludes our own */
			*out = v;
			cap = ncap;
		}
		(*out)[n++] = st.st_uid;
	}
	closedir(d);
	return n;
}

static bool id_known_to_host(unsigned long long id)
{
	char buf[4096];
	struct passwd pw, *pwp = NULL;
	struct group gr, *grp = NULL;
	if (getpwuid_r((uid_t)id, &pw, buf, sizeof(buf), &pwp) == 0 && pwp)
		return true;
	return getgrgid_r((gid_t)id, &gr, buf, sizeof(buf), &grp) == 0 && grp;
}

/* STATE/isolation-ids, made when missing; an fd or -errno. */
static int ids_dir(void)
{
	int st = open(sfs_state_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (st < 0)
		return -errno;
	if (mkdirat(st, IDS_DIR, 0700) < 0 && errno != EEXIST) {
		int r = -errno;
		close(st);
		return r;
	}
	int fd = openat(st, IDS_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int r = fd < 0 ? -errno : fd;
	close(st);
	return r;
}

/* Makes the lease of id for key; 0, -EEXIST when taken, or -errno. */
static int lease(int dir, unsigned long long id, const char *key)
{
	char name[24];
	snprintf(name, sizeof(name), "%llu", id);
	int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	size_t len = strlen(key);
	int r = write(fd, key, len) == (ssize_t)len ? 0 : -EIO;
	close(fd);
	if (r)
		unlinkat(dir, name, 0);
	return r;
}

/* Whether the lease of id is key's (a missing one counts as not). */
static bool lease_is(int dir, unsigned long long id, const char *key)
{
	char name[24], buf[64];
	snprintf(name, sizeof(name), "%llu", id);
	int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return false;
	buf[n] = '\0';
	return strcmp(buf, key) == 0;
}

int sfs_local_ids_take(const char *key, uid_t *uid, gid_t *gid, struct sfs_err *err)
{
	if (geteuid() != 0) {
		/* no other ids to give: the daemon's own */
		*uid = getuid();
		*gid = getgid();
		return 0;
	}
	unsigned long long first, count;
	int r = sfs_local_ids_parse(sfs_opt_get("local.isolation_ids"), &first, &count, err);
	if (r)
		return r;
	int dir = ids_dir();
	if (dir < 0)
		return sfs_errf(err, dir, "local: %s/%s: %s", sfs_state_dir, IDS_DIR,
				strerror(-dir));
	uid_t *busy = NULL;
	size_t nbusy = running_uids(&busy);
	r = -EAGAIN;
	for (unsigned long long i = 0; i < count && r == -EAGAIN; i++) {
		unsigned long long id = first + i;
		bool used = false;
		for (size_t j = 0; j < nbusy && !used; j++)
			used = busy[j] == (uid_t)id;
		if (used || id_known_to_host(id))
			continue;
		int lr = lease(dir, id, key);
		if (lr == 0) {
			*uid = (uid_t)id;
			*gid = (gid_t)id;
			r = 0;
		} else if (lr != -EEXIST) {
			r = sfs_errf(err, lr, "local: %s/%s/%llu: %s", sfs_state_dir, IDS_DIR, id,
				     strerror(-lr));
		}
	}
	free(busy);
	close(dir);
	if (r == -EAGAIN)
		return sfs_errf(err, -EAGAIN,
				"local: every id of local.isolation_ids=%s is in use; destroy a "
				"sandbox or widen the range",
				sfs_opt_get("local.isolation_ids"));
	return r;
}

void sfs_local_ids_keep(const char *key, uid_t uid)
{
	unsigned long long first, count;
	if (geteuid() != 0 ||
	    sfs_local_ids_parse(sfs_opt_get("local.isolation_ids"), &first, &count, NULL) < 0 ||
	    uid < first || uid - first >= count)
		return; /* not from the range (an earlier daemon's shared uid) */
	int dir = ids_dir();
	if (dir < 0)
		return;
	int r = lease(dir, uid, key);
	if (r == -EEXIST && !lease_is(dir, uid, key))
		sfs_log(SFS_LOG_WARN,
			"local: isolation id %u is leased to another sandbox as well (%s/%s/%u)",
			(unsigned)uid, sfs_state_dir, IDS_DIR, (unsigned)uid);
	close(dir);
}

void sfs_local_ids_release(const char *key, uid_t uid)
{
	if (geteuid() != 0)
		return;
	int dir = ids_dir();
	if (dir < 0)
		return;
	char name[24];
	snprintf(name, sizeof(name), "%u", (unsigned)uid);
	if (lease_is(dir, uid, key))
		unlinkat(dir, name, 0);
	close(dir);
}
