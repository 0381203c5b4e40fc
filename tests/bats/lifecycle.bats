#!/usr/bin/env bats
# A sandbox's life under hostile use (issue 10): a daemon killed in the
# middle of `exec`, `rmdir` with runs that ignore TERM or on a full state
# disk, open handles of a forgotten sandbox, adopted host directories.

load helpers

setup() {
	sfs_mount
}

teardown() {
	# an immutable file (the failing-destroy test) would outlive the test
	if [ -n "${IMMUTABLE:-}" ]; then chattr -i "$IMMUTABLE" 2>/dev/null || true; fi
	sfs_teardown
	if [ -n "${SMALL_FS:-}" ] && mountpoint -q "$SMALL_FS" 2>/dev/null; then
		umount -l "$SMALL_FS" 2>/dev/null || true
	fi
}

run_cmd() {
	ctl_write "$MNT/$1/ctl" "exec $2"
}

# sb_dir NAME: the state directory (STATE/sandboxes/KEY) of a sandbox that
# owns its workspace (STATE/sandboxes/KEY/workspace).
sb_dir() {
	dirname "$(awk '$1=="workspace"{print $2}' "$MNT/$1/status")"
}

# (functions, so that wait_for evaluates them afresh each time)
no_runs_left() { [ -z "$(sfs_run_pids "$STATE")" ]; }
no_sandbox_dirs() { [ -z "$(ls "$STATE/sandboxes")" ]; }
# audit_written OP: a sandbox's audit file in the state dir has an OP line
audit_written() { cat "$STATE"/sandboxes/*/audit 2>/dev/null | grep -q " $1 "; }
one_sandbox_dir() { [ "$(ls "$STATE/sandboxes" | wc -l)" = 1 ]; }

# kill_daemon: kill -9 of the daemon, and the mount let go.
kill_daemon() {
	kill -9 "$SFS_PID"
	wait "$SFS_PID" 2>/dev/null || true
	umount -l "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null || true
}

# ---- item 2: run numbers and half-created runs -------------------------------

# bats test_tags=core
@test "a half-created run found at startup is adopted, and its number is never reused" {
	mkdir "$MNT/demo"
	[ "$(run_cmd demo 'echo one')" = 1 ]
	cat "$MNT/demo/runs/1/wait"
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/demo/status")
	d=$(sb_dir demo)
	sfs_unmount
	# What a daemon killed between starting a run and naming its cmd left:
	# run 2 has .cmd but no cmd and its wrapper goes on; run 3 is a bare
	# directory (killed right after numbering it).
	r2="$d/runs/2"
	mkdir "$r2"
	orphan='echo orphan-out; while [ ! -e go ]; do sleep 0.1; done; exit 42'
	printf '%s' "$orphan" >"$r2/.cmd"
	SANDBOXFS_RUN_DIR="$r2" SANDBOXFS_CMD="$orphan" setsid "$SFS_BIN" __local-run-wrapper "$r2" "$ws" 9 1073741824 \
		9>/dev/null </dev/null >/dev/null 2>&1 3>&- &
	wait_for grep -qs orphan-out "$r2/journal"
	mkdir "$d/runs/3"
	sfs_mount
	[ "$(ls "$MNT/demo/runs" | sort -n | tr '\n' ' ')" = "1 2 3 " ]
	[ "$(cat "$MNT/demo/runs/2/cmd")" = "$orphan" ]
	[ "$(cat "$MNT/demo/runs/2/status")" = running ]
	[ "$(head -n1 "$MNT/demo/runs/2/journal")" = orphan-out ]
	[ "$(cat "$MNT/demo/runs/3/status")" = lost ]
	[ "$(timeout 5 cat "$MNT/demo/runs/3/wait")" = lost ]
	# a new run gets a new number, and the orphan's end is the orphan's
	[ "$(run_cmd demo 'echo fresh; exit 7')" = 4 ]
	[ "$(cat "$MNT/demo/runs/4/wait")" = "exited 7" ]
	touch "$ws/go"
	[ "$(timeout 10 cat "$MNT/demo/runs/2/wait")" = "exited 42" ]
	[ "$(cat "$MNT/demo/runs/4/status")" = "exited 7" ]
	[ "$(cat "$MNT/demo/runs/4/journal")" = fresh ]
	[ "$(cat "$MNT/demo/runs/2/journal")" = orphan-out ]
	# and the adopted run is killable
	[ "$(run_cmd demo 'sleep 30')" = 5 ]
	sfs_unmount
	sfs_mount
	echo "kill 5" >"$MNT/demo/ctl"
	[ "$(timeout 10 cat "$MNT/demo/runs/5/wait")" = "killed TERM" ]
}

# bats test_tags=core
@test "an adopted half-created run can be killed" {
	mkdir "$MNT/demo"
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/demo/status")
	d=$(sb_dir demo)
	sfs_unmount
	r1="$d/runs/1"
	mkdir -p "$r1"
	printf '%s' 'echo up; sleep 300' >"$r1/.cmd"
	SANDBOXFS_RUN_DIR="$r1" SANDBOXFS_CMD="$(cat "$r1/.cmd")" setsid "$SFS_BIN" __local-run-wrapper "$r1" "$ws" 9 1073741824 \
		9>/dev/null </dev/null >/dev/null 2>&1 3>&- &
	wait_for grep -qs up "$r1/journal"
	sfs_mount
	[ "$(cat "$MNT/demo/runs/1/status")" = running ]
	echo "kill 1" >"$MNT/demo/ctl"
	[ "$(timeout 10 cat "$MNT/demo/runs/1/wait")" = "killed TERM" ]
	wait_for no_runs_left
}

# bats test_tags=core
@test "a run an earlier wrapper left (RUNDIR/lock, a wpid file) reads running while its lock is held; kill, with no wrapper to prove the group, leaves it be" {
	mkdir "$MNT/demo"
	d=$(sb_dir demo)
	sfs_unmount
	r1="$d/runs/1"
	mkdir -p "$r1"
	printf '%s' 'sleep 300' >"$r1/cmd"
	: >"$r1/lock"
	# flock holds RUNDIR/lock as that wrapper did; setsid makes it the
	# group leader, whose pid the pid file names; the subshell leaves it to
	# init to reap, as the wrapper reaped its command
	(setsid sh -c 'echo $$ >"$1/pid"; exec flock "$1/lock" sleep 300' sh "$r1" \
		</dev/null >/dev/null 2>&1 3>&- &)
	wait_for bash -c "! flock -n '$r1/lock' true"
	pg=$(cat "$r1/pid")
	echo "$pg" >>"$BATS_TEST_TMPDIR/daemon.pids"
	[ "$(ps -o pgid= -p "$pg" | tr -d ' ')" = "$pg" ]
	echo 999999 >"$r1/wpid"
	sfs_mount
	[ "$(cat "$MNT/demo/runs/1/status")" = running ]
	# a group id read from disk proves nothing (it may be anybody's by
	# now): without its live wrapper the group is not signalled
	run bash -c "echo 'kill 1' >'$MNT/demo/ctl'"
	[ "$status" -ne 0 ]
	[[ "$(cat "$MNT/demo/ctl")" == *"no process is left to signal"* ]]
	kill -0 "$pg"
	[ "$(cat "$MNT/demo/runs/1/status")" = running ]
}

@test "kill -9 of the daemon while 4 writers exec: every run dir is a listed run, no number is reused" {
	mkdir "$MNT/demo"
	d=$(sb_dir demo)
	for w in 1 2 3 4; do
		(
			for i in $(seq 1 60); do
				ctl_write "$MNT/demo/ctl" "exec echo w$w-$i; sleep 2; exit 42" >/dev/null 2>&1 || exit 0
			done
		) 3>&- &
		echo $! >>"$BATS_TEST_TMPDIR/writers"
	done
	wait_for test -d "$d/runs/12"
	kill_daemon
	while read -r p; do wait "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/writers"
	sfs_mount
	ondisk=$(ls "$d/runs" | grep -E '^[0-9]+$' | sort -n | tr '\n' ' ')
	listed=$(ls "$MNT/demo/runs" | sort -n | tr '\n' ' ')
	[ "$ondisk" = "$listed" ]
	last=$(ls "$d/runs" | grep -E '^[0-9]+$' | sort -n | tail -n1)
	n=$(run_cmd demo 'echo fresh; exit 7')
	[ "$n" -eq $((last + 1)) ]
	[ "$(cat "$MNT/demo/runs/$n/wait")" = "exited 7" ]
	# every earlier run ends with its own status, and the new one keeps its own
	for i in $(seq 1 "$last"); do
		st=$(timeout 20 cat "$MNT/demo/runs/$i/wait")
		[ "$st" = "exited 42" ] || [ "$st" = lost ]
		if [ "$st" = "exited 42" ]; then
			grep -q '^w[1-4]-[0-9]*$' "$MNT/demo/runs/$i/journal"
		fi
	done
	[ "$(cat "$MNT/demo/runs/$n/status")" = "exited 7" ]
	[ "$(cat "$MNT/demo/runs/$n/journal")" = fresh ]
}

# ---- item 5: rmdir on a full state disk ---------------------------------------

# small_state_mount TMPFS_OPTIONS [sandboxfs options...]: the daemon
# remounted with its state on a tmpfs of its own ($SMALL_FS).
small_state_mount() {
	sfs_unmount
	SMALL_FS="$BATS_TEST_TMPDIR/small"
	mkdir -p "$SMALL_FS"
	mount -t tmpfs -o "$1" tmpfs "$SMALL_FS"
	shift
	STATE="$SMALL_FS/state"
	sfs_mount "$@"
}

# fill DIR: writes into DIR until its filesystem has no byte left.
fill() {
	dd if=/dev/zero of="$1/filler1" bs=64k 2>/dev/null || true
	dd if=/dev/zero of="$1/filler2" bs=512 2>/dev/null || true
	[ "$(df --output=avail "$1" | tail -n1 | tr -d ' ')" = 0 ]
}

# bats test_tags=core
@test "rmdir on a full state disk succeeds and leaves nothing half done" {
	small_state_mount size=8m
	mkdir "$MNT/demo" "$MNT/empty" "$MNT/keep"
	head -c 2M /dev/urandom >"$MNT/demo/workspace/big"
	run_cmd demo 'echo hello'
	cat "$MNT/demo/runs/1/wait"
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/demo/status")
	d=$(sb_dir demo)
	fill "$SMALL_FS"
	# nothing of its own to free: the registry still gets written
	rmdir "$MNT/empty"
	[ ! -e "$MNT/empty" ]
	fill "$SMALL_FS"
	rmdir "$MNT/demo"
	[ ! -e "$MNT/demo" ]
	[ ! -e "$ws" ]
	[ ! -e "$d" ]
	run ! grep -q '"name": "demo"' "$STATE/registry.json"
	run ! grep -q '"name": "empty"' "$STATE/registry.json"
	grep -q '"name": "keep"' "$STATE/registry.json"
	sfs_unmount
	sfs_mount
	[ ! -e "$MNT/demo" ]
	[ ! -e "$MNT/empty" ]
	grep -qx 'state running' "$MNT/keep/status"
}

# bats test_tags=core
@test "an rmdir the full disk stops before the registry says so, and is finished by a retry or a restart" {
	small_state_mount size=4m
	mkdir "$MNT/a" "$MNT/b" "$MNT/keep"
	da=$(sb_dir a)
	db=$(sb_dir b)
	# no reserve left and nothing of their own to free: the registry
	# cannot be written
	rm -f "$STATE/.reserve"
	fill "$SMALL_FS"
	run rmdir "$MNT/a"
	[ "$status" -ne 0 ]
	[[ "$output" == *"No space left on device"* ]]
	# consistent: listed as destroyed, saying why, and still in the registry
	grep -qx 'state destroyed' "$MNT/a/status"
	grep -q '^error destroyed, but not yet taken out of the registry' "$MNT/a/status"
	grep -q '"name": "a"' "$STATE/registry.json"
	run rmdir "$MNT/b"
	[ "$status" -ne 0 ]
	# room again: a retry finishes a
	rm -f "$SMALL_FS/filler1"
	rmdir "$MNT/a"
	[ ! -e "$MNT/a" ]
	[ ! -e "$da" ]
	run ! grep -q '"name": "a"' "$STATE/registry.json"
	# and a restart finishes b
	sfs_unmount
	sfs_mount
	[ ! -e "$MNT/b" ]
	[ ! -e "$db" ]
	run ! grep -q '"name": "b"' "$STATE/registry.json"
	grep -qx 'state running' "$MNT/keep/status"
}

# ---- item 6: rmdir with runs that ignore TERM -----------------------------------

# bats test_tags=core
@test "rmdir signals every run at once and does not hold up mkdir in the root" {
	sfs_unmount
	sfs_mount -o local.kill_grace=3
	mkdir "$MNT/demo"
	for i in $(seq 1 10); do
		run_cmd demo 'trap "" TERM; echo up; while :; do sleep 0.1; done' >/dev/null
	done
	for i in $(seq 1 10); do
		wait_for grep -q up "$MNT/demo/runs/$i/journal"
	done
	rmdir "$MNT/demo" 3>&- &
	rpid=$!
	# the root is free while the TERM-ignoring runs still have their grace
	timeout 2 mkdir "$MNT/other"
	[ -n "$(sfs_run_pids "$STATE")" ]
	[ -d "$MNT/other" ]
	wait "$rpid"
	[ ! -e "$MNT/demo" ]
	# gone from the listing too while its runs still end
	[ -n "$(sfs_run_pids "$STATE")" ]
	[ "$(ls "$MNT" | tr '\n' ' ')" = "ctl other providers " ]
	# one grace for all ten, not ten in a row (30 s)
	wait_for no_runs_left
	wait_for one_sandbox_dir
}

# bats test_tags=core
@test "destroy through ctl waits one grace for all runs, and mkdir goes on meanwhile" {
	sfs_unmount
	sfs_mount -o local.kill_grace=3
	mkdir "$MNT/demo"
	for i in $(seq 1 5); do
		run_cmd demo 'trap "" TERM; echo up; while :; do sleep 0.1; done' >/dev/null
	done
	for i in $(seq 1 5); do
		wait_for grep -q up "$MNT/demo/runs/$i/journal"
	done
	ctl_write "$MNT/demo/ctl" destroy >"$BATS_TEST_TMPDIR/destroy.out" 2>&1 3>&- &
	dpid=$!
	sleep 0.5
	timeout 2 mkdir "$MNT/other"
	wait "$dpid"
	# destroy returned: nothing of the sandbox is left
	[ ! -e "$MNT/demo" ]
	[ -z "$(sfs_run_pids "$STATE")" ]
	[ "$(ls "$STATE/sandboxes" | wc -l)" = 1 ]
}

# ---- an rmdir that returned 0 is decided (ATTACK.md finding 2) ---------------

# bats test_tags=core
@test "kill -9 of the daemon in an rmdir's grace: the next daemon finishes the destroy" {
	sfs_unmount
	# a long grace: the daemon is surely killed inside it
	sfs_mount -o local.kill_grace=60
	mkdir "$MNT/s" "$MNT/keep"
	d=$(sb_dir s)
	for i in 1 2 3; do
		run_cmd s 'trap "" TERM; echo up; while :; do sleep 0.1; done' >/dev/null
	done
	for i in 1 2 3; do
		wait_for grep -q up "$MNT/s/runs/$i/journal"
	done
	rmdir "$MNT/s"
	[ ! -e "$MNT/s" ]
	# decided on disk before rmdir returned
	[ -e "$d/destroying" ]
	# the runs ignore TERM: they are still in their grace
	[ "$(sfs_run_pids "$STATE" | wc -w)" -ge 3 ]
	kill_daemon
	[ "$(sfs_run_pids "$STATE" | wc -w)" -ge 3 ]
	sfs_mount -o local.kill_grace=0.5
	# the next daemon finished it before its mount appeared
	[ ! -e "$MNT/s" ]
	[ "$(ls "$MNT" | tr '\n' ' ')" = "ctl keep providers " ]
	[ -z "$(sfs_run_pids "$STATE")" ]
	[ ! -e "$d" ]
	run ! grep -q '"name": "s"' "$STATE/registry.json"
	grep -qx 'state running' "$MNT/keep/status"
}

# bats test_tags=core
@test "an rmdir with runs going on a full state disk is still decided before it returns" {
	# out of inodes: even the empty marker needs the one STATE/.reserve frees
	small_state_mount size=8m,nr_inodes=200 -o local.kill_grace=60
	mkdir "$MNT/s" "$MNT/keep"
	d=$(sb_dir s)
	run_cmd s 'trap "" TERM; echo up; while :; do sleep 0.1; done' >/dev/null
	wait_for grep -q up "$MNT/s/runs/1/journal"
	[ -e "$STATE/.reserve" ]
	mkdir "$SMALL_FS/fill"
	for i in $(seq 1 300); do : >"$SMALL_FS/fill/$i" 2>/dev/null || break; done
	run touch "$SMALL_FS/fill/one-more"
	[ "$status" -ne 0 ]
	# returns at once (an rmdir that could not decide would wait the grace)
	timeout 10 rmdir "$MNT/s"
	[ -e "$d/destroying" ]
	[ ! -e "$STATE/.reserve" ]
	kill_daemon
	sfs_mount -o local.kill_grace=0.3
	[ ! -e "$MNT/s" ]
	[ -z "$(sfs_run_pids "$STATE")" ]
	[ ! -e "$d" ]
	run ! grep -q '"name": "s"' "$STATE/registry.json"
	grep -qx 'state running' "$MNT/keep/status"
}

# sb_state_is NAME STATE: NAME is listed and in STATE.
sb_state_is() { grep -qsx "state $2" "$MNT/$1/status"; }

# bats test_tags=core
@test "a background destroy that fails leaves the sandbox in state error, saying why" {
	sfs_unmount
	sfs_mount -o local.kill_grace=0.3
	mkdir "$MNT/s"
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/s/status")
	touch "$ws/pinned"
	if ! chattr +i "$ws/pinned" 2>/dev/null; then
		skip "chattr +i not supported here"
	fi
	IMMUTABLE="$ws/pinned"
	run_cmd s 'trap "" TERM; echo up; while :; do sleep 0.1; done' >/dev/null
	wait_for grep -q up "$MNT/s/runs/1/journal"
	# a run going: rmdir returns at once and the destroy fails later
	rmdir "$MNT/s"
	wait_for sb_state_is s error
	grep -q '^error rmdir: the destroy failed: .*Operation not permitted' "$MNT/s/status"
	# the run was ended all the same
	wait_for no_runs_left
	# still so after a restart (the next daemon tried again, and failed)
	sfs_unmount
	sfs_mount
	sb_state_is s error
	grep -q '^error rmdir: the destroy failed: .*Operation not permitted' "$MNT/s/status"
	# fixed: rmdir again finishes it
	chattr -i "$IMMUTABLE"
	rmdir "$MNT/s"
	[ ! -e "$MNT/s" ]
	[ ! -e "$ws" ]
	wait_for no_sandbox_dirs
}

# ---- a daemon killed while `new` makes a sandbox ------------------------------

# bats test_tags=core
@test "kill -9 of the daemon during new's setup=: the next daemon lists it in state error, its runs readable; rmdir removes it all" {
	(ctl_write "$MNT/ctl" "new k setup='echo first' setup='echo up; sleep 60'" >/dev/null 2>&1) &
	wait_for grep -q up "$MNT/k/runs/2/journal"
	grep -qx 'state creating' "$MNT/k/status"
	d=$(sb_dir k)
	[ -d "$d" ]
	kill_daemon
	sfs_mount
	grep -qx 'state error' "$MNT/k/status"
	grep -q '^error interrupted: a daemon stopped while it was being created; rmdir destroys what was made' "$MNT/k/status"
	[ "$(cat "$MNT/k/runs/1/journal")" = first ]
	[ "$(cat "$MNT/k/runs/1/status")" = "exited 0" ]
	run ctl_write "$MNT/k/ctl" "exec true"
	[ "$status" -ne 0 ]
	# the registry says so too: a third daemon sees the same
	grep -q '"state": "error"' "$STATE/registry.json"
	rmdir "$MNT/k"
	[ ! -e "$MNT/k" ]
	wait_for test ! -e "$d"
	wait_for eval 'test -z "$(sfs_run_pids "$STATE")"'
	[ -z "$(ls -A "$STATE/sandboxes")" ]
	run ! grep -q '"name": "k"' "$STATE/registry.json"
}

# bats test_tags=core
@test "a record a daemon left creating before its provider answered is dropped at start, with its state dir" {
	mkdir "$MNT/s" "$MNT/keep"
	echo kept >"$MNT/keep/workspace/f"
	d=$(sb_dir s)
	sfs_unmount
	# what a kill -9 inside the provider's create leaves: a record in state
	# creating without an id (reserve saves it before the dir is made)
	python3 - "$STATE/registry.json" <<-'PY'
		import json, sys
		p = sys.argv[1]
		reg = json.load(open(p))
		for sb in reg["sandboxes"]:
		    if sb["name"] == "s":
		        sb["state"] = "creating"
		        del sb["id"]
		json.dump(reg, open(p, "w"))
	PY
	sfs_mount
	[ "$(ls "$MNT" | tr '\n' ' ')" = "ctl keep providers " ]
	[ ! -e "$d" ]
	run ! grep -q '"name": "s"' "$STATE/registry.json"
	grep -q 'dropped: a daemon stopped while local was creating it' "$BATS_TEST_TMPDIR/daemon.log"
	[ "$(cat "$MNT/keep/workspace/f")" = kept ]
	# the name is free again
	mkdir "$MNT/s"
	grep -qx 'state running' "$MNT/s/status"
}

@test "a record left creating with an id but no state dir (a failed new killed before its record went) is listed in error; rmdir removes it" {
	mkdir "$MNT/s"
	d=$(sb_dir s)
	sfs_unmount
	python3 - "$STATE/registry.json" <<-'PY'
		import json, sys
		p = sys.argv[1]
		reg = json.load(open(p))
		reg["sandboxes"][0]["state"] = "creating"
		json.dump(reg, open(p, "w"))
	PY
	rm -rf "$d"
	sfs_mount
	grep -qx 'state error' "$MNT/s/status"
	grep -q '^error interrupted:' "$MNT/s/status"
	rmdir "$MNT/s"
	[ ! -e "$MNT/s" ]
	[ -z "$(ls -A "$STATE/sandboxes")" ]
	run ! grep -q '"name": "s"' "$STATE/registry.json"
}

# bats test_tags=core
@test "a new that fails leaves no record in the registry and no state dir" {
	run ctl_write "$MNT/ctl" "new x provider=local setup='exit 3'"
	[ "$status" -ne 0 ]
	rmdir "$MNT/x"
	run ctl_write "$MNT/ctl" "new y secret.T=env:SFS_TEST_NO_SUCH_VAR"
	[ "$status" -ne 0 ]
	[ ! -e "$MNT/y" ]
	[ -z "$(ls -A "$STATE/sandboxes")" ]
	run ! grep -q '"name": "[xy]"' "$STATE/registry.json"
}

# ---- item 8: handles of a forgotten or destroyed sandbox ---------------------

# bats test_tags=core
@test "a ctl opened before forget refuses every verb afterwards" {
	mkdir "$MNT/demo"
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/demo/status")
	run_cmd demo 'sleep 30' >/dev/null
	exec 8<>"$MNT/demo/ctl"
	exec 9>"$MNT/demo/runs/1/ctl"
	echo "forget demo" >"$MNT/ctl"
	[ ! -e "$MNT/demo" ]
	for verb in "exec touch marker" "kill" "env A=1" "cancel" "destroy"; do
		run bash -c "echo '$verb' >&8"
		[ "$status" -ne 0 ]
		msg=$(cat <&8)
		[[ "$msg" == "error: "*"forgotten"* ]]
	done
	# (runs/N/ctl opens write-only: its refusal is the errno alone)
	run bash -c "echo kill >&9"
	[ "$status" -ne 0 ]
	[[ "$output" == *"No such file or directory"* ]]
	exec 8>&- 9>&-
	sleep 0.3
	[ ! -e "$ws/marker" ]
	# the forgotten sandbox's run was left alone
	[ -n "$(sfs_run_pids "$STATE")" ]
	[ ! -e "$(dirname "$ws")/runs/2" ]
}

# bats test_tags=core
@test "a ctl opened before rmdir refuses every verb afterwards" {
	mkdir "$MNT/demo"
	exec 8<>"$MNT/demo/ctl"
	rmdir "$MNT/demo"
	run bash -c "echo 'exec true' >&8"
	[ "$status" -ne 0 ]
	msg=$(cat <&8)
	exec 8>&-
	[[ "$msg" == "error: "*"destroyed"* ]]
	[ -z "$(ls "$STATE/sandboxes")" ]
}

# ---- item 13: adopted host directories -----------------------------------------

# bats test_tags=core
@test "rmdir of an adopted sandbox never deletes the adopted directory's contents" {
	adopted="$BATS_TEST_TMPDIR/adopted"
	mkdir -p "$adopted/sub"
	echo precious >"$adopted/f"
	echo deep >"$adopted/sub/g"
	run ctl_write "$MNT/ctl" "new ad dir=$adopted"
	[ "$status" -eq 0 ]
	run_cmd ad 'echo started; sleep 30' >/dev/null
	wait_for grep -q started "$MNT/ad/journal"
	rmdir "$MNT/ad"
	[ ! -e "$MNT/ad" ]
	# with a run going the destroy ends after rmdir returns: wait for all of it
	wait_for no_sandbox_dirs
	[ -z "$(sfs_run_pids "$STATE")" ]
	[ "$(cat "$adopted/f")" = precious ]
	[ "$(cat "$adopted/sub/g")" = deep ]
	# adopted by resume: the same
	echo "resume ad2 provider=local id=$adopted" >"$MNT/ctl"
	[ "$(cat "$MNT/ad2/workspace/f")" = precious ]
	rmdir "$MNT/ad2"
	[ "$(cat "$adopted/f")" = precious ]
	[ "$(cat "$adopted/sub/g")" = deep ]
	[ -z "$(ls "$STATE/sandboxes")" ]
}

# ---- forget and resume (ATTACK.md finding 4) ------------------------------------

# bats test_tags=core
@test "forget then resume of the same id gets the runs back with their journals; the next exec is run 3" {
	mkdir "$MNT/fo"
	id=$(awk '$1=="id"{print $2}' "$MNT/fo/status")
	echo keep >"$MNT/fo/workspace/f"
	[ "$(run_cmd fo 'echo out1')" = 1 ]
	[ "$(run_cmd fo 'echo out2')" = 2 ]
	cat "$MNT/fo/runs/1/wait" "$MNT/fo/runs/2/wait" >/dev/null
	echo "forget fo" >"$MNT/ctl"
	[ ! -e "$MNT/fo" ]
	echo "resume fo provider=local id=$id" >"$MNT/ctl"
	[ "$(ls "$MNT/fo/runs" | sort -n | tr '\n' ' ')" = "1 2 " ]
	[ "$(cat "$MNT/fo/runs/1/cmd")" = "echo out1" ]
	[ "$(cat "$MNT/fo/runs/1/journal")" = out1 ]
	[ "$(cat "$MNT/fo/runs/2/journal")" = out2 ]
	[ "$(cat "$MNT/fo/runs/2/status")" = "exited 0" ]
	[ "$(cat "$MNT/fo/workspace/f")" = keep ]
	[ "$(run_cmd fo 'echo out3')" = 3 ]
	cat "$MNT/fo/runs/3/wait" >/dev/null
	[ "$(cat "$MNT/fo/runs/3/journal")" = out3 ]
	[ "$(cat "$MNT/fo/journal")" = out3 ]
	# one state dir, listed again: no `forgotten` marker left in it
	one_sandbox_dir
	[ -z "$(ls "$STATE"/sandboxes/*/forgotten 2>/dev/null)" ]
	# a restarted daemon sees the same three runs
	sfs_unmount
	sfs_mount
	[ "$(ls "$MNT/fo/runs" | sort -n | tr '\n' ' ')" = "1 2 3 " ]
	[ "$(cat "$MNT/fo/runs/1/journal")" = out1 ]
}

# bats test_tags=core
@test "forget of a sandbox without runs leaves no state dir behind and its workspace intact" {
	host="$BATS_TEST_TMPDIR/host"
	mkdir "$host"
	echo precious >"$host/f"
	before=$(ls "$STATE/sandboxes" | wc -l)
	echo "resume q provider=local id=$host" >"$MNT/ctl"
	echo edited >"$MNT/q/workspace/g"
	echo "forget q" >"$MNT/ctl"
	[ "$(ls "$STATE/sandboxes" | wc -l)" = "$before" ]
	run ctl_write "$MNT/ctl" "new q2 dir=$host"
	[ "$status" -eq 0 ]
	echo "forget q2" >"$MNT/ctl"
	[ "$(ls "$STATE/sandboxes" | wc -l)" = "$before" ]
	[ "$(cat "$host/f")" = precious ]
	[ "$(cat "$host/g")" = edited ]
	# a mkdir'ed sandbox's workspace lives in its state dir: that dir stays,
	# intact, and a resume of its id takes it again (no second dir)
	mkdir "$MNT/m"
	echo mine >"$MNT/m/workspace/f"
	ws=$(awk '$1=="id"{print $2}' "$MNT/m/status")
	echo "forget m" >"$MNT/ctl"
	[ "$(cat "$ws/f")" = mine ]
	[ "$(ls "$STATE/sandboxes" | wc -l)" = $((before + 1)) ]
	echo "resume m provider=local id=$ws" >"$MNT/ctl"
	[ "$(cat "$MNT/m/workspace/f")" = mine ]
	[ "$(ls "$STATE/sandboxes" | wc -l)" = $((before + 1)) ]
}

# bats test_tags=core
@test "forget of a sandbox whose only state is its audit leaves no state dir, written or not" {
	host="$BATS_TEST_TMPDIR/host"
	mkdir "$host"
	echo "resume q provider=local id=$host" >"$MNT/ctl"
	echo x >"$MNT/q/workspace/f"
	# the audit writer has put its lines in the state dir (it writes every
	# 100 ms): whether it had must not decide what forget keeps
	wait_for audit_written create
	echo "forget q" >"$MNT/ctl"
	[ -z "$(ls "$STATE/sandboxes")" ]
	[ "$(cat "$host/f")" = x ]
	# and a destroy's rm -rf is not undone by a late audit write
	mkdir "$MNT/d"
	echo y >"$MNT/d/workspace/f"
	rmdir "$MNT/d"
	wait_for no_sandbox_dirs
	sleep 0.3 # three audit writer ticks
	[ -z "$(ls "$STATE/sandboxes")" ]
}

# bats test_tags=core
@test "20 rounds of mkdir, forget and resume of one name leave a bounded number of state dirs" {
	host="$BATS_TEST_TMPDIR/host"
	mkdir "$host"
	for i in $(seq 1 20); do
		mkdir "$MNT/r"
		id=$(awk '$1=="id"{print $2}' "$MNT/r/status")
		[ "$(run_cmd r "echo round $i")" = 1 ]
		cat "$MNT/r/runs/1/wait" >/dev/null
		echo "forget r" >"$MNT/ctl"
		echo "resume r provider=local id=$id" >"$MNT/ctl"
		echo "forget r" >"$MNT/ctl"
		echo "resume r provider=local id=$id" >"$MNT/ctl"
		[ "$(cat "$MNT/r/runs/1/journal")" = "round $i" ]
		rmdir "$MNT/r"
		echo "resume q provider=local id=$host" >"$MNT/ctl"
		echo "forget q" >"$MNT/ctl"
		[ "$(ls "$STATE/sandboxes" | wc -l)" -le 1 ]
	done
	wait_for no_sandbox_dirs || { find "$STATE/sandboxes" -ls; false; }
}

# bats test_tags=core
@test "a run alive while the daemon was out of fds for a moment is followed to its end, never declared lost" {
	mkdir "$MNT/fd"
	n=$(ctl_write "$MNT/fd/ctl" "exec sleep 2; echo done-ok")
	# an fd the exec's later work closed after the limit was set would
	# leave a slot free
	wait_exec_later_done
	local i=0 hard
	hard=$(ulimit -Hn)
	# the lowest free fd as the soft limit: the daemon's next open fails EMFILE
	while [ -e "/proc/$SFS_PID/fd/$i" ]; do i=$((i + 1)); done
	prlimit --pid "$SFS_PID" --nofile="$i:$hard"
	sleep 4
	prlimit --pid "$SFS_PID" --nofile="$hard:$hard"
	[ "$(cat "$MNT/fd/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/fd/runs/$n/journal")" = done-ok ]
}

# ---- ATTACK3 #10: a run's output and a full state disk ------------------------

# bats test_tags=core
@test "a run printing past journal.max_size goes on to its own end; its journal is cut there with one marker line" {
	sfs_unmount
	sfs_mount -o journal.max_size=1000
	mkdir "$MNT/demo"
	# after the cap: more output, then a file and an exit status of its own
	run_cmd demo 'head -c 5000 /dev/zero | tr "\0" a; echo after; touch went-on; exit 3'
	[ "$(cat "$MNT/demo/runs/1/wait")" = "exited 3" ]
	[ -e "$MNT/demo/workspace/went-on" ]
	j="$MNT/demo/runs/1/journal"
	[ "$(head -c 1000 "$j")" = "$(head -c 1000 /dev/zero | tr '\0' a)" ]
	[ "$(tail -c +1001 "$j")" = "
sandboxfs: journal truncated at 1000 bytes (journal.max_size); the run's further output is dropped" ]
	[ "$(stat -L -c %s "$j")" = $((1000 + 1 + 99)) ]
}

# bats test_tags=core
@test "a run ending while the state disk is full gets its own status, never lost" {
	small_state_mount size=4m
	mkdir "$MNT/demo"
	# the fifos through the host path: a fifo opened through FUSE is a
	# pipe of the mount's own, not the one the run reads
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/demo/status")
	mkfifo "$ws/go1" "$ws/go2"
	run_cmd demo 'read x <go1; exit 7'
	run_cmd demo 'read x <go2; exit 8'
	fill "$SMALL_FS"
	# the status file reserved at the run's start takes the status
	echo go >"$ws/go1"
	[ "$(timeout 10 cat "$MNT/demo/runs/1/wait")" = "exited 7" ]
	# and once room is back, the next one as well
	rm -f "$SMALL_FS/filler1" "$SMALL_FS/filler2"
	echo go >"$ws/go2"
	[ "$(timeout 10 cat "$MNT/demo/runs/2/wait")" = "exited 8" ]
	[ "$(cat "$MNT/demo/runs/1/status")" = "exited 7" ]
}
