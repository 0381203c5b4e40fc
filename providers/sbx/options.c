/* The sbx provider's options (-o sbx.KEY=VALUE, or the config file). */
#include "../options.h"
#include "sbx.h"

const struct sfs_opt sfs_sbx_options[] = {
    {.key = "sbx.cli",
     .type = SFS_OPT_STRING,
     .arg = "PATH",
     .help = "the sbx CLI to run (default: sbx on PATH)"},
    {.key = "sbx.timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "120",
     .min = 0.001,
     .max = 86400,
     .help = "seconds one sbx call may take before it is killed (create, exec, rm ...)"},
    {.key = "sbx.attempts",
     .type = SFS_OPT_INT,
     .def = "3",
     .min = 1,
     .max = 100,
     .help = "tries of one sbx exec whose CLI failed before the command ran (not a run's "
	     "start, which never runs twice)"},
    {.key = "sbx.poll_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "10",
     .min = 0.001,
     .max = 3600,
     .help = "seconds one journal read or run status through sbx exec may take"},
    {0},
};
