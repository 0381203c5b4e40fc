#!/usr/bin/env bats
# The sbx provider (Docker Sandboxes through the sbx CLI), against the fake
# CLI (tests/emulators/sbx: host directories as VMs, its control emulator
# for fault switches) or, with a logged-in real `sbx` on PATH (and
# SFS_SBX_EMULATOR unset), the real one: the provider conformance suite
# (tests/bats/conformance.bash, adapter tests/bats/providers/sbx.bash), then
# what only sbx has.  Every test starts its own fake and daemon; teardown
# stops both, even when the test failed.

load conformance
conf_provider sbx

# sbx has no credential of its own: the CLI keeps the login, sandboxfs never
# sees a token, so there is nothing of the provider's to grep for.  A secret
# of a sandbox (secret.NAME) in a CLI failure is covered by the error test
# below.
conf_test_secret_grep() {
	skip "sbx: no credential of its own (the CLI holds the login)"
}

@test "sbx: this file runs every body of the conformance suite" { conf_test_all_listed; }

# ---- the provider
@test "sbx: configured, follow journals, and the caps these tests prove" { conf_test_caps; }
@test "sbx: a bad option fails cleanly and creates nothing" { conf_test_bad_option; }

# ---- runs and journals
@test "sbx: exec with the sandbox env; the journal follows live; status and wait" { conf_test_exec_journal; }
@test "sbx: shell syntax in commands and env values runs as written; a real-time signal is a signal" { conf_test_shell_syntax; }
@test "sbx: a journal larger than one read arrives whole" { conf_test_big_journal; }
@test "sbx: env and unsetenv reach later runs; an unknown verb is an error" { conf_test_env_verbs; }
@test "sbx: readers that come and go leave no follower and no process" { conf_test_readers_leave_nothing; }

# ---- workspace
@test "sbx: workspace read, write, ls, mkdir, mv, rm, chmod; runs see it and vice versa" { conf_test_workspace_ops; }
@test "sbx: new files and directories get the creator's umask, here and in the sandbox" { conf_test_umask; }
@test "sbx: editor saves (temp + rename, backup, swap, fsync; vim) land in the sandbox" { conf_test_editor_saves; }
@test "sbx: git clone, status, commit in the workspace; the sandbox sees the commits" { conf_test_git_in_workspace; }
@test "sbx: symlinks: inside shown relative, outside shown so the host reaches nothing" { conf_test_symlinks; }
@test "sbx: source= arrives in a constant number of calls, setup runs there" { conf_test_source; }

# ---- snapshots, fork, ports, cancel
@test "sbx: snapshot (caps snapshots false: skips by name)" { conf_test_snapshot_restore; }
@test "sbx: fork (caps fork false: skips by name)" { conf_test_fork; }
@test "sbx: expose (caps ports false: skips by name)" { conf_test_expose; }
@test "sbx: kill ends the run and its group; cancel kills; the sandbox stays" { conf_test_kill_cancel; }
@test "sbx: cancel ends its runs and releases journal and wait readers at once" { conf_test_cancel_releases_readers; }

# ---- faults
@test "sbx: a write during an outage fails close with EIO, keeps the data, and lands later" { conf_test_outage_write; }
@test "sbx: changes unsaved at unmount are saved by the next daemon" { conf_test_unsaved_at_unmount; }
@test "sbx: failing and slow CLI calls are retried without losing bytes" { conf_test_faults_retried; }
@test "sbx: the mount stays responsive for a local sandbox while the CLI hangs" { conf_test_hang_responsive; }

# ---- round trips
@test "sbx: ls -l of a 1000-file directory costs at most 2 round trips warm" { conf_test_ls_round_trips; }
@test "sbx: the small files beside an opened one come in the same call as it" { conf_test_bulk_siblings; }

# ---- secrets, restarts, lifecycle
@test "sbx: the secret grep (sbx has no credential of its own: skips by name)" { conf_test_secret_grep; }
@test "sbx: a restarted daemon brings the sandbox, its files and its runs back" { conf_test_restart; }
@test "sbx: forget, then resume by sandbox name brings the sandbox and its files back" { conf_test_forget_resume; }
@test "sbx: stop and start are refused (the CLI has none), destroy removes it" { conf_test_stop_start_destroy; }

# ---- only sbx

# fake_only: the test needs the fake CLI (its log, its switches).
fake_only() {
	[ "${CONF_MODE:-}" = emulator ] || skip "sbx: needs the fake CLI's request log and switches"
}

# ctlq TEXT: TEXT as one word of a ctl line (single-quoted, ' as '\'').
ctlq() {
	local q="'"
	printf "'%s'" "${1//$q/$q\\$q$q}"
}

# argv_log: the fake's request log, one JSON argv per line.
argv_log() {
	grep '"argv"' "$EMU_DIR/requests.log"
}

@test "sbx: status names a missing CLI, a missing login and a missing hypervisor" {
	fake_only
	grep -qx 'configured true' "$MNT/providers/sbx/status"
	emu_faults '{"not_logged_in": true}'
	grep -qx 'configured false' "$MNT/providers/sbx/status"
	grep -q '^reason missing login: .*not logged in' "$MNT/providers/sbx/status"
	run conf_new nl
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "*"not logged in"* ]]
	emu_faults '{"not_logged_in": false, "no_hypervisor": true}'
	grep -qx 'configured false' "$MNT/providers/sbx/status"
	grep -q '^reason missing hypervisor: ' "$MNT/providers/sbx/status"
	emu_faults '{"no_hypervisor": false}'
	grep -qx 'configured true' "$MNT/providers/sbx/status"
	# no CLI at all: a daemon whose sbx.cli names nothing
	sfs_unmount
	sfs_mount --log-level 3 -o "sbx.cli=$BATS_TEST_TMPDIR/no-such-sbx"
	grep -qx 'configured false' "$MNT/providers/sbx/status"
	grep -q '^reason missing cli: ' "$MNT/providers/sbx/status"
}

@test "sbx: a name, a command and an env value with quotes, \$(), ; and newlines reach the CLI as one argv element each" {
	fake_only
	# the fake refuses this name, but it must arrive whole, as one element
	evil="a'b\"c\$(touch $BATS_TEST_TMPDIR/pwned);d\`id\`"
	run conf_new q1 "name=$(ctlq "$evil")"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: sbx create: "*"invalid sandbox name"* ]]
	argv_log | python3 -c '
import json, sys
evil = sys.argv[1]
for line in sys.stdin:
    a = json.loads(line)["argv"]
    if a[0] == "create":
        i = a.index("--name")
        assert a[i + 1] == evil, a
        sys.exit(0)
sys.exit("no create logged")' "$evil"
	[ ! -e "$BATS_TEST_TMPDIR/pwned" ]
	conf_new q2 >/dev/null
	val="x'y\"z\$(touch $BATS_TEST_TMPDIR/pwned2);w"
	ctl_write "$MNT/q2/ctl" "env V=$(ctlq "$val")" >/dev/null
	cmd="printf '%s|' \"\$V\" 'q\"\$(no)'; echo ';done'"
	n=$(ctl_write "$MNT/q2/ctl" "exec $cmd")
	[ "$(cat "$MNT/q2/runs/$n/wait")" = "exited 0" ]
	[ "$(cat "$MNT/q2/runs/$n/journal")" = "x'y\"z\$(touch $BATS_TEST_TMPDIR/pwned2);w|q\"\$(no)|;done" ]
	[ ! -e "$BATS_TEST_TMPDIR/pwned2" ]
	# the command and the env value each crossed the CLI as one element
	argv_log | python3 -c '
import json, sys
cmd, val = sys.argv[1], sys.argv[2]
seen_cmd = seen_val = False
for line in sys.stdin:
    a = json.loads(line)["argv"]
    if a[0] != "exec":
        continue
    seen_cmd = seen_cmd or cmd in a
    seen_val = seen_val or any(x == "V=" + val or x == val for x in a)
assert seen_cmd, "command not one element"
assert seen_val, "env value not one element"' "$cmd" "$val"
	# a newline inside a file name (a path argument) too
	printf 'nl\n' >"$(ws q2)/two
lines"
	[ "$(conf_run q2 'cat two?lines')" = nl ]
}

@test "sbx: a CLI failure's stderr becomes the error: text, redacted" {
	fake_only
	conf_new e1 >/dev/null
	# the next CLI call fails: its stderr is the error
	emu_faults '{"fail_next": 1}'
	run ctl_write "$MNT/e1/ctl" 'exec true'
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: sbx exec: sbx: injected failure (fail_next)"* ]]
	# a secret value in the CLI's stderr is redacted there and in status
	printf sbx-secret-value-42 >"$BATS_TEST_TMPDIR/tok"
	conf_new e2 "secret.TOK=file:$BATS_TEST_TMPDIR/tok" >/dev/null
	run ctl_write "$MNT/ctl" "new e3 provider=sbx name=sbx-secret-value-42/x"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: sbx create: "* ]]
	[[ "$output" != *sbx-secret-value-42* ]]
}

@test "sbx: a hung CLI call is killed at sbx.timeout and the op fails with ETIMEDOUT" {
	fake_only
	conf_new h1 >/dev/null
	sfs_unmount
	sfs_mount --log-level 3 -o sbx.timeout=2 -o sbx.poll_timeout=2
	emu_faults '{"hang": true}'
	start=$(date +%s)
	run ctl_write "$MNT/h1/ctl" 'exec true'
	end=$(date +%s)
	emu_faults '{"hang": false}'
	[ "$status" -ne 0 ]
	[[ "$output" == *"no answer in 2.0 s"* ]]
	[ $((end - start)) -lt 10 ]
	# the killed CLI left no process behind
	run pgrep -f "$P_FAKE_BIN/sbx"
	[ "$status" -ne 0 ]
}

@test "sbx: network= and policy network become sbx policy calls" {
	fake_only
	conf_new p1 network=allow:example.com,*.npmjs.org >/dev/null
	argv_log | grep -qF '"policy", "deny", "network", "--sandbox", "sandboxfs-'
	argv_log | grep -qF '"allow", "network", "--sandbox"'
	argv_log | grep -qF '"example.com"'
	argv_log | grep -qF '"*.npmjs.org"'
	ctl_write "$MNT/p1/ctl" "policy network host" >/dev/null
	argv_log | tail -1 | grep -qF '"policy", "allow", "network", "--sandbox"'
	argv_log | tail -1 | grep -qF '"**"'
}

@test "sbx: clone= must be a git repository on this host; its files are the workspace" {
	fake_only
	run conf_new c0 clone=$BATS_TEST_TMPDIR
	[ "$status" -ne 0 ]
	[[ "$output" == *"not a git repository"* ]]
	repo=$BATS_TEST_TMPDIR/repo
	git init -q "$repo"
	echo from-repo >"$repo/README"
	git -C "$repo" add README
	git -C "$repo" -c user.email=t@t -c user.name=t commit -qm init
	conf_new c1 "clone=$repo" >/dev/null
	[ "$(cat "$(ws c1)/README")" = from-repo ]
	argv_log | grep -qF "\"--clone\", \"--quiet\", \"shell\", \"$repo\""
}

@test "sbx: the real sbx CLI (skips by name unless a logged-in one is on PATH)" {
	[ "${CONF_MODE:-}" = real ] || skip "sbx: no real sbx CLI logged in with a hypervisor here (the fake ran instead)"
	grep -qx 'configured true' "$MNT/providers/sbx/status"
	conf_new r1 >/dev/null
	[ "$(conf_run r1 'echo real')" = real ]
}

@test "sbx: the CLI gets none of the daemon's credentials, only what it needs" {
	fake_only
	# a CLI that records its environment, then is the fake
	cli="$BATS_TEST_TMPDIR/sbx-env"
	cat >"$cli" <<SH
#!/bin/sh
env >>"$BATS_TEST_TMPDIR/cli.env"
exec "$(command -v sbx)" "\$@"
SH
	chmod 755 "$cli"
	sfs_unmount
	E2B_API_KEY=e2b-cred-7f3a AWS_SECRET_ACCESS_KEY=aws-cred-91c2 DAYTONA_API_KEY=dt-cred-55e1 \
		SFS_UNRELATED=other-4410 sfs_mount -o "sbx.cli=$cli"
	conf_new e1 >/dev/null
	[ "$(conf_run e1 'echo ran')" = ran ]
	# the CLI ran with what it needs (its own config, PATH, HOME)
	grep -q "^SBX_FAKE_ROOT=" "$BATS_TEST_TMPDIR/cli.env"
	grep -q "^PATH=" "$BATS_TEST_TMPDIR/cli.env"
	run grep -E "cred-|other-4410|^E2B_|^AWS_|^DAYTONA_" "$BATS_TEST_TMPDIR/cli.env"
	[ "$status" -ne 0 ]
}
