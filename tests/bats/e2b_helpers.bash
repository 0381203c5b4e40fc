# E2B fixtures.  By default every test starts its own emulator
# (tests/emulators/e2b) on 127.0.0.1 with a random port and a fake API key,
# and points sandboxfs at it with E2B_API_URL and E2B_SANDBOX_URL (envd calls
# then carry E2b-Sandbox-Id).  With E2B_API_KEY set in the environment (and
# SFS_E2B_EMULATOR unset) the suite runs against the real service instead,
# and tests that need the emulator's switches skip by name.  Teardown
# unmounts, destroys what a real-service test made, and stops the emulator
# and everything it started, even on failure.

SFS_E2B_EMU="${SFS_E2B_EMU:-$SFS_ROOT/tests/emulators/e2b/e2b_emulator.py}"

# e2b_mode: "emulator", "real", or "" (nothing to test against).
e2b_mode() {
	if [ -n "${SFS_E2B_EMULATOR:-}" ] || [ -z "${E2B_API_KEY:-}" ]; then
		command -v python3 >/dev/null && [ -f "$SFS_E2B_EMU" ] && echo emulator && return
		[ -n "${E2B_API_KEY:-}" ] && echo real && return
		echo ""
		return
	fi
	echo real
}

e2b_require() {
	E2B_MODE=$(e2b_mode)
	[ -n "$E2B_MODE" ] || skip "e2b: no E2B_API_KEY and no emulator"
}

# e2b_emu_require: skips unless the emulator is in use (fault switches, stats).
e2b_emu_require() {
	[ "${E2B_MODE:-}" = emulator ] || skip "e2b: needs the emulator's switches (running against the real service)"
}

# e2b_emu_start [emulator flags...]: starts the emulator, exports URLs and key.
e2b_emu_start() {
	EMU_DIR="$BATS_TEST_TMPDIR/emu"
	mkdir -p "$EMU_DIR/root"
	E2B_KEY="e2b_sfs_test_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	python3 "$SFS_E2B_EMU" --root "$EMU_DIR/root" --api-key "$E2B_KEY" \
		--port-file "$EMU_DIR/port" --log "$EMU_DIR/requests.log" "$@" \
		>"$EMU_DIR/out" 2>&1 3>&- &
	EMU_PID=$!
	echo "$EMU_PID" >"$BATS_TEST_TMPDIR/emu.pid"
	wait_for test -s "$EMU_DIR/port" || {
		cat "$EMU_DIR/out" >&2
		return 1
	}
	EMU_PORT=$(cat "$EMU_DIR/port")
	export E2B_API_URL="http://127.0.0.1:$EMU_PORT"
	export E2B_SANDBOX_URL="http://127.0.0.1:$EMU_PORT"
	export E2B_API_KEY="$E2B_KEY"
	unset E2B_DOMAIN
}

e2b_emu_stop() {
	[ -f "$BATS_TEST_TMPDIR/emu.pid" ] || return 0
	local pid i p
	pid=$(cat "$BATS_TEST_TMPDIR/emu.pid")
	# unhang it first, or it would not hear SIGTERM's shutdown
	curl -s -m 2 -X POST -d '{"hang":false}' "http://127.0.0.1:${EMU_PORT:-0}/_emu/faults" >/dev/null 2>&1 || true
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null || true
	# what it started runs in sessions of its own, with the sandbox's HOME
	for p in $(grep -l "HOME=$EMU_DIR/root" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
		kill -CONT "$p" 2>/dev/null || true
		kill -9 "$p" 2>/dev/null || true
	done
	rm -f "$BATS_TEST_TMPDIR/emu.pid"
}

# e2b_setup [sandboxfs options...]: requires a target, starts the emulator, mounts.
e2b_setup() {
	e2b_require
	if [ "$E2B_MODE" = emulator ]; then
		e2b_emu_start
	else
		E2B_KEY="$E2B_API_KEY"
	fi
	sfs_mount --log-level 3 "$@"
}

e2b_teardown() {
	if [ "${E2B_MODE:-}" = real ] && [ -n "${MNT:-}" ] && mountpoint -q "$MNT" 2>/dev/null; then
		local d
		for d in "$MNT"/*/; do
			[ -f "$d/status" ] && grep -qx 'provider e2b' "$d/status" &&
				ctl_write "$d/ctl" destroy >/dev/null 2>&1 || true
		done
	fi
	sfs_teardown
	e2b_emu_stop
}

e2b_faults() {
	curl -s -m 5 -X POST -d "$1" "http://127.0.0.1:$EMU_PORT/_emu/faults" >/dev/null
}

e2b_stat() {
	curl -s -m 5 "http://127.0.0.1:$EMU_PORT/_emu/stats" |
		python3 -c "import json,sys; d=json.load(sys.stdin); print(d['by_route'].get('$1', 0) if ' ' in '$1' else d['$1'])"
}

# e2b_new NAME [OPTIONS...]
e2b_new() {
	local name=$1
	shift
	ctl_write "$MNT/ctl" "new $name provider=e2b $*"
}

# e2b_run NAME CMD...: runs CMD, waits for it, prints its journal.
e2b_run() {
	local name=$1 n
	shift
	n=$(ctl_write "$MNT/$name/ctl" "exec $*") || return 1
	cat "$MNT/$name/runs/$n/wait" >/dev/null
	cat "$MNT/$name/runs/$n/journal"
}
