# The conformance suite's adapter for cloudflare (docs/conformance.md):
# tests/emulators/cloudflare, or the real sandbox bridge Worker with
# CLOUDFLARE_SANDBOX_URL and CLOUDFLARE_SANDBOX_TOKEN set.

P_EMULATOR="${SFS_CLOUDFLARE_EMU:-$SFS_ROOT/tests/emulators/cloudflare/cloudflare_emulator.py}"
P_SKIP_REASON="no CLOUDFLARE_SANDBOX_URL/CLOUDFLARE_SANDBOX_TOKEN and no emulator"

cf_real_creds() { [ -n "${CLOUDFLARE_SANDBOX_URL:-}" ] && [ -n "${CLOUDFLARE_SANDBOX_TOKEN:-}" ]; }

# p_mode: "emulator", "real", or "" (nothing to test against).
p_mode() {
	if [ -n "${SFS_CLOUDFLARE_EMULATOR:-}" ] || ! cf_real_creds; then
		command -v python3 >/dev/null && [ -f "$P_EMULATOR" ] && echo emulator && return
		cf_real_creds && echo real && return
		echo ""
		return
	fi
	echo real
}

p_emu_secret_args() { echo "--token $1"; }

# p_emu_env URL SECRET: points sandboxfs (started after this) at the emulator.
p_emu_env() {
	export CLOUDFLARE_SANDBOX_URL="$1"
	export CLOUDFLARE_SANDBOX_TOKEN="$2"
}

p_real_secret() { echo "$CLOUDFLARE_SANDBOX_TOKEN"; }

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
durableFilesystem false
fork true'
P_JOURNAL=poll
# fs_read_many: small siblings of an opened file come in its call
P_BULK_READ=true
P_GOOD_OPTS=ready_timeout=30
P_BAD_VALUE=ready_timeout=soon
P_BAD_VALUE_MSG="ready_timeout=soon: expected seconds"
# an id the bridge refuses (not base32), carrying TEXT
p_failing_new_opts() { echo "id=$1"; }
P_LOG_CALL_RE='cloudflare: POST http://127.0.0.1:.*/v1/sandbox'
P_FILES_PATH=/file/
P_SECRET_ENV=CLOUDFLARE_SANDBOX_TOKEN
P_NO_STOP="a Cloudflare sandbox sleeps by itself"
