/* The gcp provider's options (-o gcp.KEY=VALUE, or the config file). */
#include "../options.h"
#include "gcp.h"

const struct sfs_opt sfs_gcp_options[] = {
    {.key = "gcp.bucket",
     .type = SFS_OPT_STRING,
     .arg = "BUCKET",
     .help = "Cloud Storage bucket of the workspaces when `new` gives no bucket="},
    {.key = "gcp.prefix",
     .type = SFS_OPT_STRING,
     .arg = "PREFIX",
     .help = "object prefix of the workspaces (a sandbox is gs://BUCKET/PREFIX/NAME/) when "
	     "`new` gives no prefix="},
    {.key = "gcp.project",
     .type = SFS_OPT_STRING,
     .arg = "PROJECT",
     .help = "project id (default $GOOGLE_CLOUD_PROJECT, else the key file's project_id)"},
    {.key = "gcp.region",
     .type = SFS_OPT_STRING,
     .arg = "REGION",
     .help = "region of the Cloud Run jobs"},
    {.key = "gcp.token_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "where the service-account JWT is exchanged for a token (default the key "
	     "file's token_uri); the key itself comes from $GOOGLE_APPLICATION_CREDENTIALS, "
	     "never from this file"},
    {.key = "gcp.metadata_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "metadata server root (default http://$GCE_METADATA_HOST), asked for a token "
	     "when there is no key file"},
    {0},
};
