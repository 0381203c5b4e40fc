# The conformance suite's adapter for sprites (docs/conformance.md):
# tests/emulators/sprites, or the real service with SPRITES_TOKEN set.

P_EMULATOR="${SFS_SPRITES_EMU:-$SFS_ROOT/tests/emulators/sprites/sprites_emulator.py}"
P_SKIP_REASON="no SPRITES_TOKEN and no emulator"

# p_mode: "emulator", "real", or "" (nothing to test against).
p_mode() {
	if [ -n "${SFS_SPRITES_EMULATOR:-}" ] || [ -z "${SPRITES_TOKEN:-}" ]; then
		command -v python3 >/dev/null && [ -f "$P_EMULATOR" ] && echo emulator && return
		[ -n "${SPRITES_TOKEN:-}" ] && echo real && return
		echo ""
		return
	fi
	echo real
}

p_emu_secret_args() { echo "--token $1"; }

# p_emu_env URL SECRET: points sandboxfs (started after this) at the emulator.
p_emu_env() {
	export SPRITES_API_URL="$1"
	export SPRITES_TOKEN="$2"
	unset SPRITE_TOKEN
}

p_real_secret() { echo "$SPRITES_TOKEN"; }

# The caps this provider claims, each true proven by a test of the suite or
# of sprites.bats (writableStdin).
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
fork false'
P_JOURNAL=follow
P_BULK_READ=true
P_GOOD_OPTS=public=true
P_BAD_VALUE=network=sometimes
P_BAD_VALUE_MSG="network=sometimes: expected none, host or allow:HOST,..."
# a sprite name the API refuses (not a DNS label), carrying TEXT
p_failing_new_opts() { echo "sprite=$1--x"; }
P_LOG_CALL_RE='sprites: POST http://127.0.0.1:.*/v1/sprites'
P_FILES_PATH=/fs/
P_SECRET_ENV=SPRITES_TOKEN
P_NO_STOP="a sprite sleeps by itself"
