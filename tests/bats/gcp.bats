#!/usr/bin/env bats
# The gcp provider skeleton (issue 16, first layer): its status names what is
# missing (credentials, gcp.bucket), and `new` proves the credentials against
# the OAuth token emulator (tests/emulators/gcp_oauth, which checks the
# JWT's RS256 signature with the key's public half) before refusing: the
# workspace and runs are not implemented, so nothing is ever made.  The RSA
# keys are test-only, generated per file with openssl.

load helpers

OAUTH_EMU="$SFS_ROOT/tests/emulators/gcp_oauth/gcp_oauth_emulator.py"
EMAIL=sfs-test@sfs-test-project.iam.gserviceaccount.com
KID=sfs-test-kid-0123456789

# key_json PEM OUT [drop_field]: a service-account key file
key_json() {
	python3 -c '
import json, sys
pem, out = sys.argv[1], sys.argv[2]
k = {"type": "service_account", "project_id": "sfs-test-project", "private_key_id": sys.argv[3],
     "private_key": open(pem).read(), "client_email": sys.argv[4],
     "token_uri": "https://oauth2.googleapis.com/token"}
if len(sys.argv) > 5 and sys.argv[5]:
    del k[sys.argv[5]]
json.dump(k, open(out, "w"))' "$1" "$2" "$KID" "$EMAIL" "${3:-}"
}

setup_file() {
	local d="$BATS_FILE_TMPDIR"
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$d/key.pem" 2>/dev/null
	openssl pkey -in "$d/key.pem" -pubout -out "$d/pub.pem"
	openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$d/other.pem" 2>/dev/null
}

oauth_start() {
	EMU_DIR="$BATS_TEST_TMPDIR/emu"
	mkdir -p "$EMU_DIR"
	python3 "$OAUTH_EMU" --pubkey "$BATS_FILE_TMPDIR/pub.pem" --email "$EMAIL" --kid "$KID" \
		--port-file "$EMU_DIR/port" >"$EMU_DIR/out" 2>&1 3>&- &
	echo $! >"$BATS_TEST_TMPDIR/emu.pid"
	wait_for test -s "$EMU_DIR/port" || {
		cat "$EMU_DIR/out" >&2
		return 1
	}
	EMU_PORT=$(cat "$EMU_DIR/port")
}

oauth_stop() {
	[ -f "$BATS_TEST_TMPDIR/emu.pid" ] || return 0
	local pid
	pid=$(cat "$BATS_TEST_TMPDIR/emu.pid")
	kill -TERM "$pid" 2>/dev/null || true
	wait_for eval "! kill -0 $pid 2>/dev/null" || kill -9 "$pid" 2>/dev/null || true
	rm -f "$BATS_TEST_TMPDIR/emu.pid"
}

oauth_stat() {
	curl -s -m 5 "http://127.0.0.1:$EMU_PORT/_emu/stats" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

setup() {
	unset GOOGLE_APPLICATION_CREDENTIALS GCE_METADATA_HOST
	oauth_start
}

teardown() {
	sfs_teardown
	oauth_stop
}

@test "gcp: without credentials or bucket, status names both and new fails naming the variable" {
	sfs_mount --log-level 3
	grep -qx 'configured false' "$MNT/providers/gcp/status"
	grep -q '^reason .*GOOGLE_APPLICATION_CREDENTIALS.*GCE_METADATA_HOST.*; no gcp.bucket' \
		"$MNT/providers/gcp/status"
	run ctl_write "$MNT/ctl" "new g1 provider=gcp"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "*GOOGLE_APPLICATION_CREDENTIALS* ]]
	[ ! -e "$MNT/g1" ]
	[ "$(oauth_stat requests)" -eq 0 ]
	# every cap false: nothing but the credential check works yet
	run grep -c ' true$' "$MNT/providers/gcp/caps"
	[ "$output" = 0 ]
}

@test "gcp: a key file and no bucket: status names gcp.bucket and whose key it is, never the key" {
	key_json "$BATS_FILE_TMPDIR/key.pem" "$BATS_TEST_TMPDIR/key.json"
	GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/key.json" \
		sfs_mount --log-level 3 -o "gcp.oauth_url=http://127.0.0.1:$EMU_PORT/token"
	grep -qx 'configured false' "$MNT/providers/gcp/status"
	grep -q "^reason no gcp.bucket (authenticates as $EMAIL, a service-account JWT exchanged at http://127.0.0.1:$EMU_PORT/token)" \
		"$MNT/providers/gcp/status"
	run grep -E "PRIVATE KEY|$KID" "$MNT/providers/gcp/status"
	[ "$status" -eq 1 ]
}

@test "gcp: a key file missing private_key is named in status and new" {
	key_json "$BATS_FILE_TMPDIR/key.pem" "$BATS_TEST_TMPDIR/key.json" private_key
	GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/key.json" \
		sfs_mount --log-level 3 -o gcp.bucket=bkt
	grep -qx 'configured false' "$MNT/providers/gcp/status"
	grep -q "^reason key file $BATS_TEST_TMPDIR/key.json has no \"private_key\"" "$MNT/providers/gcp/status"
	run ctl_write "$MNT/ctl" "new g1 provider=gcp"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "*"has no \"private_key\""* ]]
	[ "$(oauth_stat requests)" -eq 0 ]
}

@test "gcp: new proves the key against the token endpoint, then refuses: nothing is made" {
	key_json "$BATS_FILE_TMPDIR/key.pem" "$BATS_TEST_TMPDIR/key.json"
	GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/key.json" \
		sfs_mount --log-level 3 -o gcp.bucket=bkt -o "gcp.oauth_url=http://127.0.0.1:$EMU_PORT/token"
	grep -qx 'configured true' "$MNT/providers/gcp/status"
	grep -q "^reason authenticates as $EMAIL, .*; bucket bkt; but .*not implemented" "$MNT/providers/gcp/status"
	run ctl_write "$MNT/ctl" "new g1 provider=gcp"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: gcp: the credentials work (a token was obtained), but "*"not implemented"* ]]
	[ "$(oauth_stat tokens)" -eq 1 ]
	[ "$(oauth_stat rejected)" -eq 0 ]
	[ ! -e "$MNT/g1" ]
}

@test "gcp: a key the token endpoint does not know: new's error is Google's invalid_grant" {
	key_json "$BATS_FILE_TMPDIR/other.pem" "$BATS_TEST_TMPDIR/key.json"
	GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/key.json" \
		sfs_mount --log-level 3 -o gcp.bucket=bkt -o "gcp.oauth_url=http://127.0.0.1:$EMU_PORT/token"
	run ctl_write "$MNT/ctl" "new g1 provider=gcp"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: gcp: exchanging for an access token at http://127.0.0.1:$EMU_PORT/token failed: HTTP 400: invalid_grant: Invalid JWT Signature."* ]]
	[ "$(oauth_stat rejected)" -eq 1 ]
	[ "$(oauth_stat tokens)" -eq 0 ]
	[ ! -e "$MNT/g1" ]
}

@test "gcp: with no key file, the metadata server named by GCE_METADATA_HOST gives the token" {
	GCE_METADATA_HOST="127.0.0.1:$EMU_PORT" sfs_mount --log-level 3 -o gcp.bucket=bkt
	grep -q "^reason authenticates through the metadata server at http://127.0.0.1:$EMU_PORT; bucket bkt" \
		"$MNT/providers/gcp/status"
	run ctl_write "$MNT/ctl" "new g1 provider=gcp"
	[ "$status" -ne 0 ]
	[[ "$output" == *"the credentials work (a token was obtained)"* ]]
	[ "$(oauth_stat tokens)" -eq 1 ]
}
