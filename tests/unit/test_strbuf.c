/* The one growable buffer. */
#include "check.h"

#include "providers/strbuf.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static void test_add_and_take(void)
{
	struct sfs_buf b = {0};
	CHECK_INT(sfs_buf_adds(&b, "ab"), 0);
	CHECK_INT(sfs_buf_addc(&b, 'c'), 0);
	CHECK_INT(sfs_buf_add(&b, "d\0e", 3), 0); /* any bytes */
	CHECK_INT(b.len, 6);
	CHECK(!memcmp(b.buf, "abcd\0e", 7));
	sfs_buf_reset(&b);
	CHECK_INT(b.len, 0);
	CHECK_STREQ(b.buf, "");
	char *s = sfs_buf_take(&b);
	CHECK_STREQ(s, "");
	CHECK(b.buf == NULL && b.len == 0 && b.cap == 0);
	free(s);
	/* nothing added: take still gives a string */
	s = sfs_buf_take(&b);
	CHECK_STREQ(s, "");
	free(s);
}

static void test_printf_any_length(void)
{
	/* the old sfs_buf_printf cut everything at 4095 bytes */
	char big[10000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	struct sfs_buf b = {0};
	CHECK_INT(sfs_buf_printf(&b, "<%s>", big), 0);
	CHECK_INT(b.len, sizeof(big) + 1);
	CHECK(b.buf[0] == '<' && b.buf[b.len - 1] == '>' && b.buf[b.len] == 0);
	CHECK_INT(sfs_buf_printf(&b, "%d", 42), 0);
	CHECK_STREQ(b.buf + sizeof(big) + 1, "42");
	sfs_buf_free(&b);
}

static void test_growth_is_geometric(void)
{
	struct sfs_buf b = {0};
	int grows = 0, failed = 0;
	size_t cap = 0;
	for (int i = 0; i < 100000; i++) {
		failed += sfs_buf_addc(&b, 'a') != 0;
		if (b.cap != cap) {
			grows++;
			cap = b.cap;
		}
	}
	CHECK_INT(failed, 0);
	CHECK(grows < 20);
	CHECK_INT(b.len, 100000);
	sfs_buf_free(&b);
	/* room made before anything is added is still an empty string (a read
	 * of an empty file hands exactly that over) */
	CHECK_INT(sfs_buf_reserve(&b, 4096), 0);
	CHECK(b.buf != NULL && b.buf[0] == '\0');
	sfs_buf_free(&b);
	/* a size that cannot be had is refused, the buffer untouched */
	CHECK_INT(sfs_buf_adds(&b, "keep"), 0);
	CHECK_INT(sfs_buf_reserve(&b, SIZE_MAX - 2), -ENOMEM);
	CHECK_STREQ(b.buf, "keep");
	sfs_buf_free(&b);
}

/* A whole file from offset 0, past one read's chunk, its offset untouched. */
static void test_add_fd(void)
{
	char path[] = "/tmp/sfs-test-strbuf-XXXXXX";
	int fd = mkstemp(path);
	CHECK(fd >= 0);
	unlink(path);
	static char data[200000];
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	CHECK_INT(write(fd, data, sizeof(data)), (long)sizeof(data));
	struct sfs_buf b = {0};
	CHECK_INT(sfs_buf_adds(&b, "head:"), 0);
	CHECK_INT(sfs_buf_add_fd(&b, fd), 0);
	CHECK_INT(b.len, 5 + sizeof(data));
	CHECK(memcmp(b.buf + 5, data, sizeof(data)) == 0);
	CHECK_INT(lseek(fd, 0, SEEK_CUR), (long)sizeof(data));
	close(fd);
	CHECK_INT(sfs_buf_add_fd(&b, fd), -EBADF);
	sfs_buf_free(&b);
}

CHECK_MAIN(CHECK_CASE(test_add_and_take), CHECK_CASE(test_printf_any_length),
	   CHECK_CASE(test_growth_is_geometric), CHECK_CASE(test_add_fd))
