# Daytona fixtures.  By default every test starts its own emulator
# (tests/emulators/daytona) on 127.0.0.1 with a random port and a fake API
# key, and points sandboxfs at it with DAYTONA_API_URL.  With DAYTONA_API_KEY
# set in the environment (and SFS_DAYTONA_EMULATOR unset) the suite runs
# against the real service instead, and tests that need the emulator's fault
# switches skip by name.  Teardown unmounts, destroys what a real-service test
# made, and stops the emulator and everything it started, even on failure.

SFS_DAYTONA_EMU="${SFS_DAYTONA_EMU:-$SFS_ROOT/tests/emulators/daytona/daytona_emulator.py}"

# dt_mode: "emulator", "real", or "" (nothing to test against).
dt_mode() {
	if [ -n "${SFS_DAYTONA_EMULATOR:-}" ] || [ -z "${DAYTONA_API_KEY:-}" ]; then
		command -v python3 >/dev/null && [ -f "$SFS_DAYTONA_EMU" ] && echo emulator && return
		[ -n "${DAYTONA_API_KEY:-}" ] && echo real && return
		echo ""
		return
	fi
	echo real
}

dt_require() {
	DT_MODE=$(dt_mode)
	[ -n "$DT_MODE" ] || skip "daytona: no DAYTONA_API_KEY and no emulator"
}

# emu_require: skips unless the emulator is in use (fault switches, stats).
emu_require() {
	[ "${DT_MODE:-}" = emulator ] || skip "daytona: needs the emulator's fault switches (running against the real service)"
}

# emu_start [emulator flags...]: starts the emulator, exports the URL and key.
emu_start() {
	EMU_DIR="$BATS_TEST_TMPDIR/emu"
	mkdir -p "$EMU_DIR/root"
	DT_KEY="sk-sfs-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	python3 "$SFS_DAYTONA_EMU" --root "$EMU_DIR/root" --api-key "$DT_KEY" \
		--port-file "$EMU_DIR/port" --log "$EMU_DIR/requests.log" "$@" \
		>"$EMU_DIR/out" 2>&1 3>&- &
	EMU_PID=$!
	echo "$EMU_PID" >"$BATS_TEST_TMPDIR/emu.pid"
	wait_for test -s "$EMU_DIR/port" || {
		cat "$EMU_DIR/out" >&2
		return 1
	}
	EMU_PORT=$(cat "$EMU_DIR/port")
	export DAYTONA_API_URL="http://127.0.0.1:$EMU_PORT/api"
	export DAYTONA_API_KEY="$DT_KEY"
}

emu_stop() {
	[ -f "$BATS_TEST_TMPDIR/emu.pid" ] || return 0
	local pid i
	pid=$(cat "$BATS_TEST_TMPDIR/emu.pid")
	# unhang it first, or it would not hear SIGTERM's shutdown
	curl -s -m 2 -X POST -d '{"hang":false}' "http://127.0.0.1:${EMU_PORT:-0}/_emu/faults" >/dev/null 2>&1 || true
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null || true
	# commands it ran are in their own sessions: they carry the sandbox HOME
	local p
	for p in $(grep -l "HOME=$EMU_DIR/root" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
		kill -9 "$p" 2>/dev/null || true
	done
	rm -f "$BATS_TEST_TMPDIR/emu.pid"
}

# dt_setup [sandboxfs options...]: requires a target, starts the emulator, mounts.
dt_setup() {
	dt_require
	if [ "$DT_MODE" = emulator ]; then
		emu_start
	else
		DT_KEY="$DAYTONA_API_KEY"
	fi
	sfs_mount --log-level 3 "$@"
}

dt_teardown() {
	if [ "${DT_MODE:-}" = real ] && [ -n "${MNT:-}" ] && mountpoint -q "$MNT" 2>/dev/null; then
		local d
		for d in "$MNT"/*/; do
			[ -f "$d/status" ] && grep -qx 'provider daytona' "$d/status" &&
				ctl_write "$d/ctl" destroy >/dev/null 2>&1 || true
		done
	fi
	sfs_teardown
	emu_stop
}

emu_faults() {
	curl -s -m 5 -X POST -d "$1" "http://127.0.0.1:$EMU_PORT/_emu/faults" >/dev/null
}

emu_stat() {
	curl -s -m 5 "http://127.0.0.1:$EMU_PORT/_emu/stats" |
		python3 -c "import json,sys; print(json.load(sys.stdin)['$1'])"
}

# dt_new NAME [OPTIONS...]
dt_new() {
	local name=$1
	shift
	ctl_write "$MNT/ctl" "new $name provider=daytona $*"
}

# dt_run NAME CMD...: runs CMD, waits for it, prints its journal.
dt_run() {
	local name=$1 n
	shift
	n=$(ctl_write "$MNT/$name/ctl" "exec $*") || return 1
	cat "$MNT/$name/runs/$n/wait" >/dev/null
	cat "$MNT/$name/runs/$n/journal"
}

# dt_calls NAME: provider round trips made for NAME's workspace so far.
dt_calls() {
	awk '$1 == "remote_calls" { print $2 }' "$MNT/$1/status"
}

# write_checked FILE TEXT: writes and closes, failing with the errno of close.
write_checked() {
	python3 - "$1" "$2" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, sys.argv[2].encode())
try:
    os.close(fd)
except OSError as e:
    print("close: errno %d" % e.errno)
    sys.exit(e.errno)
PY
}
