#!/usr/bin/env bats
# The vercel provider, against the local emulator (tests/emulators/vercel)
# or, with VERCEL_TOKEN + VERCEL_TEAM_ID + VERCEL_PROJECT_ID (or VERCEL_OIDC_TOKEN)
# set, the real service: the provider conformance
# suite (tests/bats/conformance.bash, adapter tests/bats/providers/vercel.bash).
# Every test starts its own emulator and daemon; teardown stops both, even
# when the test failed.

load conformance
conf_provider vercel

@test "vercel: this file runs every body of the conformance suite" { conf_test_all_listed; }

# ---- the provider
@test "vercel: configured, poll journals, and the caps these tests prove" { conf_test_caps; }
@test "vercel: a bad option fails cleanly and creates nothing" { conf_test_bad_option; }

# ---- runs and journals
@test "vercel: exec with the sandbox env; the journal polls live; status and wait" { conf_test_exec_journal; }
@test "vercel: shell syntax in commands and env values runs as written; a real-time signal is a signal" { conf_test_shell_syntax; }
@test "vercel: a journal larger than one poll read arrives whole (NDJSON, base64-framed)" { conf_test_big_journal; }
@test "vercel: env and unsetenv reach later runs; an unknown verb is an error" { conf_test_env_verbs; }
@test "vercel: readers that come and go leave no follower and no process" { conf_test_readers_leave_nothing; }

# ---- workspace
@test "vercel: workspace read, write, ls, mkdir, mv, rm, chmod; runs see it and vice versa" { conf_test_workspace_ops; }
@test "vercel: new files and directories get the creator's umask, here and in the sandbox" { conf_test_umask; }
@test "vercel: editor saves (temp + rename, backup, swap, fsync; vim) land in the sandbox" { conf_test_editor_saves; }
@test "vercel: git clone, status, commit in the workspace; the sandbox sees the commits" { conf_test_git_in_workspace; }
@test "vercel: symlinks: inside shown relative, outside shown so the host reaches nothing" { conf_test_symlinks; }
@test "vercel: source= arrives in a constant number of calls, setup runs there" { conf_test_source; }

# ---- snapshots, fork, ports, cancel
@test "vercel: snapshot, then restore brings the files back" { conf_test_snapshot_restore; }
@test "vercel: fork copies the workspace into a new sandbox" { conf_test_fork; }
@test "vercel: expose gives a preview URL under ports/" { conf_test_expose; }
@test "vercel: kill is refused; cancel destroys the sandbox and the run with it" { conf_test_kill_cancel; }
@test "vercel: cancel ends its runs as lost and releases journal and wait readers at once" { conf_test_cancel_releases_readers; }

# ---- faults
@test "vercel: a write during an outage fails close with EIO, keeps the data, and lands later" { conf_test_outage_write; }
@test "vercel: changes unsaved at unmount are saved by the next daemon" { conf_test_unsaved_at_unmount; }
@test "vercel: dropped connections, 5xx and slow bodies are retried without losing bytes" { conf_test_faults_retried; }
@test "vercel: the mount stays responsive for a local sandbox while the emulator hangs" { conf_test_hang_responsive; }

# ---- round trips
@test "vercel: ls -l of a 1000-file directory costs at most 2 round trips warm" { conf_test_ls_round_trips; }
@test "vercel: the small files beside an opened one come in the same call as it" { conf_test_bulk_siblings; }

# ---- secrets, restarts, lifecycle
@test "vercel: the token never appears in anything sandboxfs writes" { conf_test_secret_grep; }
@test "vercel: a restarted daemon brings the sandbox, its files and its runs back" { conf_test_restart; }
@test "vercel: forget, then resume by id brings the sandbox and its files back" { conf_test_forget_resume; }
@test "vercel: stop refuses runs, start brings the files back, destroy removes it" { conf_test_stop_start_destroy; }

# ---- vercel only

# vc_emu_get NAME: the emulator's record of sandbox NAME, as the API returns it.
vc_emu_get() {
	curl -s -m 5 -H "Authorization: Bearer $CONF_SECRET" \
		"http://127.0.0.1:$EMU_PORT/v2/sandboxes/$1?teamId=$P_EMU_TEAM&projectId=$P_EMU_PROJECT"
}

@test "vercel: a missing credential is named in providers/vercel/status and in new's error" {
	emu_require
	sfs_unmount
	(
		unset VERCEL_TOKEN VERCEL_OIDC_TOKEN
		sfs_mount --log-level 3
	)
	grep -qx 'configured false' "$MNT/providers/vercel/status"
	grep -q '^reason .*VERCEL_TOKEN.*VERCEL_OIDC_TOKEN' "$MNT/providers/vercel/status"
	run conf_new m1
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "*VERCEL_TOKEN* ]]
	sfs_unmount
	(
		unset VERCEL_TEAM_ID
		sfs_mount --log-level 3
	)
	grep -qx 'configured false' "$MNT/providers/vercel/status"
	grep -q '^reason .*VERCEL_TEAM_ID is not' "$MNT/providers/vercel/status"
	[ "$(emu_stat sandboxes)" = 0 ]
}

@test "vercel: VERCEL_OIDC_TOKEN alone: team and project come from its claims, the token stays secret" {
	emu_require
	sfs_unmount
	emu_stop
	jwt=$(python3 -c '
import base64, json, sys
b = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
print(b({"alg": "RS256", "typ": "JWT"}) + "." + b({"owner_id": sys.argv[1], "project_id": sys.argv[2], "sub": "x"}) + ".c2lnbmF0dXJl")' \
		"$P_EMU_TEAM" "$P_EMU_PROJECT")
	emu_start --token "$jwt"
	unset VERCEL_TOKEN VERCEL_TEAM_ID VERCEL_PROJECT_ID
	export VERCEL_OIDC_TOKEN="$jwt"
	sfs_mount --log-level 3
	grep -qx 'configured true' "$MNT/providers/vercel/status"
	grep -q "team $P_EMU_TEAM, project $P_EMU_PROJECT" "$MNT/providers/vercel/status"
	conf_new o1 >/dev/null
	[ "$(conf_run o1 'echo via-oidc')" = via-oidc ]
	run ! grep -rqF "$jwt" "$STATE" "$BATS_TEST_TMPDIR/daemon.log"
	# a token that is no JWT is named as such
	sfs_unmount
	export VERCEL_OIDC_TOKEN=not-a-jwt
	sfs_mount --log-level 3
	grep -q '^reason .*VERCEL_OIDC_TOKEN is not a JWT' "$MNT/providers/vercel/status"
}

@test "vercel: an API error's own message is what error: says; image= and runtime= exclude each other" {
	run conf_new e1 runtime=cobol
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: vercel: POST /v2/sandboxes: HTTP 400: Unknown runtime cobol"* ]] ||
		[ "$CONF_MODE" = real ]
	[ ! -e "$MNT/e1" ]
	# the API's message carries what it was sent: a secret in it is redacted
	run conf_new e5 "runtime=$CONF_SECRET"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: vercel: POST /v2/sandboxes: HTTP 400: Unknown runtime "* ]] ||
		[ "$CONF_MODE" = real ]
	[[ "$output" != *"$CONF_SECRET"* ]]
	run conf_new e2 image=ubuntu runtime=node24
	[ "$status" -ne 0 ]
	[[ "$output" == *"image= and runtime= exclude each other"* ]]
	run conf_new e3 network=sometimes
	[ "$status" -ne 0 ]
	[[ "$output" == *"network=sometimes: expected none, host or allow:H"* ]]
	run conf_new e4 ports=1,2,3,4,5
	[ "$status" -ne 0 ]
	[[ "$output" == *"at most 4 ports"* ]]
}

@test "vercel: a 429 is retried after its Retry-After" {
	emu_require
	emu_faults '{"rate_limit": 2}'
	start=$(date +%s%N)
	conf_new r1 >/dev/null
	elapsed=$((($(date +%s%N) - start) / 1000000))
	echo "new took ${elapsed} ms through two 429s with Retry-After: 1" >&3
	[ "$elapsed" -ge 2000 ]
	[ "$(emu_stat rate_limited)" = 2 ]
	grep -q 'vercel: POST .*retrying in [0-9]* ms' "$BATS_TEST_TMPDIR/daemon.log"
	grep -qx 'state running' "$MNT/r1/status"
}

@test "vercel: new … resume=true takes an existing sandbox by its name" {
	conf_new a1 >/dev/null
	echo kept >"$(ws a1)/f"
	ctl_write "$MNT/ctl" "forget a1" >/dev/null
	run conf_new b1 name=a1 resume=true
	[ "$status" -eq 0 ]
	[ "$(awk '$1=="id"{print $2}' "$MNT/b1/status")" = a1 ]
	[ "$(cat "$(ws b1)/f")" = kept ]
	if [ "$CONF_MODE" = emulator ]; then
		[ "$(emu_stat sandboxes)" = 1 ]
	fi
	run conf_new c1 name=no-such-sandbox resume=true
	[ "$status" -ne 0 ]
	[[ "$output" == *"no-such-sandbox is gone"* ]]
}

@test "vercel: network= becomes the networkPolicy, ports= the routes expose finds" {
	emu_require
	conf_new n1 network=none ports=3000 >/dev/null
	[ "$(vc_emu_get n1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["sandbox"]["networkPolicy"]["mode"])')" = deny-all ]
	before=$(emu_stat requests)
	[ "$(ctl_write "$MNT/n1/ctl" 'expose 3000')" = 3000 ]
	[ $(($(emu_stat requests) - before)) -eq 2 ] # the GET, and the stats call itself
	[[ "$(cat "$MNT/n1/ports/3000")" == https://*-3000.vercel.run ]]
	conf_new n2 network=allow:example.com,pypi.org >/dev/null
	[ "$(vc_emu_get n2 | python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["sandbox"]["networkPolicy"]["allowedDomains"]))')" = example.com,pypi.org ]
}

@test "vercel: a run goes on while the daemon is down; the next daemon reads its whole journal and its end" {
	conf_new rd >/dev/null
	n=$(ctl_write "$MNT/rd/ctl" 'exec echo before; sleep 3; echo after; exit 4')
	wait_for grep -q before "$MNT/rd/runs/$n/journal"
	sfs_unmount
	sleep 4 # the run ends while no daemon is there
	sfs_mount --log-level 3
	[ "$(timeout 20 cat "$MNT/rd/runs/$n/wait")" = "exited 4" ]
	[ "$(cat "$MNT/rd/runs/$n/journal")" = "before
after" ]
}

@test "vercel: secret.NAME=env:VAR reaches the runs, and only the runs" {
	sfs_unmount
	export SFS_VC_SECRET=vc-secret-value-42
	sfs_mount --log-level 3
	conf_new s1 secret.TOK=env:SFS_VC_SECRET >/dev/null
	# (the command spells the value apart, so only a leak writes it whole)
	[ "$(conf_run s1 'test "$TOK" = "vc-secret-value-""42" && echo seen')" = seen ]
	run ! grep -rqF vc-secret-value-42 "$STATE" "$BATS_TEST_TMPDIR/daemon.log"
	if [ "$CONF_MODE" = emulator ]; then
		# not baked into the sandbox's own environment
		vc_emu_get s1 >"$BATS_TEST_TMPDIR/sb.json"
		run ! grep -qF vc-secret-value-42 "$BATS_TEST_TMPDIR/sb.json"
		grep -q '"name": "s1"' "$BATS_TEST_TMPDIR/sb.json"
	fi
}
