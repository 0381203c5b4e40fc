#!/usr/bin/env bats
# bats file_tags=core
# The processes the daemon signals and starts, under hostile use: a run's
# recorded group id that now names somebody else's processes, secrets on
# command lines, descriptors a run inherits.  Each test checks that the
# attack failed and that the daemon still serves another sandbox.

load helpers
load iso_helpers

# a secret the daemon reads from its environment (secret.K=env:VAR)
export SFS_HP_SECRET="sfs-procs-secret-8e1f4c27b9"

setup() {
	sfs_mount
}

teardown() {
	if [ -f "$BATS_TEST_TMPDIR/foreign.pids" ]; then
		local p
		while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/foreign.pids"
	fi
	iso_kill_holders
	sfs_teardown
}

# run_dir NAME N: the host directory (STATE/sandboxes/KEY/runs/N) of run N of
# a sandbox that owns its workspace.
run_dir() {
	echo "$(dirname "$(awk '$1=="workspace"{print $2}' "$MNT/$1/status")")/runs/$2"
}

# foreign_group: starts a `sleep` in a session and process group of its own,
# as some other host user's program would be, and sets FOREIGN to its pid
# (which is also its group and session id).
leads_own_group() { [ "$(ps -o pgid= -p "$1" | tr -d ' ')" = "$1" ]; }
foreign_group() {
	setsid sleep 1000 </dev/null >/dev/null 2>&1 3>&- &
	FOREIGN=$!
	echo "$FOREIGN" >>"$BATS_TEST_TMPDIR/foreign.pids"
	wait_for leads_own_group "$FOREIGN"
}

# still_serves NAME: another sandbox still runs a command to its end.
still_serves() {
	local n
	n=$(ctl_write "$MNT/$1/ctl" "exec echo alive") || return 1
	[ "$(cat "$MNT/$1/runs/$n/wait")" = "exited 0" ] || return 1
	[ "$(cat "$MNT/$1/runs/$n/journal")" = alive ]
}

@test "rmdir spares a process group that now has the id a finished run recorded" {
	mkdir "$MNT/a" "$MNT/b"
	n=$(ctl_write "$MNT/a/ctl" "exec true")
	[ "$(cat "$MNT/a/runs/$n/wait")" = "exited 0" ]
	rd=$(run_dir a "$n")
	foreign_group
	# what pid reuse does by itself after a few hundred runs: the finished
	# run's group id (and its wrapper's) now name a group that is not ours
	read -r _ wpid wstart <"$rd/pid"
	printf '%s %s %s\n' "$FOREIGN" "$wpid" "$wstart" >"$rd/pid"
	rmdir "$MNT/a"
	kill -0 "$FOREIGN"
	[ "$(cat "/proc/$FOREIGN/comm")" = sleep ]
	still_serves b
}

@test "rmdir spares a foreign process that has a finished run's wrapper pid and group" {
	mkdir "$MNT/a" "$MNT/b"
	n=$(ctl_write "$MNT/a/ctl" "exec true")
	[ "$(cat "$MNT/a/runs/$n/wait")" = "exited 0" ]
	rd=$(run_dir a "$n")
	foreign_group
	printf '%s %s\n' "$FOREIGN" "$FOREIGN" >"$rd/pid"
	rmdir "$MNT/a"
	kill -0 "$FOREIGN"
	still_serves b
}

@test "kill of a running run signals the run, not the group its pid file was made to name" {
	mkdir "$MNT/a" "$MNT/b"
	n=$(ctl_write "$MNT/a/ctl" "exec sleep 1000")
	rd=$(run_dir a "$n")
	wait_sleep_running "$rd"
	foreign_group
	read -r _ wpid wstart <"$rd/pid"
	printf '%s %s %s\n' "$FOREIGN" "$wpid" "$wstart" >"$rd/pid"
	echo "kill $n" >"$MNT/a/ctl"
	[ "$(cat "$MNT/a/runs/$n/wait")" = "killed TERM" ]
	kill -0 "$FOREIGN"
	still_serves b
}

@test "rmdir with a running run ends it and spares a foreign group named in its pid file" {
	mkdir "$MNT/a" "$MNT/b"
	n=$(ctl_write "$MNT/a/ctl" "exec sleep 1000")
	rd=$(run_dir a "$n")
	wait_sleep_running "$rd"
	read -r pg _ <"$rd/pid"
	foreign_group
	read -r _ wpid wstart <"$rd/pid"
	printf '%s %s %s\n' "$FOREIGN" "$wpid" "$wstart" >"$rd/pid"
	rmdir "$MNT/a"
	kill -0 "$FOREIGN"
	# the run's own sleep went with the sandbox (waited for: rmdir returns
	# once nothing of the run is alive, and a zombie of it may still await
	# the wrapper's wait() a moment longer)
	wait_for eval '! pgrep -g "$pg" >/dev/null'
	still_serves b
}

# ---- pid reuse, steered: the kernel hands the very numbers a run recorded
# to unrelated host processes, as it does by itself sooner or later.

# need_pid_steering: skips unless this test may set the next pid the kernel
# hands out (/proc/sys/kernel/ns_last_pid: a kernel with checkpoint/restore,
# and root over the pid namespace; the file is 0666 but a write needs
# CAP_SYS_ADMIN, so only a real write tells).
need_pid_steering() {
	[ "$(id -u)" = 0 ] || skip "steering pid reuse needs root (a write to /proc/sys/kernel/ns_last_pid)"
	[ -e /proc/sys/kernel/ns_last_pid ] ||
		skip "no /proc/sys/kernel/ns_last_pid (a kernel without CONFIG_CHECKPOINT_RESTORE)"
	# writing back what it holds changes nothing (a number in use is skipped)
	local cur
	cur=$(cat /proc/sys/kernel/ns_last_pid)
	{ echo "$cur" >/proc/sys/kernel/ns_last_pid; } 2>/dev/null ||
		skip "/proc/sys/kernel/ns_last_pid is not writable here (no CAP_SYS_ADMIN over this pid namespace)"
}

# foreign_at PID: starts what foreign_group starts (a `sleep` leading a
# session and group of its own) as process number PID exactly, and sets
# FOREIGN.  The next fork gets ns_last_pid + 1, but any process on the
# machine may fork in between and take PID: then that try is killed and the
# next one made.  PID must be free (its process gone and reaped).
foreign_at() {
	local want=$1 got i
	[ ! -e "/proc/$want" ] || {
		echo "pid $want is still in use" >&2
		return 1
	}
	for i in $(seq 1 500); do
		echo $((want - 1)) >/proc/sys/kernel/ns_last_pid
		# setsid does not fork: bash's background child leads no group
		setsid sleep 1000 </dev/null >/dev/null 2>&1 3>&- &
		got=$!
		echo "$got" >>"$BATS_TEST_TMPDIR/foreign.pids"
		if [ "$got" = "$want" ]; then
			FOREIGN=$got
			wait_for leads_own_group "$FOREIGN"
			return
		fi
		kill -9 "$got" 2>/dev/null || true
		wait "$got" 2>/dev/null || true
		# somebody else may hold it now: wait until it is free again
		wait_for eval '[ ! -e "/proc/$want" ]' || break
	done
	echo "could not get pid $want for a foreign process" >&2
	return 1
}

# gone PID...: no process (not even a zombie) has any of these numbers.
gone() {
	local p
	for p in "$@"; do
		[ ! -e "/proc/$p" ] || return 1
	done
}

# foreign_alive PID: a `sleep` of ours still has that pid, alive.
foreign_alive() {
	kill -0 "$1" && [ "$(cat "/proc/$1/comm")" = sleep ] &&
		[ "$(awk '{ print $3 }' "/proc/$1/stat")" != Z ]
}

@test "pid reuse: rmdir, kill and cancel spare a host group that got a finished run's group id" {
	need_pid_steering
	mkdir "$MNT/a" "$MNT/b"
	n=$(ctl_write "$MNT/a/ctl" "exec true")
	[ "$(cat "$MNT/a/runs/$n/wait")" = "exited 0" ]
	rd=$(run_dir a "$n")
	read -r pg wpid _ <"$rd/pid"
	# the wrapper is reaped at the daemon's next tick; then both numbers are free
	wait_for gone "$pg" "$wpid"
	foreign_at "$pg"
	grp=$FOREIGN
	foreign_at "$wpid"
	wrp=$FOREIGN
	# the pid file is as the run left it: nothing was forged
	[ "$(cut -d' ' -f1-2 "$rd/pid")" = "$grp $wrp" ]
	# an ended run: refused before the provider is asked (its refusal of a
	# dead wrapper is the next two tests')
	run ctl_write "$MNT/a/ctl" "kill $n"
	[ "$status" -ne 0 ]
	[[ "$output" == *"run $n is not running (exited 0)"* ]]
	run ctl_write "$MNT/a/ctl" "cancel $n"
	[ "$status" -ne 0 ]
	[[ "$output" == *"run $n is not running (exited 0)"* ]]
	rmdir "$MNT/a"
	foreign_alive "$grp"
	foreign_alive "$wrp"
	[ "$(ps -o pgid= -p "$grp" | tr -d ' ')" = "$grp" ]
	still_serves b
}

# orphan_run NAME: starts `sleep 1000` in sandbox NAME, then kills its
# wrapper and command from the host, and sets N, RD, PG, WPID, WSTART.
# The run stays `running` for the daemon: a RUNDIR/lock held by the test
# (the lock the daemon checks instead of the directory's when it is there)
# stands for the live wrapper, which freezes the moment between the
# wrapper's death and the daemon's next look at it.
orphan_run() {
	N=$(ctl_write "$MNT/$1/ctl" "exec sleep 1000")
	RD=$(run_dir "$1" "$N")
	wait_sleep_running "$RD"
	read -r PG WPID WSTART <"$RD/pid"
	: >"$RD/lock"
	# the lock's holder is one process (flock(1) with a command would
	# leave that command behind when killed): a subshell that locks its fd
	# 9 and execs sleep with it
	(
		exec 9>"$RD/lock"
		flock -x 9
		exec sleep 1000
	) </dev/null >/dev/null 2>&1 3>&- &
	echo "$!" >>"$BATS_TEST_TMPDIR/foreign.pids"
	wait_for eval '! flock -n -s "$RD/lock" true'
	# the wrapper first: killed after its command, it would record the end
	kill -9 "$WPID"
	wait_for gone "$WPID"
	kill -9 -- "-$PG"
	wait_for gone "$PG"
	[ "$(cat "$MNT/$1/runs/$N/status")" = running ]
}

# kill_refused NAME VERB: VERB (kill N, cancel N) of the orphaned run fails
# with ESRCH and says there is nothing left to signal.
kill_refused() {
	run ctl_write "$MNT/$1/ctl" "$2 $N"
	[ "$status" -ne 0 ] || return 1
	[[ "$output" == *"No such process"* ]] || return 1
	[[ "$output" == *"run $N: no process is left to signal"* ]]
}

@test "pid reuse: kill and cancel of a run whose wrapper died fail (ESRCH) and spare the host process that got the wrapper's pid" {
	need_pid_steering
	mkdir "$MNT/a" "$MNT/b"
	orphan_run a
	foreign_at "$WPID"
	wrp=$FOREIGN
	kill_refused a kill
	kill_refused a cancel
	foreign_alive "$wrp"
	# even with the newcomer's start time in the pid file (its argv does
	# not name the run's directory, so it is still nobody's wrapper)
	printf '%s %s %s\n' "$PG" "$WPID" "$(awk '{ print $22 }' "/proc/$wrp/stat")" >"$RD/pid"
	kill_refused a kill
	run ctl_write "$MNT/a/ctl" "kill $N KILL"
	[ "$status" -ne 0 ]
	[[ "$output" == *"no process is left to signal"* ]]
	foreign_alive "$wrp"
	[ "$(cat "$MNT/a/runs/$N/status")" = running ]
	still_serves b
}

@test "pid reuse: kill, cancel and rmdir of a run whose wrapper died spare the host processes that got its wrapper's pid and its group id" {
	need_pid_steering
	mkdir "$MNT/a" "$MNT/b"
	orphan_run a
	foreign_at "$PG"
	grp=$FOREIGN
	foreign_at "$WPID"
	wrp=$FOREIGN
	# the pid file is as the wrapper wrote it
	[ "$(cut -d' ' -f1-2 "$RD/pid")" = "$grp $wrp" ]
	kill_refused a kill
	kill_refused a cancel
	foreign_alive "$grp"
	foreign_alive "$wrp"
	rmdir "$MNT/a"
	foreign_alive "$grp"
	foreign_alive "$wrp"
	still_serves b
}

# no_cmdline_has FILE: no process's command line (/proc/*/cmdline, ps) holds
# the text in FILE (read from a file, so this check's own argv is clean).
no_cmdline_has() {
	if grep -laF -f "$1" /proc/[0-9]*/cmdline 2>/dev/null; then return 1; fi
	if ps -eo pid,args | grep -F -f "$1"; then return 1; fi
	return 0
}

# secret_not_on_cmdline SANDBOX STATEDIR: a run whose command holds the
# secret's value (typed in, as a user may) shows it on no command line
# while it runs.
secret_not_on_cmdline() {
	local n rd
	n=$(ctl_write "$MNT/$1/ctl" "exec sleep 1000; echo \$TOK $SFS_HP_SECRET")
	rd="$2/runs/$n"
	wait_sleep_running "$rd"
	printf '%s\n' "$SFS_HP_SECRET" >"$BATS_TEST_TMPDIR/needle"
	no_cmdline_has "$BATS_TEST_TMPDIR/needle"
	# while the secret reaches the run as its variable, and the command is whole
	[ "$(tr '\0' '\n' <"/proc/$(cut -d' ' -f1 "$rd/pid")/environ" | grep -c "^TOK=$SFS_HP_SECRET$")" = 1 ]
	echo "kill $n KILL" >"$MNT/$1/ctl"
	[ "$(cat "$MNT/$1/runs/$n/wait")" = "killed KILL" ]
}

@test "a run's command (with a secret in it) is on no command line: not the wrapper's, not the shell's" {
	echo "new a secret.TOK=env:SFS_HP_SECRET" >"$MNT/ctl"
	sb=$(ls -d "$STATE"/sandboxes/*)
	mkdir "$MNT/b"
	secret_not_on_cmdline a "$sb"
	# the command still runs whole, quotes and all
	n=$(ctl_write "$MNT/a/ctl" "exec printf '%s|' \"a b\" 'c'; echo \$# \$0")
	[ "$(cat "$MNT/a/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/a/runs/$n/journal")" = "a b|c|0 sh" ]
	# and nothing the command starts sees how it came
	n=$(ctl_write "$MNT/a/ctl" "exec env")
	[ "$(cat "$MNT/a/runs/$n/wait")" = "exited 0" ]
	run grep -c '^SANDBOXFS_CMD=' "$MNT/a/runs/$n/journal"
	[ "$output" = 0 ]
	still_serves b
}

@test "isolation=bwrap: a run's command (with a secret in it) is on no command line" {
	iso_require
	echo "new a isolation=bwrap secret.TOK=env:SFS_HP_SECRET" >"$MNT/ctl"
	sb=$(ls -d "$STATE"/sandboxes/*)
	mkdir "$MNT/b"
	secret_not_on_cmdline a "$sb"
	still_serves b
}

# fds_ok LISTING: an `ls -l /proc/PID/fd` listing (with the lines of
# /proc/PID/status for SigBlk and SigIgn after it) shows fds 0-2 and, as
# 3, the /proc directory ls itself had open; nothing blocked, and no
# standard signal ignored.
fds_ok() {
	local fds blk ign
	fds=$(grep -- ' -> ' "$1" | awk '{ print $(NF-2) }' | tr '\n' ' ')
	[ "$fds" = "0 1 2 3 " ] || { cat "$1"; return 1; }
	grep -Eq ' 3 -> /proc/[0-9]+/fd$' "$1" || { cat "$1"; return 1; }
	blk=$(awk '$1=="SigBlk:" { print $2 }' "$1")
	ign=$(awk '$1=="SigIgn:" { print $2 }' "$1")
	[ "$((0x$blk))" = 0 ] || { cat "$1"; return 1; }
	# 1-31: what glibc reserves above them is not the run's business
	[ "$((0x$ign & 0x7fffffff))" = 0 ] || { cat "$1"; return 1; }
}

# run_fds SANDBOX: what a run of SANDBOX inherits, checked by fds_ok.
run_fds() {
	local n
	# ls inherits what the run's shell has, and adds its 3
	n=$(ctl_write "$MNT/$1/ctl" 'exec ls -l /proc/self/fd; grep -E "^Sig(Blk|Ign):" /proc/self/status')
	[ "$(cat "$MNT/$1/runs/$n/wait")" = "exited 0" ]
	cp "$MNT/$1/runs/$n/journal" "$BATS_TEST_TMPDIR/fds.$1"
	fds_ok "$BATS_TEST_TMPDIR/fds.$1"
}

@test "a run inherits fds 0-2 only, no blocked signal: local and isolation=bwrap" {
	mkdir "$MNT/a" "$MNT/c"
	run_fds a
	if command -v bwrap >/dev/null; then
		echo "new b isolation=bwrap" >"$MNT/ctl"
		run_fds b
	fi
	still_serves c
}
