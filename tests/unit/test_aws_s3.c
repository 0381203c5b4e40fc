/* S3's XML as the aws provider reads it: ListObjectsV2 pages and errors. */
#include "check.h"

#include "providers/aws/aws.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char page1[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>bkt</Name><Prefix>ws/</Prefix><Delimiter>/</Delimiter><KeyCount>3</KeyCount>"
    "<IsTruncated>true</IsTruncated><NextContinuationToken>tok&amp;1</NextContinuationToken>"
    "<Contents><Key>ws/</Key><LastModified>2026-01-02T03:04:05.000Z</LastModified>"
    "<ETag>&quot;d41d8&quot;</ETag><Size>0</Size></Contents>"
    "<Contents><Key>ws/a &amp; b&lt;c&gt;.txt</Key>"
    "<LastModified>2026-01-02T03:04:05.000Z</LastModified><Size>12345678901</Size></Contents>"
    "<CommonPrefixes><Prefix>ws/dir/</Prefix></CommonPrefixes>"
    "<CommonPrefixes><Prefix>ws/&#x41;/</Prefix></CommonPrefixes>"
    "</ListBucketResult>";

static const char page2[] = "<ListBucketResult><IsTruncated>false</IsTruncated>"
			    "<Contents><Key>ws/z</Key><Size>1</Size></Contents>"
			    "</ListBucketResult>";

static void test_list_pages(void)
{
	struct aws_s3_list l = {0};
	CHECK_INT(aws_s3_parse_list(page1, sizeof(page1) - 1, &l), 0);
	CHECK_INT(l.nobjs, 2);
	CHECK_STREQ(l.objs[0].key, "ws/");
	CHECK_STREQ(l.objs[1].key, "ws/a & b<c>.txt");
	CHECK_INT(l.objs[1].size, 12345678901LL); /* past 32 bits */
	CHECK_INT(l.objs[1].mtime, 1767323045);	  /* 2026-01-02T03:04:05Z */
	CHECK_INT(l.nprefixes, 2);
	CHECK_STREQ(l.prefixes[0], "ws/dir/");
	CHECK_STREQ(l.prefixes[1], "ws/A/");
	CHECK_STREQ(l.next_token, "tok&1");
	/* the next page appends and ends the continuation */
	CHECK_INT(aws_s3_parse_list(page2, sizeof(page2) - 1, &l), 0);
	CHECK_INT(l.nobjs, 3);
	CHECK_STREQ(l.objs[2].key, "ws/z");
	CHECK(l.next_token == NULL);
	aws_s3_list_free(&l);
	CHECK(l.objs == NULL && l.nobjs == 0);
}

static void test_list_refuses_what_is_not_a_listing(void)
{
	struct aws_s3_list l = {0};
	const char err[] = "<Error><Code>NoSuchBucket</Code></Error>";
	CHECK_INT(aws_s3_parse_list(err, sizeof(err) - 1, &l), -EPROTO);
	/* truncated without a token could never be continued */
	const char notok[] = "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>";
	CHECK_INT(aws_s3_parse_list(notok, sizeof(notok) - 1, &l), -EPROTO);
	/* an entry without a key */
	const char nokey[] =
	    "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>";
	CHECK_INT(aws_s3_parse_list(nokey, sizeof(nokey) - 1, &l), -EPROTO);
	/* an unclosed element is no entry */
	const char cut[] = "<ListBucketResult><Contents><Key>a</Key>";
	CHECK_INT(aws_s3_parse_list(cut, sizeof(cut) - 1, &l), 0);
	CHECK_INT(l.nobjs, 0);
	CHECK_INT(aws_s3_parse_list(NULL, 0, &l), -EPROTO);
	aws_s3_list_free(&l);
}

static void test_xml_text(void)
{
	const char e[] = "<Error><Code>SignatureDoesNotMatch</Code><Message>a &quot;b&quot; "
			 "&apos;c&apos; &#38; &bogus; &#999;</Message></Error>";
	char *c = aws_xml_text(e, sizeof(e) - 1, "Code");
	CHECK_STREQ(c, "SignatureDoesNotMatch");
	free(c);
	c = aws_xml_text(e, sizeof(e) - 1, "Message");
	/* unknown entities and ones past ASCII stay as written */
	CHECK_STREQ(c, "a \"b\" 'c' & &bogus; &#999;");
	free(c);
	CHECK(aws_xml_text(e, sizeof(e) - 1, "Key") == NULL);
	CHECK(aws_xml_text(e, 10, "Code") == NULL); /* cut before its end */
	const char u[] = "<InitiateMultipartUploadResult><UploadId>u-1</UploadId>";
	c = aws_xml_text(u, sizeof(u) - 1, "UploadId");
	CHECK_STREQ(c, "u-1");
	free(c);
}

CHECK_MAIN(CHECK_CASE(test_list_pages), CHECK_CASE(test_list_refuses_what_is_not_a_listing),
	   CHECK_CASE(test_xml_text))
