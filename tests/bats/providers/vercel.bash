# The conformance suite's adapter for vercel (docs/conformance.md):
# tests/emulators/vercel, or the real service with VERCEL_TOKEN,
# VERCEL_TEAM_ID and VERCEL_PROJECT_ID (or VERCEL_OIDC_TOKEN) set.

P_EMULATOR="${SFS_VERCEL_EMU:-$SFS_ROOT/tests/emulators/vercel/vercel_emulator.py}"
P_SKIP_REASON="no VERCEL_TOKEN/VERCEL_OIDC_TOKEN and no emulator"
P_EMU_TEAM=team_sfs_test
P_EMU_PROJECT=prj_sfs_test

vc_real_creds() {
	[ -n "${VERCEL_OIDC_TOKEN:-}" ] ||
		{ [ -n "${VERCEL_TOKEN:-}" ] && [ -n "${VERCEL_TEAM_ID:-}" ] && [ -n "${VERCEL_PROJECT_ID:-}" ]; }
}

# p_mode: "emulator", "real", or "" (nothing to test against).
p_mode() {
	if [ -n "${SFS_VERCEL_EMULATOR:-}" ] || ! vc_real_creds; then
		command -v python3 >/dev/null && [ -f "$P_EMULATOR" ] && echo emulator && return
		vc_real_creds && echo real && return
		echo ""
		return
	fi
	echo real
}

p_emu_secret_args() { echo "--token $1 --team $P_EMU_TEAM --project $P_EMU_PROJECT"; }

# p_emu_env URL SECRET: points sandboxfs (started after this) at the emulator.
p_emu_env() {
	export VERCEL_API_URL="$1"
	export VERCEL_TOKEN="$2"
	export VERCEL_TEAM_ID="$P_EMU_TEAM"
	export VERCEL_PROJECT_ID="$P_EMU_PROJECT"
	unset VERCEL_OIDC_TOKEN
}

p_real_secret() { echo "${VERCEL_TOKEN:-$VERCEL_OIDC_TOKEN}"; }

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
P_GOOD_OPTS="timeout=600 vcpus=2"
P_BAD_VALUE=vcpus=many
P_BAD_VALUE_MSG="vcpus=many: expected a number"
# options that carry TEXT to the API in a create it refuses
p_failing_new_opts() { echo "tag.x=$1 snapshot=snap_no_such_snapshot"; }
# a request the daemon's log (level 3) shows for new
P_LOG_CALL_RE='vercel: POST http://127.0.0.1:.*/v2/sandboxes'
# the part of a URL that only file transfers have (fault injection on files)
P_FILES_PATH=/fs/
# what `env` is used to slip the secret into the sandbox
P_SECRET_ENV=VERCEL_TOKEN
