/* fs/kernel_io.c: which raw requests carry a kill flag, and the INIT reply
 * that asks for FUSE_HANDLE_KILLPRIV_V2. */
#include "fs/kernel_io.h"
#include "check.h"

#include <linux/fuse.h>
#include <errno.h>
#include <string.h>

/* A request of opcode with its argument struct after the header. */
static size_t request(void *buf, uint32_t opcode, const void *arg, size_t alen)
{
	struct fuse_in_header in = {
	    .len = (uint32_t)(sizeof(in) + alen), .opcode = opcode, .unique = 7};
	memcpy(buf, &in, sizeof(in));
	memcpy((char *)buf + sizeof(in), arg, alen);
	return sizeof(in) + alen;
}

static void test_write_flag(void)
{
	char buf[256];
	struct fuse_write_in w = {.size = 4096, .write_flags = FUSE_WRITE_KILL_SUIDGID};
	size_t n = request(buf, FUSE_WRITE, &w, sizeof(w));
	CHECK(kio_request_kills(buf, n, NULL));
	/* cut short: never read past what the kernel sent */
	CHECK(!kio_request_kills(buf, n - 1, NULL));
	CHECK(!kio_request_kills(buf, sizeof(struct fuse_in_header) - 1, NULL));
	w.write_flags = FUSE_WRITE_CACHE | FUSE_WRITE_LOCKOWNER;
	n = request(buf, FUSE_WRITE, &w, sizeof(w));
	CHECK(!kio_request_kills(buf, n, NULL));
}

static void test_setattr_open_create_flags(void)
{
	char buf[256];
	struct fuse_setattr_in sa = {.valid = FATTR_SIZE | FATTR_KILL_SUIDGID};
	CHECK(kio_request_kills(buf, request(buf, FUSE_SETATTR, &sa, sizeof(sa)), NULL));
	sa.valid = FATTR_SIZE;
	CHECK(!kio_request_kills(buf, request(buf, FUSE_SETATTR, &sa, sizeof(sa)), NULL));
	struct fuse_open_in o = {.flags = 01001, .open_flags = FUSE_OPEN_KILL_SUIDGID};
	CHECK(kio_request_kills(buf, request(buf, FUSE_OPEN, &o, sizeof(o)), NULL));
	o.open_flags = 0;
	CHECK(!kio_request_kills(buf, request(buf, FUSE_OPEN, &o, sizeof(o)), NULL));
	struct fuse_create_in c = {.flags = 01101, .open_flags = FUSE_OPEN_KILL_SUIDGID};
	CHECK(kio_request_kills(buf, request(buf, FUSE_CREATE, &c, sizeof(c)), NULL));
	/* the same bit in another request means nothing */
	struct fuse_read_in r = {.flags = FUSE_OPEN_KILL_SUIDGID, .read_flags = ~0u};
	CHECK(!kio_request_kills(buf, request(buf, FUSE_READ, &r, sizeof(r)), NULL));
}

static void test_init_offer(void)
{
	char buf[256];
	unsigned offers = 0;
	struct fuse_init_in i = {.major = 7, .minor = 38, .flags = FUSE_HANDLE_KILLPRIV_V2};
	CHECK(!kio_request_kills(buf, request(buf, FUSE_INIT, &i, sizeof(i)), &offers));
	CHECK_INT(offers, KIO_INIT_V2);
	i.flags = FUSE_ASYNC_READ | FUSE_HANDLE_KILLPRIV;
	kio_request_kills(buf, request(buf, FUSE_INIT, &i, sizeof(i)), &offers);
	CHECK_INT(offers, 0);
	/* passthrough is bit 37: flags2's bit 5, read only with FUSE_INIT_EXT */
	i.flags = FUSE_INIT_EXT | FUSE_HANDLE_KILLPRIV_V2;
	i.flags2 = 1u << 5;
	kio_request_kills(buf, request(buf, FUSE_INIT, &i, sizeof(i)), &offers);
	CHECK_INT(offers, KIO_INIT_V2 | KIO_INIT_PASSTHROUGH);
	i.flags = FUSE_HANDLE_KILLPRIV_V2;
	kio_request_kills(buf, request(buf, FUSE_INIT, &i, sizeof(i)), &offers);
	CHECK_INT(offers, KIO_INIT_V2);
	i.flags = FUSE_INIT_EXT;
	i.flags2 = 1u << 4;
	kio_request_kills(buf, request(buf, FUSE_INIT, &i, sizeof(i)), &offers);
	CHECK_INT(offers, 0);
	/* an old kernel's short INIT: no flags word, no offer */
	offers = KIO_INIT_V2;
	kio_request_kills(buf, request(buf, FUSE_INIT, &i, 8), &offers);
	CHECK_INT(offers, KIO_INIT_V2); /* left as it was: nothing read */
}

static void test_init_reply(void)
{
	struct fuse_out_header out = {.len = sizeof(out) + sizeof(struct fuse_init_out),
				      .unique = 9};
	struct fuse_init_out o = {.major = 7, .minor = 38, .flags = FUSE_ASYNC_READ};
	struct iovec iov[2] = {{&out, sizeof(out)}, {&o, sizeof(o)}};

	/* another request's reply is left alone */
	CHECK_INT(kio_patch_init_reply(iov, 2, 8, KIO_INIT_V2), -1);
	CHECK_INT(o.flags, FUSE_ASYNC_READ);
	/* not wanted: untouched */
	CHECK_INT(kio_patch_init_reply(iov, 2, 9, 0), 0);
	CHECK_INT(o.flags, FUSE_ASYNC_READ);
	/* an error reply has no body to patch */
	out.error = -EPROTO;
	CHECK_INT(kio_patch_init_reply(iov, 1, 9, KIO_INIT_V2), -1);
	CHECK_INT(kio_patch_init_reply(iov, 2, 9, KIO_INIT_V2), 0);
	out.error = 0;
	CHECK_INT(kio_patch_init_reply(iov, 2, 9, KIO_INIT_V2), KIO_INIT_V2);
	CHECK_INT(o.flags, FUSE_ASYNC_READ | FUSE_HANDLE_KILLPRIV_V2);
	CHECK_INT(o.flags2, 0);
	/* passthrough: FUSE_INIT_EXT, flags2's bit 5 and a stack depth of 1 */
	CHECK_INT(kio_patch_init_reply(iov, 2, 9, KIO_INIT_PASSTHROUGH), KIO_INIT_PASSTHROUGH);
	CHECK(o.flags & FUSE_INIT_EXT);
	CHECK_INT(o.flags2, 1u << 5);
	CHECK_INT(o.unused[0], 1);
	/* ...never beside the writeback cache, which the kernel refuses it with */
	struct fuse_init_out w = {.major = 7, .minor = 38, .flags = FUSE_WRITEBACK_CACHE};
	iov[1].iov_base = &w;
	CHECK_INT(kio_patch_init_reply(iov, 2, 9, KIO_INIT_V2 | KIO_INIT_PASSTHROUGH), KIO_INIT_V2);
	CHECK_INT(w.flags2, 0);
	CHECK_INT(w.unused[0], 0);
	/* a reply too short for max_stack_depth gets no passthrough */
	iov[1].iov_len = offsetof(struct fuse_init_out, flags2) + sizeof(w.flags2);
	w.flags = 0;
	CHECK_INT(kio_patch_init_reply(iov, 2, 9, KIO_INIT_PASSTHROUGH), 0);
}

static void test_open_reply(void)
{
	struct fuse_out_header out = {.unique = 4};
	struct fuse_open_out o = {.fh = 77, .open_flags = FOPEN_KEEP_CACHE};
	struct iovec iov[2] = {{&out, sizeof(out)}, {&o, sizeof(o)}};

	/* keep_cache goes: the kernel refuses it beside passthrough */
	CHECK(kio_patch_open_reply(iov, 2, 3));
	CHECK_INT(o.open_flags, 1 << 7);
	o.open_flags = FOPEN_NOFLUSH | FOPEN_DIRECT_IO;
	CHECK(kio_patch_open_reply(iov, 2, 3));
	CHECK_INT(o.open_flags, FOPEN_NOFLUSH | FOPEN_DIRECT_IO | (1 << 7));
	CHECK_INT(o.padding, 3); /* 7.40's backing_id */
	CHECK(o.fh == 77);
	/* create's reply: the open part ends an unaligned body */
	char body[1 + sizeof(struct fuse_entry_out) + sizeof(struct fuse_open_out)] = {0};
	struct fuse_open_out c = {.fh = 5};
	memcpy(body + sizeof(body) - sizeof(c), &c, sizeof(c));
	iov[1].iov_base = body + 1;
	iov[1].iov_len = sizeof(body) - 1;
	CHECK(kio_patch_open_reply(iov, 2, 12));
	memcpy(&c, body + sizeof(body) - sizeof(c), sizeof(c));
	CHECK_INT(c.open_flags, 1 << 7);
	CHECK_INT(c.padding, 12);
	CHECK(c.fh == 5);
	/* an error reply, or one with no body, is left alone */
	out.error = -EACCES;
	CHECK(!kio_patch_open_reply(iov, 2, 12));
	out.error = 0;
	CHECK(!kio_patch_open_reply(iov, 1, 12));
}

static int has_fsetid(const char *text)
{
	FILE *f = fmemopen((void *)text, strlen(text), "r");
	int r = kio_status_has_fsetid(f);
	fclose(f);
	return r;
}

static void test_status_capeff(void)
{
	/* root's full set, CAP_FSETID (bit 4) alone, everything but it, none */
	CHECK_INT(has_fsetid("Name:\tsh\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n"
			     "CapEff:\t000001ffffffffff\n"),
		  1);
	CHECK_INT(has_fsetid("CapPrm:\t0000000000000010\nCapEff:\t0000000000000010\n"), 1);
	CHECK_INT(has_fsetid("CapPrm:\t000001ffffffffef\nCapEff:\t000001ffffffffef\n"), 0);
	CHECK_INT(has_fsetid("Uid:\t65534\nCapEff:\t0000000000000000\n"), 0);
	/* permitted but not effective does not count */
	CHECK_INT(has_fsetid("CapPrm:\t0000000000000010\nCapEff:\t0000000000000000\n"), 0);
	CHECK_INT(has_fsetid("Name:\tgone\n"), -1);
}

static void test_bits_to_clear(void)
{
	CHECK_INT(kio_suidgid_to_clear(S_IFREG | 06777, true), 06000);
	CHECK_INT(kio_suidgid_to_clear(S_IFREG | 04755, true), 04000);
	/* set-group-ID without group execute stays for a member of the
	 * file's group (a locking mark), goes for anyone else (Linux 6.2) */
	CHECK_INT(kio_suidgid_to_clear(S_IFREG | 06767, true), 04000);
	CHECK_INT(kio_suidgid_to_clear(S_IFREG | 02767, true), 0);
	CHECK_INT(kio_suidgid_to_clear(S_IFREG | 02767, false), 02000);
	CHECK_INT(kio_suidgid_to_clear(S_IFREG | 06767, false), 06000);
	CHECK_INT(kio_suidgid_to_clear(S_IFREG | 02777, true), 02000);
	CHECK_INT(kio_suidgid_to_clear(S_IFREG | 0777, false), 0);
	/* a directory's set-group-ID is inheritance, never cleared here */
	CHECK_INT(kio_suidgid_to_clear(S_IFDIR | 02775, false), 0);
}

CHECK_MAIN(CHECK_CASE(test_write_flag), CHECK_CASE(test_bits_to_clear),
	   CHECK_CASE(test_status_capeff), CHECK_CASE(test_setattr_open_create_flags),
	   CHECK_CASE(test_init_offer), CHECK_CASE(test_init_reply), CHECK_CASE(test_open_reply))
