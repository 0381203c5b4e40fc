/* sfs_flush_later (providers/util.c): inside a request's begin/end the fsync
 * and close wait for the end (the reply is out first); outside, at once. */
#include "check.h"

#include "../../providers/util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int open_tmp(void)
{
	char path[] = "/tmp/sfs-flush-XXXXXX";
	int fd = mkstemp(path);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static bool is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

static void test_deferred_until_the_end(void)
{
	sfs_flush_defer_begin();
	int a = open_tmp(), b = open_tmp();
	CHECK(a >= 0 && b >= 0);
	sfs_flush_later(a);
	sfs_flush_later(b);
	CHECK(is_open(a)); /* the reply would go out now */
	CHECK(is_open(b));
	sfs_flush_defer_end();
	CHECK(!is_open(a));
	CHECK(!is_open(b));
}

static void test_at_once_outside_a_request(void)
{
	int a = open_tmp();
	CHECK(a >= 0);
	sfs_flush_later(a);
	CHECK(!is_open(a));
	/* and after an end, deferring is off again */
	sfs_flush_defer_begin();
	sfs_flush_defer_end();
	int b = open_tmp();
	sfs_flush_later(b);
	CHECK(!is_open(b));
}

static void test_a_full_queue_flushes_at_once(void)
{
	int fds[40];
	sfs_flush_defer_begin();
	for (int i = 0; i < 40; i++) {
		fds[i] = open_tmp();
		CHECK(fds[i] >= 0);
		sfs_flush_later(fds[i]);
	}
	int open_now = 0;
	for (int i = 0; i < 40; i++)
		open_now += is_open(fds[i]);
	CHECK(open_now > 0 && open_now < 40); /* the queue's worth waits */
	sfs_flush_defer_end();
	for (int i = 0; i < 40; i++)
		CHECK(!is_open(fds[i]));
}

CHECK_MAIN(CHECK_CASE(test_deferred_until_the_end), CHECK_CASE(test_at_once_outside_a_request),
	   CHECK_CASE(test_a_full_queue_flushes_at_once))
