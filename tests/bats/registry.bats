#!/usr/bin/env bats
# The registry (STATE/registry.json) under many ctl lines: the env lines of
# one write are saved once, the file is written outside the records lock so
# other sandboxes' status never waits for it, and a restart has every value.

load helpers

setup() {
	sfs_mount --log-level 3
}

teardown() {
	if [ -n "${WRITER:-}" ]; then
		kill "$WRITER" 2>/dev/null || true
	fi
	sfs_teardown
}

# saves: how many registry saves the daemon has logged so far.
saves() {
	grep -c 'registry: saved' "$BATS_TEST_TMPDIR/daemon.log" || true
}

# bats test_tags=core
@test "registry: 2000 env lines in one write are one save, and a restart has every value" {
	mkdir "$MNT/demo"
	local f="$BATS_TEST_TMPDIR/envs" i
	for i in $(seq 1 2000); do echo "env K$i=v$i"; done >"$f"
	echo 'env API_TOKEN=hunter2secretvalue' >>"$f" # a name says nothing: persisted
	[ "$(stat -c %s "$f")" -lt 131072 ] # one write(2) of cat, one FUSE write
	local before after
	before=$(saves)
	exec 7<>"$MNT/demo/ctl"
	cat "$f" >&7
	run cat <&7
	exec 7>&-
	[ "$status" -eq 0 ]
	[[ "$output" != *error* ]]
	after=$(saves)
	echo "saves: $before -> $after"
	[ "$((after - before))" -eq 1 ]
	# unsetenv in the same run of lines: one save, the last line wins
	before=$(saves)
	printf 'env K1=changed\nunsetenv K2\nenv K3=x\nenv K3=y\n' >"$f" # cat: one write
	cat "$f" >"$MNT/demo/ctl"
	[ "$(( $(saves) - before ))" -eq 1 ]
	sfs_unmount
	sfs_mount --log-level 3
	run ctl_write "$MNT/demo/ctl" 'exec env | grep -c "^K[0-9]*=" ; echo "$K1 ${K2-unset} $K3 $K2000 ${API_TOKEN-unset}"'
	[ "$status" -eq 0 ]
	cat "$MNT/demo/runs/1/wait"
	run cat "$MNT/demo/journal"
	echo "$output"
	[ "${lines[0]}" = 1999 ]
	[ "${lines[1]}" = "changed unset y v2000 hunter2secretvalue" ]
}

# bats test_tags=core
@test "registry: env values whose names hold key, token or secret survive a restart" {
	run ctl_write "$MNT/ctl" 'new demo env.TOKENIZERS_PARALLELISM=false env.KEYBOARD=us env.MY_SECRET_SAUCE=ketchup'
	[ "$status" -eq 0 ]
	echo 'env API_KEY_FILE=/etc/k' >"$MNT/demo/ctl"
	grep -q '"TOKENIZERS_PARALLELISM": "false"' "$STATE/registry.json"
	sfs_unmount
	sfs_mount --log-level 3
	run ctl_write "$MNT/demo/ctl" 'exec echo "$TOKENIZERS_PARALLELISM $KEYBOARD $MY_SECRET_SAUCE $API_KEY_FILE"'
	[ "$status" -eq 0 ]
	cat "$MNT/demo/runs/1/wait"
	[ "$(cat "$MNT/demo/runs/1/journal")" = "false us ketchup /etc/k" ]
}

# bats test_tags=core
@test "registry: env lines before a line that fails are saved, those after it are not" {
	mkdir "$MNT/demo"
	ctl_write "$MNT/demo/ctl" 'env A=1'
	# the env lines before a failing line run in order; a line that fails
	# at run time (kill of a run that does not exist) stops the write there
	run ctl_write "$MNT/demo/ctl" $'env B=2\nkill 7\nenv C=3'
	[ "$status" -ne 0 ]
	[[ "$output" == *'"kill 7"'* ]]
	sfs_unmount
	sfs_mount --log-level 3
	run ctl_write "$MNT/demo/ctl" 'exec echo "$A ${B-unset} ${C-unset}"'
	cat "$MNT/demo/runs/1/wait"
	[ "$(cat "$MNT/demo/journal")" = "1 2 unset" ]
}

# bats test_tags=core
@test "registry: status of another sandbox answers while a long stream of env writes goes on" {
	mkdir "$MNT/demo" "$MNT/other"
	# a registry worth writing: each save below rewrites all of it
	local f="$BATS_TEST_TMPDIR/envs" i
	for i in $(seq 1 3000); do echo "env P$i=$(printf '%0100d' "$i")"; done >"$f"
	cat "$f" >"$MNT/demo/ctl"
	local stop="$BATS_TEST_TMPDIR/stop"
	# one write, one save per line, until told to stop
	(i=0
	while [ ! -e "$stop" ]; do
		i=$((i + 1))
		echo "env W$i=$i" >"$MNT/demo/ctl" || exit 1
	done) &
	WRITER=$!
	wait_for grep -q 'W1 ctl\|registry: saved' "$BATS_TEST_TMPDIR/daemon.log"
	sleep 0.5
	for i in 1 2 3 4 5; do
		run timeout 10 cat "$MNT/other/status"
		[ "$status" -eq 0 ]
		[[ "$output" == *"state running"* ]]
		kill -0 "$WRITER" # the writer is still going
	done
	touch "$stop"
	wait "$WRITER"
	WRITER=
}

@test "state: what a killed daemon left half-written (registry temp, mirror clone, libgit2 temp objects) goes at the next start, and only that" {
	ctl_write "$MNT/ctl" 'new keep' >/dev/null
	echo kept >"$MNT/keep/workspace/f"
	ctl_write "$MNT/keep/ctl" 'snapshot s1' >/dev/null
	sfs_unmount
	local victim="$BATS_TEST_TMPDIR/victim"
	echo precious >"$victim"
	echo '{"half":' >"$STATE/registry.json.tmp.4242"
	ln -s "$victim" "$STATE/registry.json.tmp.4243"
	mkdir -p "$STATE/git/mirrors/.tmp-00000000000000aa-AbCdEf/objects"
	echo x >"$STATE/git/mirrors/.tmp-00000000000000aa-AbCdEf/HEAD"
	mkdir -p "$STATE/git/store/objects/ab"
	echo x >"$STATE/git/store/objects/tmp_object_git2_q1w2e3"
	echo x >"$STATE/git/store/objects/ab/tmp_object_git2_r4t5y6"
	echo x >"$STATE/git/store/objects/ab/keep_me"
	sfs_mount --log-level 3
	[ ! -e "$STATE/registry.json.tmp.4242" ]
	[ ! -L "$STATE/registry.json.tmp.4243" ]
	[ "$(cat "$victim")" = precious ]
	[ ! -e "$STATE/git/mirrors/.tmp-00000000000000aa-AbCdEf" ]
	[ ! -e "$STATE/git/store/objects/tmp_object_git2_q1w2e3" ]
	[ ! -e "$STATE/git/store/objects/ab/tmp_object_git2_r4t5y6" ]
	[ -e "$STATE/git/store/objects/ab/keep_me" ]
	grep -q 'removed leftover ./registry.json.tmp.4242' "$BATS_TEST_TMPDIR/daemon.log"
	# what is not a leftover is all there
	[ "$(cat "$MNT/keep/workspace/f")" = kept ]
	[ "$(cat "$MNT/keep/snapshots/s1/tree/f")" = kept ]
}
