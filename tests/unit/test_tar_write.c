/* sfs_tar_write_dir: a host tree as one archive, read back by the kit's tar reader. */
#include "check.h"

#include "providers/tar.h"
#include "providers/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

struct seen {
	char list[4096];
	size_t len;
	char data[256];
};

static int on_entry(void *ctx, const struct sfs_tar_entry *e)
{
	struct seen *s = ctx;
	s->len += (size_t)snprintf(s->list + s->len, sizeof(s->list) - s->len, "%c %s %o %s|",
				   e->type, e->name, e->mode, e->linkname);
	return 0;
}

static int on_data(void *ctx, const struct sfs_tar_entry *e, const void *p, size_t n)
{
	struct seen *s = ctx;
	if (strcmp(e->name, "sub/f") == 0 && n < sizeof(s->data))
		memcpy(s->data, p, n);
	return 0;
}

static void test_round_trip(void)
{
	char dir[] = "/tmp/test_tar_write.XXXXXX";
	CHECK(mkdtemp(dir) != NULL);
	char p[4300], longname[200];
	snprintf(p, sizeof(p), "%s/sub", dir);
	CHECK_INT(mkdir(p, 0750), 0);
	snprintf(p, sizeof(p), "%s/sub/f", dir);
	FILE *f = fopen(p, "w");
	CHECK(f != NULL);
	fputs("hello", f);
	fclose(f);
	CHECK_INT(chmod(p, 0754), 0);
	memset(longname, 'n', 150);
	longname[150] = '\0';
	snprintf(p, sizeof(p), "%s/%s", dir, longname);
	CHECK_INT(close(open(p, O_CREAT | O_WRONLY, 0600)), 0);
	snprintf(p, sizeof(p), "%s/link", dir);
	CHECK_INT(symlink("sub/f", p), 0);
	snprintf(p, sizeof(p), "%s/fifo", dir);
	CHECK_INT(mkfifo(p, 0600), 0); /* skipped */

	char tarp[] = "/tmp/test_tar_write.tar.XXXXXX";
	int fd = mkstemp(tarp);
	CHECK(fd >= 0);
	struct sfs_err err = {0};
	CHECK_INT(sfs_tar_write_dir(dir, fd, &err), 0);
	off_t size = lseek(fd, 0, SEEK_END);
	CHECK(size > 0 && size % 512 == 0);
	char *buf = malloc((size_t)size);
	CHECK(buf && pread(fd, buf, (size_t)size, 0) == size);
	close(fd);
	unlink(tarp);

	struct seen s = {0};
	struct sfs_tar_ops ops = {.entry = on_entry, .data = on_data};
	CHECK_INT(sfs_tar_walk(buf, (size_t)size, &ops, &s, &err), 0);
	free(buf);
	CHECK(strstr(s.list, "5 sub 750 |") != NULL);
	CHECK(strstr(s.list, "0 sub/f 754 |") != NULL);
	CHECK(strstr(s.list, "2 link 777 sub/f|") != NULL);
	char want[300];
	snprintf(want, sizeof(want), "0 %s 600 |", longname);
	CHECK(strstr(s.list, want) != NULL);
	CHECK(strstr(s.list, "fifo") == NULL);
	CHECK_STREQ(s.data, "hello");
	sfs_rm_rf(dir);
}

CHECK_MAIN(CHECK_CASE(test_round_trip))
