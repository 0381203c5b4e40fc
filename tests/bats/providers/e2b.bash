# The conformance suite's adapter for e2b (docs/conformance.md):
# tests/emulators/e2b, or the real service with E2B_API_KEY set.

P_EMULATOR="${SFS_E2B_EMU:-$SFS_ROOT/tests/emulators/e2b/e2b_emulator.py}"
P_SKIP_REASON="no E2B_API_KEY and no emulator"

# p_mode: "emulator", "real", or "" (nothing to test against).
p_mode() {
	if [ -n "${SFS_E2B_EMULATOR:-}" ] || [ -z "${E2B_API_KEY:-}" ]; then
		command -v python3 >/dev/null && [ -f "$P_EMULATOR" ] && echo emulator && return
		[ -n "${E2B_API_KEY:-}" ] && echo real && return
		echo ""
		return
	fi
	echo real
}

p_emu_secret_args() { echo "--api-key $1"; }

# p_emu_env URL SECRET: both planes at the emulator; envd calls then carry
# the E2b-Sandbox-Id and E2b-Sandbox-Port headers.
p_emu_env() {
	export E2B_API_URL="$1"
	export E2B_SANDBOX_URL="$1"
	export E2B_API_KEY="$2"
	unset E2B_DOMAIN
}

p_real_secret() { echo "$E2B_API_KEY"; }

# The caps this provider claims, each true proven by a test of the suite or
# of tests/bats/e2b.bats (writableStdin).
P_CAPS='fs true
exec true
env true
ports true
backgroundProcesses true
writableStdin true
killableProcesses true
snapshots true
networkPolicy false
durableFilesystem true
fork true'
P_JOURNAL=follow
# fs_read_many: the kit's bulk read (one tar through Start)
P_BULK_READ=true
P_GOOD_OPTS="timeout=600 metadata.team=sfs"
P_BAD_VALUE=timeout=soon
P_BAD_VALUE_MSG="timeout=soon: expected seconds"
p_failing_new_opts() { echo "metadata.x=$1 template=no-such-template"; }
P_LOG_CALL_RE='e2b: POST http://127.0.0.1:.*/sandboxes'
# envd's byte transfers (and filesystem.Filesystem, whose path starts alike)
P_FILES_PATH=/files
P_SECRET_ENV=E2B_API_KEY
