#!/usr/bin/env bats
# The aws provider through the provider conformance suite
# (tests/bats/conformance.bash, adapter tests/bats/providers/aws.bash), against
# tests/emulators/aws (S3, ECS and CloudWatch Logs; each run a real task in
# bubblewrap syncing through the emulated bucket) or, with AWS credentials
# and SFS_AWS_NEW_OPTS set, the real cloud.  Every test starts its own
# emulator and daemon; teardown stops both, even when the test failed.

load conformance
conf_provider aws

@test "aws: this file runs every body of the conformance suite" { conf_test_all_listed; }

# ---- the provider
@test "aws: configured, poll journals, and the caps these tests prove" { conf_test_caps; }
@test "aws: a bad option fails cleanly and creates nothing" { conf_test_bad_option; }

# ---- runs and journals
@test "aws: exec with the sandbox env; the journal polls live; status and wait" { conf_test_exec_journal; }
@test "aws: shell syntax in commands and env values runs as written; a real-time signal is a signal" { conf_test_shell_syntax; }
@test "aws: a journal larger than one poll read arrives whole" { conf_test_big_journal; }
@test "aws: env and unsetenv reach later runs; an unknown verb is an error" { conf_test_env_verbs; }
@test "aws: readers that come and go leave no follower and no process" { conf_test_readers_leave_nothing; }

# ---- workspace
@test "aws: workspace read, write, ls, mkdir, mv, rm, chmod; runs see it and vice versa" { conf_test_workspace_ops; }
@test "aws: new files and directories get the creator's umask, here and in the sandbox" { conf_test_umask; }
@test "aws: editor saves (temp + rename, backup, swap, fsync; vim) land in the sandbox" { conf_test_editor_saves; }
@test "aws: git clone, status, commit in the workspace; the sandbox sees the commits" { conf_test_git_in_workspace; }
@test "aws: symlinks are refused (S3 has none)" { conf_test_symlinks; }
@test "aws: source= is refused with its reason (S3 has no bulk upload)" { conf_test_source; }

# ---- snapshots, fork, ports, cancel
@test "aws: snapshot, then restore brings the files back" { conf_test_snapshot_restore; }
@test "aws: fork copies the workspace into a new sandbox" { conf_test_fork; }
@test "aws: expose is not there (caps ports false)" { conf_test_expose; }
@test "aws: kill stops the run's task, the sandbox stays; cancel kills" { conf_test_kill_cancel; }
@test "aws: cancel ends its runs as killed and releases journal and wait readers at once" { conf_test_cancel_releases_readers; }

# ---- faults
@test "aws: a write during an outage fails close with EIO, keeps the data, and lands later" { conf_test_outage_write; }
@test "aws: changes unsaved at unmount are saved by the next daemon" { conf_test_unsaved_at_unmount; }
@test "aws: dropped connections, 5xx and slow bodies are retried without losing bytes" { conf_test_faults_retried; }
@test "aws: the mount stays responsive for a local sandbox while the emulator hangs" { conf_test_hang_responsive; }

# ---- round trips
@test "aws: ls -l of a 1000-file directory costs at most 2 round trips warm" { conf_test_ls_round_trips; }
@test "aws: the small files beside an opened one come in the same call as it" { conf_test_bulk_siblings; }

# ---- secrets, restarts, lifecycle
@test "aws: the secret key never appears in anything sandboxfs writes" { conf_test_secret_grep; }
@test "aws: a restarted daemon brings the sandbox, its files and its runs back" { conf_test_restart; }
@test "aws: forget, then resume by id brings the sandbox and its files back" { conf_test_forget_resume; }
@test "aws: stop and start are refused; destroy removes it" { conf_test_stop_start_destroy; }

# ---- the real cloud
@test "aws: the suite ran against the real cloud (needs AWS credentials and SFS_AWS_NEW_OPTS)" {
	aws_real_creds || skip "aws: no AWS credential (AWS_ACCESS_KEY_ID or AWS_PROFILE) with SFS_AWS_NEW_OPTS in the environment: the real cloud is not tested, the emulator is"
	[ "$CONF_MODE" = real ] || skip "aws: SFS_AWS_EMULATOR is set: this run used the emulator"
	conf_new rc1 >/dev/null
	[ "$(conf_run rc1 'echo from-fargate')" = from-fargate ]
	ctl_write "$MNT/rc1/ctl" destroy >/dev/null
}
