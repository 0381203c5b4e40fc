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
    {.key = "aws.cluster",
     .type = SFS_OPT_STRING,
     .arg = "CLUSTER",
     .help = "ECS cluster of the runs' tasks when `new` gives no cluster="},
    {.key = "aws.task_definition",
     .type = SFS_OPT_STRING,
     .arg = "FAMILY[:REV]",
     .help = "task definition of the runs (its first container, with an awslogs log "
	     "configuration) when `new` gives no task_definition="},
    {.key = "aws.runner",
     .type = SFS_OPT_ENUM,
     .def = "ecs",
     .choices = "ecs|codebuild",
     .help = "what runs a run's script when `new` gives no runner=: an ECS Fargate task, or "
	     "a CodeBuild build of aws.codebuild_project (docs/aws.md \"CodeBuild\")"},
    {.key = "aws.codebuild_project",
     .type = SFS_OPT_STRING,
     .arg = "PROJECT",
     .help = "CodeBuild project of the runs when runner=codebuild and `new` gives no "
	     "project="},
    {.key = "aws.subnets",
     .type = SFS_OPT_STRING,
     .arg = "SUBNET[,SUBNET]",
     .help = "subnets of the runs' tasks (awsvpc) when `new` gives no subnets= (in -o, "
	     "separate them with \\,)"},
    {.key = "aws.security_groups",
     .type = SFS_OPT_STRING,
     .arg = "SG[,SG]",
     .help = "security groups of the runs' tasks when `new` gives no security_groups="},
    {.key = "aws.assign_public_ip",
     .type = SFS_OPT_BOOL,
     .def = "false",
     .help = "give the runs' tasks a public IP (needed to reach S3 without a NAT or endpoint)"},
    {.key = "aws.workdir",
     .type = SFS_OPT_STRING,
     .def = "/workspace",
     .arg = "PATH",
     .help = "where the runs' tasks of sandboxes made from now on put the workspace and run "
	     "commands (status shows it as the workspace; the S3 prefix is the id)"},
    {.key = "aws.url_expiry",
     .type = SFS_OPT_INT,
     .def = "86400",
     .min = 60,
     .max = 604800,
     .help = "seconds the presigned URLs a run's task syncs with stay valid (a run "
	     "longer than this cannot write its changes back)"},
    {.key = "aws.sync_parallel",
     .type = SFS_OPT_INT,
     .def = "8",
     .min = 1,
     .max = 50,
     .help = "transfers a run's task makes at once when it syncs the workspace in and back "
	     "(curl --parallel; 1, or a curl older than 7.67, makes them one at a time)"},
    {0},
};
