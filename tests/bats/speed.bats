#!/usr/bin/env bats
# The fast paths of runs and journals (issue 15): what they must keep doing.
# No test here asserts a time; bench/runs.sh measures.

load helpers
load docker_helpers

teardown() {
	docker_teardown
}

# wrapper_exe RUNDIR: the executable of the run's wrapper, while it lives
wrapper_exe() {
	local pid wpid
	read -r pid wpid _ <"$1/pid"
	readlink "/proc/$wpid/exe"
}

# bats test_tags=core
@test "local: runs start through sandboxfs-run-wrapper when it sits beside the binary" {
	[ -x "$(dirname "$SFS_BIN")/sandboxfs-run-wrapper" ] || skip "no sandboxfs-run-wrapper beside $SFS_BIN"
	sfs_mount
	mkdir "$MNT/demo"
	n=$(ctl_write "$MNT/demo/ctl" "exec echo started; sleep 30")
	rundir=$(ls -d "$STATE"/sandboxes/*/runs/"$n")
	wait_for grep -q started "$MNT/demo/runs/$n/journal"
	[ "$(wrapper_exe "$rundir")" = "$(cd "$(dirname "$SFS_BIN")" && pwd -P)/sandboxfs-run-wrapper" ]
	# the wrapper's own files (the command's and its own pid in one; its lock
	# on the directory), and kill through them
	[ "$(ls -A "$rundir" | tr '\n' ' ')" = "cmd journal pid stdin " ]
	read -r pid wpid _ <"$rundir/pid"
	[ "$(ps -o pgid= -p "$pid" | tr -d ' ')" = "$pid" ]
	[ "$(ps -o ppid= -p "$pid" | tr -d ' ')" = "$wpid" ]
	run flock -n "$rundir" true
	[ "$status" -ne 0 ]
	ctl_write "$MNT/demo/ctl" "kill $n" >/dev/null
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "killed TERM" ]
	[ "$(cat "$rundir/status")" = "signal 15" ]
	n=$(ctl_write "$MNT/demo/ctl" 'exec echo "out $SANDBOXFS_RUN_DIR"; exit 4')
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "exited 4" ]
	[ "$(cat "$MNT/demo/runs/$n/journal")" = "out $STATE/sandboxes/$(basename "$(dirname "$(dirname "$rundir")")")/runs/$n" ]
}

# bats test_tags=core
@test "local: sandboxfs-run-wrapper is linked against musl where the build had musl-gcc" {
	w="$(dirname "$SFS_BIN")/sandboxfs-run-wrapper"
	cache="$(dirname "$SFS_BIN")/CMakeCache.txt"
	[ -x "$w" ] || skip "no sandboxfs-run-wrapper beside $SFS_BIN"
	[ -f "$cache" ] || skip "no CMakeCache.txt beside $SFS_BIN"
	command -v musl-gcc >/dev/null || skip "no musl-gcc"
	if grep -Eq '^(SFS_WRAPPER_MUSL:BOOL=OFF|SFS_SANITIZE:BOOL=ON|SFS_TSAN:BOOL=ON)' "$cache"; then
		skip "a build that keeps glibc for it"
	fi
	# glibc's start-up sizes the CPU caches with CPUID, a VM exit each: 0.4 ms
	# of every run's start under a hypervisor (CMakeLists.txt); GLIBC_TUNABLES
	# is in every glibc program, static or not
	run grep -c GLIBC_TUNABLES "$w"
	[ "$output" = 0 ]
}

# bats test_tags=core
@test "local: without sandboxfs-run-wrapper beside it, sandboxfs runs as the wrapper itself" {
	mkdir "$BATS_TEST_TMPDIR/bin"
	cp "$SFS_BIN" "$BATS_TEST_TMPDIR/bin/sandboxfs"
	SFS_BIN=$BATS_TEST_TMPDIR/bin/sandboxfs sfs_mount
	mkdir "$MNT/demo"
	n=$(ctl_write "$MNT/demo/ctl" "exec echo started; sleep 30")
	rundir=$(ls -d "$STATE"/sandboxes/*/runs/"$n")
	wait_for grep -q started "$MNT/demo/runs/$n/journal"
	[ "$(wrapper_exe "$rundir")" = "$BATS_TEST_TMPDIR/bin/sandboxfs" ]
	ctl_write "$MNT/demo/ctl" "kill $n" >/dev/null
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "killed TERM" ]
	n=$(ctl_write "$MNT/demo/ctl" "exec echo two; exit 2")
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "exited 2" ]
	[ "$(cat "$MNT/demo/runs/$n/journal")" = two ]
}

# bats test_tags=core
@test "local: where a directory cannot be locked (NFS), the wrapper locks RUNDIR/lock, and the run is followed and killed as usual" {
	command -v gcc >/dev/null || skip "no gcc to build the flock shim"
	# NFS turns flock into a POSIX lock, and an exclusive one on a directory
	# (open read-only) fails with EBADF: this shim does the same to the
	# daemon and to the wrapper (the sandboxfs binary itself: no
	# sandboxfs-run-wrapper beside it, and the static one ignores LD_PRELOAD)
	cat >"$BATS_TEST_TMPDIR/shim.c" <<'C'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/stat.h>
int flock(int fd, int op)
{
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		errno = EBADF;
		return -1;
	}
	int (*real)(int, int) = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
	return real(fd, op);
}
C
	gcc -shared -fPIC -o "$BATS_TEST_TMPDIR/shim.so" "$BATS_TEST_TMPDIR/shim.c" -ldl
	# a sanitizer's runtime must come first in the preload list
	pre=$BATS_TEST_TMPDIR/shim.so
	san=$(ldd "$SFS_BIN" | awk '/lib(a|t)san/ {print $3; exit}')
	[ -z "$san" ] || pre=$san:$pre
	mkdir "$BATS_TEST_TMPDIR/bin"
	cp "$SFS_BIN" "$BATS_TEST_TMPDIR/bin/sandboxfs"
	LD_PRELOAD=$pre SFS_BIN=$BATS_TEST_TMPDIR/bin/sandboxfs sfs_mount
	mkdir "$MNT/demo"
	n=$(ctl_write "$MNT/demo/ctl" "exec echo started; sleep 30")
	rundir=$(ls -d "$STATE"/sandboxes/*/runs/"$n")
	wait_for grep -q started "$MNT/demo/runs/$n/journal"
	[ -f "$rundir/lock" ]
	run flock -n "$rundir/lock" true
	[ "$status" -ne 0 ]
	[ "$(cat "$MNT/demo/runs/$n/status")" = running ]
	ctl_write "$MNT/demo/ctl" "kill $n" >/dev/null
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "killed TERM" ]
	# a restarted daemon reads a live run as running, not lost
	n=$(ctl_write "$MNT/demo/ctl" "exec sleep 30")
	sfs_unmount
	LD_PRELOAD=$pre SFS_BIN=$BATS_TEST_TMPDIR/bin/sandboxfs sfs_mount
	[ "$(cat "$MNT/demo/runs/$n/status")" = running ]
	ctl_write "$MNT/demo/ctl" "kill $n" >/dev/null
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "killed TERM" ]
}

# bats test_tags=core
@test "local: the next run's directory is made a moment after an exec (runs/.next), taken whole by the next exec, never listed" {
	sfs_mount
	mkdir "$MNT/demo"
	[ "$(ctl_write "$MNT/demo/ctl" "exec true")" = 1 ]
	[ "$(cat "$MNT/demo/runs/1/wait")" = "exited 0" ]
	runs=$(ls -d "$STATE"/sandboxes/*/runs)
	wait_for test -p "$runs/.next/stdin"
	[ "$(ls -A "$runs/.next" | tr '\n' ' ')" = ".cmd.tmp .pid.tmp .status.tmp journal stdin " ]
	# the status reservation is made with its room
	[ "$(stat -c %s "$runs/.next/.status.tmp")" = 64 ]
	sino=$(stat -c %i "$runs/.next/.status.tmp")
	ino=$(stat -c %i "$runs/.next")
	[ "$(ctl_write "$MNT/demo/ctl" "exec read x; echo got \$x")" = 2 ]
	[ "$(stat -c %i "$runs/2")" = "$ino" ]
	# taken by the wrapper: beside the directory while the run goes on
	[ "$(stat -c %i "$runs/.2.status.tmp")" = "$sino" ]
	[ "$(ls -A "$runs/2" | tr '\n' ' ')" = "cmd journal pid stdin " ]
	echo yes >"$MNT/demo/runs/2/stdin"
	[ "$(cat "$MNT/demo/runs/2/wait")" = "exited 0" ]
	[ "$(cat "$MNT/demo/runs/2/journal")" = "got yes" ]
	[ "$(stat -c %i "$runs/2/status")" = "$sino" ]
	[ "$(cat "$runs/2/status")" = "exit 0" ]
	[ "$(cat "$MNT/demo/runs/2/cmd")" = 'read x; echo got $x' ]
	wait_for test -d "$runs/.next"
	[ "$(ls "$MNT/demo/runs" | tr '\n' ' ')" = "1 2 " ]
	# a restart neither lists it nor gives its number away
	sfs_unmount
	sfs_mount
	[ "$(ls "$MNT/demo/runs" | tr '\n' ' ')" = "1 2 " ]
	[ "$(ctl_write "$MNT/demo/ctl" "exec echo three")" = 3 ]
	[ "$(cat "$MNT/demo/runs/3/wait")" = "exited 0" ]
	[ "$(cat "$MNT/demo/runs/3/journal")" = three ]
	# a half-made one (the daemon killed while making it) is cleared, not taken
	wait_for test -d "$runs/.next"
	rm -rf "$runs/.next"
	mkdir "$runs/.next.d/run"
	touch "$runs/.next.d/run/half"
	[ "$(ctl_write "$MNT/demo/ctl" "exec echo four")" = 4 ]
	[ "$(cat "$MNT/demo/runs/4/wait")" = "exited 0" ]
	wait_for test -p "$runs/.next/stdin"
	[ "$(ls -A "$runs/.next" | tr '\n' ' ')" = ".cmd.tmp .pid.tmp .status.tmp journal stdin " ]
	[ -z "$(ls -A "$runs/.next.d")" ]
	# one a daemon of an earlier version left half made in runs/ itself goes
	# at the next start
	mkdir "$runs/.next.new"
	sfs_unmount
	sfs_mount
	[ ! -e "$runs/.next.new" ]
	[ "$(ls "$MNT/demo/runs" | tr '\n' ' ')" = "1 2 3 4 " ]
}

# bats test_tags=core
@test "local: setup= runs make the next run's directory too: the first exec after new takes it" {
	sfs_mount
	# each setup run outlasts its spare's delay (at most 10 ms): the spare
	# comes due while the sandbox is still creating
	ctl_write "$MNT/ctl" "new s setup='sleep 0.3' setup='sleep 0.3'" >/dev/null
	[ "$(awk '$1 == "state" { print $2 }' "$MNT/s/status")" = running ]
	wait_exec_later_done
	runs=$(ls -d "$STATE"/sandboxes/*/runs)
	ino=$(stat -c %i "$runs/.next")
	[ "$(ctl_write "$MNT/s/ctl" "exec echo first")" = 3 ]
	[ "$(stat -c %i "$runs/3")" = "$ino" ]
	[ "$(cat "$MNT/s/runs/3/wait")" = "exited 0" ]
	[ "$(cat "$MNT/s/runs/3/journal")" = first ]
	[ "$(ls "$MNT/s/runs" | tr '\n' ' ')" = "1 2 3 " ]
}

@test "local: an exec's cmd is fsync'd, by the unmount right after it at the latest" {
	sfs_mount
	mkdir "$MNT/demo"
	local trace="$BATS_TEST_TMPDIR/strace"
	trace_daemon "$trace" fsync
	[ "$(ctl_write "$MNT/demo/ctl" "exec true")" = 1 ]
	# (a call another thread's line interrupts shows as "unfinished")
	wait_for grep -q 'fsync([0-9]*</.*/runs/1/cmd>' "$trace"
	# one perhaps still owed when the daemon stops is flushed on the way
	# out (the unit test test_later.c stops with flushes owed for sure)
	[ "$(ctl_write "$MNT/demo/ctl" "exec true")" = 2 ]
	sfs_unmount
	wait "$TRACER" || true
	grep -q 'fsync([0-9]*</.*/runs/2/cmd>' "$trace"
}

@test "local: a sandbox another op holds (an rmdir's grace) holds up no other sandbox's cmd flush" {
	sfs_mount -o local.kill_grace=30
	mkdir "$MNT/a" "$MNT/b"
	[ "$(ctl_write "$MNT/a/ctl" 'exec trap "" TERM; echo up; while :; do sleep 0.1; done')" = 1 ]
	wait_for grep -q up "$MNT/a/runs/1/journal"
	local trace="$BATS_TEST_TMPDIR/strace"
	trace_daemon "$trace" fsync
	# a's spare, asked for by this exec, comes due while the rmdir's
	# destroy holds a through its grace (the run ignores TERM)
	[ "$(ctl_write "$MNT/a/ctl" "exec true")" = 2 ]
	rmdir "$MNT/a" 3>&- &
	local rpid=$!
	wait_for eval '! test -e "$MNT/a"'
	[ "$(ctl_write "$MNT/b/ctl" "exec echo b")" = 1 ]
	local bcmd
	bcmd=$(grep -lx 'echo b' "$STATE"/sandboxes/*/runs/1/cmd)
	# b's cmd is flushed while a's grace still runs
	wait_for grep -qF "fsync(" "$trace"
	wait_for grep -qF "<$bcmd>" "$trace"
	[ -n "$(sfs_run_pids "$STATE")" ]
	kill "$TRACER"
	sfs_kill_runs
	wait "$rpid"
}

# bats test_tags=tsan
@test "local: rmdir, forget and resume racing the making of spares leave no state behind and no TSan report" {
	export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}log_path=$BATS_TEST_TMPDIR/tsan:halt_on_error=0"
	sfs_mount
	local i n id
	for i in $(seq 1 9); do
		mkdir "$MNT/r$i"
		[ "$(ctl_write "$MNT/r$i/ctl" "exec true")" = 1 ]
		# the spare is due at most 10 ms after the exec: before, while
		# and after
		sleep "$(printf '0.%03d' $((i * 2)))"
		rmdir "$MNT/r$i"
	done
	mkdir "$MNT/fo"
	id=$(awk '$1=="id"{print $2}' "$MNT/fo/status")
	for i in $(seq 1 5); do
		[ "$(ctl_write "$MNT/fo/ctl" "exec true")" = "$i" ]
		echo "forget fo" >"$MNT/ctl"
		echo "resume fo provider=local id=$id" >"$MNT/ctl"
		[ "$(cat "$MNT/fo/runs/$i/wait")" = "exited 0" ]
	done
	[ "$(ls "$MNT/fo/runs" | tr '\n' ' ')" = "1 2 3 4 5 " ]
	# the removed sandboxes' state dirs go, spares and all
	wait_for eval 'test "$(ls "$STATE/sandboxes" | wc -l)" = 1'
	# a spare asked for by the record forget took is not made for it; the
	# resumed one's next exec asks again
	[ "$(ctl_write "$MNT/fo/ctl" "exec true")" = 6 ]
	wait_exec_later_done
	[ "$(cat "$MNT/fo/runs/6/wait")" = "exited 0" ]
	sfs_unmount
	no_tsan_reports
}

# bats test_tags=core
@test "local: a run's end creates nothing in its directory but the status it renames in (each event there wakes the journal engine)" {
	sfs_mount
	mkdir "$MNT/demo"
	n=$(ctl_write "$MNT/demo/ctl" "exec read x < /dev/stdin; echo done")
	rundir=$(ls -d "$STATE"/sandboxes/*/runs/"$n")
	# every name created or moved into the run's directory until its end
	python3 - "$rundir" >"$BATS_TEST_TMPDIR/events" <<'PY' &
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
libc.inotify_add_watch(fd, sys.argv[1].encode(), 0x100 | 0x80)  # IN_CREATE | IN_MOVED_TO
print("ready", flush=True)
while True:
    buf = os.read(fd, 4096)
    i = 0
    while i < len(buf):
        wd, mask, cookie, ln = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16:i + 16 + ln].rstrip(b"\0").decode()
        print(name, flush=True)
        if name == "status":
            sys.exit(0)
        i += 16 + ln
PY
	watcher=$!
	wait_for grep -q ready "$BATS_TEST_TMPDIR/events"
	echo eof >"$MNT/demo/runs/$n/ctl"
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "exited 0" ]
	wait "$watcher"
	[ "$(grep -v ready "$BATS_TEST_TMPDIR/events")" = status ]
	[ -z "$(find "$(dirname "$rundir")" -maxdepth 1 -name '.*.tmp')" ]
}

# bats test_tags=core
@test "local: readers parked before the run's end get every line, then EOF and the status" {
	sfs_mount
	mkdir "$MNT/demo"
	n=$(ctl_write "$MNT/demo/ctl" 'exec for i in 1 2 3 4 5; do echo "line $i"; sleep 0.2; done')
	cat "$MNT/demo/runs/$n/wait" >"$BATS_TEST_TMPDIR/wait" &
	w=$!
	cat "$MNT/demo/runs/$n/journal" >"$BATS_TEST_TMPDIR/journal" &
	j=$!
	wait "$w" "$j"
	[ "$(cat "$BATS_TEST_TMPDIR/wait")" = "exited 0" ]
	[ "$(cat "$BATS_TEST_TMPDIR/journal")" = "$(printf 'line %s\n' 1 2 3 4 5)" ]
	wait_for grep -qx 'followers 0' "$MNT/demo/status"
}

@test "docker: a reader parked in a journal read gets each line the container writes, then EOF; wait the status" {
	docker_setup
	dk_new d1 >/dev/null
	n=$(dk_exec d1 'for i in 1 2 3 4 5; do echo "line $i"; sleep 0.2; done; exit 6')
	cat "$MNT/d1/runs/$n/wait" >"$BATS_TEST_TMPDIR/wait" &
	w=$!
	cat "$MNT/d1/runs/$n/journal" >"$BATS_TEST_TMPDIR/journal" &
	j=$!
	wait_for grep -q 'line 1' "$BATS_TEST_TMPDIR/journal"
	# the watch on the run's directory in the container's overlay
	grep -qx 'followers 1' "$MNT/d1/status"
	wait "$w" "$j"
	[ "$(cat "$BATS_TEST_TMPDIR/wait")" = "exited 6" ]
	[ "$(cat "$BATS_TEST_TMPDIR/journal")" = "$(printf 'line %s\n' 1 2 3 4 5)" ]
	wait_for grep -qx 'followers 0' "$MNT/d1/status"
}

# by_agent N: run N was started by the agent (its record has no exec id),
# and the agent left no start file behind
by_agent() {
	grep -q '"exec":""' "$STATE"/sandboxes/*/runs/"$1"/docker.json &&
		! docker exec "$id" sh -c "ls -a /.sandboxfs/runs/$1 | grep -q '^\.start'"
}

# agent_pid ID: the run agent's pid in container ID, if one is alive
agent_pid() {
	docker exec "$1" sh -c 'p=$(cat /.sandboxfs/agent/pid 2>/dev/null) &&
		tr "\0" "\n" <"/proc/$p/cmdline" 2>/dev/null | grep -qx sfs-agent && echo "$p"'
}

@test "docker: runs start through one agent per container; killed with docker exec, it is started again" {
	docker_setup
	dk_new a1 env.GREETING=hi >/dev/null
	id=$(dk_id a1)
	n=$(dk_exec a1 'echo "$GREETING from $(pwd) in $SANDBOXFS_RUN_DIR"; exit 5')
	[ "$(cat "$MNT/a1/runs/$n/wait")" = "exited 5" ]
	[ "$(cat "$MNT/a1/runs/$n/journal")" = "hi from /workspace in /.sandboxfs/runs/$n" ]
	p1=$(agent_pid "$id")
	[ -n "$p1" ]
	# the run came from the agent, not from an exec
	by_agent "$n"
	docker exec "$id" kill "$p1"
	wait_for eval 'test -z "$(agent_pid "$id")"'
	n=$(dk_exec a1 'echo again')
	[ "$(cat "$MNT/a1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/a1/runs/$n/journal")" = again ]
	p2=$(agent_pid "$id")
	[ -n "$p2" ]
	[ "$p2" != "$p1" ]
	by_agent "$n"
	# one agent, not one per run
	[ "$(docker exec "$id" ps -o args | grep -c '[s]fs-agent')" -eq 1 ]
}

@test "docker: kill goes through the agent and takes the run's whole process group" {
	docker_setup
	dk_new k1 >/dev/null
	id=$(dk_id k1)
	n=$(dk_exec k1 'sh -c "trap \"\" TERM; echo child; sleep 300" & echo parent; wait')
	wait_for grep -q child "$MNT/k1/runs/$n/journal"
	pgid=$(docker exec "$id" cat "/.sandboxfs/runs/$n/pid")
	ctl_write "$MNT/k1/ctl" "kill $n" >/dev/null
	[ "$(cat "$MNT/k1/runs/$n/wait")" = "killed TERM" ]
	# the agent ran the kill script and left its answer
	[ "$(docker exec "$id" cat "/.sandboxfs/runs/$n/.kill.out")" = ok ]
	run docker exec "$id" sh -c "ps -o pgid,args | awk '\$1 == $pgid'"
	[ -z "$output" ]
}

@test "docker: the agent outlives a daemon kill -9; the restarted daemon's runs use the same agent" {
	docker_setup
	dk_new r1 >/dev/null
	id=$(dk_id r1)
	n=$(dk_exec r1 'echo one')
	[ "$(cat "$MNT/r1/runs/$n/wait")" = "exited 0" ]
	p1=$(agent_pid "$id")
	[ -n "$p1" ]
	dk_restart_daemon
	n=$(dk_exec r1 'echo two')
	[ "$(cat "$MNT/r1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/r1/runs/$n/journal")" = two ]
	[ "$(agent_pid "$id")" = "$p1" ]
	ctl_write "$MNT/r1/ctl" "exec sleep 300" >/dev/null
	ctl_write "$MNT/r1/ctl" "kill 3" >/dev/null
	[ "$(cat "$MNT/r1/runs/3/wait")" = "killed TERM" ]
}

@test "docker: with -o docker.agent=false every run is an exec and no agent starts" {
	docker_setup -o docker.agent=false
	dk_new e1 >/dev/null
	id=$(dk_id e1)
	n=$(dk_exec e1 'echo plain')
	[ "$(cat "$MNT/e1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/e1/runs/$n/journal")" = plain ]
	[ -z "$(agent_pid "$id")" ]
	run by_agent "$n"
	[ "$status" -ne 0 ]
	grep -q '"exec":"[0-9a-f]' "$STATE"/sandboxes/*/runs/"$n"/docker.json
}

@test "docker: a run the agent starts leaves its environment nowhere in the container's files" {
	docker_setup
	dk_new v1 >/dev/null
	id=$(dk_id v1)
	dk_ctl "$MNT/v1/ctl" "env TOKEN=tok-9f3a1c77e2" >/dev/null
	n=$(dk_exec v1 'echo "len ${#TOKEN}"')
	[ "$(cat "$MNT/v1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/v1/runs/$n/journal")" = "len 14" ]
	by_agent "$n"
	# files only: the agent's FIFO would block a reader
	run docker exec "$id" sh -c 'find /.sandboxfs -type f -exec grep -l tok-9f3a1c77e2 {} +'
	[ "$status" -eq 1 ] # grep: no match
	[ -z "$output" ]
}
