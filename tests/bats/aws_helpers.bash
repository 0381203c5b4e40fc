# Fixtures of the aws tests (aws.bats, aws_runs.bats): an emulator of the
# test's own (tests/emulators/s3 or tests/emulators/aws) with bucket "bkt"
# and a fresh secret, the AWS_* variables pointing sandboxfs at it, and a
# look at the bucket from the outside (aws_obj: emu_obj of remote_helpers).
# Teardown stops it, even on failure.

# aws_emu_start EMULATOR [emulator flags...]: sets EMU_DIR, EMU_PORT, EMU (its
# URL) and AWS_SECRET.
aws_emu_start() {
	local emulator=$1
	shift
	EMU_DIR="$BATS_TEST_TMPDIR/emu"
	mkdir -p "$EMU_DIR"
	rm -f "$EMU_DIR/port"
	AWS_SECRET="sfs-test-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	python3 "$emulator" --bucket bkt --key "AKIDSFSTEST:$AWS_SECRET" --port-file "$EMU_DIR/port" \
		--log "$EMU_DIR/requests.log" "$@" >"$EMU_DIR/out" 2>&1 3>&- &
	echo $! >"$BATS_TEST_TMPDIR/emu.pid"
	wait_for test -s "$EMU_DIR/port" || {
		cat "$EMU_DIR/out" >&2
		return 1
	}
	EMU_PORT=$(cat "$EMU_DIR/port")
	EMU="http://127.0.0.1:$EMU_PORT"
	export AWS_ACCESS_KEY_ID=AKIDSFSTEST AWS_SECRET_ACCESS_KEY="$AWS_SECRET"
	export AWS_ENDPOINT_URL="$EMU" AWS_REGION=us-east-1
	unset AWS_SESSION_TOKEN AWS_PROFILE AWS_ENDPOINT_URL_S3 AWS_ENDPOINT_URL_ECS AWS_ENDPOINT_URL_CLOUDWATCH_LOGS
	# no ~/.aws of the machine's user may leak in
	export AWS_SHARED_CREDENTIALS_FILE="$BATS_TEST_TMPDIR/none" AWS_CONFIG_FILE="$BATS_TEST_TMPDIR/none"
}

aws_emu_stop() {
	[ -f "$BATS_TEST_TMPDIR/emu.pid" ] || return 0
	local pid
	pid=$(cat "$BATS_TEST_TMPDIR/emu.pid")
	curl -s -m 2 -X POST -d '{"hang":false}' "http://127.0.0.1:${EMU_PORT:-0}/_emu/faults" >/dev/null 2>&1 || true
	kill -TERM "$pid" 2>/dev/null || true
	wait_for eval "! kill -0 $pid 2>/dev/null" || kill -9 "$pid" 2>/dev/null || true
	rm -f "$BATS_TEST_TMPDIR/emu.pid"
}

# aws_faults JSON: sets the emulator's fault switches.
aws_faults() {
	curl -s -m 5 -X POST -d "$1" "$EMU/_emu/faults" >/dev/null
}

# aws_obj KEY FIELD: size, sha256 or meta.NAME of an object in bucket bkt ("" if absent).
aws_obj() {
	emu_obj "$EMU/_emu/objects?bucket=bkt" meta "$1" "$2"
}

# aws_task N FIELD: a field of the Nth task (or CodeBuild build) the emulator
# ran (1-based); exitCode and image are its container's.
aws_task() {
	curl -s -m 5 "$EMU/_emu/tasks" | python3 -c '
import json, sys
t = json.load(sys.stdin)[int(sys.argv[1]) - 1]
f = sys.argv[2]
print(t["containers"][0].get(f, "") if f in ("exitCode", "image") else t.get(f, ""))' "$1" "$2"
}
