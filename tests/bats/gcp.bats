#!/usr/bin/env bats
# The gcp provider (docs/gcp.md) against two emulators: the OAuth token
# endpoint (tests/emulators/gcp_oauth, which checks the JWT's RS256
# signature with the key's public half) and the Google APIs
# (tests/emulators/gcp: Cloud Storage over real files, Cloud Run Jobs whose
# executions are local process groups or containers, Cloud Logging), which
# accepts only bearer tokens the OAuth emulator issued.  The RSA keys are
# test-only, generated per file with openssl.  Every test starts its own
# emulators and daemon; teardown stops them all, even when it failed.

load helpers
load remote_helpers  # write_checked, no_pending
load docker_helpers

OAUTH_EMU="$SFS_ROOT/tests/emulators/gcp_oauth/gcp_oauth_emulator.py"
GCP_EMU="$SFS_ROOT/tests/emulators/gcp/gcp_emulator.py"
EMAIL=sfs-test@sfs-test-project.iam.gserviceaccount.com
KID=sfs-test-kid-0123456789
PROJECT=sfs-test-project
REGION=us-central1

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

# start_emu NAME PIDFILE PORTFILE CMD...: a background emulator, its port.
start_emu() {
	local out=$1 pidf=$2 portf=$3
	shift 3
	rm -f "$portf"
	"$@" >"$out" 2>&1 3>&- &
	echo $! >"$pidf"
	wait_for test -s "$portf" || {
		cat "$out" >&2
		return 1
	}
}

stop_emu() {
	[ -f "$1" ] || return 0
	local pid
	pid=$(cat "$1")
	curl -s -m 2 -X POST -d '{"hang":false}' "http://127.0.0.1:${2:-0}/_emu/faults" >/dev/null 2>&1 || true
	kill -TERM "$pid" 2>/dev/null || true
	wait_for eval "! kill -0 $pid 2>/dev/null" || kill -9 "$pid" 2>/dev/null || true
	rm -f "$1"
}

oauth_start() {
	EMU_DIR="$BATS_TEST_TMPDIR/emu"
	mkdir -p "$EMU_DIR"
	start_emu "$EMU_DIR/oauth.out" "$BATS_TEST_TMPDIR/oauth.pid" "$EMU_DIR/oauth.port" \
		python3 "$OAUTH_EMU" --pubkey "$BATS_FILE_TMPDIR/pub.pem" --email "$EMAIL" --kid "$KID" \
		--port-file "$EMU_DIR/oauth.port"
	OAUTH_PORT=$(cat "$EMU_DIR/oauth.port")
}

# gcp_start [emulator flags...]: the APIs emulator with bucket "bkt", trusting
# the OAuth emulator's tokens, and the variables that point sandboxfs at it.
gcp_start() {
	mkdir -p "$EMU_DIR/root"
	start_emu "$EMU_DIR/gcp.out" "$BATS_TEST_TMPDIR/gcp.pid" "$EMU_DIR/gcp.port" \
		python3 "$GCP_EMU" --root "$EMU_DIR/root" --bucket bkt --oauth "http://127.0.0.1:$OAUTH_PORT" \
		--port-file "$EMU_DIR/gcp.port" --log "$EMU_DIR/requests.log" "$@"
	GCP_PORT=$(cat "$EMU_DIR/gcp.port")
	export STORAGE_EMULATOR_HOST="127.0.0.1:$GCP_PORT"
	export CLOUDSDK_API_ENDPOINT_OVERRIDES_RUN="http://127.0.0.1:$GCP_PORT/"
	export CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING="http://127.0.0.1:$GCP_PORT/"
}

gcp_stop() {
	stop_emu "$BATS_TEST_TMPDIR/gcp.pid" "${GCP_PORT:-0}"
	# executions it ran carry a path under its root in their environment
	local p
	for p in $(grep -lszF -- "=$EMU_DIR/root" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
		kill -9 "$p" 2>/dev/null || true
	done
	if [ -n "${EMU_DIR:-}" ] && command -v docker >/dev/null; then
		docker ps -q --filter "label=sfs.gcp-emu.root=$(realpath "$EMU_DIR/root" 2>/dev/null)" 2>/dev/null |
			xargs -r docker rm -f >/dev/null 2>&1 || true
	fi
}

# gcp_mount [options]: the key file, bucket bkt, the OAuth emulator, project and region.
gcp_mount() {
	key_json "$BATS_FILE_TMPDIR/key.pem" "$BATS_TEST_TMPDIR/key.json"
	GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/key.json" \
		sfs_mount --log-level 3 -o gcp.bucket=bkt -o "gcp.oauth_url=http://127.0.0.1:$OAUTH_PORT/token" \
		-o gcp.project=$PROJECT -o gcp.region=$REGION "$@"
}

oauth_stat() {
	curl -s -m 5 "http://127.0.0.1:$OAUTH_PORT/_emu/stats" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"
}

gcp_stat() {
	curl -s -m 5 "http://127.0.0.1:$GCP_PORT/_emu/stats" |
		python3 -c 'import json, sys
v = json.load(sys.stdin)
for k in sys.argv[1].split("/"):
    v = v.get(k, 0) if isinstance(v, dict) else 0
print(v)' "$1"
}

gcp_faults() {
	curl -s -m 5 -X POST -d "$1" "http://127.0.0.1:$GCP_PORT/_emu/faults" >/dev/null
}

# gcs_obj NAME FIELD: size, sha256 or meta.KEY of an object in bkt ("" if absent).
gcs_obj() {
	emu_obj "http://127.0.0.1:$GCP_PORT/_emu/objects?bucket=bkt" metadata "$1" "$2"
}

gcs_names() {
	curl -s -m 5 "http://127.0.0.1:$GCP_PORT/_emu/objects?bucket=bkt" |
		python3 -c 'import json, sys; print(" ".join(sorted(json.load(sys.stdin))))'
}

# run_wait SANDBOX CMD: runs CMD, waits, prints the run's number.
run_wait() {
	local n
	n=$(ctl_write "$MNT/$1/ctl" "exec $2") || return 1
	cat "$MNT/$1/runs/$n/wait" >/dev/null
	echo "$n"
}

setup() {
	# kept for the real-cloud test, which the unset below would hide
	REAL_GAC="${GOOGLE_APPLICATION_CREDENTIALS:-}"
	unset GOOGLE_APPLICATION_CREDENTIALS GCE_METADATA_HOST GOOGLE_CLOUD_PROJECT GCLOUD_PROJECT
	unset STORAGE_EMULATOR_HOST CLOUDSDK_API_ENDPOINT_OVERRIDES_RUN CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING
	oauth_start
}

teardown() {
	sfs_teardown
	gcp_stop
	stop_emu "$BATS_TEST_TMPDIR/oauth.pid" "${OAUTH_PORT:-0}"
}

# ---- credentials and status

@test "gcp: without credentials or bucket, status names both and new fails naming the variable" {
	sfs_mount --log-level 3
	grep -qx 'configured false' "$MNT/providers/gcp/status"
	grep -q '^reason .*GOOGLE_APPLICATION_CREDENTIALS.*GCE_METADATA_HOST.*; no gcp.bucket' \
		"$MNT/providers/gcp/status"
	run ctl_write "$MNT/ctl" "new g1 provider=gcp bucket=bkt"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "*GOOGLE_APPLICATION_CREDENTIALS* ]]
	[ ! -e "$MNT/g1" ]
	[ "$(oauth_stat requests)" -eq 0 ]
	# the caps a batch provider has: runs are jobs, no background or stdin
	grep -qx 'exec true' "$MNT/providers/gcp/caps"
	grep -qx 'backgroundProcesses false' "$MNT/providers/gcp/caps"
	grep -qx 'writableStdin false' "$MNT/providers/gcp/caps"
	grep -qx 'durableFilesystem true' "$MNT/providers/gcp/caps"
	grep -qx 'killableProcesses true' "$MNT/providers/gcp/caps"
	grep -qx 'snapshots true' "$MNT/providers/gcp/caps"
}

@test "gcp: a key file and no bucket: status names gcp.bucket and whose key it is, never the key" {
	key_json "$BATS_FILE_TMPDIR/key.pem" "$BATS_TEST_TMPDIR/key.json"
	GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/key.json" \
		sfs_mount --log-level 3 -o "gcp.oauth_url=http://127.0.0.1:$OAUTH_PORT/token"
	# usable: new can name the bucket
	grep -qx 'configured true' "$MNT/providers/gcp/status"
	grep -q "^reason authenticates as $EMAIL, a service-account JWT exchanged at http://127.0.0.1:$OAUTH_PORT/token; no gcp.bucket (new needs bucket=) at " \
		"$MNT/providers/gcp/status"
	run ctl_write "$MNT/ctl" "new g1 provider=gcp"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: gcp: no bucket: give bucket= or set gcp.bucket"* ]]
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

@test "gcp: a key the token endpoint does not know: new's error is Google's invalid_grant, nothing made" {
	gcp_start
	key_json "$BATS_FILE_TMPDIR/other.pem" "$BATS_TEST_TMPDIR/key.json"
	GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/key.json" \
		sfs_mount --log-level 3 -o gcp.bucket=bkt -o "gcp.oauth_url=http://127.0.0.1:$OAUTH_PORT/token"
	run ctl_write "$MNT/ctl" "new g1 provider=gcp"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: gcp: exchanging for an access token at http://127.0.0.1:$OAUTH_PORT/token failed: HTTP 400: invalid_grant: Invalid JWT Signature."* ]]
	[ "$(oauth_stat rejected)" -eq 1 ]
	[ "$(oauth_stat tokens)" -eq 0 ]
	[ ! -e "$MNT/g1" ]
	[ -z "$(gcs_names)" ]
}

@test "gcp: with no key file, the metadata server named by GCE_METADATA_HOST gives the token" {
	gcp_start
	GCE_METADATA_HOST="127.0.0.1:$OAUTH_PORT" sfs_mount --log-level 3 -o gcp.bucket=bkt
	grep -q "^reason authenticates through the metadata server at http://127.0.0.1:$OAUTH_PORT; bucket bkt at http://127.0.0.1:$GCP_PORT; runs: no gcp.project, no gcp.region" \
		"$MNT/providers/gcp/status"
	ctl_write "$MNT/ctl" "new g1 provider=gcp"
	echo meta >"$MNT/g1/workspace/f"
	[ "$(gcs_obj g1/f size)" = 5 ]
	[ "$(oauth_stat tokens)" -eq 1 ]
}

# ---- the workspace

@test "gcp: new makes gs://bkt/PREFIX/NAME/ with a JWT-issued token; status says where and what runs lack" {
	gcp_start
	gcp_mount -o gcp.prefix=team/ws
	grep -qx 'configured true' "$MNT/providers/gcp/status"
	grep -q "^reason authenticates as $EMAIL, .*; bucket bkt at http://127.0.0.1:$GCP_PORT; runs: project $PROJECT, region $REGION" \
		"$MNT/providers/gcp/status"
	ctl_write "$MNT/ctl" "new g1 provider=gcp"
	grep -qx 'id bkt/team/ws/g1/' "$MNT/g1/status"
	grep -qx 'objects gs://bkt/team/ws/g1/' "$MNT/g1/status"
	grep -qx 'workspace /workspace' "$MNT/g1/status"
	# no image: the workspace works, runs need one
	grep -qx 'runs need image= (the job.s container image)' "$MNT/g1/status"
	[ "$(gcs_obj team/ws/g1/ meta.goog-reserved-posix-mode)" = 755 ]
	[ "$(oauth_stat tokens)" -eq 1 ]
	[ "$(gcp_stat auth_checks)" -ge 1 ]
	# bucket= and prefix= on new win over gcp.bucket/gcp.prefix; bad values are refused
	run ctl_write "$MNT/ctl" "new g2 provider=gcp bucket=Bad_Bucket"
	[[ "$output" == *"error: gcp: bucket=Bad_Bucket: expected 3-222 characters"* ]]
	run ctl_write "$MNT/ctl" "new g2 provider=gcp memory=lots"
	[[ "$output" == *"error: gcp: memory=lots: expected a size like 512Mi"* ]]
	# a value longer than the job's field is refused, never cut to another
	run ctl_write "$MNT/ctl" "new g2 provider=gcp cpu=00000000000000000002"
	[[ "$output" == *"error: gcp: cpu=00000000000000000002: expected Cloud Run's cpu"* ]]
	run ctl_write "$MNT/ctl" "new g2 provider=gcp memory=0000000000000512Mi"
	[[ "$output" == *"error: gcp: memory=0000000000000512Mi: expected a size"* ]]
	run ctl_write "$MNT/ctl" "new g2 provider=gcp prefix=a/../b"
	[[ "$output" == *"error: gcp: prefix=a/../b: no '..' segments"* ]]
	run ctl_write "$MNT/ctl" "new g2 provider=gcp colour=red"
	[[ "$output" == *"error: gcp: unknown option \"colour\""* ]]
	[ ! -e "$MNT/g2" ]
	ctl_write "$MNT/ctl" "new g3 provider=gcp prefix=other cpu=2 memory=1Gi"
	grep -qx 'objects gs://bkt/other/g3/' "$MNT/g3/status"
}

@test "gcp: workspace read, write, ls -l modes, mkdir, mv, rm; objects carry mode and mtime" {
	gcp_start
	gcp_mount
	ctl_write "$MNT/ctl" "new w1 provider=gcp"
	W="$MNT/w1/workspace"
	echo hello >"$W/a.txt"
	mkdir "$W/d"
	mkdir -m 0750 "$W/private"
	printf 'x%.0s' $(seq 1 100) >"$W/d/b.txt"
	echo '#!/bin/sh' >"$W/run.sh"
	chmod 0750 "$W/run.sh"
	touch -d @1700000000 "$W/a.txt"
	[ "$(cat "$W/a.txt")" = hello ]
	[ "$(gcs_obj w1/a.txt size)" = 6 ]
	[ "$(gcs_obj w1/a.txt meta.goog-reserved-posix-mode)" = 644 ]
	[ -n "$(gcs_obj w1/a.txt meta.goog-reserved-file-mtime)" ]
	[ "$(gcs_obj w1/d/ meta.goog-reserved-posix-mode)" = 755 ]
	[ "$(gcs_obj w1/run.sh meta.goog-reserved-posix-mode)" = 750 ]
	[ "$(gcs_obj w1/d/b.txt size)" = 100 ]
	# the listing asks for the attributes it shows, metadata included
	[ "$(gcp_stat fields)" = 'items(name,size,updated,metadata),prefixes,nextPageToken' ]
	# a second daemon reads modes and contents back from the bucket, one
	# list call per directory
	sfs_unmount
	gcp_mount
	W="$MNT/w1/workspace"
	before=$(gcp_stat by_route/GET\ list)
	objs=$(gcp_stat by_route/GET\ object)
	# one listing shows the files' and the sub-directories' stored modes
	[ "$(ls -l "$W" | awk 'NR > 1 { print $1, $NF }' | tr '\n' ' ')" = \
		"-rw-r--r-- a.txt drwxr-xr-x d drwxr-x--- private -rwxr-x--- run.sh " ]
	[ "$(( $(gcp_stat by_route/GET\ list) - before ))" -le 2 ]
	[ "$(gcp_stat by_route/GET\ object)" = "$objs" ]
	rmdir "$W/private"
	[ "$(cat "$W/run.sh")" = '#!/bin/sh' ]
	mv "$W/a.txt" "$W/d/c.txt"
	[ -z "$(gcs_obj w1/a.txt size)" ]
	[ "$(gcs_obj w1/d/c.txt size)" = 6 ]
	mv "$W/d" "$W/e"
	[ "$(cat "$W/e/c.txt")" = hello ]
	[ "$(gcs_obj w1/e/b.txt size)" = 100 ]
	[ "$(gcs_obj w1/e/ meta.goog-reserved-posix-mode)" = 755 ]
	[ -z "$(gcs_obj w1/d/b.txt size)" ]
	[ -z "$(gcs_obj w1/d/ size)" ]
	run rmdir "$W/e"
	[ "$status" -ne 0 ]
	rm "$W/e/b.txt" "$W/e/c.txt"
	rmdir "$W/e"
	[ -z "$(gcs_obj w1/e/ size)" ]
	[ "$(ls "$W")" = run.sh ]
	chmod 0700 "$W/run.sh"
	[ "$(gcs_obj w1/run.sh meta.goog-reserved-posix-mode)" = 700 ]
}

@test "gcp: a chmod shows in ls -l at once, over a listing fetched before it" {
	gcp_start
	gcp_mount
	ctl_write "$MNT/ctl" "new w1 provider=gcp"
	W="$MNT/w1/workspace"
	for i in 1 2 3; do
		ls -l "$W" >/dev/null # a listing, cached for the TTL
		echo q >"$W/f$i"
		chmod 600 "$W/f$i"
		[ "$(ls -l "$W" | awk -v f="f$i" '$NF == f { print $1 }')" = -rw------- ]
		[ "$(stat -c %a "$W/f$i")" = 600 ]
		chmod 640 "$W/f$i"
		[ "$(ls -l "$W" | awk -v f="f$i" '$NF == f { print $1 }')" = -rw-r----- ]
	done
	[ "$(gcs_obj w1/f3 meta.goog-reserved-posix-mode)" = 640 ]
}

@test "gcp: objects named ./, ../, . or .. or holding // are left out of listings, once each . and .." {
	gcp_start
	gcp_mount
	ctl_write "$MNT/ctl" "new w1 provider=gcp"
	W="$MNT/w1/workspace"
	echo ok >"$W/ok.txt"
	mkdir "$W/d"
	# made by something else, straight into the emulator's store
	# shellcheck disable=SC2086 # the keys are words
	python3 -c '
import json, sys, time, urllib.parse
d = sys.argv[1]
for name in sys.argv[2:]:
    q = urllib.parse.quote("w1/" + name, safe="")
    open(d + "/" + q + ".data", "w").write("x\n")
    t = time.time()
    json.dump({"name": "w1/" + name, "generation": 1, "metageneration": 1, "created": t,
               "updated": t, "metadata": {}}, open(d + "/" + q + ".json", "w"))' \
		"$EMU_DIR/root/gcs/bkt" $ODD_KEYS
	[ "$(gcs_obj w1/../b size)" = 2 ]
	[ "$(gcs_obj w1//c size)" = 2 ]
	odd_keys_left_out "$W" "$MNT/w1"
}

@test "gcp: a file over 8 MiB goes up as a resumable upload in chunks and reads back whole" {
	gcp_start
	gcp_mount
	ctl_write "$MNT/ctl" "new m1 provider=gcp"
	head -c $((17 * 1024 * 1024 + 123)) /dev/urandom >"$BATS_TEST_TMPDIR/big"
	cp "$BATS_TEST_TMPDIR/big" "$MNT/m1/workspace/big"
	echo small >"$MNT/m1/workspace/small"
	[ "$(gcp_stat uploads/resumable)" = 1 ]
	# the session, then three chunks (8 MiB, 8 MiB, the rest): two "go on" (308)
	[ "$(gcp_stat resumable_308)" = 2 ]
	[ "$(gcp_stat by_route/PUT\ upload\ resumable)" = 3 ]
	[ "$(gcs_obj m1/big sha256)" = "$(sha256sum <"$BATS_TEST_TMPDIR/big" | cut -d' ' -f1)" ]
	[ "$(gcs_obj m1/big meta.goog-reserved-posix-mode)" = 644 ]
	# small files are one multipart upload (resource + bytes)
	[ "$(gcs_obj m1/small size)" = 6 ]
	# chunks that fail are sent again; the object is whole
	gcp_faults '{"fail_count":2,"status":503,"fail_paths":"upload_id="}'
	cp "$BATS_TEST_TMPDIR/big" "$MNT/m1/workspace/big3"
	gcp_faults '{"fail_count":0,"fail_paths":""}'
	[ "$(grep -c 'injected 503' "$EMU_DIR/requests.log")" = 2 ]
	[ "$(gcs_obj m1/big3 sha256)" = "$(sha256sum <"$BATS_TEST_TMPDIR/big" | cut -d' ' -f1)" ]
	sfs_unmount
	gcp_mount
	cmp "$BATS_TEST_TMPDIR/big" "$MNT/m1/workspace/big"
	# a rename of it is a rewrite that takes several calls (rewriteToken)
	gcp_faults '{"rewrite_chunk":4194304}'
	mv "$MNT/m1/workspace/big" "$MNT/m1/workspace/big2"
	[ "$(gcp_stat by_route/POST\ rewrite)" -ge 5 ]
	[ "$(gcs_obj m1/big2 sha256)" = "$(sha256sum <"$BATS_TEST_TMPDIR/big" | cut -d' ' -f1)" ]
	[ -z "$(gcs_obj m1/big size)" ]
}

@test "gcp: a rename failing midway loses nothing (every copy before any delete)" {
	gcp_start
	gcp_mount -o remote.attr_timeout=60
	ctl_write "$MNT/ctl" "new r1 provider=gcp"
	W="$MNT/r1/workspace"
	mkdir "$W/d"
	for f in a b c; do echo "$f" >"$W/d/$f"; done
	# the copy of d/b fails: not one object of d may be gone
	gcp_faults '{"fail_paths":"rewriteTo/b/bkt/o/r1%2Fe%2Fb","status":403,"fail_count":100}'
	run mv "$W/d" "$W/e"
	[ "$status" -ne 0 ]
	for f in a b c; do [ "$(gcs_obj "r1/d/$f" size)" = 2 ]; done
	# and the copies made before the failure are gone again
	[ -z "$(gcs_obj r1/e/a size)" ]
	[ ! -e "$W/e" ]
	gcp_faults '{"fail_count":0,"fail_paths":""}'
	mv "$W/d" "$W/e"
	for f in a b c; do
		[ "$(gcs_obj "r1/e/$f" size)" = 2 ]
		[ -z "$(gcs_obj "r1/d/$f" size)" ]
	done
}

@test "gcp: throttling (429 with Retry-After) is retried; a write during an outage fails with EIO and lands later" {
	gcp_start
	gcp_mount -o remote.attr_timeout=60
	ctl_write "$MNT/ctl" "new f1 provider=gcp"
	W="$MNT/f1/workspace"
	gcp_faults '{"status":429,"fail_count":2,"retry_after":1,"fail_paths":"/upload/"}'
	start=$(date +%s%N)
	echo throttled >"$W/t.txt"
	[ "$(gcs_obj f1/t.txt size)" = 10 ]
	# two refusals honoured with Retry-After: 1 s each
	[ "$(( ($(date +%s%N) - start) / 1000000 ))" -ge 1900 ]
	[ "$(grep -c 'injected 429' "$EMU_DIR/requests.log")" = 2 ]
	# every upload fails: close reports EIO, the bytes stay, and land once GCS is back
	echo before >"$W/keep.txt"
	gcp_faults '{"status":503,"fail_count":100000,"fail_paths":"/upload/"}'
	run write_checked "$W/keep.txt" precious
	[ "$status" -eq 5 ]
	[ "$output" = "close: errno 5" ]
	grep -rqx 'keep.txt' "$STATE"/sandboxes/*/rcache/*.pending
	[ "$(cat "$W/keep.txt")" = precious ]
	[ "$(gcs_obj f1/keep.txt size)" = 7 ]
	gcp_faults '{"fail_count":0}'
	wait_for no_pending
	[ "$(gcs_obj f1/keep.txt size)" = 8 ]
	[ "$(cat "$W/keep.txt")" = precious ]
}

@test "gcp: a revoked token is refreshed once; 403, a missing bucket and endless 429 are clear, redacted errors" {
	gcp_start
	gcp_mount -o remote.attr_timeout=0
	ctl_write "$MNT/ctl" "new b1 provider=gcp"
	[ "$(oauth_stat tokens)" -eq 1 ]
	# the cached token stops working (expired early, revoked): one new one, the call goes through
	gcp_faults '{"revoke":true}'
	echo after-revoke >"$MNT/b1/workspace/f"
	[ "$(gcs_obj b1/f size)" = 13 ]
	[ "$(oauth_stat tokens)" -eq 2 ]
	[ "$(gcp_stat by_route/unauthenticated)" = 1 ]
	# a bucket nobody has
	run ctl_write "$MNT/ctl" "new b2 provider=gcp bucket=nosuch"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: gcp: gcs upload gs://nosuch/b2/: HTTP 404"*"The specified bucket does not exist."* ]]
	[ ! -e "$MNT/b2" ]
	# permission denied
	gcp_faults '{"deny":true}'
	run ctl_write "$MNT/ctl" "new b3 provider=gcp"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: gcp: gcs upload gs://bkt/b3/: HTTP 403 PERMISSION_DENIED: "*"(the service account lacks a permission here)"* ]]
	run ls "$MNT/b1/workspace"
	[ "$status" -ne 0 ]
	gcp_faults '{"deny":false}'
	# throttled past every retry
	gcp_faults '{"status":429,"fail_count":100,"retry_after":0}'
	run ctl_write "$MNT/ctl" "new b4 provider=gcp"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: gcp: gcs upload gs://bkt/b4/: HTTP 429 RESOURCE_EXHAUSTED: emulated failure (throttled: still refused after the retries)"* ]]
	gcp_faults '{"fail_count":0}'
	# the tokens never show: not in errors, status, the log or the state
	sfs_unmount
	run grep -rqE 'ya29\.emu-|PRIVATE KEY' "$STATE" "$BATS_TEST_TMPDIR/daemon.log"
	[ "$status" -eq 1 ]
}

@test "gcp: an expired token is not used: the next call fetches a fresh one first" {
	gcp_start
	curl -s -m 5 -X POST -d '{"expires_in":1}' "http://127.0.0.1:$OAUTH_PORT/_emu/faults" >/dev/null
	gcp_mount -o remote.attr_timeout=0
	ctl_write "$MNT/ctl" "new e1 provider=gcp"
	sleep 1.2
	echo x >"$MNT/e1/workspace/f"
	[ "$(gcs_obj e1/f size)" = 2 ]
	[ "$(oauth_stat tokens)" -ge 2 ]
	# no call was refused for its token
	[ "$(gcp_stat by_route/unauthenticated)" = 0 ]
}

# ---- runs

@test "gcp: exec without an image or a region fails naming what is missing; the workspace still works" {
	gcp_start
	key_json "$BATS_FILE_TMPDIR/key.pem" "$BATS_TEST_TMPDIR/key.json"
	GOOGLE_APPLICATION_CREDENTIALS="$BATS_TEST_TMPDIR/key.json" \
		sfs_mount --log-level 3 -o gcp.bucket=bkt -o "gcp.oauth_url=http://127.0.0.1:$OAUTH_PORT/token"
	ctl_write "$MNT/ctl" "new x1 provider=gcp"
	run ctl_write "$MNT/x1/ctl" "exec true"
	[ "$status" -ne 0 ]
	# the project comes from the key file; region and image are missing
	[[ "$output" == *"error: gcp: exec runs a Cloud Run job, which needs gcp.region (or region=), image= (the job's container image); the workspace gs://bkt/x1/ works without them"* ]]
	[ "$(gcp_stat by_route/POST\ jobs.run)" = 0 ]
	echo ok >"$MNT/x1/workspace/f"
	[ "$(gcs_obj x1/f size)" = 3 ]
	ctl_write "$MNT/ctl" "new x2 provider=gcp region=europe-west1 image=img"
	run grep -c '^runs need' "$MNT/x2/status"
	[ "$output" = 0 ]
}

@test "gcp: exec is a Cloud Run execution that reads and writes the workspace; status from its exit code, journal from its logs" {
	gcp_start
	gcp_mount
	ctl_write "$MNT/ctl" "new j1 provider=gcp image=sandboxfs-test:latest cpu=1 memory=512Mi"
	W="$MNT/j1/workspace"
	echo from-host >"$W/in.txt"
	ctl_write "$MNT/j1/ctl" "env GREETING=hello-env"
	n=$(run_wait j1 'cat in.txt; echo "$GREETING"; echo out-from-job >out.txt; rm in.txt; echo oops >&2; exit 3')
	[ "$(cat "$MNT/j1/runs/$n/status")" = "exited 3" ]
	[ "$(cat "$MNT/j1/runs/$n/journal")" = "$(printf 'from-host\nhello-env\noops')" ]
	# the run's writes are in the bucket and the workspace shows them
	[ "$(gcs_obj j1/out.txt size)" = 13 ]
	[ -z "$(gcs_obj j1/in.txt size)" ]
	[ "$(cat "$W/out.txt")" = out-from-job ]
	[ ! -e "$W/in.txt" ]
	# one job, made at the first run with the sandbox's image and the workspace volume
	[ "$(gcp_stat by_route/POST\ jobs.create)" = 1 ]
	[ "$(gcp_stat sandboxes)" = 1 ]
	n=$(run_wait j1 'echo second; exit 0')
	[ "$(cat "$MNT/j1/runs/$n/status")" = "exited 0" ]
	[ "$(cat "$MNT/j1/runs/$n/journal")" = second ]
	[ "$(gcp_stat by_route/POST\ jobs.create)" = 1 ]
	[ "$(gcp_stat by_route/POST\ jobs.run)" = 2 ]
	grep -q 'POST /v2/entries:list' "$EMU_DIR/requests.log"
	# a restarted daemon reads the journal again from the logs
	sfs_unmount
	gcp_mount
	[ "$(cat "$MNT/j1/runs/1/journal")" = "$(printf 'from-host\nhello-env\noops')" ]
	[ "$(cat "$MNT/j1/runs/1/status")" = "exited 3" ]
	# destroy removes the prefix and the job
	ctl_write "$MNT/j1/ctl" destroy
	[ "$(gcp_stat sandboxes)" = 0 ]
	[ -z "$(gcs_names)" ]
}

@test "gcp: kill cancels the execution and the run says killed; a finished run cannot be killed" {
	gcp_start
	gcp_mount
	ctl_write "$MNT/ctl" "new k1 provider=gcp image=sandboxfs-test:latest"
	n=$(ctl_write "$MNT/k1/ctl" "exec echo started; sleep 60; echo never")
	wait_for grep -qx started "$MNT/k1/runs/$n/journal"
	[ "$(cat "$MNT/k1/runs/$n/status")" = running ]
	[ "$(gcp_stat processes)" = 1 ]
	ctl_write "$MNT/k1/ctl" "kill $n"
	[ "$(cat "$MNT/k1/runs/$n/status")" = "killed TERM" ]
	[ "$(gcp_stat processes)" = 0 ]
	[ "$(gcp_stat by_route/POST\ executions.cancel)" = 1 ]
	run grep -c never "$MNT/k1/runs/$n/journal"
	[ "$output" = 0 ]
	run ctl_write "$MNT/k1/ctl" "kill $n"
	[ "$status" -ne 0 ]
}

@test "gcp: a run as a container on the test dockerd reads and writes the workspace; kill stops it" {
	docker_require
	gcp_start --docker
	gcp_mount
	ctl_write "$MNT/ctl" "new c1 provider=gcp image=$SFS_DOCKER_IMAGE"
	echo in-container >"$MNT/c1/workspace/in.txt"
	n=$(run_wait c1 'cat in.txt; pwd; echo made >made.txt')
	[ "$(cat "$MNT/c1/runs/$n/status")" = "exited 0" ]
	[ "$(cat "$MNT/c1/runs/$n/journal")" = "$(printf 'in-container\n/workspace')" ]
	[ "$(cat "$MNT/c1/workspace/made.txt")" = made ]
	# kill cancels the execution: the container stops
	n=$(ctl_write "$MNT/c1/ctl" "exec echo up; sleep 60")
	wait_for grep -qx up "$MNT/c1/runs/$n/journal"
	ctl_write "$MNT/c1/ctl" "kill $n"
	[[ "$(cat "$MNT/c1/runs/$n/status")" == killed* ]]
	wait_for eval 'test -z "$(docker ps -q --filter "label=sfs.gcp-emu.root=$(realpath "$EMU_DIR/root")")"'
}

@test "gcp: new source= uploads the tree as one object and one execution unpacks it; files and symlinks arrive" {
	gcp_start
	gcp_mount
	local repo="$BATS_TEST_TMPDIR/repo"
	git -c init.defaultBranch=main init -q "$repo"
	mkdir "$repo/d"
	for i in $(seq 1 40); do echo "file $i" >"$repo/d/f$i"; done
	ln -s d/f1 "$repo/link"
	git -C "$repo" add .
	git -c user.email=t@example.org -c user.name=t -C "$repo" commit -qm one
	ctl_write "$MNT/ctl" "new g provider=gcp image=sandboxfs-test:latest source=$repo"
	# one upload of the archive (besides the root marker), one execution to unpack it
	[ "$(gcp_stat uploads/multipart)" = 2 ]
	[ "$(gcp_stat by_route/POST\ jobs.run)" = 1 ]
	[ "$(cat "$MNT/g/workspace/d/f7")" = "file 7" ]
	[ "$(readlink "$MNT/g/workspace/link")" = d/f1 ]
	[ "$(gcs_obj g/link meta.gcsfuse_symlink_target)" = d/f1 ]
	[ "$(cat "$MNT/g/workspace/.git/HEAD")" = "ref: refs/heads/main" ]
	[ ! -e "$MNT/g/workspace/.sandboxfs-source.tar" ]
	[ -z "$(gcs_obj g/.sandboxfs-source.tar size)" ]
	# without the job settings, source= is refused naming them; nothing is left
	run ctl_write "$MNT/ctl" "new h provider=gcp source=$repo"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: gcp: source= (unpacked in a Cloud Run execution) runs a Cloud Run job, which needs image="* ]]
	[ ! -e "$MNT/h" ]
	[ -z "$(gcs_obj h/ size)" ]
}

# ---- resume by id: the marker's settings are the bucket's word

# GOOD_MARKER: the root marker's metadata as new leaves it, with settings
# other than the mount's (so a run shows whose it used).
GOOD_MARKER='{"sandboxfs-image": "sandboxfs-test:latest", "sandboxfs-project": "other-project", "sandboxfs-region": "europe-west1", "sandboxfs-cpu": "2", "sandboxfs-memory": "1Gi"}'

# plant_marker ROOT JSON [KEY VALUE]: the root marker gs://bkt/ROOT as
# whoever can write the bucket left it: JSON as its metadata, KEY set to
# VALUE in it.
plant_marker() {
	local md
	md=$(python3 -c 'import json, sys
d = json.loads(sys.argv[1])
if len(sys.argv) > 3:
    d[sys.argv[2]] = sys.argv[3]
print(json.dumps(d))' "$2" "${3:-}" "${4:-}")
	curl -sf -m 5 -X POST -G --data-urlencode "bucket=bkt" --data-urlencode "name=$1" \
		--data-urlencode "metadata=$md" "http://127.0.0.1:$GCP_PORT/_emu/put" >/dev/null
}

# resume_refused META VALUE FIELD: a marker whose META is VALUE (the other
# settings good) is refused with EINVAL naming FIELD; nothing is made:
# no sandbox, no state, no object, no Cloud Run call.
resume_refused() {
	plant_marker bad/ "$GOOD_MARKER" "$1" "$2"
	local names before
	names=$(gcs_names)
	touch "$EMU_DIR/requests.log" # the emulator makes it at its first logged request
	before=$(wc -l <"$EMU_DIR/requests.log")
	run ctl_write "$MNT/ctl" "resume h provider=gcp id=bkt/bad/"
	[ "$status" -ne 0 ] || return 1
	[[ "$output" == *"Invalid argument"* ]] || return 1
	[[ "$output" == *"error: gcp: resume: the marker gs://bkt/bad/ has a bad $3 (metadata $1=\""* ]] || return 1
	# the value is shown escaped and cut: one line, never megabytes
	[ "$(printf '%s\n' "$output" | grep -c '^error: ')" = 1 ] || return 1
	[ "${#output}" -lt 1000 ] || return 1
	[ ! -e "$MNT/h" ] || return 1
	[ -z "$(ls "$STATE/sandboxes")" ] || return 1
	[ "$(gcs_names)" = "$names" ] || return 1
	# what the resume asked: the marker's stat and metadata only
	[ "$(gcp_stat sandboxes)" = 0 ] || return 1
	if tail -n +"$((before + 1))" "$EMU_DIR/requests.log" | grep -v ' /storage/v1/b/bkt/o'; then
		return 1
	fi
}

@test "gcp: resume by id refuses a marker whose settings new would refuse, naming the setting; nothing is made" {
	gcp_start
	gcp_mount
	resume_refused sandboxfs-project "../../../../v1/projects/evil" project
	resume_refused sandboxfs-project "p/locations/r/jobs/x?" project
	resume_refused sandboxfs-region "us-central1/jobs/other" region
	resume_refused sandboxfs-region ".." region
	resume_refused sandboxfs-cpu "$(printf '1%.0s' $(seq 1 20000))" cpu
	resume_refused sandboxfs-memory "$(printf '512Mi\nstate running')" memory
	resume_refused sandboxfs-image "$(printf 'img\nerror planted')" image
	# a newline shows as \x0a, never as a line of its own
	[[ "$output" == *'(metadata sandboxfs-image="img\x0aerror planted")'* ]]
	resume_refused sandboxfs-image "-v /:/host" image
	resume_refused sandboxfs-image "$(printf 'a%.0s' $(seq 1 300))" image
	[[ "$output" == *'="aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...")'* ]]
	# new refuses the same values
	run ctl_write "$MNT/ctl" "new n1 provider=gcp region=us-central1/jobs/other"
	[[ "$output" == *"error: gcp: region=us-central1/jobs/other: expected a region like us-central1"* ]]
	run ctl_write "$MNT/ctl" "new n1 provider=gcp image=-v"
	[[ "$output" == *"error: gcp: image=-v: expected an image reference"* ]]
	[ ! -e "$MNT/n1" ]
	# the same marker made good resumes
	plant_marker bad/ "$GOOD_MARKER"
	ctl_write "$MNT/ctl" "resume h provider=gcp id=bkt/bad/" >/dev/null
	grep -qx 'state running' "$MNT/h/status"
}

@test "gcp: resume by id of a good marker takes its settings: a run goes to its project and region" {
	gcp_start
	gcp_mount
	plant_marker r1/ "$GOOD_MARKER"
	curl -sf -m 5 -X POST --data-binary kept "http://127.0.0.1:$GCP_PORT/_emu/put?bucket=bkt&name=r1/f" >/dev/null
	ctl_write "$MNT/ctl" "resume back provider=gcp id=bkt/r1/" >/dev/null
	grep -qx 'state running' "$MNT/back/status"
	grep -qx 'image sandboxfs-test:latest' "$MNT/back/status"
	run grep -c '^runs need' "$MNT/back/status"
	[ "$output" = 0 ]
	[ "$(cat "$MNT/back/workspace/f")" = kept ]
	n=$(run_wait back 'cat f')
	[ "$(cat "$MNT/back/runs/$n/status")" = "exited 0" ]
	[ "$(cat "$MNT/back/runs/$n/journal")" = kept ]
	# the marker's project and region, not the mount's gcp.project and gcp.region
	grep -q ' /v2/projects/other-project/locations/europe-west1/jobs' "$EMU_DIR/requests.log"
	run grep -c " /v2/projects/$PROJECT/" "$EMU_DIR/requests.log"
	[ "$output" = 0 ]
}

# ---- snapshots

@test "gcp: a snapshot is a server-side copy under snapshots/ID/; restore brings it back; delete removes it" {
	gcp_start
	gcp_mount
	ctl_write "$MNT/ctl" "new s1 provider=gcp"
	W="$MNT/s1/workspace"
	echo v1 >"$W/f"
	mkdir "$W/d"
	echo keep >"$W/d/k"
	name=$(ctl_write "$MNT/s1/ctl" "snapshot first")
	[ -d "$MNT/s1/snapshots/$name" ]
	# the copy: snapshots/ID/ in the bucket, ID the provider's
	id=$(gcs_names | tr ' ' '\n' | sed -n 's|^snapshots/\([^/]*\)/f$|\1|p')
	[ -n "$id" ]
	[ "$(gcs_obj "snapshots/$id/f" size)" = 3 ]
	[ "$(gcs_obj "snapshots/$id/d/k" size)" = 5 ]
	# no byte came through this host: rewrites, no uploads of the copies
	[ "$(gcp_stat by_route/POST\ rewrite)" -ge 4 ]
	echo v2 >"$W/f"
	echo extra >"$W/extra"
	rm "$W/d/k"
	ctl_write "$MNT/s1/ctl" "restore $name"
	[ "$(cat "$W/f")" = v1 ]
	[ "$(cat "$W/d/k")" = keep ]
	[ ! -e "$W/extra" ]
	[ -z "$(gcs_obj s1/extra size)" ]
	[ "$(gcs_obj s1/f size)" = 3 ]
	rmdir "$MNT/s1/snapshots/$name"
	[ -z "$(gcs_obj "snapshots/$id/f" size)" ]
	run grep -c "snapshots/$id/" <<<"$(gcs_names | tr ' ' '\n')"
	[ "$output" = 0 ]
}

# ---- the real cloud

@test "gcp: the real cloud: new, write, exec reads it back, destroy" {
	[ -n "$REAL_GAC" ] && [ -n "${SFS_GCP_BUCKET:-}" ] && [ -n "${SFS_GCP_PROJECT:-}" ] &&
		[ -n "${SFS_GCP_REGION:-}" ] ||
		skip "gcp: the real cloud needs GOOGLE_APPLICATION_CREDENTIALS, SFS_GCP_BUCKET, SFS_GCP_PROJECT and SFS_GCP_REGION"
	GOOGLE_APPLICATION_CREDENTIALS="$REAL_GAC" sfs_mount --log-level 3 -o "gcp.bucket=$SFS_GCP_BUCKET" \
		-o "gcp.project=$SFS_GCP_PROJECT" -o "gcp.region=$SFS_GCP_REGION"
	name="sfs-bats-$(head -c 4 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	ctl_write "$MNT/ctl" "new $name provider=gcp prefix=sandboxfs-tests image=${SFS_GCP_IMAGE:-busybox}"
	echo real >"$MNT/$name/workspace/f"
	n=$(run_wait "$name" 'cat f')
	result=$(cat "$MNT/$name/runs/$n/status")
	journal=$(cat "$MNT/$name/runs/$n/journal")
	ctl_write "$MNT/$name/ctl" destroy
	[ "$result" = "exited 0" ]
	[ "$journal" = real ]
}
