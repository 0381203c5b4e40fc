#!/usr/bin/env bats
# The sprites provider, against the local emulator (tests/emulators/sprites)
# or, with SPRITES_TOKEN set (and SFS_SPRITES_EMULATOR unset), the real
# service: the provider conformance suite (tests/bats/conformance.bash,
# adapter tests/bats/providers/sprites.bash), then what only sprites has.
# Every test starts its own emulator and daemon; teardown stops both, even
# when the test failed.

load conformance
conf_provider sprites

@test "sprites: this file runs every body of the conformance suite" { conf_test_all_listed; }

# ---- the provider
@test "sprites: configured, follow journals, and the caps these tests prove" { conf_test_caps; }
@test "sprites: a bad option fails cleanly and creates nothing" { conf_test_bad_option; }

# ---- runs and journals
@test "sprites: exec with the sandbox env; the journal follows live; status and wait" { conf_test_exec_journal; }
@test "sprites: shell syntax in commands and env values runs as written; a real-time signal is a signal" { conf_test_shell_syntax; }
@test "sprites: a journal larger than one read arrives whole" { conf_test_big_journal; }
@test "sprites: env and unsetenv reach later runs; an unknown verb is an error" { conf_test_env_verbs; }
@test "sprites: readers that come and go leave no follower and no process" { conf_test_readers_leave_nothing; }

# ---- workspace
@test "sprites: workspace read, write, ls, mkdir, mv, rm, chmod; runs see it and vice versa" { conf_test_workspace_ops; }
@test "sprites: new files and directories get the creator's umask, here and in the sandbox" { conf_test_umask; }
@test "sprites: editor saves (temp + rename, backup, swap, fsync; vim) land in the sandbox" { conf_test_editor_saves; }
@test "sprites: git clone, status, commit in the workspace; the sprite sees the commits" { conf_test_git_in_workspace; }
@test "sprites: symlinks: inside shown relative, outside shown so the host reaches nothing" { conf_test_symlinks; }
@test "sprites: source= arrives in a constant number of calls, setup runs there" { conf_test_source; }

# ---- snapshots, fork, ports, cancel
@test "sprites: snapshot (a checkpoint), then restore brings the files back" { conf_test_snapshot_restore; }
@test "sprites: fork (caps fork false: skips by name)" { conf_test_fork; }
@test "sprites: expose 8080 gives the sprite URL under ports/" { conf_test_expose; }
@test "sprites: kill ends the run and its group; cancel kills; the sprite stays" { conf_test_kill_cancel; }
@test "sprites: cancel ends its runs and releases journal and wait readers at once" { conf_test_cancel_releases_readers; }

# ---- faults
@test "sprites: a write during an outage fails close with EIO, keeps the data, and lands later" { conf_test_outage_write; }
@test "sprites: changes unsaved at unmount are saved by the next daemon" { conf_test_unsaved_at_unmount; }
@test "sprites: dropped connections, 5xx and slow bodies are retried without losing bytes" { conf_test_faults_retried; }
@test "sprites: the mount stays responsive for a local sandbox while the emulator hangs" { conf_test_hang_responsive; }

# ---- round trips
@test "sprites: ls -l of a 1000-file directory costs at most 2 round trips warm" { conf_test_ls_round_trips; }
@test "sprites: the small files beside an opened one come in the same call as it" { conf_test_bulk_siblings; }

# ---- secrets, restarts, lifecycle
@test "sprites: the token never appears in anything sandboxfs writes" { conf_test_secret_grep; }
@test "sprites: a restarted daemon brings the sandbox, its files and its runs back" { conf_test_restart; }
@test "sprites: forget, then resume by sprite name brings the sandbox and its files back" { conf_test_forget_resume; }
@test "sprites: stop and start are refused (a sprite sleeps by itself), destroy removes it" { conf_test_stop_start_destroy; }

# ---- only sprites

# emu_api METHOD PATH [BODY]: a call to the emulator with the test's token.
emu_api() {
	curl -s -m 10 -X "$1" -H "Authorization: Bearer $CONF_SECRET" ${3:+-d "$3"} \
		"http://127.0.0.1:$EMU_PORT$2"
}

@test "sprites: writableStdin: bytes written to runs/N/stdin reach the run (stream 0); eof ends it (stream 4)" {
	conf_new in1 >/dev/null
	n=$(ctl_write "$MNT/in1/ctl" 'exec while read -r l; do echo "got $l"; done; echo done')
	echo hello >"$MNT/in1/runs/$n/stdin"
	echo world >"$MNT/in1/runs/$n/stdin"
	wait_for grep -q "got world" "$MNT/in1/runs/$n/journal"
	[ "$(cat "$MNT/in1/runs/$n/status")" = running ]
	echo eof >"$MNT/in1/runs/$n/ctl"
	[ "$(cat "$MNT/in1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/in1/runs/$n/journal")" = "$(printf 'got hello\ngot world\ndone')" ]
}

@test "sprites: kill reaches the run's background children too: nothing of it is left" {
	emu_require
	conf_new kg >/dev/null
	n=$(ctl_write "$MNT/kg/ctl" 'exec sleep 300 & sleep 301 & echo up; wait')
	wait_for grep -q up "$MNT/kg/runs/$n/journal"
	[ "$(emu_stat processes)" -ge 3 ] # wrapper, its command, two sleeps
	ctl_write "$MNT/kg/ctl" kill >/dev/null
	[ "$(cat "$MNT/kg/runs/$n/wait")" = "killed TERM" ]
	wait_for eval 'test "$(emu_stat processes)" = 0'
	run ctl_write "$MNT/kg/ctl" "kill $n"
	[ "$status" -ne 0 ] # an ended run is not killed twice
}

@test "sprites: a run outlives the daemon's socket and the daemon: its output and status are there after a restart" {
	conf_new lv >/dev/null
	n=$(ctl_write "$MNT/lv/ctl" 'exec echo one; sleep 2; echo two')
	sfs_unmount
	sleep 3
	sfs_mount --log-level 3
	[ "$(cat "$MNT/lv/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/lv/runs/$n/journal")" = "one
two" ]
}

@test "sprites: journal followers are attached sessions ended through the kill route" {
	emu_require
	conf_new fo >/dev/null
	n=$(ctl_write "$MNT/fo/ctl" 'exec echo first; sleep 30')
	wait_for grep -q first "$MNT/fo/runs/$n/journal"
	# long enough for the engine to start a follower (at most one a second)
	timeout 3 cat "$MNT/fo/runs/$n/journal" >/dev/null || true
	wait_for grep -q '^followers 0$' "$MNT/fo/status"
	grep -Eq 'POST /v1/sprites/fo/exec/[0-9]+/kill\?signal=SIGTERM' "$EMU_DIR/requests.log"
	ctl_write "$MNT/fo/ctl" kill >/dev/null
	wait_for eval 'test "$(emu_stat processes)" = 0'
}

@test "sprites: expose of a port other than 8080 is EOPNOTSUPP with the reason" {
	conf_new xp >/dev/null
	run ctl_write "$MNT/xp/ctl" "expose 3000"
	[ "$status" -ne 0 ]
	[[ "$output" == *"only port 8080 has a URL"* ]]
	[ ! -e "$MNT/xp/ports/3000" ]
}

@test "sprites: network= and policy network become the sprite's network policy; a bad one creates nothing" {
	emu_require
	conf_new np network=allow:github.com,*.pypi.org >/dev/null
	rules=$(emu_api GET /v1/sprites/np/policy/network)
	[ "$rules" = '{"rules": [{"domain": "github.com", "action": "allow"}, {"domain": "*.pypi.org", "action": "allow"}, {"domain": "*", "action": "deny"}]}' ]
	conf_new nn network=none >/dev/null
	[ "$(emu_api GET /v1/sprites/nn/policy/network)" = '{"rules": [{"domain": "*", "action": "deny"}]}' ]
	# policy network changes it later
	ctl_write "$MNT/nn/ctl" "policy network allow:example.org" >/dev/null
	[ "$(emu_api GET /v1/sprites/nn/policy/network)" = '{"rules": [{"domain": "example.org", "action": "allow"}, {"domain": "*", "action": "deny"}]}' ]
	run conf_new nb network=allow:
	[ "$status" -ne 0 ]
	[[ "$output" == *"allow: needs at least one host"* ]]
	[ ! -e "$MNT/nb" ]
	[ "$(emu_stat sandboxes)" = 2 ]
}

@test "sprites: a sandbox name that is not a sprite name needs sprite=; sprite= names it" {
	run conf_new Big_One
	[ "$status" -ne 0 ]
	[[ "$output" == *"give one with sprite=NAME"* ]]
	[ ! -e "$MNT/Big_One" ]
	conf_new Big_One sprite=big-one >/dev/null
	grep -qx 'id big-one' "$MNT/Big_One/status"
}

@test "sprites: without a token providers/sprites/status names the variables; SPRITE_TOKEN also works" {
	emu_require
	sfs_unmount
	unset SPRITES_TOKEN SPRITE_TOKEN
	sfs_mount --log-level 3
	grep -qx 'configured false' "$MNT/providers/sprites/status"
	grep -q 'SPRITES_TOKEN (or SPRITE_TOKEN)' "$MNT/providers/sprites/status"
	run conf_new nt
	[ "$status" -ne 0 ]
	[[ "$output" == *"no token"* ]]
	sfs_unmount
	export SPRITE_TOKEN="$CONF_SECRET"
	sfs_mount --log-level 3
	grep -qx 'configured true' "$MNT/providers/sprites/status"
	conf_new nt >/dev/null
	[ "$(conf_run nt 'echo ok')" = ok ]
}

@test "sprites: an API refusal reads as the API's message, and a sprite gone behind our back reads as gone" {
	emu_require
	conf_new gone >/dev/null
	emu_api DELETE /v1/sprites/gone >/dev/null
	run ctl_write "$MNT/gone/ctl" 'exec true'
	[ "$status" -ne 0 ]
	[[ "$output" == *"sprite gone not found"* ]]
}

@test "sprites: a command too long for a URL is staged in pieces and runs as written" {
	conf_new lc >/dev/null
	long=$(head -c 30000 /dev/zero | tr '\0' x)
	n=$(ctl_write "$MNT/lc/ctl" "exec v='$long'; echo \${#v} \"it's\" long-ok")
	[ "$(cat "$MNT/lc/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/lc/runs/$n/journal")" = "30000 it's long-ok" ]
	# the staged file is gone; no request line came near 8 KiB
	[ "$(conf_run lc 'ls "${TMPDIR:-/tmp}"/sandboxfs-runs/*.sh 2>/dev/null | wc -l')" = 0 ]
	if [ "$CONF_MODE" = emulator ]; then
		[ "$(grep -c 'sandboxfs-stage' "$EMU_DIR/requests.log")" -ge 15 ]
		[ "$(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$EMU_DIR/requests.log")" -lt 8300 ]
	fi
}

@test "sprites: an exec that names no session still runs; only its stdin is refused, with the reason" {
	emu_require
	sfs_unmount
	sfs_mount --log-level 3 -o sprites.poll_timeout=1
	conf_new ns >/dev/null
	emu_faults '{"no_session_info": true}'
	n=$(ctl_write "$MNT/ns/ctl" 'exec echo ran; cat')
	emu_faults '{"no_session_info": false}'
	wait_for grep -q ran "$MNT/ns/runs/$n/journal"
	grep -q "run $n: no session_info came" "$BATS_TEST_TMPDIR/daemon.log"
	run ctl_write "$MNT/ns/runs/$n/ctl" eof
	[ "$status" -ne 0 ]
	[[ "$output" == *"has no session to write to"* ]]
	ctl_write "$MNT/ns/ctl" "kill $n" >/dev/null
	[ "$(cat "$MNT/ns/runs/$n/wait")" = "killed TERM" ]
}
