#!/usr/bin/env bats
# The e2b provider, against the local emulator (tests/emulators/e2b) or, with
# E2B_API_KEY set, the real service.  Every test starts its own emulator and
# daemon; teardown stops both, even when the test failed.

load helpers
load e2b_helpers

setup() {
	e2b_setup
}

teardown() {
	e2b_teardown
}

ws() { echo "$MNT/$1/workspace"; }

@test "e2b: configured, poll journals, and the caps these tests prove" {
	grep -qx 'configured true' "$MNT/providers/e2b/status"
	grep -qx 'journal poll' "$MNT/providers/e2b/status"
	expected='fs true
exec true
env true
ports true
backgroundProcesses true
writableStdin true
killableProcesses false
snapshots true
networkPolicy false
durableFilesystem true
fork true'
	[ "$(cat "$MNT/providers/e2b/caps")" = "$expected" ]
}

@test "e2b: exec with the sandbox env; the journal polls live; status and wait" {
	run e2b_new d1 env.GREETING=hello metadata.team=sfs timeout=600
	[ "$status" -eq 0 ]
	grep -qx 'provider e2b' "$MNT/d1/status"
	grep -qx 'state running' "$MNT/d1/status"
	grep -qx 'journal poll' "$MNT/d1/status"
	grep -q '^workspace /' "$MNT/d1/status"
	[ "$(awk '$1=="id"{print $2}' "$MNT/d1/status")" != - ]

	n=$(ctl_write "$MNT/d1/ctl" 'exec echo "$GREETING from $(basename "$(pwd)")"; for i in 1 2 3 4 5; do echo tick $i; sleep 0.3; done; echo oops >&2; exit 3')
	[ "$n" = 1 ]
	cat "$MNT/d1/journal" >"$BATS_TEST_TMPDIR/live" &
	reader=$!
	wait_for grep -q 'tick 1' "$BATS_TEST_TMPDIR/live"
	[ "$(cat "$MNT/d1/runs/1/status")" = running ]
	[ "$(cat "$MNT/d1/runs/1/wait")" = "exited 3" ]
	wait "$reader"
	expected='hello from user
tick 1
tick 2
tick 3
tick 4
tick 5
oops'
	[ "$(cat "$BATS_TEST_TMPDIR/live")" = "$expected" ]
	[ "$(cat "$MNT/d1/journal")" = "$expected" ]
	[ "$(head -c 5 "$MNT/d1/runs/1/journal")" = hello ]
}

@test "e2b: bad options fail cleanly and create nothing" {
	run e2b_new bad colour=blue
	[ "$status" -ne 0 ]
	[[ "$output" == *'e2b: unknown option "colour"'* ]]
	[ ! -e "$MNT/bad" ]
	run e2b_new bad timeout=soon
	[ "$status" -ne 0 ]
	[[ "$output" == *"timeout=soon: expected seconds"* ]]
	if [ "$E2B_MODE" = emulator ]; then
		[ "$(e2b_stat sandboxes)" = 0 ]
	fi
}

@test "e2b: without E2B_API_KEY the provider's status names the variable and new fails" {
	e2b_emu_require
	sfs_unmount
	E2B_API_KEY='' sfs_mount --log-level 3
	grep -qx 'configured false' "$MNT/providers/e2b/status"
	grep -q 'E2B_API_KEY' "$MNT/providers/e2b/status"
	run e2b_new nokey
	[ "$status" -ne 0 ]
	[[ "$output" == *E2B_API_KEY* ]]
	[ ! -e "$MNT/nokey" ]
}

@test "e2b: an API error shows E2B's message, with the key redacted; a 429 is retried after Retry-After" {
	e2b_emu_require
	sfs_unmount
	E2B_API_KEY="$E2B_KEY-wrong" sfs_mount --log-level 3
	run e2b_new denied
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid API key"* ]]
	[[ "$output" != *"$E2B_KEY-wrong"* ]]
	run ! grep -q -- "$E2B_KEY-wrong" "$BATS_TEST_TMPDIR/daemon.log"
	sfs_unmount
	sfs_mount --log-level 3
	# every control-plane call answers 429 with Retry-After: 1 once in two
	e2b_faults '{"fail_rate": 0.5, "status": 429, "retry_after": 1, "fail_paths": "/sandboxes"}'
	start=$(date +%s%N)
	for i in 1 2 3; do
		e2b_new "r$i" >/dev/null
	done
	e2b_faults '{"fail_rate": 0}'
	grep -q 'injected 429' "$EMU_DIR/requests.log"
	n429=$(grep -c 'injected 429' "$EMU_DIR/requests.log")
	ms=$((($(date +%s%N) - start) / 1000000))
	echo "$n429 answers 429, $ms ms" >&3
	# each 429 waited at least the second it asked for
	[ "$ms" -ge $((n429 * 1000)) ]
}

@test "e2b: envd is reached through E2B_SANDBOX_URL with the sandbox id and port headers" {
	e2b_emu_require
	e2b_new h1 >/dev/null
	[ "$(e2b_run h1 'echo hi')" = hi ]
	# the emulator answers envd routes only with E2b-Sandbox-Id and port 49983
	[ "$(e2b_stat 'envd POST /process.Process')" -ge 2 ]
	grep -q 'envd POST /process.Process/Start' "$EMU_DIR/requests.log"
}

@test "e2b: workspace read, write, ls, mkdir, mv, rm, chmod, symlink; runs see it" {
	e2b_new w1 >/dev/null
	W=$(ws w1)
	echo hello >"$W/a.txt"
	mkdir "$W/dir"
	printf 'one\ntwo\n' >"$W/dir/f"
	[ "$(cat "$W/a.txt")" = hello ]
	[ "$(ls "$W")" = "a.txt
dir" ]
	mv "$W/a.txt" "$W/dir/b.txt"
	[ ! -e "$W/a.txt" ]
	[ "$(cat "$W/dir/b.txt")" = hello ]
	chmod 755 "$W/dir/f"
	[ "$(stat -c %a "$W/dir/f")" = 755 ]
	echo over >"$W/dir/f2"
	mv -f "$W/dir/f2" "$W/dir/b.txt"
	[ "$(cat "$W/dir/b.txt")" = over ]
	ln -s dir/b.txt "$W/link"
	[ "$(readlink "$W/link")" = dir/b.txt ]
	[ "$(e2b_run w1 'cat dir/b.txt; stat -c %a dir/f; ls dir; readlink link')" = "over
755
b.txt
f
dir/b.txt" ]
	e2b_run w1 'echo from-run > dir/r.txt; rm dir/f' >/dev/null
	[ "$(cat "$W/dir/r.txt")" = from-run ]
	[ ! -e "$W/dir/f" ]
	run rmdir "$W/dir"
	[ "$status" -ne 0 ]
	[[ "$output" == *"not empty"* ]]
	rm "$W/dir/r.txt" "$W/dir/b.txt" "$W/link"
	rmdir "$W/dir"
	[ -z "$(ls -A "$W")" ]
	printf 'abcdef' >"$W/t"
	truncate -s 3 "$W/t"
	[ "$(e2b_run w1 'cat t')" = abc ]
	# sizes travel as int64 strings, bytes as they are
	head -c 100000 /dev/urandom >"$BATS_TEST_TMPDIR/bin"
	cp "$BATS_TEST_TMPDIR/bin" "$W/bin"
	[ "$(stat -c %s "$W/bin")" = 100000 ]
	[ "$(e2b_run w1 'wc -c < bin')" = 100000 ]
	cmp "$BATS_TEST_TMPDIR/bin" "$W/bin"
}

@test "e2b: ls -l of a 1000-file directory is at most 2 envd calls (ListDir carries the attributes)" {
	e2b_new n1 >/dev/null
	e2b_run n1 'mkdir many && cd many && for i in $(seq 1 1000); do echo $i > f$i; done' >/dev/null
	W=$(ws n1)
	stat "$W/many" >/dev/null # the lookup of the directory itself
	[ "$E2B_MODE" != emulator ] || echo '-- ls' >>"$EMU_DIR/requests.log"
	b=$(awk '$1 == "remote_calls" { print $2 }' "$MNT/n1/status")
	[ "$(ls -l "$W/many" | wc -l)" -eq 1001 ]
	c=$(awk '$1 == "remote_calls" { print $2 }' "$MNT/n1/status")
	echo "ls -l of 1000 files: $((c - b)) calls" >&3
	[ $((c - b)) -le 2 ]
	if [ "$E2B_MODE" = emulator ]; then
		[ "$(sed -n '/^-- ls/,$p' "$EMU_DIR/requests.log" | grep -c 'ListDir')" = 1 ]
		[ "$(sed -n '/^-- ls/,$p' "$EMU_DIR/requests.log" | grep -c 'Stat')" = 0 ]
	fi
}

@test "e2b: writable stdin: bytes written to runs/N/stdin reach the run; eof ends it" {
	e2b_new i1 >/dev/null
	n=$(ctl_write "$MNT/i1/ctl" 'exec while read -r l; do echo "got $l"; done; echo done')
	echo hello >"$MNT/i1/runs/$n/stdin"
	echo world >"$MNT/i1/runs/$n/stdin"
	wait_for grep -q "got world" "$MNT/i1/runs/$n/journal"
	[ "$(cat "$MNT/i1/runs/$n/status")" = running ]
	echo eof >"$MNT/i1/runs/$n/ctl"
	[ "$(cat "$MNT/i1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/i1/runs/$n/journal")" = "$(printf 'got hello\ngot world\ndone')" ]
}

@test "e2b: stop pauses and start connects: files and a running command survive" {
	e2b_new s1 >/dev/null
	echo kept >"$(ws s1)/f"
	n=$(ctl_write "$MNT/s1/ctl" 'exec echo before; sleep 2; echo after')
	wait_for grep -q before "$MNT/s1/runs/$n/journal"
	ctl_write "$MNT/s1/ctl" stop >/dev/null
	grep -qx 'state stopped' "$MNT/s1/status"
	if [ "$E2B_MODE" = emulator ]; then
		[ "$(curl -s "$E2B_API_URL/sandboxes/$(awk '$1=="id"{print $2}' "$MNT/s1/status")" -H "X-API-Key: $E2B_KEY" |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = paused ]
	fi
	ctl_write "$MNT/s1/ctl" start >/dev/null
	grep -qx 'state running' "$MNT/s1/status"
	[ "$(cat "$(ws s1)/f")" = kept ]
	[ "$(cat "$MNT/s1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/s1/runs/$n/journal")" = "before
after" ]
}

@test "e2b: a run survives the daemon; forget then resume by id gets sandbox and runs back" {
	e2b_new v1 >/dev/null
	id=$(awk '$1=="id"{print $2}' "$MNT/v1/status")
	n=$(ctl_write "$MNT/v1/ctl" 'exec echo one; sleep 1; echo two')
	wait_for grep -q one "$MNT/v1/runs/$n/journal"
	sfs_unmount
	sleep 1.5
	sfs_mount --log-level 3
	[ "$(cat "$MNT/v1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/v1/runs/$n/journal")" = "one
two" ]
	echo "forget v1" >"$MNT/ctl"
	[ ! -e "$MNT/v1" ]
	echo "resume v1 provider=e2b id=$id" >"$MNT/ctl"
	grep -qx "id $id" "$MNT/v1/status"
	grep -qx 'state running' "$MNT/v1/status"
	[ "$(cat "$MNT/v1/runs/$n/journal")" = "one
two" ]
	[ "$(e2b_run v1 'echo three')" = three ]
}

@test "e2b: snapshot and restore; fork; fork from a snapshot; expose; destroy deletes snapshots" {
	e2b_new p1 >/dev/null
	echo first >"$(ws p1)/f"
	sid=$(ctl_write "$MNT/p1/ctl" "snapshot first")
	[ -d "$MNT/p1/snapshots/$sid" ]
	echo second >"$(ws p1)/f"
	ctl_write "$MNT/p1/ctl" "restore $sid" >/dev/null
	[ "$(cat "$(ws p1)/f")" = first ]
	echo third >"$(ws p1)/f"
	ctl_write "$MNT/p1/ctl" "fork p2" >/dev/null
	[ "$(cat "$(ws p2)/f")" = third ]
	[ "$(awk '$1=="id"{print $2}' "$MNT/p1/status")" != "$(awk '$1=="id"{print $2}' "$MNT/p2/status")" ]
	echo only-in-p2 >"$(ws p2)/g"
	[ ! -e "$(ws p1)/g" ]
	ctl_write "$MNT/p1/ctl" "fork p3 from=$sid" >/dev/null
	[ "$(cat "$(ws p3)/f")" = first ]
	run ctl_write "$MNT/p1/ctl" "expose 8080"
	[ "$status" -eq 0 ]
	id=$(awk '$1=="id"{print $2}' "$MNT/p1/status")
	[[ "$(cat "$MNT/p1/ports/8080")" == "https://8080-$id."* ]]
	if [ "$E2B_MODE" = emulator ]; then
		[ "$(e2b_stat snapshots)" = 1 ]
		ctl_write "$MNT/p1/ctl" destroy >/dev/null
		[ "$(e2b_stat snapshots)" = 0 ]
	fi
}
