#!/usr/bin/env bats
# SANDBOX/audit (SPEC §13): a line per ctl command, run start and end and
# change made through workspace/ (time, caller uid, operation, path,
# result), append-only in the state directory, rotated by size, readable
# like a journal.

load helpers

teardown() {
	cd "$BATS_TEST_TMPDIR"
	exec 8<&- # a directory of the mount held open by a test
	[ -n "${FOLLOW_PID:-}" ] && kill "$FOLLOW_PID" 2>/dev/null
	sfs_teardown
	if [ -n "${AO_DIR:-}" ]; then
		rmdir "$AO_DIR/mnt" 2>/dev/null || true
		rmdir "$AO_DIR" 2>/dev/null || true
	fi
}

# audit_now SANDBOX: what its audit holds now (a nonblocking read ends at
# the end instead of waiting for more).
audit_now() {
	dd if="$MNT/$1/audit" iflag=nonblock bs=64k status=none
}

# audit_has SANDBOX ERE: waits (the writer flushes every 100 ms) for a line.
audit_has() {
	wait_for eval "audit_now $1 | grep -Eq -- '$2'"
}

T='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z'

# bats test_tags=core
@test "ctl commands, runs and workspace changes each leave a line: time, uid, operation, path, result" {
	# a mount point other users can reach (the bats tmpdir is private)
	AO_DIR=$(mktemp -d /tmp/sfs-audit-ao.XXXXXX)
	chmod 755 "$AO_DIR"
	MNT="$AO_DIR/mnt"
	sfs_mount -o allow_other
	echo "new demo" >"$MNT/ctl"
	ws="$MNT/demo/workspace"
	echo hi >"$ws/a.txt"
	mkdir "$ws/d"
	mv "$ws/a.txt" "$ws/d/b c.txt"
	chmod 600 "$ws/d/b c.txt"
	: >"$ws/d/b c.txt"
	ln -s target "$ws/link"
	rm "$ws/link"
	run rmdir "$ws/d"
	[ "$status" -ne 0 ]
	echo 'exec exit 3' >"$MNT/demo/ctl"
	timeout 20 cat "$MNT/demo/runs/1/wait" >/dev/null
	run ctl_write "$MNT/demo/ctl" "kill 9 NOSUCHSIG"
	[ "$status" -ne 0 ]
	run ctl_write "$MNT/demo/ctl" "frobnicate now"
	[ "$status" -ne 0 ]
	u=$(id -u)
	audit_has demo "^$T $u ctl /ctl 0 new demo\$"
	audit_has demo "^$T $u create workspace/a\.txt 0\$"
	audit_has demo "^$T $u mkdir workspace/d 0\$"
	audit_has demo "^$T $u rename workspace/a\.txt 0 -> workspace/d/b\\\\x20c\.txt\$"
	audit_has demo "^$T $u setattr workspace/d/b\\\\x20c\.txt 0 mode\$"
	audit_has demo "^$T $u open workspace/d/b\\\\x20c\.txt 0 write trunc\$"
	audit_has demo "^$T $u symlink workspace/link 0 target\$"
	audit_has demo "^$T $u unlink workspace/link 0\$"
	audit_has demo "^$T $u rmdir workspace/d ENOTEMPTY\$"
	audit_has demo "^$T $u run\.start runs/1 0 exit 3\$"
	audit_has demo "^$T $u ctl ctl 0 exec exit 3\$"
	audit_has demo "^$T - run\.end runs/1 0 exited 3\$"
	audit_has demo "^$T $u ctl ctl EINVAL kill 9 NOSUCHSIG\$"
	audit_has demo "^$T $u ctl ctl EINVAL frobnicate now\$"
	# another user's change carries that user's uid
	chmod 777 "$ws/d"
	setpriv --reuid=nobody --regid=nogroup --clear-groups -- sh -c "echo x >'$ws/d/theirs'"
	audit_has demo "^$T $(id -u nobody) create workspace/d/theirs 0\$"
	# append-only, in the state directory
	[ "$(stat -c %a "$STATE"/sandboxes/*/audit)" = 600 ]
	cmp <(audit_now demo) "$STATE"/sandboxes/*/audit
	[ "$(stat -c %a "$MNT/demo/audit")" = 400 ]
}

# bats test_tags=core
@test "paths stay right when directories move: through the mount, above a directory, and outside it" {
	sfs_mount
	echo "new demo" >"$MNT/ctl"
	ws="$MNT/demo/workspace"
	mkdir -p "$ws/d" "$ws/x/y"
	touch "$ws/d/a" "$ws/x/y/f1"
	mv "$ws/d" "$ws/e"
	touch "$ws/e/b"
	mv "$ws/x" "$ws/z"
	touch "$ws/z/y/f2"
	rmdir "$ws/z/y" 2>/dev/null || true
	audit_has demo "^$T [0-9]+ create workspace/d/a 0\$"
	audit_has demo "^$T [0-9]+ rename workspace/d 0 -> workspace/e\$"
	audit_has demo "^$T [0-9]+ create workspace/e/b 0\$"
	audit_has demo "^$T [0-9]+ create workspace/z/y/f2 0\$"
	audit_has demo "^$T [0-9]+ rmdir workspace/z/y ENOTEMPTY\$"
	# moved by a run, on the host: the next line through the mount says where it is now
	touch "$ws/p-file"
	mkdir "$ws/p"
	touch "$ws/p/one"
	audit_has demo "^$T [0-9]+ create workspace/p/one 0\$"
	# held open, so the kernel keeps the directory's inode (and the node its
	# kept path belongs to) across the move
	exec 8<"$ws/p"
	echo 'exec mv p q' >"$MNT/demo/ctl"
	timeout 20 cat "$MNT/demo/runs/1/wait" >/dev/null
	touch "$ws/q/two"
	exec 8<&-
	audit_has demo "^$T [0-9]+ create workspace/q/two 0\$"
	run grep -c "workspace/p/two" <(audit_now demo)
	[ "$output" = 0 ]
}

# bats test_tags=core
@test "a read at the end of audit waits for the next line (followed like a journal); a nonblocking one ends" {
	sfs_mount
	mkdir "$MNT/demo"
	cat "$MNT/demo/audit" >"$BATS_TEST_TMPDIR/followed" &
	FOLLOW_PID=$!
	sleep 0.3
	kill -0 "$FOLLOW_PID"
	touch "$MNT/demo/workspace/later"
	wait_for grep -q 'create workspace/later 0' "$BATS_TEST_TMPDIR/followed"
	mkdir "$MNT/demo/workspace/later2"
	wait_for grep -q 'mkdir workspace/later2 0' "$BATS_TEST_TMPDIR/followed"
	kill -0 "$FOLLOW_PID"
	timeout 5 dd if="$MNT/demo/audit" iflag=nonblock status=none | grep -q 'mkdir workspace/later2'
	# st_size is what a reader gets
	[ "$(stat -c %s "$MNT/demo/audit")" -eq "$(audit_now demo | wc -c)" ]
}

# bats test_tags=core
@test "secret values never reach audit lines" {
	export SFS_AUDIT_SECRET="sfs-audit-secret-9d2f61e0"
	sfs_mount
	echo "new demo secret.API_TOKEN=env:SFS_AUDIT_SECRET" >"$MNT/ctl"
	echo "exec echo $SFS_AUDIT_SECRET" >"$MNT/demo/ctl"
	echo "env PLAIN=$SFS_AUDIT_SECRET" >"$MNT/demo/ctl"
	# a secret-looking key's short value: the whole marker, not cut to the value's length
	echo "env API_TOKEN=abc" >"$MNT/demo/ctl"
	touch "$MNT/demo/workspace/$SFS_AUDIT_SECRET"
	audit_has demo 'create workspace/\[redacted\] 0'
	audit_has demo 'ctl ctl 0 env PLAIN=\[redacted\]'
	audit_has demo 'ctl ctl 0 env API_TOKEN=\[redacted\]$'
	audit_has demo 'run\.start runs/1 0 echo \[redacted\]'
	run grep -c "$SFS_AUDIT_SECRET" "$STATE"/sandboxes/*/audit
	[ "$output" = 0 ]
	run grep -c "$SFS_AUDIT_SECRET" <(audit_now demo)
	[ "$output" = 0 ]
}

@test "at audit.max_size the file becomes audit.1, one old file is kept, and a follower at the end gets end-of-file" {
	sfs_mount -o audit.max_size=4096
	mkdir "$MNT/demo"
	cat "$MNT/demo/audit" >/dev/null &
	FOLLOW_PID=$!
	for i in $(seq 1 150); do touch "$MNT/demo/workspace/file-$i"; done
	# the follower was answered end-of-file when its file was rotated away
	wait_for eval '! kill -0 $FOLLOW_PID 2>/dev/null'
	wait "$FOLLOW_PID" # end-of-file: cat exits 0, not with an error
	dir=$(ls -d "$STATE"/sandboxes/*/)
	# the newest line is in audit, or in audit.1 when it filled that one
	wait_for eval 'cat "$dir/audit.1" "$dir/audit" 2>/dev/null | grep -q "create workspace/file-150 0"'
	[ -f "$dir/audit.1" ]
	[ ! -e "$dir/audit.2" ]
	[ "$(stat -c %s "$dir/audit.1")" -ge 4096 ]
	[ "$(stat -c %s "$dir/audit.1")" -lt 20000 ]
	# nothing lost between the two: older lines in audit.1, the rest in audit
	total=$(cat "$dir/audit.1" "$dir/audit" 2>/dev/null | grep -c 'create workspace/file-')
	first=$(cat "$dir/audit.1" | grep -o 'create workspace/file-[0-9]*' | head -1 | cut -d- -f2)
	[ "$total" -ge $((150 - first + 1)) ]
}

@test "-o audit=false: no audit file and no lines" {
	sfs_mount -o audit=false
	mkdir "$MNT/demo"
	touch "$MNT/demo/workspace/x"
	[ ! -e "$MNT/demo/audit" ]
	run ls "$MNT/demo"
	[[ "$output" != *audit* ]]
	sleep 0.3
	run ls "$STATE"/sandboxes/*/audit
	[ "$status" -ne 0 ]
}

@test "audit survives a daemon restart and goes on appending" {
	sfs_mount
	mkdir "$MNT/demo"
	touch "$MNT/demo/workspace/before"
	audit_has demo 'create workspace/before 0'
	sfs_unmount
	sfs_mount
	touch "$MNT/demo/workspace/after"
	audit_has demo 'create workspace/after 0'
	audit_now demo | grep -q 'create workspace/before 0'
}

# bats test_tags=tsan
@test "audit under concurrent changes, ctl commands, rotations and followers (no TSan report)" {
	export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}log_path=$BATS_TEST_TMPDIR/tsan:halt_on_error=0"
	sfs_mount -o audit.max_size=8192
	mkdir "$MNT/demo"
	cat "$MNT/demo/audit" >/dev/null &
	f1=$!
	local pids=() w
	for w in 1 2 3; do
		(for i in $(seq 1 60); do
			echo "$i" >"$MNT/demo/workspace/w$w-$i"
			mv "$MNT/demo/workspace/w$w-$i" "$MNT/demo/workspace/m$w-$i"
			dd if="$MNT/demo/audit" iflag=nonblock status=none >/dev/null
		done) &
		pids+=($!)
	done
	(for i in $(seq 1 10); do echo "exec true" >"$MNT/demo/ctl"; echo "env K$i=v" >"$MNT/demo/ctl"; done) &
	pids+=($!)
	for w in "${pids[@]}"; do wait "$w"; done
	kill "$f1" 2>/dev/null || true
	dir=$(ls -d "$STATE"/sandboxes/*/)
	[ -f "$dir/audit.1" ]
	sfs_unmount
	no_tsan_reports
}
