#!/usr/bin/env bats
# ctl files under hostile use: writes cut anywhere by the kernel, lines
# without a newline, lines over the bound, bytes that are not text, and the
# small promises around them (modes, names, redaction, kill's return).

load helpers
load docker_helpers

setup() {
	sfs_mount
}

teardown() {
	cd "$BATS_TEST_TMPDIR"
	sfs_teardown
	docker_cleanup
	# an allow_other mount point lives outside the private test dir
	if [ -n "${AO_DIR:-}" ]; then
		rmdir "$AO_DIR/mnt" 2>/dev/null || true
		rmdir "$AO_DIR" 2>/dev/null || true
	fi
}

# mount_allow_other [options...]: remounts with -o allow_other on a mount
# point other users can reach (the bats tmpdir is private).
mount_allow_other() {
	sfs_unmount
	AO_DIR=$(mktemp -d /tmp/sfs-ctl-ao.XXXXXX)
	chmod 755 "$AO_DIR"
	MNT="$AO_DIR/mnt"
	sfs_mount -o allow_other "$@"
}

as_nobody() {
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
}

# ws SANDBOX: the host directory of a local sandbox's workspace.
ws() {
	awk '$1=="workspace"{print $2}' "$MNT/$1/status"
}

# pad FILE TARGET: appends blank lines (blank lines are skipped) to FILE
# until it is TARGET bytes long.
pad() {
	local f="$1" target="$2" size
	size=$(stat -c %s "$f")
	while [ $((target - size)) -gt 100 ]; do
		printf '%99s\n' '' >>"$f"
		size=$((size + 100))
	done
	while [ "$size" -lt "$target" ]; do
		printf '\n' >>"$f"
		size=$((size + 1))
	done
}

# bats test_tags=core
@test "a command cut by a write boundary runs whole: cat's 128 KiB pieces and the kernel's 1 MiB split" {
	mkdir "$MNT/demo"
	W=$(ws demo)
	f="$BATS_TEST_TMPDIR/cmds"
	: >"$f"
	# each exec line straddles a boundary: 128 KiB (cat's buffer) and
	# 1 MiB (a single write(2) arrives as 1 MiB requests)
	pad "$f" $((131072 - 20))
	echo 'exec touch marker_across_128k_with_a_long_name' >>"$f"
	pad "$f" $((1048576 - 20))
	echo 'exec touch marker_across_1m_with_a_long_name' >>"$f"
	pad "$f" $((2 * 1048576))
	[ "$(stat -c %s "$f")" -eq $((2 * 1048576)) ]

	cat "$f" >"$MNT/demo/ctl"
	[ "$(cat "$MNT/demo/runs/1/cmd")" = "touch marker_across_128k_with_a_long_name" ]
	[ "$(cat "$MNT/demo/runs/2/cmd")" = "touch marker_across_1m_with_a_long_name" ]
	[ "$(cat "$MNT/demo/runs/1/wait")" = "exited 0" ]
	[ "$(cat "$MNT/demo/runs/2/wait")" = "exited 0" ]
	[ ! -e "$MNT/demo/runs/3" ]

	# one write(2) of 2 MiB: the kernel cuts it, the lines stay whole
	dd if="$f" of="$MNT/demo/ctl" bs=2M count=1 iflag=fullblock status=none
	[ "$(cat "$MNT/demo/runs/3/cmd")" = "touch marker_across_128k_with_a_long_name" ]
	[ "$(cat "$MNT/demo/runs/4/cmd")" = "touch marker_across_1m_with_a_long_name" ]
	cat "$MNT/demo/runs/4/wait"
	[ ! -e "$MNT/demo/runs/5" ]
	# nothing ran cut short
	[ "$(ls "$W")" = "$(printf 'marker_across_128k_with_a_long_name\nmarker_across_1m_with_a_long_name')" ]
}

# bats test_tags=core
@test "a line without its newline waits for it, and runs at the last close" {
	mkdir "$MNT/demo"
	W=$(ws demo)
	# the sleep inherits the fd and closes it (a flush) mid-line: nothing runs
	{
		printf 'exec touch part'
		sleep 0.3
		printf 'ial_marker\n'
	} >"$MNT/demo/ctl"
	[ "$(cat "$MNT/demo/runs/1/cmd")" = "touch partial_marker" ]
	cat "$MNT/demo/runs/1/wait"
	[ -e "$W/partial_marker" ]
	[ ! -e "$W/part" ]
	[ ! -e "$MNT/demo/runs/2" ]

	# echo -n: the line is complete when the file is closed
	echo -n 'exec touch echo_n_marker' >"$MNT/demo/ctl"
	wait_for test -e "$MNT/demo/runs/2/cmd"
	[ "$(cat "$MNT/demo/runs/2/cmd")" = "touch echo_n_marker" ]
	[ "$(cat "$MNT/demo/runs/2/wait")" = "exited 0" ]
	[ -e "$W/echo_n_marker" ]
	# and on the mount ctl too
	echo -n 'new fromecho' >"$MNT/ctl"
	wait_for test -d "$MNT/fromecho"
}

# bats test_tags=core
@test "a writer killed mid-command: the unfinished line never runs, and ctl says why" {
	mkdir "$MNT/demo"
	W=$(ws demo)
	# two writes, the second cut mid-command, then the writer dies (as a
	# killed `cat script > ctl` does): its close must not run `touch cu`
	python3 - "$MNT/demo/ctl" <<'PY' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY)
os.write(fd, b"exec touch first\n")
os.write(fd, b"exec touch cu")
time.sleep(60)
os.write(fd, b"t_marker\n")
PY
	writer=$!
	wait_for test -e "$W/first"
	kill -9 "$writer"
	wait "$writer" || true
	wait_for grep -q 'not run: "exec touch cu"' "$MNT/demo/ctl"
	[ ! -e "$W/cu" ]
	[ ! -e "$W/cut_marker" ]
	[ ! -e "$MNT/demo/runs/2" ]
	grep -q 'not run: .*exec touch cu' "$BATS_TEST_TMPDIR/daemon.log"

	# one write with a newline and a tail: the tail is not run either
	printf 'exec touch one\nexec touch tw' >"$MNT/demo/ctl"
	wait_for grep -q 'not run: "exec touch tw"' "$MNT/demo/ctl"
	[ ! -e "$W/tw" ]
	# while one write without a newline is a whole command (echo -n)
	echo -n 'exec touch whole' >"$MNT/demo/ctl"
	wait_for test -e "$W/whole"
}

# bats test_tags=core
@test "a line over 65536 bytes fails whole with EINVAL, and its tail never runs" {
	mkdir "$MNT/demo"
	W=$(ws demo)
	long="exec echo $(head -c 70000 /dev/zero | tr '\0' a)"
	exec 7<>"$MNT/demo/ctl"
	run bash -c 'printf "%s\n" "$1" >&7' _ "$long"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	msg=$(cat <&7)
	[[ "$msg" == "error: a command longer than 65536 bytes (the limit of one ctl line) is refused whole: \"exec echo aaa"* ]]
	[ "${#msg}" -lt 400 ]
	[ ! -e "$MNT/demo/runs/1" ]

	# the beginning of an over-long line comes in one write and its end in
	# the next: the end is not a command of its own
	run bash -c 'printf "exec echo start%70000s" "" >&7'
	[ "$status" -ne 0 ]
	run bash -c 'printf "exec touch cut\n" >&7'
	[ "$status" -ne 0 ]
	msg=$(cat <&7)
	[[ "$msg" == "error: discarded: these bytes continue a line that failed"* ]]
	# the next line is a fresh start
	echo 'exec touch ok' >&7
	read -r n <&7
	exec 7>&-
	[ "$n" = 1 ]
	[ "$(cat "$MNT/demo/runs/1/cmd")" = "touch ok" ]
	cat "$MNT/demo/runs/1/wait"
	[ ! -e "$W/cut" ]
	[ ! -e "$MNT/demo/runs/2" ]

	# cat of a file with an over-long line stops at it: nothing of it runs
	f="$BATS_TEST_TMPDIR/long"
	{
		printf 'exec touch before\n'
		printf 'exec echo %200000s' ''
		printf 'exec touch inside\n'
	} >"$f"
	run bash -c "cat '$f' >'$MNT/demo/ctl'"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	sleep 0.3 # a line run at release would show up by now
	[ ! -e "$W/inside" ]
	# cat's first write held both lines: checked together, neither ran
	[ ! -e "$W/before" ]
	[ "$(ls "$MNT/demo/runs")" = 1 ]
}

# bats test_tags=core
@test "exactly 65536 bytes is still one line; exec refuses longer commands naming the limit" {
	mkdir "$MNT/demo"
	# "exec " + 65531 = 65536 bytes: at the limit, accepted
	cmd="echo $(head -c 65526 /dev/zero | tr '\0' b)"
	[ $((${#cmd} + 5)) -eq 65536 ]
	run ctl_write "$MNT/demo/ctl" "exec $cmd"
	[ "$status" -eq 0 ]
	[ "$output" = 1 ]
	[ "$(cat "$MNT/demo/runs/1/wait")" = "exited 0" ]
	[ "$(cat "$MNT/demo/runs/1/cmd")" = "$cmd" ]
	[ "$(wc -c <"$MNT/demo/journal")" -eq 65527 ]
	# 200 KiB: refused before any provider sees it, the message names the limit
	run ctl_write "$MNT/demo/ctl" "exec echo $(head -c 204800 /dev/zero | tr '\0' c)"
	[ "$status" -ne 0 ]
	[[ "$output" == *"longer than 65536 bytes"* ]]
	[ ! -e "$MNT/demo/runs/2" ]
}

@test "docker: a command at the line limit runs whole; a longer one is refused naming the limit" {
	docker_require
	run dk_new d1
	[ "$status" -eq 0 ]
	cmd="echo $(head -c 65526 /dev/zero | tr '\0' b)"
	run dk_exec d1 "$cmd"
	[ "$status" -eq 0 ]
	[ "$output" = 1 ]
	[ "$(cat "$MNT/d1/runs/1/wait")" = "exited 0" ]
	[ "$(cat "$MNT/d1/runs/1/cmd")" = "$cmd" ]
	[ "$(wc -c <"$MNT/d1/runs/1/journal")" -eq 65527 ]
	# 200 KiB used to be accepted and end `lost` with an empty journal
	run dk_exec d1 "echo $(head -c 204800 /dev/zero | tr '\0' c)"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: a command longer than 65536 bytes (the limit of one ctl line)"* ]]
	[ ! -e "$MNT/d1/runs/2" ]
}

# bats test_tags=core
@test "a NUL byte fails the write with a readable error and runs nothing" {
	mkdir "$MNT/demo"
	exec 7<>"$MNT/demo/ctl"
	# /usr/bin/printf writes once (bash's builtin writes line by line)
	run bash -c "/usr/bin/printf 'exec touch x\nexec true\0\n' >&7"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	msg=$(cat <&7)
	exec 7>&-
	[[ "$msg" == "error: a NUL byte at byte 23 of the write"* ]]
	[ ! -e "$MNT/demo/runs/1" ]
	grep -q "a NUL byte" "$BATS_TEST_TMPDIR/daemon.log"
}

# bats test_tags=core
@test "runs/N/ctl is 0600 and reads back its own error" {
	mkdir "$MNT/demo"
	echo 'exec true' >"$MNT/demo/ctl"
	cat "$MNT/demo/runs/1/wait"
	[ "$(stat -c %a "$MNT/demo/runs/1/ctl")" = 600 ]
	[ "$(stat -c %a "$MNT/demo/ctl")" = 600 ]
	exec 7<>"$MNT/demo/runs/1/ctl"
	run bash -c 'echo "kill NOSUCH" >&7'
	[ "$status" -ne 0 ]
	msg=$(cat <&7)
	exec 7>&-
	[[ "$msg" == "error: kill: bad signal \"NOSUCH\""* ]]
	[[ "$(cat "$MNT/demo/runs/1/ctl")" == "status exited 0"* ]]
}

# bats test_tags=core
@test "ctl and providers cannot be renamed: EPERM, not ENOENT" {
	for name in ctl providers; do
		run mv -T "$MNT/$name" "$MNT/other"
		[ "$status" -ne 0 ]
		[[ "$output" == *"Operation not permitted"* ]]
		[ -e "$MNT/$name" ]
		[ ! -e "$MNT/other" ]
	done
}

# bats test_tags=core
@test "env names must be names: env =x, env .=x, new env.=x are refused" {
	mkdir "$MNT/demo"
	for line in 'env =x' 'env .=x' 'env 1A=x' 'env A-B=x' 'env OK=1 .=x'; do
		run ctl_write "$MNT/demo/ctl" "$line"
		[ "$status" -ne 0 ]
		[[ "$output" == *"error: env: "* ]]
	done
	run ctl_write "$MNT/ctl" "new other env.=x"
	[ "$status" -ne 0 ]
	[[ "$output" == *'bad variable name "" in "env.="'* ]]
	[ ! -e "$MNT/other" ]
	run ctl_write "$MNT/ctl" "new other env.A.B=x"
	[ "$status" -ne 0 ]
	# nothing half done: OK=1 was not set by the refused line
	run ctl_write "$MNT/demo/ctl" 'exec echo "${OK-unset}"'
	cat "$MNT/demo/runs/1/wait"
	[ "$(cat "$MNT/demo/journal")" = unset ]
	# good names still work
	run ctl_write "$MNT/demo/ctl" 'env _A1=x'
	[ "$status" -eq 0 ]
}

# bats test_tags=core
@test "an unterminated quote after a secret key keeps the caret line" {
	mkdir "$MNT/demo"
	run ctl_write "$MNT/demo/ctl" 'env API_TOKEN="hunter2secret'
	[ "$status" -ne 0 ]
	[[ "$output" == *"unterminated"* ]]
	[[ "$output" != *hunter2secret* ]]
	# three lines: the message, the line (redacted), the caret
	msg=$(printf '%s\n' "$output" | grep -v 'write error')
	[ "$(printf '%s\n' "$msg" | wc -l)" -eq 3 ]
	[[ "$(printf '%s\n' "$msg" | tail -n 1)" =~ ^\ +\^$ ]]
}

# bats test_tags=core
@test "bytes that are not UTF-8 are escaped in errors and the log" {
	run mkdir "$MNT/$(printf 'bad\xffname')"
	[ "$status" -ne 0 ]
	run ctl_write "$MNT/ctl" "$(printf 'new bad\xfe\x1bname')"
	[ "$status" -ne 0 ]
	[[ "$output" == *'bad\xfe\x1bname'* ]]
	run ctl_write "$MNT/ctl" "$(printf 'frob\xc3(x')"
	[ "$status" -ne 0 ]
	[[ "$output" == *'frob\xc3(x'* ]]
	# the caret still sits under the bad word
	[[ "$(printf '%s\n' "$output" | tail -n 1)" == "  ^" ]]
	# valid UTF-8 stays as it is
	run ctl_write "$MNT/ctl" "new naïve"
	[[ "$output" == *"naïve"* ]]
	# no raw byte reached an error or the log
	run grep -c $'\xff\|\xfe\|\x1b\|\xc3(' "$BATS_TEST_TMPDIR/daemon.log"
	[ "$output" = 0 ]
	grep -q 'bad\\xfe\\x1bname' "$BATS_TEST_TMPDIR/daemon.log"
}

# bats test_tags=core
@test "option values that are not UTF-8 are refused; UTF-8 ones survive a restart" {
	mkdir "$MNT/demo"
	run ctl_write "$MNT/demo/ctl" "$(printf 'env K=bad\xff')"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid argument"* ]]
	[[ "$output" == *"not UTF-8 text"* ]]
	run ctl_write "$MNT/ctl" "$(printf 'new other env.K=\xc3(')"
	[ "$status" -ne 0 ]
	[ ! -e "$MNT/other" ]
	# before: accepted, seen by runs, then silently gone from the registry
	echo 'env K=naïve' >"$MNT/demo/ctl"
	sfs_unmount
	sfs_mount
	n=$(ctl_write "$MNT/demo/ctl" 'exec printf %s "$K"')
	cat "$MNT/demo/runs/$n/wait" >/dev/null
	[ "$(cat "$MNT/demo/runs/$n/journal")" = "naïve" ]
}

# bats test_tags=core
@test "a kill right after exec returns reaches the command while its process still has the dispositions it inherited (an ignored signal)" {
	# a daemon started with USR2 ignored (as a script's background job
	# ignores INT and QUIT) passes that on; the run's process sets defaults
	# only after the fork, and the delay (a test switch of the wrapper's
	# child) holds it there while the kill comes
	sfs_unmount
	trap '' USR2
	SANDBOXFS_TEST_CHILD_DELAY_MS=400 sfs_mount
	trap - USR2
	mkdir "$MNT/demo"
	n=$(ctl_write "$MNT/demo/ctl" 'exec sleep 30')
	echo "kill $n USR2" >"$MNT/demo/ctl"
	[ "$(timeout 10 cat "$MNT/demo/runs/$n/wait")" = "killed USR2" ]
}

# bats test_tags=core
@test "when kill returns, runs/N/status is already final" {
	mkdir "$MNT/demo"
	for i in 1 2 3 4 5; do
		echo 'exec sleep 30' >"$MNT/demo/ctl"
	done
	for i in 1 2 3 4 5; do
		echo "kill $i" >"$MNT/demo/ctl"
		[ "$(cat "$MNT/demo/runs/$i/status")" = "killed TERM" ]
	done
	echo 'exec sleep 30' >"$MNT/demo/ctl"
	# a single signal waits until the command runs: one that lands while
	# the run's shell forks it is held by the shell (dash defers INT there)
	# until that command ends, as in any shell
	wait_sleep_running "$(ls -d "$STATE"/sandboxes/*/runs/6)"
	echo 'kill INT' >"$MNT/demo/runs/6/ctl"
	[ "$(cat "$MNT/demo/runs/6/status")" = "killed INT" ]
	# a signal the run ignores: kill returns (after its settle wait) and it runs on
	echo "exec trap '' HUP; sleep 30" >"$MNT/demo/ctl"
	sleep 0.2
	echo 'kill 7 HUP' >"$MNT/demo/ctl"
	[ "$(cat "$MNT/demo/runs/7/status")" = running ]
}

# bats test_tags=core
@test "allow_other: a snapshot's diff shows file contents, so it is the owner's alone; a file's mode holds in the snapshot's tree" {
	mount_allow_other
	mkdir "$MNT/demo"
	(umask 077 && echo before >"$MNT/demo/workspace/private")
	ctl_write "$MNT/demo/ctl" "snapshot s1" >/dev/null
	echo "TOPSECRET-after" >"$MNT/demo/workspace/private"
	grep -q TOPSECRET-after "$MNT/demo/snapshots/s1/diff"
	[ "$(stat -c %a:%u "$MNT/demo/snapshots/s1/diff")" = "400:$(id -u)" ]
	run as_nobody cat "$MNT/demo/snapshots/s1/diff"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Permission denied"* ]]
	[[ "$output" != *TOPSECRET* ]]
	run as_nobody cat "$MNT/demo/snapshots/s1/tree/private" "$MNT/demo/workspace/private"
	[ "$status" -ne 0 ]
	[[ "$output" != *before* ]]
	[[ "$output" != *TOPSECRET* ]]
	# what everyone may read stays so
	as_nobody cat "$MNT/demo/snapshots/s1/info" >/dev/null
}

# bats test_tags=core
@test "allow_other: a run's cmd, journal, status and wait are the owner's alone unless runs_mode says" {
	mount_allow_other
	mkdir "$MNT/demo"
	echo 'exec echo API_TOKEN is hunter2' >"$MNT/demo/ctl"
	[ "$(cat "$MNT/demo/runs/1/wait")" = "exited 0" ]
	for f in cmd journal status wait; do
		[ "$(stat -c %a:%u "$MNT/demo/runs/1/$f")" = "400:$(id -u)" ]
		run as_nobody cat "$MNT/demo/runs/1/$f"
		[ "$status" -ne 0 ]
		[[ "$output" == *"Permission denied"* ]]
	done
	run as_nobody cat "$MNT/demo/journal"
	[ "$status" -ne 0 ]
	[ "$(stat -c %a "$MNT/demo/runs/1/ctl")" = 600 ]
	# the owner reads them as before
	[ "$(cat "$MNT/demo/journal")" = "API_TOKEN is hunter2" ]
	# a bad mode is refused at mount
	sfs_unmount
	run "$SFS_BIN" -f --state "$STATE" -o runs_mode=rw "$MNT"
	[ "$status" -ne 0 ]
	[[ "$output" == *"runs_mode"* ]]
	# -o runs_mode=0444: readable by all, as before
	sfs_mount -o allow_other -o runs_mode=0444
	for f in cmd journal status wait; do
		[ "$(stat -c %a "$MNT/demo/runs/1/$f")" = 444 ]
	done
	[ "$(as_nobody cat "$MNT/demo/runs/1/journal")" = "API_TOKEN is hunter2" ]
	[ "$(as_nobody cat "$MNT/demo/runs/1/status")" = "exited 0" ]
}
