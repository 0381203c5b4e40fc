#!/usr/bin/env bats
# The daytona provider, against the local emulator (tests/emulators/daytona)
# or, with DAYTONA_API_KEY set, the real service: the provider conformance
# suite (tests/bats/conformance.bash, adapter tests/bats/providers/daytona.bash).
# Every test starts its own emulator and daemon; teardown stops both, even
# when the test failed.

load conformance
conf_provider daytona

@test "daytona: this file runs every body of the conformance suite" { conf_test_all_listed; }

# ---- the provider
@test "daytona: configured, poll journals, and the caps these tests prove" { conf_test_caps; }
@test "daytona: a bad option fails cleanly and creates nothing" { conf_test_bad_option; }

# ---- runs and journals
@test "daytona: exec with the sandbox env; the journal polls live; status and wait" { conf_test_exec_journal; }
@test "daytona: shell syntax in commands and env values runs as written; a real-time signal is a signal" { conf_test_shell_syntax; }
@test "daytona: a journal larger than one poll read arrives whole" { conf_test_big_journal; }
@test "daytona: env and unsetenv reach later runs; an unknown verb is an error" { conf_test_env_verbs; }
@test "daytona: readers that come and go leave no follower and no process" { conf_test_readers_leave_nothing; }

# ---- workspace
@test "daytona: workspace read, write, ls, mkdir, mv, rm, chmod; runs see it and vice versa" { conf_test_workspace_ops; }
@test "daytona: new files and directories get the creator's umask, here and in the sandbox" { conf_test_umask; }
@test "daytona: editor saves (temp + rename, backup, swap, fsync; vim) land in the sandbox" { conf_test_editor_saves; }
@test "daytona: git clone, status, commit in the workspace; the sandbox sees the commits" { conf_test_git_in_workspace; }
@test "daytona: symlinks: inside shown relative, outside shown so the host reaches nothing" { conf_test_symlinks; }
@test "daytona: source= arrives in a constant number of calls, setup runs there" { conf_test_source; }

# ---- snapshots, fork, ports, cancel
@test "daytona: snapshot, then restore brings the files back" { conf_test_snapshot_restore; }
@test "daytona: fork copies the workspace into a new sandbox" { conf_test_fork; }
@test "daytona: expose gives a preview URL under ports/" { conf_test_expose; }
@test "daytona: kill is refused; cancel destroys the sandbox and the run with it" { conf_test_kill_cancel; }
@test "daytona: cancel ends its runs as lost and releases journal and wait readers at once" { conf_test_cancel_releases_readers; }

# ---- faults
@test "daytona: a write during an outage fails close with EIO, keeps the data, and lands later" { conf_test_outage_write; }
@test "daytona: changes unsaved at unmount are saved by the next daemon" { conf_test_unsaved_at_unmount; }
@test "daytona: dropped connections, 5xx and slow bodies are retried without losing bytes" { conf_test_faults_retried; }
@test "daytona: the mount stays responsive for a local sandbox while the emulator hangs" { conf_test_hang_responsive; }

# ---- round trips
@test "daytona: ls -l of a 1000-file directory costs at most 2 round trips warm" { conf_test_ls_round_trips; }
@test "daytona: the small files beside an opened one come in the same call as it" { conf_test_bulk_siblings; }

# ---- secrets, restarts, lifecycle
@test "daytona: the API key never appears in anything sandboxfs writes" { conf_test_secret_grep; }
@test "daytona: a restarted daemon brings the sandbox, its files and its runs back" { conf_test_restart; }
@test "daytona: forget, then resume by id brings the sandbox and its files back" { conf_test_forget_resume; }
@test "daytona: stop refuses runs, start brings the files back, destroy removes it" { conf_test_stop_start_destroy; }

# ---- a daemon killed inside the provider's create (not in the shared suite:
# where in create to stall is the provider's own)
@test "daytona: a daemon killed while new waits on the sandbox it made: the next lists it in state error, rmdir deletes it at the provider" {
	emu_require
	# the workdir is asked for after POST /sandbox answered with the id
	emu_faults '{"stall_path": "work-dir"}'
	(conf_new k >/dev/null 2>&1) &
	# the id is saved as soon as it is known, not when create returns
	wait_for grep -q '"id": "' "$STATE/registry.json"
	grep -q '"state": "creating"' "$STATE/registry.json"
	kill -9 "$SFS_PID"
	wait "$SFS_PID" 2>/dev/null || true
	umount -l "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null || true
	emu_faults '{"stall_path": ""}'
	[ "$(emu_stat sandboxes)" = 1 ]
	sfs_mount --log-level 3
	grep -qx 'state error' "$MNT/k/status"
	grep -q '^error interrupted: a daemon stopped while it was being created' "$MNT/k/status"
	rmdir "$MNT/k"
	wait_for eval 'test "$(emu_stat sandboxes)" = 0'
	[ -z "$(ls -A "$STATE/sandboxes")" ]
}
