#!/usr/bin/env bats
# bats file_tags=core
# The mount, the tree, ctl/caps/journal and the local provider, used the way
# a person uses them: mkdir, echo > ctl, cat journal.

load helpers

setup() {
	sfs_mount
}

teardown() {
	sfs_teardown
}

# run_cmd SANDBOX CMD: starts a run and prints its number.
run_cmd() {
	local out
	out=$(ctl_write "$MNT/$1/ctl" "exec $2") || return 1
	echo "$out"
}

@test "--help and --version" {
	run "$SFS_BIN" --help
	[ "$status" -eq 0 ]
	[[ "$output" == *"usage: sandboxfs"* ]]
	run "$SFS_BIN" --version
	[ "$status" -eq 0 ]
	echo "$output"
	# the version and the revision built from, then the libraries it runs with
	[[ "${lines[0]}" =~ ^sandboxfs\ [0-9]+\.[0-9]+\.[0-9]+\ \((unknown|[0-9a-f]{12}(-.*)?)\)$ ]]
	[[ "${lines[1]}" =~ ^libfuse\ 3\.[0-9]+,\ libcurl\ [0-9.]+,\ libgit2\ [0-9]+\.[0-9]+\.[0-9]+,\ jansson\ [0-9.]+$ ]]
	# built from this checkout's commit (edits since may make it -dirty)
	if git -C "$SFS_ROOT" rev-parse HEAD >/dev/null 2>&1; then
		[[ "${lines[0]}" == *"($(git -C "$SFS_ROOT" rev-parse --short=12 HEAD)"* ]]
	fi
	run "$SFS_BIN"
	[ "$status" -eq 2 ]
	[[ "$output" == *"no mountpoint"* ]]
}

# try_mount ARGS...: `run`s a second daemon in the foreground with ARGS on a
# scratch mount point; a mount that wrongly succeeds ends after 20 s (libfuse
# unmounts on TERM) and the mount point is cleared whatever happened.
try_mount() {
	local m="$BATS_TEST_TMPDIR/m2"
	mkdir -p "$m" "$BATS_TEST_TMPDIR/s2"
	run timeout -k 5 20 "$SFS_BIN" -f --state "$BATS_TEST_TMPDIR/s2" "$@" "$m" 3>&-
	fusermount3 -uz "$m" 2>/dev/null || true
}

@test "--help lists the core's and every provider's options" {
	run "$SFS_BIN" --help
	[ "$status" -eq 0 ]
	for key in attr_timeout writeback max_threads local.scrub_env local.kill_grace \
		docker.host docker.fs docker.kill_grace daytona.api_url daytona.timeout; do
		[[ "$output" == *"-o $key"* ]]
	done
	[[ "$output" == *"docker options:"* ]]
	[[ "$output" == *"daytona options:"* ]]
	[[ "$output" == *"allow_other"* ]]
}

@test "an unknown -o key fails the mount naming the nearest key, as -o X and as -oX" {
	try_mount -o docker.fss=archive
	[ "$status" -eq 2 ]
	[[ "$output" == *'unknown option "docker.fss" (did you mean docker.fs?)'* ]]
	try_mount -odocker.fss=archive
	[ "$status" -eq 2 ]
	[[ "$output" == *'unknown option "docker.fss" (did you mean docker.fs?)'* ]]
	# a key with no dot, and one among others in a list
	try_mount -o local.kill_grace=1,writebak
	[ "$status" -eq 2 ]
	[[ "$output" == *'unknown option "writebak" (did you mean writeback?)'* ]]
	try_mount -oallow_othr
	[ "$status" -eq 2 ]
	[[ "$output" == *'did you mean allow_other?'* ]]
}

@test "a bad option value (-o, --log-level, SANDBOXFS_PROVIDER) fails the mount naming the key" {
	try_mount -o docker.fs=archiv
	[ "$status" -eq 2 ]
	[[ "$output" == *'docker.fs: "archiv" is not one of auto|archive (did you mean archive?)'* ]]
	try_mount -omax_threads=lots
	[ "$status" -eq 2 ]
	[[ "$output" == *'max_threads: "lots" is not an integer'* ]]
	try_mount -o writeback=maybe
	[ "$status" -eq 2 ]
	[[ "$output" == *'writeback: "maybe" is not a boolean'* ]]
	try_mount -o local.kill_grace=-1
	[ "$status" -eq 2 ]
	[[ "$output" == *'local.kill_grace: -1 is out of range'* ]]
	try_mount --log-level loud
	[ "$status" -eq 2 ]
	[[ "$output" == *'log_level: "loud" is not an integer'* ]]
	SANDBOXFS_PROVIDER=dockr try_mount
	[ "$status" -eq 2 ]
	[[ "$output" == *'SANDBOXFS_PROVIDER: option provider: no provider "dockr" (did you mean docker?)'* ]]
}

@test "a bad config file line fails the mount with its line number" {
	printf '# comment\nlocal.kill_grace = 1\n\ndocker.fss = archive\n' >"$BATS_TEST_TMPDIR/conf"
	try_mount --config "$BATS_TEST_TMPDIR/conf"
	[ "$status" -eq 1 ]
	[[ "$output" == *'conf:4: unknown option "docker.fss" (did you mean docker.fs?)'* ]]
	printf 'http.attempts = many\n' >"$BATS_TEST_TMPDIR/conf"
	try_mount --config "$BATS_TEST_TMPDIR/conf"
	[ "$status" -eq 1 ]
	[[ "$output" == *'conf:1: option http.attempts: "many" is not an integer'* ]]
}

@test "libfuse's own mount options and escaped commas pass; config file keys apply" {
	sfs_unmount
	# x-* are fstab's userspace-only options (mount(8)): accepted, ignored
	A_ONE=1 B_TWO=2 sfs_mount -o noatime,local.scrub_env=A_ONE\\,B_TWO,x-systemd.automount
	grep -q " $MNT fuse.sandboxfs [^ ]*noatime" /proc/mounts
	mkdir "$MNT/d1"
	n=$(ctl_write "$MNT/d1/ctl" 'exec echo "[$A_ONE$B_TWO]"')
	cat "$MNT/d1/runs/$n/wait"
	[ "$(cat "$MNT/d1/journal")" = "[]" ]
	sfs_unmount
	printf 'local.scrub_env = A_ONE,B_TWO\n' >"$BATS_TEST_TMPDIR/conf"
	A_ONE=1 B_TWO=2 sfs_mount --config "$BATS_TEST_TMPDIR/conf"
	mkdir "$MNT/d2"
	n=$(ctl_write "$MNT/d2/ctl" 'exec echo "[$A_ONE$B_TWO]"')
	cat "$MNT/d2/runs/$n/wait"
	[ "$(cat "$MNT/d2/journal")" = "[]" ]
}

@test "the root lists ctl and providers; a provider has caps and status" {
	run ls "$MNT"
	[ "$output" = "$(printf 'ctl\nproviders')" ]
	run cat "$MNT/providers/local/status"
	[[ "$output" == *"configured true"* ]]
	[ "$(stat -c %a "$MNT/ctl")" = 600 ]
	[ "$(stat -c %a "$MNT/providers/local/caps")" = 444 ]
}

@test "mkdir makes a sandbox, rmdir destroys it and its workspace" {
	mkdir "$MNT/demo"
	[ -d "$MNT/demo" ]
	run cat "$MNT/demo/status"
	[[ "$output" == *"name demo"* ]]
	[[ "$output" == *"provider local"* ]]
	[[ "$output" == *"state running"* ]]
	[[ "$output" == *"journal follow"* ]]
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/demo/status")
	[ -d "$ws" ]
	rmdir "$MNT/demo"
	[ ! -e "$MNT/demo" ]
	[ ! -e "$ws" ]
	run ls "$MNT"
	[ "$output" = "$(printf 'ctl\nproviders')" ]
}

@test "status has every key SPEC §2 names" {
	mkdir "$MNT/s1"
	for k in name provider id state created image journal workspace; do
		grep -q "^$k " "$MNT/s1/status"
	done
	created=$(awk '$1=="created"{print $2}' "$MNT/s1/status")
	[[ "$created" =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$ ]]
}

@test "bad sandbox names fail with EINVAL and create nothing" {
	for name in .hidden -dash "$(printf 'a%.0s' {1..64})" 'sp ace' 'semi;colon' 'ü'; do
		run mkdir "$MNT/$name"
		[ "$status" -ne 0 ]
		[[ "$output" == *"Invalid argument"* ]]
	done
	# the reserved names are taken by the tree itself
	for name in ctl providers; do
		run mkdir "$MNT/$name"
		[[ "$output" == *"File exists"* ]]
		run bash -c "echo 'new $name' >'$MNT/ctl'"
		[[ "$output" == *"Invalid argument"* ]]
	done
	run ls "$MNT"
	[ "$output" = "$(printf 'ctl\nproviders')" ]
	mkdir "$MNT/$(printf 'a%.0s' {1..63})"
}

@test "new and forget on the mount ctl; forget leaves the workspace" {
	run ctl_write "$MNT/ctl" "new n1"
	[ "$status" -eq 0 ]
	[ "$output" = "n1" ]
	echo hello >"$MNT/n1/workspace/f"
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/n1/status")
	echo "forget n1" >"$MNT/ctl"
	[ ! -e "$MNT/n1" ]
	[ "$(cat "$ws/f")" = hello ]
	# and resume brings it back by id
	echo "resume n1 provider=local id=$ws" >"$MNT/ctl"
	[ "$(cat "$MNT/n1/workspace/f")" = hello ]
}

@test "mv renames the local name only" {
	mkdir "$MNT/old"
	echo x >"$MNT/old/workspace/f"
	mv "$MNT/old" "$MNT/new"
	[ ! -e "$MNT/old" ]
	[ "$(cat "$MNT/new/workspace/f")" = x ]
	grep -q "^name new" "$MNT/new/status"
	mkdir "$MNT/other"
	run mv -T "$MNT/other" "$MNT/new"
	[ "$status" -ne 0 ]
}

@test "mv of a sandbox into another's workspace is refused and copies nothing; files still move between workspaces" {
	mkdir "$MNT/m1" "$MNT/m2"
	echo one >"$MNT/m1/workspace/f"
	run mv "$MNT/m1" "$MNT/m2/workspace/"
	[ "$status" -ne 0 ]
	[[ "$output" == *"not permitted"* ]]
	[ "$(cat "$MNT/m1/workspace/f")" = one ]
	[ ! -e "$MNT/m2/workspace/m1" ]
	run mv "$MNT/m1/ctl" "$MNT/m2/workspace/"
	[ "$status" -ne 0 ]
	[ -e "$MNT/m1/ctl" ]
	# a file moves between two sandboxes' workspaces (mv copies, as across filesystems)
	mv "$MNT/m1/workspace/f" "$MNT/m2/workspace/"
	[ "$(cat "$MNT/m2/workspace/f")" = one ]
	[ ! -e "$MNT/m1/workspace/f" ]
}

@test "a bad command fails with EINVAL and the message is read back from ctl" {
	mkdir "$MNT/demo"
	exec 7<>"$MNT/demo/ctl"
	run bash -c 'echo "frobnicate now" >&7'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	msg=$(cat <&7)
	exec 7>&-
	[[ "$msg" == "error: unknown command \"frobnicate now\""* ]]
	# a multi-line write with a bad line runs none of it (/bin/printf
	# writes once; bash's builtin printf writes line by line)
	run bash -c "/usr/bin/printf 'exec echo one\nkill NOSUCHSIG\n' >'$MNT/demo/ctl'"
	[ "$status" -ne 0 ]
	[ ! -e "$MNT/demo/runs/1" ]
	# a good multi-line write runs every line in order
	/usr/bin/printf 'env A=1\nexec echo "$A"\n' >"$MNT/demo/ctl"
	[ "$(cat "$MNT/demo/runs/1/wait")" = "exited 0" ]
	[ "$(cat "$MNT/demo/journal")" = 1 ]
}

@test "an unsupported op fails with EOPNOTSUPP saying what is missing" {
	mkdir "$MNT/demo"
	exec 7<>"$MNT/demo/ctl"
	# local has workspace snapshots (snapshots.bats), not native ones
	run bash -c 'echo snapshot kind=native >&7'
	[ "$status" -ne 0 ]
	[[ "$output" == *"Operation not supported"* ]]
	msg=$(cat <&7)
	exec 7>&-
	[[ "$msg" == *"provider local does not support snapshot"* ]]
	run bash -c "echo stop >'$MNT/demo/ctl'"
	[[ "$output" == *"Operation not supported"* ]]
	grep -q '^snapshots workspace$' "$MNT/demo/status"
}

@test "caps lists the 11 flags in SPEC order" {
	mkdir "$MNT/demo"
	run awk '{print $1}' "$MNT/demo/caps"
	[ "$output" = "$(printf '%s\n' fs exec env ports backgroundProcesses writableStdin killableProcesses snapshots networkPolicy durableFilesystem fork)" ]
	diff "$MNT/demo/caps" "$MNT/providers/local/caps"
}

@test "exec: the run number is read back on the same fd, runs/N has cmd status wait" {
	mkdir "$MNT/demo"
	exec 7<>"$MNT/demo/ctl"
	echo 'exec echo "hello  world"; exit 3' >&7
	read -r n <&7
	exec 7>&-
	[ "$n" = 1 ]
	[ "$(cat "$MNT/demo/runs/1/wait")" = "exited 3" ]
	[ "$(cat "$MNT/demo/runs/1/status")" = "exited 3" ]
	[ "$(cat "$MNT/demo/runs/1/cmd")" = 'echo "hello  world"; exit 3' ]
	[ "$(cat "$MNT/demo/journal")" = "hello  world" ]
	[ "$(readlink "$MNT/demo/journal")" = runs/1/journal ]
	[ "$(run_cmd demo 'true')" = 2 ]
	[ "$(readlink "$MNT/demo/journal")" = runs/2/journal ]
}

@test "backgroundProcesses: exec returns while the run goes on" {
	mkdir "$MNT/demo"
	# exec came back, and the run it started has not ended (it would take
	# 300 s): no clock needed
	run_cmd demo 'sleep 300'
	[ "$(cat "$MNT/demo/runs/1/status")" = running ]
	echo kill >"$MNT/demo/ctl"
}

@test "cat journal streams a run live and ends with it" {
	mkdir "$MNT/demo"
	run_cmd demo 'for i in 1 2 3 4 5 6 7 8 9 10; do echo "line $i"; sleep 0.1; done'
	# the first line arrives while the run is still going
	exec 4<"$MNT/demo/journal"
	read -r first <&4
	[ "$first" = "line 1" ]
	[ "$(cat "$MNT/demo/runs/1/status")" = running ]
	rest=$(cat <&4)
	exec 4<&-
	[ "$(echo "$rest" | wc -l)" = 9 ]
	[ "$(echo "$rest" | tail -n1)" = "line 10" ]
	[ "$(cat "$MNT/demo/runs/1/status")" = "exited 0" ]
}

@test "journal: stdout and stderr merged in arrival order; st_size is bytes so far" {
	mkdir "$MNT/demo"
	run_cmd demo 'echo out1; echo err1 >&2; echo out2'
	cat "$MNT/demo/runs/1/wait"
	[ "$(cat "$MNT/demo/journal")" = "$(printf 'out1\nerr1\nout2')" ]
	[ "$(stat -L -c %s "$MNT/demo/journal")" = 15 ]
}

@test "head -c and tail -f work on a journal" {
	mkdir "$MNT/demo"
	run_cmd demo 'for i in $(seq 1 20); do echo "tick $i"; sleep 0.1; done'
	[ "$(head -c 6 "$MNT/demo/journal")" = "tick 1" ]
	timeout 10 tail -f "$MNT/demo/runs/1/journal" >"$BATS_TEST_TMPDIR/tail.out" &
	tpid=$!
	cat "$MNT/demo/runs/1/wait"
	wait_for grep -q "tick 20" "$BATS_TEST_TMPDIR/tail.out"
	kill "$tpid" 2>/dev/null || true
	[ "$(grep -c tick "$BATS_TEST_TMPDIR/tail.out")" = 20 ]
}

@test "an interrupted reader is released at once" {
	mkdir "$MNT/demo"
	command -v python3 || skip "python3 is not installed"
	run_cmd demo 'sleep 30'
	# a reader with a SIGINT handler, as an interactive `cat` has: the
	# signal interrupts the parked read, which must come back EINTR now
	python3 -c '
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    os.read(fd, 4096)
    print("read returned")
except KeyboardInterrupt:
    print("interrupted")
' "$MNT/demo/journal" >"$BATS_TEST_TMPDIR/py.out" &
	cpid=$!
	# signal only once the read is parked in the daemon: the reader's
	# current syscall is read(2) on the journal's fd (a signal before
	# that would be Python's business, not the mount's)
	wait_for blocked_reading "$cpid" "$MNT/demo/journal"
	kill -INT "$cpid"
	wait "$cpid" || true
	[ "$(cat "$BATS_TEST_TMPDIR/py.out")" = interrupted ]
	# released by the interrupt, not by the run's end
	[ "$(cat "$MNT/demo/runs/1/status")" = running ]
	echo kill >"$MNT/demo/ctl"
}

@test "200 concurrent readers of one journal all get every byte" {
	mkdir "$MNT/demo"
	run_cmd demo 'for i in $(seq 1 30); do echo "line $i of the journal"; sleep 0.05; done'
	pids=()
	for i in $(seq 1 200); do
		cat "$MNT/demo/journal" >"$BATS_TEST_TMPDIR/r$i" &
		pids+=($!)
	done
	wait "${pids[@]}" # not a bare wait: the daemon is a child of this shell too
	cat "$MNT/demo/runs/1/wait"
	expected=$(cat "$MNT/demo/journal")
	[ "$(echo "$expected" | wc -l)" = 30 ]
	for i in $(seq 1 200); do
		[ "$(cat "$BATS_TEST_TMPDIR/r$i")" = "$expected" ]
	done
}

@test "readers that come and go leave no follower and no process" {
	mkdir "$MNT/demo"
	run_cmd demo 'for i in $(seq 1 40); do echo "x $i"; sleep 0.05; done'
	for i in $(seq 1 50); do
		timeout 0.2 cat "$MNT/demo/journal" >/dev/null || true
	done
	cat "$MNT/demo/runs/1/wait"
	wait_for grep -q '^followers 0$' "$MNT/demo/status"
	wait_for eval 'test -z "$(sfs_run_pids "$STATE")"'
}

@test "kill: TERM then KILL takes the whole group, a TERM-ignoring grandchild too" {
	mkdir "$MNT/demo"
	run_cmd demo 'sh -c "trap \"\" TERM; echo grandchild \$\$; while :; do sleep 0.1; done" & echo parent; wait'
	wait_for grep -q grandchild "$MNT/demo/journal"
	gc=$(grep -m1 grandchild "$MNT/demo/journal" | awk '{print $2}')
	kill -0 "$gc"
	echo kill >"$MNT/demo/ctl"
	run cat "$MNT/demo/runs/1/wait"
	[ "$output" = "killed TERM" ]
	run ! kill -0 "$gc"
	wait_for eval 'test -z "$(sfs_run_pids "$STATE")"'
}

# gone PID: PID is no process any more, or a zombie (dead, only not yet
# reaped by the run wrapper).
gone() {
	! kill -0 "$1" 2>/dev/null || [ "$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" = Z ]
}

# The command that escapes: its own session (setsid), TERM ignored; the
# escaped sh's pid lands in the workspace's file $1.
escape_cmd() {
	echo "setsid sh -c 'trap \"\" TERM; sleep 600' </dev/null >/dev/null 2>&1 & echo \$! >$1"
}

@test "kill reaches a descendant that left the run's group and session (setsid), TERM-ignoring" {
	mkdir "$MNT/demo"
	run_cmd demo "$(escape_cmd esc); sleep 600"
	wait_for test -s "$MNT/demo/workspace/esc"
	esc=$(cat "$MNT/demo/workspace/esc")
	kill -0 "$esc"
	# it really left: another session than the run's command
	[ "$(ps -o sid= -p "$esc")" != "$(ps -o sid= -p "$(cut -d' ' -f1 "$STATE"/sandboxes/*/runs/1/pid)")" ]
	echo kill >"$MNT/demo/ctl"
	run cat "$MNT/demo/runs/1/wait"
	[ "$output" = "killed TERM" ]
	# gone when kill returned, status final
	gone "$esc"
	[ "$(cat "$MNT/demo/runs/1/status")" = "killed TERM" ]
	wait_for eval 'test -z "$(sfs_run_pids "$STATE")"'
}

@test "rmdir reaches descendants that left their run's session, of live and of ended runs" {
	sfs_unmount
	sfs_mount -o local.kill_grace=1
	mkdir "$MNT/demo"
	run_cmd demo "$(escape_cmd esc1); sleep 600"
	# this run's own command ends at once: only its escaped child is left
	run_cmd demo "$(escape_cmd esc2)"
	wait_for test -s "$MNT/demo/workspace/esc1"
	wait_for test -s "$MNT/demo/workspace/esc2"
	esc1=$(cat "$MNT/demo/workspace/esc1")
	esc2=$(cat "$MNT/demo/workspace/esc2")
	[ "$(cat "$MNT/demo/runs/2/wait")" = "exited 0" ]
	kill -0 "$esc1"
	kill -0 "$esc2"
	rmdir "$MNT/demo"
	wait_for gone "$esc1"
	wait_for gone "$esc2"
	wait_for eval 'test -z "$(sfs_run_pids "$STATE")"'
}

@test "kill RUN SIGNAL, runs/N/ctl kill, and cancel on a killable provider" {
	mkdir "$MNT/demo"
	run_cmd demo 'sleep 30'
	run_cmd demo 'sleep 30'
	run_cmd demo 'sleep 30'
	# (an INT landing while the shell forks the command waits for its end:
	# ctl.bats, "when kill returns")
	wait_sleep_running "$(ls -d "$STATE"/sandboxes/*/runs/1)"
	echo "kill 1 INT" >"$MNT/demo/ctl"
	[ "$(cat "$MNT/demo/runs/1/wait")" = "killed INT" ]
	echo "kill HUP" >"$MNT/demo/runs/2/ctl"
	[ "$(cat "$MNT/demo/runs/2/wait")" = "killed HUP" ]
	echo cancel >"$MNT/demo/ctl"
	[ "$(cat "$MNT/demo/runs/3/wait")" = "killed TERM" ]
	grep -q "state running" "$MNT/demo/status"
	# killing an ended run is an error, not a silent success
	run bash -c "echo 'kill 1' >'$MNT/demo/ctl'"
	[ "$status" -ne 0 ]
}

@test "writableStdin: bytes written to runs/N/stdin reach the run; eof ends it" {
	mkdir "$MNT/demo"
	run_cmd demo 'while read -r l; do echo "got $l"; done; echo done'
	echo hello >"$MNT/demo/runs/1/stdin"
	echo world >"$MNT/demo/runs/1/stdin"
	wait_for grep -q "got world" "$MNT/demo/journal"
	[ "$(cat "$MNT/demo/runs/1/status")" = running ]
	echo eof >"$MNT/demo/runs/1/ctl"
	[ "$(cat "$MNT/demo/runs/1/wait")" = "exited 0" ]
	[ "$(cat "$MNT/demo/journal")" = "$(printf 'got hello\ngot world\ndone')" ]
}

@test "env: new env.K=V and env K=V reach runs, unsetenv removes" {
	run ctl_write "$MNT/ctl" "new demo env.GREETING=hi"
	[ "$status" -eq 0 ]
	echo 'env COLOR="dark blue"' >"$MNT/demo/ctl"
	run_cmd demo 'echo "$GREETING/$COLOR"'
	cat "$MNT/demo/runs/1/wait"
	[ "$(cat "$MNT/demo/runs/1/journal")" = "hi/dark blue" ]
	echo 'unsetenv COLOR' >"$MNT/demo/ctl"
	run_cmd demo 'echo "${COLOR-unset}"'
	cat "$MNT/demo/runs/2/wait"
	[ "$(cat "$MNT/demo/runs/2/journal")" = unset ]
}

@test "scrubEnv: local.scrub_env names never reach a run" {
	sfs_unmount
	SECRET_THING=leak sfs_mount -o local.scrub_env=SECRET_THING
	mkdir "$MNT/demo"
	run_cmd demo 'echo "${SECRET_THING-absent}"'
	cat "$MNT/demo/runs/1/wait"
	[ "$(cat "$MNT/demo/journal")" = absent ]
}

@test "provider credentials in the daemon's environment never reach a local run" {
	sfs_unmount
	DAYTONA_API_KEY=dtn-planted-credential sfs_mount
	mkdir "$MNT/demo"
	run_cmd demo 'echo "${DAYTONA_API_KEY-absent}"'
	cat "$MNT/demo/runs/1/wait"
	[ "$(cat "$MNT/demo/journal")" = absent ]
	# the sandbox's own env still may set it on purpose
	echo 'env DAYTONA_API_KEY=chosen' >"$MNT/demo/ctl"
	run_cmd demo 'echo "${DAYTONA_API_KEY-absent}"'
	cat "$MNT/demo/runs/2/wait"
	[ "$(cat "$MNT/demo/runs/2/journal")" = chosen ]
}

@test "ports: expose gives a URL that reaches a server in the sandbox" {
	command -v python3 || skip "python3 is not installed"
	mkdir "$MNT/demo"
	echo served >"$MNT/demo/workspace/index.html"
	port=$((20000 + RANDOM % 20000))
	run_cmd demo "exec python3 -m http.server $port --bind 127.0.0.1"
	echo "expose $port" >"$MNT/demo/ctl"
	url=$(cat "$MNT/demo/ports/$port")
	[ "$url" = "http://127.0.0.1:$port" ]
	wait_for curl -sf "$url/index.html" -o "$BATS_TEST_TMPDIR/page"
	[ "$(cat "$BATS_TEST_TMPDIR/page")" = served ]
	echo kill >"$MNT/demo/ctl"
}

@test "fork copies the workspace into a new sandbox" {
	mkdir "$MNT/demo"
	mkdir -p "$MNT/demo/workspace/sub"
	echo data >"$MNT/demo/workspace/sub/f"
	ln -s sub/f "$MNT/demo/workspace/link"
	echo "fork copy" >"$MNT/demo/ctl"
	[ "$(cat "$MNT/copy/workspace/sub/f")" = data ]
	[ "$(readlink "$MNT/copy/workspace/link")" = sub/f ]
	echo changed >"$MNT/copy/workspace/sub/f"
	[ "$(cat "$MNT/demo/workspace/sub/f")" = data ]
}

@test "workspace basics: create, read, write, ls, rm, mkdir, mv" {
	mkdir "$MNT/demo"
	w="$MNT/demo/workspace"
	echo one >"$w/a"
	echo two >>"$w/a"
	[ "$(cat "$w/a")" = "$(printf 'one\ntwo')" ]
	mkdir -p "$w/d/e"
	mv "$w/a" "$w/d/e/b"
	[ "$(ls "$w/d/e")" = b ]
	[ ! -e "$w/a" ]
	rm "$w/d/e/b"
	rmdir "$w/d/e" "$w/d"
	[ -z "$(ls -A "$w")" ]
	# runs see what the mount wrote, and the mount sees what runs write
	echo from-mount >"$w/m"
	run_cmd demo 'cat m; echo from-run >r'
	cat "$MNT/demo/runs/1/wait"
	[ "$(cat "$MNT/demo/journal")" = from-mount ]
	wait_for eval 'test "$(cat "$w/r")" = from-run'
}

@test "durableFilesystem and takeover: kill -9 of the daemon mid-run loses nothing" {
	mkdir "$MNT/demo"
	echo keep >"$MNT/demo/workspace/f"
	run_cmd demo 'for i in $(seq 1 30); do echo "n $i"; sleep 0.1; done'
	wait_for grep -q "n 3" "$MNT/demo/journal"
	kill -9 "$SFS_PID"
	umount -l "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null || true
	sleep 1.5 # the run writes while nobody watches
	sfs_mount
	[ -d "$MNT/demo" ]
	[ "$(cat "$MNT/demo/workspace/f")" = keep ]
	cat "$MNT/demo/runs/1/wait"
	run cat "$MNT/demo/runs/1/journal"
	[ "$(echo "$output" | wc -l)" = 30 ]
	[ "$(echo "$output" | tail -n1)" = "n 30" ]
	[ "$(cat "$MNT/demo/runs/1/status")" = "exited 0" ]
}

@test "unmount with runs going leaves the runs going" {
	mkdir "$MNT/demo"
	run_cmd demo 'for i in $(seq 1 20); do echo "n $i"; sleep 0.1; done'
	wait_for grep -q "n 2" "$MNT/demo/journal"
	sfs_unmount
	[ -n "$(sfs_run_pids "$STATE")" ]
	sleep 2.5
	sfs_mount
	[ "$(cat "$MNT/demo/runs/1/wait")" = "exited 0" ]
	[ "$(wc -l <"$MNT/demo/runs/1/journal")" = 20 ]
}

@test "a second daemon on the same state dir is refused" {
	mkdir -p "$BATS_TEST_TMPDIR/mnt2"
	run "$SFS_BIN" -f --state "$STATE" "$BATS_TEST_TMPDIR/mnt2"
	[ "$status" -ne 0 ]
	[[ "$output" == *"in use by another sandboxfs"* ]]
}

@test "secrets are redacted in ctl errors, status and the log" {
	mkdir "$MNT/demo"
	exec 7<>"$MNT/demo/ctl"
	run bash -c 'echo "kill password=hunter2secret" >&7'
	msg=$(cat <&7)
	exec 7>&-
	[[ "$msg" == *"[redacted]"* ]]
	[[ "$msg" != *hunter2secret* ]]
	echo 'env API_TOKEN=hunter2secret' >"$MNT/demo/ctl"
	run_cmd demo 'echo "$API_TOKEN" | wc -c'
	cat "$MNT/demo/runs/1/wait"
	# the run gets the value; nothing sandboxfs shows about it shows it (the
	# registry keeps env values as given: a secret is a secret.NAME= reference)
	[ "$(cat "$MNT/demo/journal" | tr -d ' ')" = 14 ]
	! grep -r hunter2secret "$BATS_TEST_TMPDIR/daemon.log" "$MNT/demo/status" "$MNT/demo/ctl"
}

@test "mount(8) can mount it, so fstab can too" {
	command -v mount.fuse3 >/dev/null || skip "mount.fuse3 is not installed"
	sfs_unmount
	# `-t fuse.sandboxfs` looks the binary up in mount's own PATH; the
	# `PROGRAM#SOURCE` form names this build's binary directly
	mount -t fuse "$SFS_BIN#sandboxfs" "$MNT" -o "state=$STATE"
	grep -q " $MNT fuse.sandboxfs " /proc/mounts
	mkdir "$MNT/viamount"
	[ -f "$MNT/viamount/caps" ]
	umount "$MNT"
	# daemonized, it logged to the state dir
	[ -f "$STATE/sandboxfs.log" ]
}
