#!/usr/bin/env bats
# The e2b provider, against the local emulator (tests/emulators/e2b) or, with
# E2B_API_KEY set, the real service: the provider conformance suite
# (tests/bats/conformance.bash, adapter tests/bats/providers/e2b.bash), then
# what only e2b has.  Every test starts its own emulator and daemon; teardown
# stops both, even when the test failed.

load conformance
conf_provider e2b

@test "e2b: this file runs every body of the conformance suite" { conf_test_all_listed; }

# ---- the provider
@test "e2b: configured, follow journals, and the caps these tests prove" { conf_test_caps; }
@test "e2b: a bad option fails cleanly and creates nothing" { conf_test_bad_option; }

# ---- runs and journals
@test "e2b: exec with the sandbox env; the journal follows live; status and wait" { conf_test_exec_journal; }
@test "e2b: shell syntax in commands and env values runs as written; a real-time signal is a signal" { conf_test_shell_syntax; }
@test "e2b: a journal larger than one poll read arrives whole" { conf_test_big_journal; }
@test "e2b: env and unsetenv reach later runs; an unknown verb is an error" { conf_test_env_verbs; }
@test "e2b: readers that come and go leave no follower and no process" { conf_test_readers_leave_nothing; }

# ---- workspace
@test "e2b: workspace read, write, ls, mkdir, mv, rm, chmod; runs see it and vice versa" { conf_test_workspace_ops; }
@test "e2b: new files and directories get the creator's umask, here and in the sandbox" { conf_test_umask; }
@test "e2b: editor saves (temp + rename, backup, swap, fsync; vim) land in the sandbox" { conf_test_editor_saves; }
@test "e2b: git clone, status, commit in the workspace; the sandbox sees the commits" { conf_test_git_in_workspace; }
@test "e2b: symlinks: inside shown relative, outside shown so the host reaches nothing" { conf_test_symlinks; }
@test "e2b: source= arrives in a constant number of calls, setup runs there" { conf_test_source; }

# ---- snapshots, fork, ports, cancel
@test "e2b: snapshot, then restore brings the files back" { conf_test_snapshot_restore; }
@test "e2b: fork copies the workspace into a new sandbox" { conf_test_fork; }
@test "e2b: expose gives the port URL under ports/" { conf_test_expose; }
@test "e2b: kill ends the run's whole group and the sandbox stays; cancel kills" { conf_test_kill_cancel; }
@test "e2b: cancel ends its runs and releases journal and wait readers at once" { conf_test_cancel_releases_readers; }

# ---- faults
@test "e2b: a write during an outage fails close with EIO, keeps the data, and lands later" { conf_test_outage_write; }
@test "e2b: changes unsaved at unmount are saved by the next daemon" { conf_test_unsaved_at_unmount; }
@test "e2b: dropped connections, 5xx and slow bodies are retried without losing bytes" { conf_test_faults_retried; }
@test "e2b: the mount stays responsive for a local sandbox while the emulator hangs" { conf_test_hang_responsive; }

# ---- round trips
@test "e2b: ls -l of a 1000-file directory costs at most 2 round trips warm" { conf_test_ls_round_trips; }
@test "e2b: the small files beside an opened one come in the same call as it" { conf_test_bulk_siblings; }

# ---- secrets, restarts, lifecycle
@test "e2b: the API key never appears in anything sandboxfs writes" { conf_test_secret_grep; }
@test "e2b: a restarted daemon brings the sandbox, its files and its runs back" { conf_test_restart; }
@test "e2b: forget, then resume by id brings the sandbox and its files back" { conf_test_forget_resume; }
@test "e2b: stop refuses runs, start brings the files back, destroy removes it" { conf_test_stop_start_destroy; }


# ---- e2b only

@test "e2b: without E2B_API_KEY the provider's status names the variable and new fails" {
	emu_require
	sfs_unmount
	E2B_API_KEY='' sfs_mount --log-level 3
	grep -qx 'configured false' "$MNT/providers/e2b/status"
	grep -q 'E2B_API_KEY' "$MNT/providers/e2b/status"
	run conf_new nokey
	[ "$status" -ne 0 ]
	[[ "$output" == *E2B_API_KEY* ]]
	[ ! -e "$MNT/nokey" ]
}

@test "e2b: an API error shows E2B's message, with the key redacted; a 429 is retried after Retry-After" {
	emu_require
	sfs_unmount
	E2B_API_KEY="$CONF_SECRET-wrong" sfs_mount --log-level 3
	run conf_new denied
	[ "$status" -ne 0 ]
	[[ "$output" == *"Invalid API key"* ]]
	[[ "$output" != *"$CONF_SECRET-wrong"* ]]
	run ! grep -q -- "$CONF_SECRET-wrong" "$BATS_TEST_TMPDIR/daemon.log"
	sfs_unmount
	sfs_mount --log-level 3
	# the next two creates answer 429 with Retry-After: 1
	emu_faults '{"fail_count": 2, "status": 429, "retry_after": 1, "fail_paths": "/sandboxes"}'
	start=$(date +%s%N)
	conf_new r1 >/dev/null
	ms=$((($(date +%s%N) - start) / 1000000))
	echo "create after two 429s: $ms ms" >&3
	[ "$(grep -c 'injected 429' "$EMU_DIR/requests.log")" = 2 ]
	grep -qx 'state running' "$MNT/r1/status"
	# each 429 waited at least the second it asked for
	[ "$ms" -ge 2000 ]
}

@test "e2b: envd is reached through E2B_SANDBOX_URL with the sandbox id and port headers" {
	emu_require
	conf_new h1 >/dev/null
	[ "$(conf_run h1 'echo hi')" = hi ]
	# the emulator answers envd routes only with E2b-Sandbox-Id and port 49983
	[ "$(grep -c 'envd POST /process.Process/Start' "$EMU_DIR/requests.log")" -ge 2 ]
	run ! grep -q 'api POST /process' "$EMU_DIR/requests.log"
}

@test "e2b: ls -l of a 1000-file directory is at most 2 envd calls (ListDir carries the attributes)" {
	conf_new n1 >/dev/null
	conf_run n1 'mkdir many && cd many && for i in $(seq 1 1000); do echo $i > f$i; done' >/dev/null
	W=$(ws n1)
	stat "$W/many" >/dev/null # the lookup of the directory itself
	[ "$CONF_MODE" != emulator ] || echo '-- ls' >>"$EMU_DIR/requests.log"
	b=$(awk '$1 == "remote_calls" { print $2 }' "$MNT/n1/status")
	[ "$(ls -l "$W/many" | wc -l)" -eq 1001 ]
	c=$(awk '$1 == "remote_calls" { print $2 }' "$MNT/n1/status")
	echo "ls -l of 1000 files: $((c - b)) calls" >&3
	[ $((c - b)) -le 2 ]
	if [ "$CONF_MODE" = emulator ]; then
		[ "$(sed -n '/^-- ls/,$p' "$EMU_DIR/requests.log" | grep -c 'ListDir')" = 1 ]
		[ "$(sed -n '/^-- ls/,$p' "$EMU_DIR/requests.log" | grep -c 'Stat')" = 0 ]
	fi
}

@test "e2b: writable stdin: bytes written to runs/N/stdin reach the run; eof ends it" {
	conf_new i1 >/dev/null
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
	conf_new s1 >/dev/null
	echo kept >"$(ws s1)/f"
	n=$(ctl_write "$MNT/s1/ctl" 'exec echo before; sleep 2; echo after')
	wait_for grep -q before "$MNT/s1/runs/$n/journal"
	ctl_write "$MNT/s1/ctl" stop >/dev/null
	grep -qx 'state stopped' "$MNT/s1/status"
	if [ "$CONF_MODE" = emulator ]; then
		[ "$(curl -s "$E2B_API_URL/sandboxes/$(awk '$1=="id"{print $2}' "$MNT/s1/status")" -H "X-API-Key: $CONF_SECRET" |
			python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')" = paused ]
	fi
	ctl_write "$MNT/s1/ctl" start >/dev/null
	grep -qx 'state running' "$MNT/s1/status"
	[ "$(cat "$(ws s1)/f")" = kept ]
	[ "$(cat "$MNT/s1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/s1/runs/$n/journal")" = "before
after" ]
}

@test "e2b: a run in flight survives the daemon: the next one reads its end and whole journal" {
	conf_new v1 >/dev/null
	n=$(ctl_write "$MNT/v1/ctl" 'exec echo one; sleep 1; echo two')
	wait_for grep -q one "$MNT/v1/runs/$n/journal"
	sfs_unmount
	sleep 1.5
	sfs_mount --log-level 3
	[ "$(cat "$MNT/v1/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/v1/runs/$n/journal")" = "one
two" ]
}

@test "e2b: fork from= a snapshot; the port URL is E2B's; destroy deletes the snapshot templates" {
	conf_new p1 >/dev/null
	echo first >"$(ws p1)/f"
	sid=$(ctl_write "$MNT/p1/ctl" "snapshot first")
	echo second >"$(ws p1)/f"
	ctl_write "$MNT/p1/ctl" "fork p3 from=$sid" >/dev/null
	[ "$(cat "$(ws p3)/f")" = first ]
	[ "$(cat "$(ws p1)/f")" = second ]
	ctl_write "$MNT/p1/ctl" "expose 8080" >/dev/null
	id=$(awk '$1=="id"{print $2}' "$MNT/p1/status")
	[[ "$(cat "$MNT/p1/ports/8080")" == "https://8080-$id."* ]]
	if [ "$CONF_MODE" = emulator ]; then
		[ "$(emu_stat snapshots)" = 1 ]
	fi
	ctl_write "$MNT/p3/ctl" destroy >/dev/null
	ctl_write "$MNT/p1/ctl" destroy >/dev/null
	if [ "$CONF_MODE" = emulator ]; then
		[ "$(emu_stat snapshots)" = 0 ]
		[ "$(emu_stat sandboxes)" = 0 ]
	fi
}

@test "e2b: kill reaches the run's background children: nothing of the run is left in the sandbox" {
	conf_new k1 >/dev/null
	# durations no other test uses: the emulator's sandboxes share the host's ps
	a=$((100000 + RANDOM)) b=$((200000 + RANDOM))
	n=$(ctl_write "$MNT/k1/ctl" "exec sleep $a & sleep $b & echo started; wait")
	wait_for grep -q started "$MNT/k1/runs/$n/journal"
	ctl_write "$MNT/k1/ctl" "kill $n" >/dev/null
	[[ "$(cat "$MNT/k1/runs/$n/status")" == killed* ]]
	[ "$(conf_run k1 "ps -eo args | grep -c -e '^sleep $a\$' -e '^sleep $b\$'")" = 0 ]
	if [ "$CONF_MODE" = emulator ]; then
		wait_for eval 'test "$(emu_stat processes)" = 0'
	fi
}

@test "e2b: a secret reaches runs through Start's envs, never a process's argv or E2B's sandbox record" {
	emu_require
	value="e2b-secret-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	sfs_unmount
	SFS_E2B_SECRET="$value" sfs_mount --log-level 3
	conf_new sec secret.API_TOKEN=env:SFS_E2B_SECRET >/dev/null
	n=$(ctl_write "$MNT/sec/ctl" 'exec printf %s "$API_TOKEN" | md5sum; ps -eo args | grep -c "[e]2b-secret-" || true')
	[ "$(cat "$MNT/sec/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/sec/runs/$n/journal")" = "$(printf %s "$value" | md5sum)
0" ]
	# the create's envVars and metadata carry the plain env only
	id=$(awk '$1=="id"{print $2}' "$MNT/sec/status")
	run ! grep -rqF "$value" <(curl -s "$E2B_API_URL/sandboxes/$id" -H "X-API-Key: $CONF_SECRET")
	run ! grep -rqF "$value" "$STATE" "$EMU_DIR/requests.log"
}
