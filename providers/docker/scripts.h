/*
 * The POSIX sh scripts sandboxfs runs inside a container (busybox is
 * enough: sh, setsid, kill, tail, head, cat, mkdir, mv, rm, sleep).  Each is
 * run as `sh -c SCRIPT NAME ARGS...`, so arguments never need quoting.
 *
 * A run's directory (DK_RUNS_DIR/N) holds, like the local wrapper's:
 *   journal   the command's stdout and stderr, merged, appended
 *   cmd       the command line
 *   pid       the command's pid, which is also its process group (setsid)
 *   wpid      the wrapper's pid
 *   status    "exit N" or "signal N", written atomically when the command ends
 *   follow.T  the pid of a journal follower (tail -f), while it lives
 */
#ifndef SFS_DOCKER_SCRIPTS_H
#define SFS_DOCKER_SCRIPTS_H

#define DK_DIR "/.sandboxfs"
#define DK_RUNS_DIR DK_DIR "/runs"

/* $1 run dir, $2 command: a clean run directory with an empty journal. */
#define DK_SCRIPT_PREP                                                                             \
	"rm -rf \"$1\" && mkdir -p \"$1\" && : >\"$1/journal\" && printf '%s\\n' \"$2\" "          \
	">\"$1/cmd\""

/* $1 run dir, $2 workspace, $3 command.  Runs detached (exec Detach:true).
 * The command runs in the foreground (an `&` job of a non-interactive shell
 * would ignore INT and QUIT) and setsid makes it a session and process group
 * of its own.  A status above 128 is reported as the signal that killed the
 * command, as shells do; the run's followers are stopped once it has ended. */
#define DK_SCRIPT_WRAPPER                                                                          \
	"d=$1\n"                                                                                   \
	"echo $$ >\"$d/wpid\"\n"                                                                   \
	": >>\"$d/journal\"\n"                                                                     \
	"fin() { printf '%s\\n' \"$1\" >\"$d/.status.tmp\" && mv -f \"$d/.status.tmp\" "           \
	"\"$d/status\"; }\n"                                                                       \
	"if ! cd \"$2\" 2>/dev/null; then\n"                                                       \
	"  echo \"sandboxfs: cannot enter workspace $2\" >>\"$d/journal\"\n"                       \
	"  fin 'exit 126'\n"                                                                       \
	"  exit 0\n"                                                                               \
	"fi\n"                                                                                     \
	"setsid sh -c 'echo $$ >\"$0/.pid.tmp\" && mv -f \"$0/.pid.tmp\" \"$0/pid\"; exec sh -c "  \
	"\"$1\"' \"$d\" \"$3\" </dev/null >>\"$d/journal\" 2>&1\n"                                 \
	"st=$?\n"                                                                                  \
	"if [ $st -gt 128 ] && [ $st -lt 193 ]; then fin \"signal $((st - 128))\"; "               \
	"else fin \"exit $st\"; fi\n"                                                              \
	"for f in \"$d\"/follow.*; do [ -f \"$f\" ] && kill \"$(cat \"$f\")\" 2>/dev/null; "       \
	"rm -f \"$f\"; done\n"                                                                     \
	"exit 0\n"

/* $1 run dir, $2 signal number, $3 escalate (0|1), $4 grace in ms.  Signals
 * the command's process group; with escalate, KILLs what is left after the
 * grace period and checks that the group is gone.  Prints one word:
 * ok | gone | no-pid | survived. */
#define DK_SCRIPT_KILL                                                                             \
	"d=$1; i=0\n"                                                                              \
	"while [ ! -s \"$d/pid\" ]; do\n"                                                          \
	"  [ $i -ge 40 ] && { echo no-pid; exit 0; }\n"                                            \
	"  sleep 0.05; i=$((i + 1))\n"                                                             \
	"done\n"                                                                                   \
	"p=$(cat \"$d/pid\")\n"                                                                    \
	"kill -0 -\"$p\" 2>/dev/null || { echo gone; exit 0; }\n"                                  \
	"kill -\"$2\" -\"$p\" 2>/dev/null || kill -\"$2\" \"$p\" 2>/dev/null\n"                    \
	"[ \"$3\" = 1 ] || { echo ok; exit 0; }\n"                                                 \
	"n=$(($4 / 50)); i=0\n"                                                                    \
	"while kill -0 -\"$p\" 2>/dev/null && [ $i -lt $n ]; do sleep 0.05; i=$((i + 1)); done\n"  \
	"kill -0 -\"$p\" 2>/dev/null && kill -9 -\"$p\" 2>/dev/null\n"                             \
	"i=0\n"                                                                                    \
	"while kill -0 -\"$p\" 2>/dev/null; do\n"                                                  \
	"  [ $i -ge 100 ] && { echo survived; exit 0; }\n"                                         \
	"  sleep 0.05; i=$((i + 1))\n"                                                             \
	"done\n"                                                                                   \
	"echo ok\n"

/* $1 run dir, $2 first byte (1-based), $3 follower token.  Records its pid
 * (tail keeps it through exec) in a file and on stderr, then follows. */
#define DK_SCRIPT_FOLLOW                                                                           \
	"echo $$ >\"$1/follow.$3\"\n"                                                              \
	"[ -e \"$1/status\" ] && { rm -f \"$1/follow.$3\"; exit 0; }\n"                            \
	"echo $$ >&2\n"                                                                            \
	"exec tail -c +\"$2\" -f \"$1/journal\"\n"

/* $1 run dir, $2 pid ("" to take it from the file), $3 follower token.
 * Only while the token file is there: the wrapper removes it when it stops
 * the follower itself, so a reused pid is never signalled. */
#define DK_SCRIPT_UNFOLLOW                                                                         \
	"f=\"$1/follow.$3\"; [ -f \"$f\" ] || exit 0; p=$2; [ -n \"$p\" ] || p=$(cat \"$f\"); "    \
	"[ -n \"$p\" ] && kill \"$p\" 2>/dev/null; rm -f \"$f\"; exit 0"

/* $1 file, $2 first byte (1-based), $3 max bytes: a bounded read. */
#define DK_SCRIPT_READ "[ -e \"$1\" ] || exit 3; tail -c +\"$2\" \"$1\" | head -c \"$3\""

/* $1 1 to kill the recorded followers (same container life), 0 to only
 * forget them (their pids belong to an earlier life). */
#define DK_SCRIPT_FORGET_FOLLOWERS                                                                 \
	"for f in " DK_RUNS_DIR "/*/follow.*; do [ -f \"$f\" ] || continue; "                      \
	"[ \"$1\" = 1 ] && kill \"$(cat \"$f\")\" 2>/dev/null; rm -f \"$f\"; done; exit 0"

/* $1 the workspace root. */
#define DK_SCRIPT_MKDIR "mkdir -p \"$1\""

/* The container's main process: stays up, ends at once on TERM (stop), and
 * reaps orphans (its `wait`), so a killed process group really goes away. */
#define DK_KEEPALIVE "trap 'exit 0' TERM; while :; do sleep 3600 & wait; done"

#endif
