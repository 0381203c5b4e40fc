/* The e2b provider's options (-o e2b.KEY=VALUE, or the config file). */
#include "../options.h"
#include "e2b.h"

const struct sfs_opt sfs_e2b_options[] = {
    {.key = "e2b.api_key",
     .type = SFS_OPT_STRING,
     .arg = "KEY",
     .help = "API key (default $E2B_API_KEY); better in the config file than on a command line "
	     "others can read"},
    {.key = "e2b.api_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "control-plane URL (default $E2B_API_URL, else https://api.$E2B_DOMAIN, else "
	     "https://api.e2b.app)"},
    {.key = "e2b.sandbox_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "one envd URL for every sandbox, routed by the E2b-Sandbox-Id header (default "
	     "$E2B_SANDBOX_URL, else https://49983-ID.DOMAIN per sandbox)"},
    {.key = "e2b.timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "60",
     .min = 0.001,
     .max = 86400,
     .help = "seconds one API request may take"},
    {.key = "e2b.sandbox_timeout",
     .type = SFS_OPT_INT,
     .def = "3600",
     .min = 1,
     .max = 86400,
     .help = "seconds a sandbox lives (E2B's timeout) unless `new ... timeout=` says otherwise; "
	     "a connect starts it again"},
    {.key = "e2b.poll_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "10",
     .min = 0.001,
     .max = 3600,
     .help = "seconds one status or journal read inside the sandbox may take"},
    {.key = "e2b.kill_grace",
     .type = SFS_OPT_DOUBLE,
     .def = "2",
     .min = 0,
     .max = 600,
     .help = "seconds between TERM and KILL when a run is killed"},
    {0},
};
