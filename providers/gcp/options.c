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
     .help = "project of the Cloud Run jobs when `new` gives no project= (default "
	     "$GOOGLE_CLOUD_PROJECT, else the key file's project_id)"},
    {.key = "gcp.region",
     .type = SFS_OPT_STRING,
     .arg = "REGION",
     .help = "region of the Cloud Run jobs when `new` gives no region= (e.g. us-central1)"},
    {.key = "gcp.storage_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "Cloud Storage root (default $STORAGE_EMULATOR_HOST, else "
	     "https://storage.googleapis.com)"},
    {.key = "gcp.run_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "Cloud Run Admin API root (default $CLOUDSDK_API_ENDPOINT_OVERRIDES_RUN, else "
	     "https://run.googleapis.com)"},
    {.key = "gcp.logging_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "Cloud Logging API root (default $CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING, else "
	     "https://logging.googleapis.com)"},
    /* not "token_url": the redactor hides the value of any key naming a
     * token, and this URL belongs in messages */
    {.key = "gcp.oauth_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "OAuth endpoint where the service-account JWT is exchanged (default the key "
	     "file's token_uri); the key itself comes from $GOOGLE_APPLICATION_CREDENTIALS, "
	     "never from this file"},
    {.key = "gcp.metadata_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "metadata server root (default http://$GCE_METADATA_HOST), asked for a token "
	     "when there is no key file"},
    {0},
};
