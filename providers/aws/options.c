/* The aws provider's options (-o aws.KEY=VALUE, or the config file). */
#include "../options.h"
#include "aws.h"

const struct sfs_opt sfs_aws_options[] = {
    {.key = "aws.bucket",
     .type = SFS_OPT_STRING,
     .arg = "BUCKET",
     .help = "S3 bucket of the workspaces when `new` gives no bucket="},
    {.key = "aws.prefix",
     .type = SFS_OPT_STRING,
     .arg = "PREFIX",
     .help = "key prefix of the workspaces (a sandbox is s3://BUCKET/PREFIX/NAME/) when `new` "
	     "gives no prefix="},
    {.key = "aws.region",
     .type = SFS_OPT_STRING,
     .arg = "REGION",
     .help = "region (default $AWS_REGION, $AWS_DEFAULT_REGION, the profile's region, else "
	     "us-east-1); keys come from $AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY or the "
	     "$AWS_PROFILE profile of ~/.aws/credentials, never from this file"},
    {.key = "aws.s3_addressing",
     .type = SFS_OPT_ENUM,
     .def = "auto",
     .choices = "auto|path|virtual",
     .help = "S3 addressing: path (/BUCKET/KEY), virtual (BUCKET.host/KEY); auto is "
	     "path-style for an endpoint from $AWS_ENDPOINT_URL[_S3], virtual otherwise"},
    {0},
};
