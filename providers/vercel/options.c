/* The vercel provider's options (-o vercel.KEY=VALUE, or the config file). */
#include "../options.h"
#include "vercel.h"

const struct sfs_opt sfs_vercel_options[] = {
    {.key = "vercel.token",
     .type = SFS_OPT_STRING,
     .arg = "TOKEN",
     .help = "access token (default $VERCEL_TOKEN; else $VERCEL_OIDC_TOKEN is used); better in "
	     "the config file than on a command line others can read"},
    {.key = "vercel.team_id",
     .type = SFS_OPT_STRING,
     .arg = "ID",
     .help = "team the sandboxes belong to (default $VERCEL_TEAM_ID, else the OIDC token's "
	     "owner_id)"},
    {.key = "vercel.project_id",
     .type = SFS_OPT_STRING,
     .arg = "ID",
     .help = "project the sandboxes belong to (default $VERCEL_PROJECT_ID, else the OIDC "
	     "token's project_id)"},
    {.key = "vercel.api_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "API base URL (default $VERCEL_API_URL, else https://api.vercel.com)"},
    {.key = "vercel.timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "60",
     .min = 0.001,
     .max = 86400,
     .help = "seconds one API request may take"},
    {.key = "vercel.poll_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "10",
     .min = 0.001,
     .max = 3600,
     .help = "seconds one journal read or run status inside the sandbox may take"},
    {0},
};
