#!/usr/bin/env bats
# bats file_tags=core
# The state directory and ctl input as another party would attack them: a
# state dir someone else owns or may write, symlinks planted where the root
# daemon writes its own files, keys given twice.  Each test checks that the
# attack failed and that the daemon mounted in setup still serves.

load helpers

setup() {
	sfs_mount
	# a host file an attacker would have the root daemon write
	VICTIM="$BATS_TEST_TMPDIR/victim"
	echo "precious host content" >"$VICTIM"
	chmod 0644 "$VICTIM"
	VICTIM_SUM=$(stat -c '%s %a %u %Y' "$VICTIM")-$(md5sum <"$VICTIM")
	BAD_STATE="$BATS_TEST_TMPDIR/bad/state"
	BAD_MNT="$BATS_TEST_TMPDIR/badmnt"
	mkdir -p "$BAD_STATE" "$BAD_MNT"
	chmod 0700 "$BAD_STATE"
}

teardown() {
	if [ -n "${BAD_PID:-}" ]; then
		kill -9 "$BAD_PID" 2>/dev/null || true
	fi
	if mountpoint -q "$BAD_MNT" 2>/dev/null; then
		fusermount3 -u "$BAD_MNT" 2>/dev/null || umount -l "$BAD_MNT" 2>/dev/null || true
	fi
	sfs_teardown
}

# victim_untouched: the host file is as setup made it.
victim_untouched() {
	[ -f "$VICTIM" ]
	[ ! -L "$VICTIM" ]
	[ "$(stat -c '%s %a %u %Y' "$VICTIM")-$(md5sum <"$VICTIM")" = "$VICTIM_SUM" ]
}

# still_serving: the daemon of setup makes a sandbox and runs in it.
still_serving() {
	local name="alive$RANDOM"
	ctl_write "$MNT/ctl" "new $name" >/dev/null
	local n
	n=$(ctl_write "$MNT/$name/ctl" 'exec echo still-here')
	[ "$(cat "$MNT/$name/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/$name/runs/$n/journal")" = still-here ]
}

# bad_start [OPTIONS...]: starts a daemon in the foreground on $BAD_STATE
# and $BAD_MNT, expecting it to refuse; its stderr is in $output.
bad_start() {
	run timeout -k 5 20 "$SFS_BIN" -f --state "$BAD_STATE" "$@" "$BAD_MNT" 3>&-
	echo "$output"
	[ "$status" -eq 1 ] # refused at once, not mounted and killed
	if mountpoint -q "$BAD_MNT"; then false; fi
}

@test "hostile state: a state dir owned by another user is refused, naming it" {
	chown nobody "$BAD_STATE"
	bad_start
	[[ "$output" == *"state dir $BAD_STATE belongs to uid $(id -u nobody)"* ]]
	# nothing was made in it
	[ -z "$(ls -A "$BAD_STATE")" ]
	still_serving
}

@test "hostile state: a state dir group- or world-writable is refused" {
	chmod 0777 "$BAD_STATE"
	bad_start
	[[ "$output" == *"state dir $BAD_STATE may be written by others (mode 0777)"* ]]
	chmod 0770 "$BAD_STATE"
	bad_start
	[[ "$output" == *"(mode 0770)"* ]]
	[ -z "$(ls -A "$BAD_STATE")" ]
	still_serving
}

@test "hostile state: a state dir inside a directory others may change is refused; a sticky root one is fine" {
	chmod 0777 "$BATS_TEST_TMPDIR/bad"
	bad_start
	[[ "$output" == *"state dir $BAD_STATE is inside $BATS_TEST_TMPDIR/bad (uid 0, mode 0777)"* ]]
	chmod 0755 "$BATS_TEST_TMPDIR/bad"
	chown nobody "$BATS_TEST_TMPDIR/bad"
	bad_start
	[[ "$output" == *"is inside $BATS_TEST_TMPDIR/bad (uid $(id -u nobody), mode 0755)"* ]]
	# /tmp-like: sticky and root's, nobody else can move an entry of ours
	chown root "$BATS_TEST_TMPDIR/bad"
	chmod 1777 "$BATS_TEST_TMPDIR/bad"
	"$SFS_BIN" -f --state "$BAD_STATE" "$BAD_MNT" 2>>"$BATS_TEST_TMPDIR/bad.log" 3>&- &
	BAD_PID=$!
	wait_for test -e "$BAD_MNT/ctl"
	fusermount3 -u "$BAD_MNT"
	wait "$BAD_PID"
	BAD_PID=
	still_serving
}

@test "hostile state: a state dir given through a symlink is judged by what it resolves to" {
	ln -s "$BAD_STATE" "$BATS_TEST_TMPDIR/link"
	chmod 0777 "$BAD_STATE"
	run timeout -k 5 20 "$SFS_BIN" -f --state "$BATS_TEST_TMPDIR/link" "$BAD_MNT" 3>&-
	[ "$status" -eq 1 ]
	[[ "$output" == *"state dir $BAD_STATE may be written by others"* ]]
	still_serving
}

@test "hostile state: a .reserve symlink to a host file is replaced, never followed" {
	ln -s "$VICTIM" "$BAD_STATE/.reserve"
	"$SFS_BIN" -f --state "$BAD_STATE" "$BAD_MNT" 2>>"$BATS_TEST_TMPDIR/bad.log" 3>&- &
	BAD_PID=$!
	wait_for test -e "$BAD_MNT/ctl"
	victim_untouched
	# the name is a file of the daemon's own now, of the reserve's size
	[ -f "$BAD_STATE/.reserve" ]
	[ ! -L "$BAD_STATE/.reserve" ]
	[ "$(stat -c %s "$BAD_STATE/.reserve")" -eq 262144 ]
	grep -q '.reserve was not a regular file of its own: replaced' "$BATS_TEST_TMPDIR/bad.log"
	mkdir "$BAD_MNT/b"
	[ -d "$BAD_MNT/b" ]
	fusermount3 -u "$BAD_MNT"
	wait "$BAD_PID"
	BAD_PID=
	victim_untouched
	still_serving
}

@test "hostile state: a .reserve hard link to a host file is replaced, the file untouched" {
	ln "$VICTIM" "$BAD_STATE/.reserve"
	"$SFS_BIN" -f --state "$BAD_STATE" "$BAD_MNT" 2>>"$BATS_TEST_TMPDIR/bad.log" 3>&- &
	BAD_PID=$!
	wait_for test -e "$BAD_MNT/ctl"
	victim_untouched
	[ "$(stat -c %h "$VICTIM")" = 1 ]
	[ "$(stat -c '%s %h' "$BAD_STATE/.reserve")" = "262144 1" ]
	fusermount3 -u "$BAD_MNT"
	wait "$BAD_PID"
	BAD_PID=
	still_serving
}

@test "hostile state: a sandboxfs.log symlink to a host file refuses the start, the file untouched" {
	ln -s "$VICTIM" "$BAD_STATE/sandboxfs.log"
	# daemonized: the log goes to STATE/sandboxfs.log
	run timeout -k 5 20 "$SFS_BIN" --state "$BAD_STATE" "$BAD_MNT" 3>&-
	echo "$output"
	[ "$status" -eq 1 ]
	[[ "$output" == *"log $BAD_STATE/sandboxfs.log: "*"not a regular file"* ]]
	run ! mountpoint -q "$BAD_MNT"
	victim_untouched
	[ -L "$BAD_STATE/sandboxfs.log" ]
	# nor a hard link to it
	rm "$BAD_STATE/sandboxfs.log"
	ln "$VICTIM" "$BAD_STATE/sandboxfs.log"
	run timeout -k 5 20 "$SFS_BIN" --state "$BAD_STATE" "$BAD_MNT" 3>&-
	[ "$status" -eq 1 ]
	[[ "$output" == *"a hard link"* ]]
	run ! mountpoint -q "$BAD_MNT"
	victim_untouched
	# a FIFO there is refused too, never waited on
	rm "$BAD_STATE/sandboxfs.log"
	mkfifo "$BAD_STATE/sandboxfs.log"
	run timeout -k 5 20 "$SFS_BIN" --state "$BAD_STATE" "$BAD_MNT" 3>&-
	[ "$status" -eq 1 ]
	[[ "$output" == *"not a regular file"* ]]
	still_serving
}

@test "hostile state: registry.json and lock symlinks to host files refuse the start, the files untouched" {
	ln -s "$VICTIM" "$BAD_STATE/registry.json"
	bad_start
	[[ "$output" == *"registry $BAD_STATE/registry.json: not a regular file"* ]]
	victim_untouched
	rm "$BAD_STATE/registry.json" "$BAD_STATE/lock"
	ln -s "$VICTIM" "$BAD_STATE/lock"
	bad_start
	[[ "$output" == *"state dir $BAD_STATE: "* ]]
	victim_untouched
	[ ! -e "$BAD_STATE/registry.json" ]
	still_serving
}

@test "hostile ctl: a key given twice on new is refused with a caret under the second, and nothing is made" {
	run ctl_write "$MNT/ctl" 'new twice provider=local isolation=bwrap isolation=none'
	[ "$status" -ne 0 ]
	[[ "$output" == *'new: option "isolation" given twice'* ]]
	# the caret is under the second isolation=
	local shown caret
	shown=$(grep '^  new twice' <<<"$output")
	caret=$(grep '^ *^$' <<<"$output")
	[ "${shown:${#caret}-1:14}" = "isolation=none" ]
	[ ! -e "$MNT/twice" ]
	run ctl_write "$MNT/ctl" 'new twice env.A=1 env.A=2'
	[ "$status" -ne 0 ]
	[[ "$output" == *'option "env.A" given twice'* ]]
	[ ! -e "$MNT/twice" ]
	still_serving
	# setup= is repeatable, as before
	run ctl_write "$MNT/ctl" "new twice setup='echo a >>x' setup='echo b >>x'"
	[ "$status" -eq 0 ]
}
