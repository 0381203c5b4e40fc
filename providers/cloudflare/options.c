/* The cloudflare provider's options (-o cloudflare.KEY=VALUE, or the config file). */
#include "../options.h"
#include "cloudflare.h"

const struct sfs_opt sfs_cloudflare_options[] = {
    {.key = "cloudflare.url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "base URL of the sandbox bridge Worker (default $CLOUDFLARE_SANDBOX_URL; "
	     "docs/cloudflare.md deploys it)"},
    {.key = "cloudflare.token",
     .type = SFS_OPT_STRING,
     .arg = "TOKEN",
     .help = "the bridge's bearer token, its SANDBOX_API_KEY (default "
	     "$CLOUDFLARE_SANDBOX_TOKEN); better in the config file than on a command line "
	     "others can read"},
    {.key = "cloudflare.timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "60",
     .min = 0.001,
     .max = 86400,
     .help = "seconds one bridge request may take"},
    {.key = "cloudflare.poll_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "10",
     .min = 0.001,
     .max = 3600,
     .help = "seconds one journal read or run status inside the sandbox may take"},
    {0},
};
