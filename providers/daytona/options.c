/* The daytona provider's options (-o daytona.KEY=VALUE, or the config file). */
#include "../options.h"
#include "daytona.h"

const struct sfs_opt sfs_daytona_options[] = {
    {.key = "daytona.api_key",
     .type = SFS_OPT_STRING,
     .arg = "KEY",
     .help = "API key (default $DAYTONA_API_KEY); better in the config file than on a command line "
	     "others can read"},
    {.key = "daytona.api_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "API base URL (default $DAYTONA_API_URL, else https://app.daytona.io/api)"},
    {.key = "daytona.timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "60",
     .min = 0.001,
     .max = 86400,
     .help = "seconds one API request may take"},
    {.key = "daytona.create_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "300",
     .min = 1,
     .max = 86400,
     .help = "seconds a new, started or restored sandbox may take to come up"},
    {.key = "daytona.poll_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "10",
     .min = 0.001,
     .max = 3600,
     .help = "seconds one journal read inside the sandbox may take"},
    {0},
};
