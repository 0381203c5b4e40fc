#!/usr/bin/env bats
# bats file_tags=core
# The processes the daemon signals and starts, under hostile use: a run's
# recorded group id that now names somebody else's processes, secrets on
# command lines, descriptors a run inherits.  Each test checks that the
# attack failed and that the daemon still serves another sandbox.

load helpers

setup() {
	sfs_mount
}

teardown() {
	if [ -f "$BATS_TEST_TMPDIR/foreign.pids" ]; then
		local p
		while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/foreign.pids"
	fi
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
	# the run's own sleep went with the sandbox
	run pgrep -g "$pg"
	[ "$status" -ne 0 ]
	still_serves b
}
