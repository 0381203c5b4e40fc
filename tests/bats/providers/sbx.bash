# The conformance suite's adapter for sbx (docs/conformance.md): the fake
# sbx CLI (tests/emulators/sbx/bin/sbx) with its control emulator
# (sbx_emulator.py: fault switches, stats), or, with a real `sbx` on PATH
# that is logged in and has a hypervisor (and SFS_SBX_EMULATOR unset), the
# real Docker Sandboxes.

P_EMULATOR="${SFS_SBX_EMU:-$SFS_ROOT/tests/emulators/sbx/sbx_emulator.py}"
P_FAKE_BIN="$SFS_ROOT/tests/emulators/sbx/bin"
P_SKIP_REASON="no logged-in sbx CLI and no fake one (python3)"

# sbx_real_ready: a real sbx on PATH answers `sbx ls --json`.
sbx_real_ready() {
	local cli
	cli=$(command -v sbx 2>/dev/null) || return 1
	[ "$cli" != "$P_FAKE_BIN/sbx" ] && timeout 10 sbx ls --json >/dev/null 2>&1
}

# p_mode: "emulator", "real", or "" (nothing to test against).
p_mode() {
	if [ -n "${SFS_SBX_EMULATOR:-}" ] || ! sbx_real_ready; then
		command -v python3 >/dev/null && [ -f "$P_EMULATOR" ] && echo emulator && return
		echo ""
		return
	fi
	echo real
}

# sbx has no credential of its own (the CLI holds the login)
p_emu_secret_args() { echo "--token $1"; }

# p_emu_env URL SECRET: the fake CLI first on PATH, its root in the env.
p_emu_env() {
	export SBX_FAKE_ROOT="$EMU_DIR/root"
	export PATH="$P_FAKE_BIN:$PATH"
	unset SBX_FAKE_NOT_LOGGED_IN SBX_FAKE_NO_HYPERVISOR
	# SFS_SBX_FAKE_BACKEND=docker: the fake's VMs are containers of
	# SFS_DOCKER_IMAGE on the test dockerd (default: host directories)
	if [ "${SFS_SBX_FAKE_BACKEND:-}" = docker ]; then
		export SBX_FAKE_BACKEND=docker
		export SBX_FAKE_IMAGE="${SFS_DOCKER_IMAGE:-127.0.0.1:1/none:latest}"
	else
		unset SBX_FAKE_BACKEND
	fi
}

p_real_secret() { echo "sbx-has-no-secret-$$"; }

# The caps this provider claims, each true proven by a test of the suite
# (killableProcesses: conf_test_kill_cancel sees the group gone).
P_CAPS='fs true
exec true
env true
ports false
backgroundProcesses true
writableStdin false
killableProcesses true
snapshots false
networkPolicy false
durableFilesystem true
fork false'
P_JOURNAL=follow
P_BULK_READ=true
P_GOOD_OPTS="cpus=2 memory=2g"
P_BAD_VALUE=network=sometimes
P_BAD_VALUE_MSG="network=sometimes"
# a sandbox name the CLI refuses (a slash), carrying TEXT
p_failing_new_opts() { echo "name=$1/x"; }
P_LOG_CALL_RE='sbx: create --name'
# what only file operations have in their argv (the kit's file scripts)
P_FILES_PATH=sandboxfs-fs
P_SECRET_ENV=SBX_TOKEN
P_NO_STOP="stop and start are not supported"
# a CLI has no HTTP retries: its own attempts for the faults body
P_FAULT_MOUNT_OPTS="-o sbx.attempts=10"
