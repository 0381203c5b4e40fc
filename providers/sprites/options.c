/* The sprites provider's options (-o sprites.KEY=VALUE, or the config file). */
#include "../options.h"
#include "sprites.h"

const struct sfs_opt sfs_sprites_options[] = {
    {.key = "sprites.token",
     .type = SFS_OPT_STRING,
     .arg = "TOKEN",
     .help = "API token (default $SPRITES_TOKEN, else $SPRITE_TOKEN); better in the config file "
	     "than on a command line others can read"},
    {.key = "sprites.api_url",
     .type = SFS_OPT_STRING,
     .arg = "URL",
     .help = "API base URL (default $SPRITES_API_URL, else https://api.sprites.dev)"},
    {.key = "sprites.timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "60",
     .min = 0.001,
     .max = 86400,
     .help = "seconds one API request (or WebSocket upgrade) may take"},
    {.key = "sprites.poll_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "10",
     .min = 0.001,
     .max = 3600,
     .help = "seconds one run status or journal read inside the sprite may take"},
    {.key = "sprites.kill_grace",
     .type = SFS_OPT_DOUBLE,
     .def = "5",
     .min = 0,
     .max = 3600,
     .help = "seconds between TERM and KILL when a run is killed"},
    {.key = "sprites.keep",
     .type = SFS_OPT_STRING,
     .def = "720h",
     .arg = "DURATION",
     .help = "how long a run's exec session outlives its socket (max_run_after_disconnect)"},
    {0},
};
