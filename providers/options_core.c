/*
 * The core's options: the daemon, the workspace layers, the journal engine
 * and the HTTP kit.  Each provider's own keys are in its folder (options.c).
 * A row here is what -o, the config file and --help know; the code that
 * reads a key gets its default from here (sfs_opt_apply_defaults).
 */
#include "options.h"

const struct sfs_opt sfs_core_options[] = {
    {.key = "provider",
     .type = SFS_OPT_PROVIDER,
     .help = "default provider for new sandboxes (also --provider; default $SANDBOXFS_PROVIDER, "
	     "else local)"},
    {.key = "state",
     .type = SFS_OPT_STRING,
     .arg = "DIR",
     .help = "registry, journals, workspaces (also --state; default /var/lib/sandboxfs for root, "
	     "else $XDG_STATE_HOME/sandboxfs)"},
    {.key = "config",
     .type = SFS_OPT_STRING,
     .arg = "FILE",
     .help = "config file of `key = value` lines (also --config; default /etc/sandboxfs.conf for "
	     "root, else $XDG_CONFIG_HOME/sandboxfs/config)"},
    {.key = "log_level",
     .type = SFS_OPT_INT,
     .min = 0,
     .max = 3,
     .help = "0 errors .. 3 debug (also --log-level; default 1, 3 with -d)"},
    {.key = "log",
     .type = SFS_OPT_STRING,
     .arg = "FILE",
     .help = "where a daemonized sandboxfs logs (default STATE/sandboxfs.log)"},
    {.key = "attr_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "86400",
     .min = 0,
     .max = 1e9,
     .help =
	 "workspace attribute cache, seconds (changes made behind the mount are pushed within ms)"},
    {.key = "entry_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "86400",
     .min = 0,
     .max = 1e9,
     .help = "workspace name cache, seconds"},
    {.key = "symlinks",
     .type = SFS_OPT_ENUM,
     .def = "rewrite",
     .choices = "rewrite|raw",
     .help = "raw: show sandbox symlink targets unrewritten (SPEC §5)"},
    {.key = "writeback",
     .type = SFS_OPT_BOOL,
     .def = "false",
     .help = "kernel writeback cache for the workspace: faster small writes, but the kernel "
	     "owns the size and times of a file open through the mount, so a run's change to "
	     "such a file shows only after the last close, and pages written through the "
	     "mount reach the host later and can overwrite what a run wrote meanwhile; a "
	     "hard-linked file a run changes keeps its old size through the mount while more "
	     "than one of its names is cached"},
    {.key = "passthrough",
     .type = SFS_OPT_BOOL,
     .def = "true",
     .help = "let the kernel read, write and map a workspace file open through the mount "
	     "directly on the host file (FUSE passthrough: Linux 6.9 or later, a daemon with "
	     "CAP_SYS_ADMIN, not with writeback); false, or where it is not had: every read "
	     "and write goes through the daemon"},
    {.key = "killpriv_v2",
     .type = SFS_OPT_BOOL,
     .def = "true",
     .help = "take over clearing set-user-ID and set-group-ID on write and truncate from the "
	     "kernel (FUSE_HANDLE_KILLPRIV_V2), which then stops asking for "
	     "security.capability before every write; false: the kernel asks each time"},
    {.key = "runs_mode",
     .type = SFS_OPT_MODE,
     .def = "0400",
     .max = 0444,
     .help = "read bits of each run's cmd, journal, status and wait (owner only by default: "
	     "runs print secrets; 0444 lets every user of an allow_other mount read them)"},
    {.key = "max_threads",
     .type = SFS_OPT_INT,
     .def = "16",
     .min = 1,
     .max = 1024,
     .help = "FUSE worker threads"},
    {.key = "remote.attr_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "1",
     .min = 0,
     .max = 86400,
     .help = "how long a remote workspace's attributes and listings are trusted, seconds"},
    {.key = "remote.attr_timeout_busy",
     .type = SFS_OPT_DOUBLE,
     .def = "10",
     .min = 0,
     .max = 86400,
     .help = "attributes and listings fetched while a remote workspace is in use (no pause of "
	     "remote.attr_timeout) are trusted while that use lasts, up to this many seconds "
	     "(0: off)"},
    {.key = "remote.retry_interval",
     .type = SFS_OPT_DOUBLE,
     .def = "1",
     .min = 0.01,
     .max = 3600,
     .help = "seconds between retries of a remote write-back that failed"},
    {.key = "audit",
     .type = SFS_OPT_BOOL,
     .def = "true",
     .help = "keep SANDBOX/audit: a line per ctl command, run start and end, and change made "
	     "through workspace/ (STATE/sandboxes/KEY/audit)"},
    {.key = "snapshot.max_file_size",
     .type = SFS_OPT_DOUBLE,
     .arg = "BYTES",
     .def = "268435456",
     .min = 0,
     .max = 1e15,
     .help = "bytes: a workspace file larger than this makes snapshot (and fork, which takes "
	     "one) and a snapshot's diff fail with EFBIG naming it, before any of it is read (a "
	     "sparse file can claim any size)"},
    {.key = "audit.max_size",
     .type = SFS_OPT_DOUBLE,
     .arg = "BYTES",
     .def = "4194304",
     .min = 4096,
     .max = 1e12,
     .help = "bytes at which a sandbox's audit file becomes audit.1 (the older audit.1 is "
	     "dropped) and a new one starts"},
    {.key = "quota",
     .type = SFS_OPT_STRING,
     .arg = "SIZE",
     .help = "quota= of new sandboxes that do not give one: each one's state directory "
	     "(its local workspace, journals, audit) is a file system of SIZE bytes of its own, "
	     "so a run that fills it gets ENOSPC and other sandboxes keep their room (unset: no "
	     "quota; needs root and loop devices)"},
    {.key = "journal.max_size",
     .type = SFS_OPT_DOUBLE,
     .arg = "BYTES",
     .def = "1073741824",
     .min = 0,
     .max = 1e15,
     .help = "bytes of a local run's journal: past them one marker line is written and the "
	     "run's further output is dropped (the run goes on), so a chatty run cannot fill the "
	     "state disk"},
    {.key = "journal.poll_interval",
     .type = SFS_OPT_DOUBLE,
     .def = "0.25",
     .min = 0.01,
     .max = 60,
     .help = "seconds between journal reads of a provider that is polled"},
    {.key = "http.timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "60",
     .min = 0.001,
     .max = 86400,
     .help = "seconds one HTTP request to a provider's API may take"},
    {.key = "http.attempts",
     .type = SFS_OPT_INT,
     .def = "4",
     .min = 1,
     .max = 100,
     .help = "tries of an idempotent HTTP request before it fails"},
    {.key = "git.token",
     .type = SFS_OPT_STRING,
     .arg = "TOKEN",
     .help = "password for https git sources (new … source=); $SANDBOXFS_GIT_TOKEN wins; never "
	     "written anywhere, redacted everywhere"},
    {.key = "git.ssh_key",
     .type = SFS_OPT_STRING,
     .arg = "FILE",
     .help = "private key for ssh git sources (FILE.pub beside it is used when present); "
	     "without it the ssh agent ($SSH_AUTH_SOCK) is asked"},
    {.key = "git.ssh_passphrase",
     .type = SFS_OPT_STRING,
     .arg = "PASSPHRASE",
     .help = "passphrase of git.ssh_key; $SANDBOXFS_GIT_SSH_PASSPHRASE wins; redacted everywhere"},
    {.key = "git.known_hosts",
     .type = SFS_OPT_STRING,
     .arg = "FILE",
     .help = "OpenSSH known_hosts file that ssh git sources' host keys must be listed in "
	     "(default: ~/.ssh/known_hosts of the daemon's user); an unknown or changed key is "
	     "refused"},
    {.key = "git.ca_file",
     .type = SFS_OPT_STRING,
     .arg = "FILE",
     .help = "PEM certificates that https git sources must chain to, instead of the system's "
	     "(default: $SSL_CERT_FILE, else the system's list)"},
    {.key = "cow.mode",
     .type = SFS_OPT_ENUM,
     .def = "auto",
     .choices = "auto|copy",
     .help = "base workspaces (new … base=DIR): auto mounts overlayfs and copies the base when "
	     "that fails; copy always copies it (reflinked where the filesystem can)"},
    {.key = "proxy.resolve",
     .type = SFS_OPT_STRING,
     .arg = "NAME=ADDR ...",
     .help = "names the network=allow: proxy resolves to fixed addresses instead of asking DNS "
	     "(space- or ;-separated; for tests and split-horizon names); such addresses may be "
	     "private or loopback, which DNS answers may not"},
    {.key = "proxy.max_connections",
     .type = SFS_OPT_INT,
     .def = "128",
     .min = 1,
     .max = 65536,
     .help = "connections one sandbox may hold open through the network=allow: proxy at once; "
	     "more are answered 503 (the proxy as a whole holds at most a quarter of the "
	     "daemon's file descriptor limit)"},
    {.key = "proxy.head_timeout",
     .type = SFS_OPT_DOUBLE,
     .def = "10",
     .min = 0.1,
     .max = 3600,
     .help = "seconds a client of the network=allow: proxy has to send its whole request head"},
    {0},
};
