#!/usr/bin/env bats
# The gcp provider's run of the provider conformance suite
# (tests/bats/conformance.bash, adapter tests/bats/providers/gcp.bash)
# against tests/emulators/gcp (runs as local process groups), or, with
# GOOGLE_APPLICATION_CREDENTIALS and SFS_GCP_BUCKET/PROJECT/REGION set, the
# real cloud.  Its own setup is the suite's, so the gcp-only tests (OAuth
# JWT exchange, faults, docker runs) live in tests/bats/gcp.bats.  Every
# test starts its own emulator and daemon; teardown stops both, even when
# the test failed.

load conformance
conf_provider gcp

@test "gcp: this file runs every body of the conformance suite" { conf_test_all_listed; }

# ---- the provider
@test "gcp: configured, poll journals, and the caps these tests prove" { conf_test_caps; }
@test "gcp: a bad option fails cleanly and creates nothing" { conf_test_bad_option; }

# ---- runs and journals
@test "gcp: exec with the sandbox env; the journal polls live; status and wait" { conf_test_exec_journal; }
@test "gcp: shell syntax in commands and env values runs as written; a real-time signal is a signal" { conf_test_shell_syntax; }
@test "gcp: a journal larger than one poll read arrives whole" { conf_test_big_journal; }
@test "gcp: env and unsetenv reach later runs; an unknown verb is an error" { conf_test_env_verbs; }
@test "gcp: readers that come and go leave no follower and no process" { conf_test_readers_leave_nothing; }

# ---- workspace
@test "gcp: workspace read, write, ls, mkdir, mv, rm, chmod; runs see it and vice versa" { conf_test_workspace_ops; }
@test "gcp: new files and directories get the creator's umask, here and in the sandbox" { conf_test_umask; }
@test "gcp: editor saves (temp + rename, backup, swap, fsync; vim) land in the sandbox" { conf_test_editor_saves; }
@test "gcp: git clone, status, commit in the workspace; the sandbox sees the commits" { conf_test_git_in_workspace; }
@test "gcp: symlinks: inside shown relative, outside shown so the host reaches nothing" { conf_test_symlinks; }
@test "gcp: source= arrives in a constant number of calls, setup runs there" { conf_test_source; }

# ---- snapshots, fork, ports, cancel
@test "gcp: snapshot, then restore brings the files back" { conf_test_snapshot_restore; }
@test "gcp: fork copies the workspace into a new sandbox" { conf_test_fork; }
@test "gcp: expose gives a preview URL under ports/" { conf_test_expose; }
@test "gcp: kill cancels the execution; cancel ends the runs, the sandbox stays" { conf_test_kill_cancel; }
@test "gcp: cancel ends its runs and releases journal and wait readers at once" { conf_test_cancel_releases_readers; }

# ---- faults
@test "gcp: a write during an outage fails close with EIO, keeps the data, and lands later" { conf_test_outage_write; }
@test "gcp: changes unsaved at unmount are saved by the next daemon" { conf_test_unsaved_at_unmount; }
@test "gcp: dropped connections, 5xx and slow bodies are retried without losing bytes" { conf_test_faults_retried; }
@test "gcp: the mount stays responsive for a local sandbox while the emulator hangs" { conf_test_hang_responsive; }

# ---- round trips
@test "gcp: ls -l of a 1000-file directory costs at most 2 round trips warm" { conf_test_ls_round_trips; }
@test "gcp: the small files beside an opened one come in the same call as it" { conf_test_bulk_siblings; }

# ---- secrets and restarts
@test "gcp: the access token never appears in anything sandboxfs writes" { conf_test_secret_grep; }
@test "gcp: a restarted daemon brings the sandbox, its files and its runs back" { conf_test_restart; }
@test "gcp: forget, then resume by id brings the sandbox and its files back" { conf_test_forget_resume; }
@test "gcp: stop refuses runs, start brings the files back, destroy removes it" { conf_test_stop_start_destroy; }
