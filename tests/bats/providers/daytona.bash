# The conformance suite's adapter for daytona (docs/conformance.md):
# tests/emulators/daytona, or the real service with DAYTONA_API_KEY set.

P_EMULATOR="${SFS_DAYTONA_EMU:-$SFS_ROOT/tests/emulators/daytona/daytona_emulator.py}"
P_SKIP_REASON="no DAYTONA_API_KEY and no emulator"

# p_mode: "emulator", "real", or "" (nothing to test against).
p_mode() {
	if [ -n "${SFS_DAYTONA_EMULATOR:-}" ] || [ -z "${DAYTONA_API_KEY:-}" ]; then
		command -v python3 >/dev/null && [ -f "$P_EMULATOR" ] && echo emulator && return
		[ -n "${DAYTONA_API_KEY:-}" ] && echo real && return
		echo ""
		return
	fi
	echo real
}

p_emu_secret_args() { echo "--api-key $1"; }

# p_emu_env URL SECRET: points sandboxfs (started after this) at the emulator.
p_emu_env() {
	export DAYTONA_API_URL="$1/api"
	export DAYTONA_API_KEY="$2"
}

p_real_secret() { echo "$DAYTONA_API_KEY"; }

# The caps this provider claims, each true proven by a test of the suite.
P_CAPS='fs true
exec true
env true
ports true
backgroundProcesses true
writableStdin false
killableProcesses false
snapshots true
networkPolicy false
durableFilesystem true
fork true'
P_JOURNAL=poll
# fs_read_many: small siblings of an opened file come in its call
P_BULK_READ=true
# an option that passes, and one with a bad value and the start of what new answers
P_GOOD_OPTS=autostop=30
P_BAD_VALUE=autostop=soon
P_BAD_VALUE_MSG="autostop=soon: expected a number"
# options that carry TEXT to the API in a create it refuses
p_failing_new_opts() { echo "label.x=$1 snapshot=no-such-snapshot"; }
# a request the daemon's log (level 3) shows for new
P_LOG_CALL_RE='daytona: POST http://127.0.0.1:.*/api/sandbox'
# the part of a URL that only file transfers have (fault injection on files)
P_FILES_PATH=/files
# what `env` is used to slip the secret into the sandbox
P_SECRET_ENV=DAYTONA_API_KEY
