/* untrusted_creds: a thread acting as a sandbox's uid cannot write what
 * that uid cannot, still reads the daemon's files, touches no other
 * thread, and is itself again afterwards. */
#include "check.h"

#include "providers/untrusted/creds.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#define SANDBOX_UID 2147012345u
#define SANDBOX_GID 2147012345u

static char dir[] = "/tmp/test_untrusted_creds.XXXXXX";

static int try_create(const char *name)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static pthread_barrier_t started, acted;

/* Started before untrusted_creds_begin (a thread made after it would be
 * made with the sandbox's ids): the daemon's other threads keep theirs. */
static void *other_thread(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&started);
	long ok = try_create("other") == 0 && setfsuid((uid_t)-1) == 0;
	pthread_barrier_wait(&acted);
	return (void *)ok;
}

static void test_as_sandbox(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "test_untrusted_creds: not root, nothing to test\n");
		return;
	}
	CHECK(mkdtemp(dir) != NULL);
	chmod(dir, 0755); /* root's: the sandbox's uid may not write in it */
	char secret[300];
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	int fd = open(secret, O_WRONLY | O_CREAT, 0600);
	CHECK(fd >= 0);
	CHECK(write(fd, "x", 1) == 1);
	close(fd);

	pthread_t t;
	pthread_barrier_init(&started, NULL, 2);
	pthread_barrier_init(&acted, NULL, 2);
	CHECK_INT(pthread_create(&t, NULL, other_thread, NULL), 0);
	struct untrusted_creds c;
	CHECK_INT(untrusted_creds_begin(&c, SANDBOX_UID, SANDBOX_GID), 0);
	pthread_barrier_wait(&started);
	pthread_barrier_wait(&acted);
	CHECK((uid_t)setfsuid((uid_t)-1) == SANDBOX_UID);
	CHECK_INT(try_create("as-sandbox"), -EACCES);
	/* no CAP_FOWNER: root's file's mode is not the sandbox's to change */
	CHECK(chmod(secret, 0666) < 0 && errno == EPERM);
	/* CAP_DAC_READ_SEARCH stays: the daemon's own store is read */
	fd = open(secret, O_RDONLY);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	void *ok = NULL;
	pthread_join(t, &ok);
	CHECK(ok == (void *)1L);
	untrusted_creds_end(&c);

	CHECK((uid_t)setfsuid((uid_t)-1) == 0);
	CHECK_INT(try_create("as-root"), 0);
	CHECK_INT(chmod(secret, 0600), 0);

	/* uid 0 (runs with the daemon's own ids): nothing changes */
	CHECK_INT(untrusted_creds_begin(&c, 0, 0), 0);
	CHECK(!c.on);
	CHECK_INT(try_create("still-root"), 0);
	untrusted_creds_end(&c);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK_INT(system(cmd), 0);
}

CHECK_MAIN(CHECK_CASE(test_as_sandbox))
