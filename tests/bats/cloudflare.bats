#!/usr/bin/env bats
# The cloudflare provider, against the local bridge emulator (tests/emulators/cloudflare)
# or, with CLOUDFLARE_SANDBOX_URL + CLOUDFLARE_SANDBOX_TOKEN
# set, the real bridge Worker: the provider conformance
# suite (tests/bats/conformance.bash, adapter tests/bats/providers/cloudflare.bash).
# Every test starts its own emulator and daemon; teardown stops both, even
# when the test failed.

load conformance
conf_provider cloudflare

@test "cloudflare: this file runs every body of the conformance suite" { conf_test_all_listed; }

# ---- the provider
@test "cloudflare: configured, poll journals, and the caps these tests prove" { conf_test_caps; }
@test "cloudflare: a bad option fails cleanly and creates nothing" { conf_test_bad_option; }

# ---- runs and journals
@test "cloudflare: exec with the sandbox env; the journal polls live; status and wait" { conf_test_exec_journal; }
@test "cloudflare: shell syntax in commands and env values runs as written; a real-time signal is a signal" { conf_test_shell_syntax; }
@test "cloudflare: a journal larger than one poll read arrives whole (base64-framed, over SSE)" { conf_test_big_journal; }
@test "cloudflare: env and unsetenv reach later runs; an unknown verb is an error" { conf_test_env_verbs; }
@test "cloudflare: readers that come and go leave no follower and no process" { conf_test_readers_leave_nothing; }

# ---- workspace
@test "cloudflare: workspace read, write, ls, mkdir, mv, rm, chmod; runs see it and vice versa" { conf_test_workspace_ops; }
@test "cloudflare: new files and directories get the creator's umask, here and in the sandbox" { conf_test_umask; }
@test "cloudflare: editor saves (temp + rename, backup, swap, fsync; vim) land in the sandbox" { conf_test_editor_saves; }
@test "cloudflare: git clone, status, commit in the workspace; the sandbox sees the commits" { conf_test_git_in_workspace; }
@test "cloudflare: symlinks: inside shown relative, outside shown so the host reaches nothing" { conf_test_symlinks; }
@test "cloudflare: source= arrives in a constant number of calls, setup runs there" { conf_test_source; }

# ---- snapshots, fork, ports, cancel
@test "cloudflare: snapshot, then restore brings the files back" { conf_test_snapshot_restore; }
@test "cloudflare: fork copies the workspace into a new sandbox" { conf_test_fork; }
@test "cloudflare: expose opens a tunnel whose URL is under ports/" { conf_test_expose; }
@test "cloudflare: kill is refused; cancel destroys the sandbox and the run with it" { conf_test_kill_cancel; }
@test "cloudflare: cancel ends its runs as lost and releases journal and wait readers at once" { conf_test_cancel_releases_readers; }

# ---- faults
@test "cloudflare: a write during an outage fails close with EIO, keeps the data, and lands later" { conf_test_outage_write; }
@test "cloudflare: changes unsaved at unmount are saved by the next daemon" { conf_test_unsaved_at_unmount; }
@test "cloudflare: dropped connections, 5xx and slow bodies are retried without losing bytes" { conf_test_faults_retried; }
@test "cloudflare: the mount stays responsive for a local sandbox while the emulator hangs" { conf_test_hang_responsive; }

# ---- round trips
@test "cloudflare: ls -l of a 1000-file directory costs at most 2 round trips warm" { conf_test_ls_round_trips; }
@test "cloudflare: the small files beside an opened one come in the same call as it" { conf_test_bulk_siblings; }

# ---- secrets, restarts, lifecycle
@test "cloudflare: the token never appears in anything sandboxfs writes" { conf_test_secret_grep; }
@test "cloudflare: a restarted daemon brings the sandbox, its files and its runs back" { conf_test_restart; }
@test "cloudflare: forget, then resume by id brings the sandbox and its files back" { conf_test_forget_resume; }
@test "cloudflare: stop refuses runs, start brings the files back, destroy removes it" { conf_test_stop_start_destroy; }

# ---- cloudflare only

@test "cloudflare: a missing URL or token is named in providers/cloudflare/status and in new's error" {
	emu_require
	sfs_unmount
	(
		unset CLOUDFLARE_SANDBOX_URL
		sfs_mount --log-level 3
	)
	grep -qx 'configured false' "$MNT/providers/cloudflare/status"
	grep -q '^reason .*set CLOUDFLARE_SANDBOX_URL' "$MNT/providers/cloudflare/status"
	run conf_new m1
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "*CLOUDFLARE_SANDBOX_URL* ]]
	[ ! -e "$MNT/m1" ]
	sfs_unmount
	(
		unset CLOUDFLARE_SANDBOX_TOKEN
		sfs_mount --log-level 3
	)
	grep -qx 'configured false' "$MNT/providers/cloudflare/status"
	grep -q '^reason .*set CLOUDFLARE_SANDBOX_TOKEN' "$MNT/providers/cloudflare/status"
	run conf_new m2
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "*CLOUDFLARE_SANDBOX_TOKEN* ]]
	[ "$(emu_stat sandboxes)" = 0 ]
	[ "$(emu_stat requests)" -le 2 ] # the stats calls themselves: nothing reached the bridge
}

@test "cloudflare: the bridge's own error message is what error: says, a secret in it redacted" {
	run conf_new e1 id=Not-Base32
	[ "$status" -ne 0 ]
	[[ "$output" == *'error: cloudflare: GET /v1/sandbox/Not-Base32/running: HTTP 400: invalid sandbox id "Not-Base32"'* ]] ||
		[ "$CONF_MODE" = real ]
	[ ! -e "$MNT/e1" ]
	run conf_new e2 "id=$CONF_SECRET"
	[ "$status" -ne 0 ]
	[[ "$output" == *"HTTP 400: invalid sandbox id"* ]] || [ "$CONF_MODE" = real ]
	[[ "$output" != *"$CONF_SECRET"* ]]
	run conf_new e3 image=ubuntu
	[ "$status" -ne 0 ]
	[[ "$output" == *"image= is not per sandbox: the bridge Worker's wrangler.jsonc fixes it"* ]]
	run conf_new e4 size=large
	[ "$status" -ne 0 ]
	[[ "$output" == *'unknown option "size"'* ]]
	# a wrong token: the bridge's 401 in words
	sfs_unmount
	(
		export CLOUDFLARE_SANDBOX_TOKEN=not-the-key
		sfs_mount --log-level 3
	)
	run conf_new e5
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: cloudflare: POST /v1/sandbox: HTTP 401"* ]]
}

@test "cloudflare: a 429 is retried after its Retry-After" {
	emu_require
	emu_faults '{"rate_limit": 2}'
	start=$(date +%s%N)
	conf_new r1 >/dev/null
	elapsed=$((($(date +%s%N) - start) / 1000000))
	echo "new took ${elapsed} ms through two 429s with Retry-After: 1" >&3
	[ "$elapsed" -ge 2000 ]
	[ "$(emu_stat rate_limited)" = 2 ]
	grep -q 'cloudflare: POST .*retrying in [0-9]* ms' "$BATS_TEST_TMPDIR/daemon.log"
	grep -qx 'state running' "$MNT/r1/status"
}

@test "cloudflare: exec output split across reads anywhere (SSE events cut mid-line) arrives whole" {
	emu_require
	conf_new s1 >/dev/null
	emu_faults '{"slow_rate": 1.0}'
	out=$(conf_run s1 'printf "a%.0s" $(seq 1 3000); echo; echo to-stderr >&2; printf "\\001\\377\\n" | od -An -tx1')
	emu_faults '{"slow_rate": 0}'
	[ "$(head -1 <<<"$out" | tr -d '\n' | wc -c)" = 3000 ]
	grep -qx to-stderr <<<"$out"
	grep -q '01 ff 0a' <<<"$out"
	# a file read by a script comes back byte for byte too
	head -c 70000 /dev/urandom >"$BATS_TEST_TMPDIR/blob"
	cp "$BATS_TEST_TMPDIR/blob" "$(ws s1)/blob"
	emu_faults '{"slow_rate": 1.0}'
	[ "$(conf_run s1 'sha256sum blob' | cut -d' ' -f1)" = "$(sha256sum <"$BATS_TEST_TMPDIR/blob" | cut -d' ' -f1)" ]
}

@test "cloudflare: snapshots are persist tars kept on this host: restore is exact, survives a restart, delete removes the tar" {
	conf_new p1 >/dev/null
	W=$(ws p1)
	mkdir "$W/d"
	echo first >"$W/d/f"
	chmod 755 "$W/d/f"
	sid=$(ctl_write "$MNT/p1/ctl" "snapshot one")
	[[ "$sid" == cfsnap-* ]]
	tar=$(ls "$STATE"/sandboxes/*/cloudflare-snapshots/"$sid".tar)
	tar -tf "$tar" | grep -qx 'd/f'
	echo second >"$W/d/f"
	echo later >"$W/new"
	# the daemon goes away: the tar is what restore needs
	sfs_unmount
	sfs_mount --log-level 3
	ctl_write "$MNT/p1/ctl" "restore $sid" >/dev/null
	[ "$(cat "$W/d/f")" = first ]
	[ ! -e "$W/new" ]
	[ "$(conf_run p1 'cat d/f; ls; stat -c %a d/f')" = "$(printf 'first\nd\n755')" ]
	if [ "$CONF_MODE" = emulator ]; then
		grep -q "POST /v1/sandbox/.*/persist" "$EMU_DIR/requests.log"
		grep -q "POST /v1/sandbox/.*/hydrate" "$EMU_DIR/requests.log"
	fi
	rmdir "$MNT/p1/snapshots/$sid"
	[ ! -e "$tar" ]
	run ctl_write "$MNT/p1/ctl" "restore $sid"
	[ "$status" -ne 0 ]
}

@test "cloudflare: expose opens a trycloudflare tunnel for the port" {
	conf_new x1 >/dev/null
	[ "$(ctl_write "$MNT/x1/ctl" 'expose 8080')" = 8080 ]
	url=$(cat "$MNT/x1/ports/8080")
	[[ "$url" == https://*.trycloudflare.com ]] || [ "$CONF_MODE" = real ]
	if [ "$CONF_MODE" = emulator ]; then
		grep -q "POST /v1/sandbox/.*/tunnel/8080" "$EMU_DIR/requests.log"
		# the bridge keeps port 3000 for itself: its refusal in words
		run ctl_write "$MNT/x1/ctl" 'expose 3000'
		[ "$status" -ne 0 ]
		[[ "$output" == *"HTTP 400: port 3000 cannot be tunnelled"* ]]
	fi
}
