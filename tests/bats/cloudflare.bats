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
@test "cloudflare: a journal larger than one poll read arrives whole (SSE, base64 chunks)" { conf_test_big_journal; }
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
