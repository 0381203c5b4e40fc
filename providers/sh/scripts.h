/*
 * The scripts of the shell kit, as text (see sh.h for what each does and
 * takes).  Private to providers/sh: providers build commands with sh.h.
 * Every script that takes a run directory starts with SH_RUNDIR, which
 * puts a relative one below ${TMPDIR:-/tmp}.
 */
#ifndef SFS_SH_SCRIPTS_H
#define SFS_SH_SCRIPTS_H

#define SH_RUNDIR "d=$1; case $d in /*) ;; *) d=${TMPDIR:-/tmp}/$d ;; esac\n"

/* $1 run dir, $2 command. */
#define SH_PREP                                                                                    \
	SH_RUNDIR "rm -rf \"$d\" && mkdir -p \"$d\" && : >\"$d/journal\" && "                      \
		  "printf '%s\\n' \"$2\" >\"$d/cmd\"\n"

/*
 * $1 run dir, $2 workspace, $3 command, $4 "-" to keep stdin, $5... K=V.
 * The command runs in the foreground (an `&` job of a non-interactive shell
 * would ignore INT and QUIT).  The environment goes through `env` in the
 * command's own shell, never through shell variables of the wrapper, so a
 * variable named like one of ours (d, c) cannot change what it does.
 */
#define SH_WRAPPER                                                                                 \
	SH_RUNDIR                                                                                  \
	"mkdir -p \"$d\" || exit 1\n"                                                              \
	"echo $$ >\"$d/.wpid.tmp\" && mv -f \"$d/.wpid.tmp\" \"$d/wpid\"\n"                        \
	": >>\"$d/journal\"\n"                                                                     \
	"fin() { printf '%s\\n' \"$1\" >\"$d/.status.tmp\" && mv -f \"$d/.status.tmp\" "           \
	"\"$d/status\"; }\n"                                                                       \
	"if ! cd \"$2\" 2>/dev/null; then\n"                                                       \
	"  echo \"sandboxfs: cannot enter workspace $2\" >>\"$d/journal\"\n"                       \
	"  fin 'exit 126'\n"                                                                       \
	"  exit 0\n"                                                                               \
	"fi\n"                                                                                     \
	"[ \"$4\" = - ] || exec </dev/null\n"                                                      \
	"c=$3; shift 4\n"                                                                          \
	"s=; command -v setsid >/dev/null 2>&1 && s=setsid\n"                                      \
	"$s sh -c 'echo $$ >\"$0/.pid.tmp\" && mv -f \"$0/.pid.tmp\" \"$0/pid\"\n"                 \
	"c=$1; shift\n"                                                                            \
	"[ $# -eq 0 ] && exec sh -c \"$c\"\n"                                                      \
	"exec env \"$@\" /bin/sh -c \"$c\"' \"$d\" \"$c\" \"$@\" >>\"$d/journal\" 2>&1\n"          \
	"st=$?\n"                                                                                  \
	"if [ $st -gt 128 ] && [ $st -le 192 ]; then fin \"signal $((st - 128))\"; "               \
	"else fin \"exit $st\"; fi\n"                                                              \
	"for f in \"$d\"/follow.*; do [ -f \"$f\" ] && kill \"$(cat \"$f\")\" 2>/dev/null; "       \
	"rm -f \"$f\"; done\n"                                                                     \
	"exit 0\n"

/* $1 run dir, $2 signal number, $3 escalate (0|1), $4 grace in ms.
 * Prints ok | gone | no-pid | survived.  A run with a status has ended:
 * the group id in its pid file may be another's by now, so nothing is
 * signalled. */
#define SH_KILL                                                                                    \
	SH_RUNDIR                                                                                  \
	"i=0\n"                                                                                    \
	"while [ ! -s \"$d/pid\" ]; do\n"                                                          \
	"  [ $i -ge 40 ] && { echo no-pid; exit 0; }\n"                                            \
	"  sleep 0.05; i=$((i + 1))\n"                                                             \
	"done\n"                                                                                   \
	"p=$(cat \"$d/pid\")\n"                                                                    \
	"alive() { kill -0 -\"$p\" 2>/dev/null || kill -0 \"$p\" 2>/dev/null; }\n"                 \
	"[ -e \"$d/status\" ] && { echo gone; exit 0; }\n"                                         \
	"alive || { echo gone; exit 0; }\n"                                                        \
	"kill -\"$2\" -\"$p\" 2>/dev/null || kill -\"$2\" \"$p\" 2>/dev/null\n"                    \
	"[ \"$3\" = 1 ] || { echo ok; exit 0; }\n"                                                 \
	"n=$(($4 / 50)); i=0\n"                                                                    \
	"while alive && [ $i -lt $n ]; do sleep 0.05; i=$((i + 1)); done\n"                        \
	"alive && { kill -9 -\"$p\" 2>/dev/null || kill -9 \"$p\" 2>/dev/null; }\n"                \
	"i=0\n"                                                                                    \
	"while alive; do\n"                                                                        \
	"  [ $i -ge 100 ] && { echo survived; exit 0; }\n"                                         \
	"  sleep 0.05; i=$((i + 1))\n"                                                             \
	"done\n"                                                                                   \
	"echo ok\n"

/* $1 run dir, $2 first byte (1-based), $3 token.  tail keeps the pid
 * through exec. */
#define SH_FOLLOW                                                                                  \
	SH_RUNDIR                                                                                  \
	"echo $$ >\"$d/follow.$3\"\n"                                                              \
	"[ -e \"$d/status\" ] && { rm -f \"$d/follow.$3\"; exit 0; }\n"                            \
	"echo $$ >&2\n"                                                                            \
	"exec tail -c +\"$2\" -f \"$d/journal\"\n"

/* $1 run dir, $2 pid ("" to take it from the file), $3 token. */
#define SH_UNFOLLOW                                                                                \
	SH_RUNDIR                                                                                  \
	"f=\"$d/follow.$3\"; [ -f \"$f\" ] || exit 0; p=$2; [ -n \"$p\" ] || p=$(cat \"$f\"); "    \
	"[ -n \"$p\" ] && kill \"$p\" 2>/dev/null; rm -f \"$f\"; exit 0\n"

/* $1 runs dir, $2 1 to kill, 0 to only forget. */
#define SH_FORGET_FOLLOWERS                                                                        \
	SH_RUNDIR                                                                                  \
	"for f in \"$d\"/*/follow.*; do [ -f \"$f\" ] || continue; "                               \
	"[ \"$2\" = 1 ] && kill \"$(cat \"$f\")\" 2>/dev/null; rm -f \"$f\"; done; exit 0\n"

/* $1 file, $2 first byte (1-based), $3 max bytes, $4 "b64" or "". */
#define SH_READ                                                                                    \
	SH_RUNDIR                                                                                  \
	"[ -e \"$d\" ] || exit 3\n"                                                                \
	"if [ \"$4\" = b64 ]; then printf 'sfs-b64:'; "                                            \
	"tail -c +\"$2\" \"$d\" 2>/dev/null | head -c \"$3\" | base64; "                           \
	"else tail -c +\"$2\" \"$d\" 2>/dev/null | head -c \"$3\"; fi\n"

/* $1 run dir.  The wrapper makes the directory and its wpid at once, so a
 * directory without wpid is a wrapper just starting.  wpid is looked at
 * once: it only ever appears, and one that appeared between two looks made
 * a starting wrapper "lost" (its journal then ended before any output). */
#define SH_STATUS                                                                                  \
	SH_RUNDIR                                                                                  \
	"if [ -f \"$d/status\" ]; then cat \"$d/status\"\n"                                        \
	"elif [ -f \"$d/wpid\" ]; then\n"                                                          \
	"  if kill -0 \"$(cat \"$d/wpid\")\" 2>/dev/null; then echo running\n"                     \
	"  elif [ -f \"$d/status\" ]; then cat \"$d/status\"\n"                                    \
	"  else echo lost; fi\n"                                                                   \
	"elif [ -f \"$d/status\" ]; then cat \"$d/status\"\n"                                      \
	"elif [ -d \"$d\" ]; then echo running\n"                                                  \
	"else echo none; fi\n"

/* $1 run dir. */
#define SH_ALIVE                                                                                   \
	SH_RUNDIR "kill -0 \"$(cat \"$d/wpid\" 2>/dev/null)\" 2>/dev/null && echo yes || echo "    \
		  "no\n"

/* $1 path. */
#define SH_MKDIR SH_RUNDIR "mkdir -p \"$d\"\n"

#define SH_KEEPALIVE "trap 'exit 0' TERM; while :; do sleep 3600 & wait; done"

#endif
