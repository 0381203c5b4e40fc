# Fixtures for remote providers, shared by the conformance suite
# (conformance.bash) and any test that needs a provider's emulator.  The
# provider-specific part lives in an adapter, tests/bats/providers/NAME.bash,
# loaded by conf_provider NAME (see docs/conformance.md for what it defines).
#
# By default every test starts its own emulator (tests/emulators/NAME) on
# 127.0.0.1 with a random port and a fake secret, and points sandboxfs at it.
# With the provider's credentials set in the environment (and its
# SFS_NAME_EMULATOR unset) the tests run against the real service instead,
# and tests that need the emulator's fault switches skip by name.  Teardown
# unmounts, destroys what a real-service test made, and stops the emulator
# and everything it started, even on failure.
#
# The emulator contract (every tests/emulators/NAME follows it):
#   flags --root DIR --port-file FILE --log FILE [--latency-ms N] plus the
#         adapter's secret flag; "listening on 127.0.0.1:PORT" on stdout
#   POST /_emu/faults {"latency_ms","fail_rate","drop_rate","slow_rate",
#         "hang","fail_paths"} (no auth); GET /_emu/stats gives at least
#         {"requests","sandboxes","processes"} (live sandboxes and commands)
#   the request log names injected faults "injected 503" or "dropped"
#   commands it runs carry a path under --root in their environment (HOME)

# conf_provider NAME: loads the adapter tests/bats/providers/NAME.bash.
conf_provider() {
	PROVIDER=$1
	load "providers/$1"
}

# conf_require: sets CONF_MODE (emulator | real) or skips naming why not.
conf_require() {
	CONF_MODE=$(p_mode)
	[ -n "$CONF_MODE" ] || skip "$PROVIDER: $P_SKIP_REASON"
}

# emu_require: skips unless the emulator is in use (fault switches, stats).
emu_require() {
	[ "${CONF_MODE:-}" = emulator ] || skip "$PROVIDER: needs the emulator's fault switches (running against the real service)"
}

# emu_start [emulator flags...]: starts the adapter's emulator with a fresh
# secret (CONF_SECRET), waits for its port, exports what points sandboxfs at it.
emu_start() {
	EMU_DIR="$BATS_TEST_TMPDIR/emu"
	mkdir -p "$EMU_DIR/root"
	rm -f "$EMU_DIR/port" # a second start must not read the first one's port
	CONF_SECRET="sk-sfs-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	# 3>&-: bats reports on fd 3; an emulator holding it would stall bats
	python3 "$P_EMULATOR" --root "$EMU_DIR/root" --port-file "$EMU_DIR/port" \
		--log "$EMU_DIR/requests.log" $(p_emu_secret_args "$CONF_SECRET") "$@" \
		>"$EMU_DIR/out" 2>&1 3>&- &
	EMU_PID=$!
	echo "$EMU_PID" >"$BATS_TEST_TMPDIR/emu.pid"
	wait_for test -s "$EMU_DIR/port" || {
		cat "$EMU_DIR/out" >&2
		return 1
	}
	EMU_PORT=$(cat "$EMU_DIR/port")
	p_emu_env "http://127.0.0.1:$EMU_PORT" "$CONF_SECRET"
}

emu_stop() {
	[ -f "$BATS_TEST_TMPDIR/emu.pid" ] || return 0
	local pid i p
	pid=$(cat "$BATS_TEST_TMPDIR/emu.pid")
	# unhang it first, or it would not hear SIGTERM's shutdown
	curl -s -m 2 -X POST -d '{"hang":false,"stall_path":""}' "http://127.0.0.1:${EMU_PORT:-0}/_emu/faults" >/dev/null 2>&1 || true
	kill -TERM "$pid" 2>/dev/null || true
	for i in $(seq 1 100); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$pid" 2>/dev/null || true
	# commands it ran are in their own sessions: they carry a path under its root
	for p in $(grep -lszF -- "=$EMU_DIR/root" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
		kill -9 "$p" 2>/dev/null || true
	done
	rm -f "$BATS_TEST_TMPDIR/emu.pid"
}

# conf_setup [sandboxfs options...]: requires a target, starts the emulator, mounts.
conf_setup() {
	conf_require
	if [ "$CONF_MODE" = emulator ]; then
		emu_start
	else
		CONF_SECRET=$(p_real_secret)
	fi
	sfs_mount --log-level 3 "$@"
}

conf_teardown() {
	if [ "${CONF_MODE:-}" = real ] && [ -n "${MNT:-}" ] && mountpoint -q "$MNT" 2>/dev/null; then
		local d
		for d in "$MNT"/*/; do
			[ -f "$d/status" ] && grep -qx "provider $PROVIDER" "$d/status" &&
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

# conf_new NAME [OPTIONS...]: a sandbox of the provider under test.
conf_new() {
	local name=$1
	shift
	ctl_write "$MNT/ctl" "new $name provider=$PROVIDER ${P_NEW_OPTS:-} $*"
}

# conf_run NAME CMD...: runs CMD, waits for it, prints its journal.
conf_run() {
	local name=$1 n
	shift
	n=$(ctl_write "$MNT/$name/ctl" "exec $*") || return 1
	cat "$MNT/$name/runs/$n/wait" >/dev/null
	cat "$MNT/$name/runs/$n/journal"
}

# conf_calls NAME: provider round trips made for NAME's workspace so far.
conf_calls() {
	awk '$1 == "remote_calls" { print $2 }' "$MNT/$1/status"
}

# no_pending: no write-back is waiting for a retry.
no_pending() {
	! ls "$STATE"/sandboxes/*/rcache/*.pending >/dev/null 2>&1
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

# emu_obj URL META KEY FIELD: size, sha256 or meta.NAME (under the object's
# META field) of object KEY in an emulator's /_emu/objects listing at URL
# ("" if absent).
emu_obj() {
	curl -s -m 5 "$1" | python3 -c '
import json, sys
o = json.load(sys.stdin).get(sys.argv[2])
f = sys.argv[3]
print("" if o is None else (o[sys.argv[1]].get(f[5:], "") if f.startswith("meta.") else o[f]))' "$2" "$3" "$4"
}

# ODD_KEYS: keys under a sandbox's prefix that no file name can be, made by
# something else than sandboxfs (object stores allow them), beside ok.txt and d/
ODD_KEYS="./a ../b /c . .. d/./e d/.. d//f x/../g" # /c: PREFIX//c

# odd_keys_left_out W SANDBOX_DIR: W lists each of . and .. once, and the
# odd keys' names nowhere; nothing under those names is reached.
odd_keys_left_out() {
	local W=$1
	sleep 1.2 # past the listings' TTL
	run ls -la "$W"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | awk 'NR > 1 { print $NF }' | sort | tr '\n' ' ')" = ". .. d ok.txt x " ]
	run ls -a "$W/d"
	[ "$(echo "$output" | tr '\n' ' ')" = ". .. " ]
	run ls -a "$W/x"
	[ "$(echo "$output" | tr '\n' ' ')" = ". .. " ]
	[ "$(cat "$W/ok.txt")" = ok ]
	# . and .. are the kernel's
	[ "$(stat -c %i "$W/..")" = "$(stat -c %i "$2")" ]
	[ ! -e "$W/../b" ]
	[ ! -e "$W/a" ]
	[ ! -e "$W/c" ]
	# the root's listing left out 2 objects (. ..) and 3 prefixes (./ ../ /)
	grep -q "leaves out 5 name(s) that cannot be file names" "$BATS_TEST_TMPDIR/daemon.log"
}
