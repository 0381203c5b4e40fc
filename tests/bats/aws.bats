#!/usr/bin/env bats
# The aws provider's workspace (an S3 prefix through the remote workspace
# layer) against the S3 emulator (tests/emulators/s3), which verifies every
# request's SigV4 signature with the test's key.  Runs (ECS tasks) are in
# aws_runs.bats.  Every test starts its own emulator and daemon;
# teardown stops both, even when the test failed.

load helpers
load remote_helpers # write_checked
load aws_helpers

S3_EMU="$SFS_ROOT/tests/emulators/s3/s3_emulator.py"

s3_start() { aws_emu_start "$S3_EMU" "$@"; }
s3_stop() { aws_emu_stop; }
s3_faults() { aws_faults "$@"; }
s3_obj() { aws_obj "$@"; }

setup() {
	s3_start
	sfs_mount --log-level 3
}

teardown() {
	sfs_teardown
	s3_stop
}

@test "aws: status says configured with the endpoint and where the keys came from" {
	grep -qx 'configured true' "$MNT/providers/aws/status"
	grep -q "^reason ready: S3 at http://127.0.0.1:$EMU_PORT (path-style, region us-east-1, keys from environment)" \
		"$MNT/providers/aws/status"
	run ! grep -q "$AWS_SECRET" "$MNT/providers/aws/status"
}

@test "aws: missing credentials or bucket are named in status and in new's error; nothing is made" {
	sfs_unmount
	(
		unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
		sfs_mount --log-level 3
	)
	grep -qx 'configured false' "$MNT/providers/aws/status"
	grep -q '^reason .*AWS_ACCESS_KEY_ID.*AWS_SECRET_ACCESS_KEY' "$MNT/providers/aws/status"
	run ctl_write "$MNT/ctl" "new a1 provider=aws bucket=bkt"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "*AWS_ACCESS_KEY_ID* ]]
	sfs_unmount
	sfs_mount --log-level 3
	run ctl_write "$MNT/ctl" "new a2 provider=aws"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "*"bucket="*"aws.bucket"* ]]
	run ctl_write "$MNT/ctl" "new a3 provider=aws bucket=bkt cpu=lots"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: aws: cpu=lots"* ]]
	[ -z "$(curl -s "http://127.0.0.1:$EMU_PORT/_emu/objects?bucket=bkt" | tr -d '{}')" ]
}

@test "aws: workspace read, write, ls, mkdir, mv, rm; objects carry mode and mtime" {
	ctl_write "$MNT/ctl" "new w1 provider=aws bucket=bkt prefix=team/ws"
	grep -qx 'provider aws' "$MNT/w1/status"
	W="$MNT/w1/workspace"
	echo hello >"$W/a.txt"
	mkdir "$W/d"
	printf 'x%.0s' $(seq 1 100) >"$W/d/b.txt"
	[ "$(cat "$W/a.txt")" = hello ]
	[ "$(s3_obj team/ws/w1/a.txt size)" = 6 ]
	[ "$(s3_obj team/ws/w1/a.txt meta.mode)" = 100644 ]
	[ -n "$(s3_obj team/ws/w1/a.txt meta.mtime)" ]
	[ "$(s3_obj team/ws/w1/d/ meta.mode)" = 40755 ]
	[ "$(s3_obj team/ws/w1/d/b.txt size)" = 100 ]
	[ "$(ls "$W" | tr '\n' ' ')" = "a.txt d " ]
	[ -d "$W/d" ]
	mv "$W/a.txt" "$W/d/c.txt"
	[ -z "$(s3_obj team/ws/w1/a.txt size)" ]
	[ "$(s3_obj team/ws/w1/d/c.txt size)" = 6 ]
	mv "$W/d" "$W/e"
	[ "$(cat "$W/e/c.txt")" = hello ]
	[ "$(s3_obj team/ws/w1/e/b.txt size)" = 100 ]
	[ -z "$(s3_obj team/ws/w1/d/b.txt size)" ]
	run rmdir "$W/e"
	[ "$status" -ne 0 ]
	rm "$W/e/b.txt" "$W/e/c.txt"
	rmdir "$W/e"
	[ -z "$(s3_obj team/ws/w1/e/ size)" ]
	[ -z "$(ls "$W")" ]
	echo '#!/bin/sh' >"$W/run.sh"
	chmod 0755 "$W/run.sh"
	[ "$(s3_obj team/ws/w1/run.sh meta.mode)" = 100755 ]
	# a second daemon reads it all back from the bucket
	sfs_unmount
	sfs_mount --log-level 3
	[ "$(cat "$MNT/w1/workspace/run.sh")" = '#!/bin/sh' ]
	# names that sort before "g/" ("g-1", "g.txt") do not hide directory g
	# from the provider's stat (chmod asks it)
	W="$MNT/w1/workspace"
	mkdir "$W/g"
	echo in >"$W/g/in"
	echo 1 >"$W/g-1"
	echo 2 >"$W/g-2"
	echo t >"$W/g.txt"
	sfs_unmount
	sfs_mount --log-level 3
	[ "$(stat -c %F "$MNT/w1/workspace/g")" = directory ]
	chmod 0700 "$MNT/w1/workspace/g"
	[ "$(s3_obj team/ws/w1/g/ meta.mode)" = 40700 ]
	[ "$(cat "$MNT/w1/workspace/g/in")" = in ]
}

@test "aws: keys named ./, ../, . or .. or holding // are left out of listings, once each . and .." {
	ctl_write "$MNT/ctl" "new x1 provider=aws bucket=bkt"
	W="$MNT/x1/workspace"
	echo ok >"$W/ok.txt"
	mkdir "$W/d"
	# made by something else, signed as the SDKs do (the path as it is)
	local k sum
	sum=$(printf x | sha256sum | cut -d' ' -f1)
	for k in $ODD_KEYS; do
		curl -sf -m 5 --path-as-is --aws-sigv4 aws:amz:us-east-1:s3 -u "AKIDSFSTEST:$AWS_SECRET" \
			-H "x-amz-content-sha256: $sum" -X PUT --data-binary x "$EMU/bkt/x1/$k" >/dev/null
	done
	[ "$(s3_obj x1/../b size)" = 1 ]
	[ "$(s3_obj x1//c size)" = 1 ]
	odd_keys_left_out "$W" "$MNT/x1"
}

@test "aws: an empty directory (only its marker object) is listed by a second daemon" {
	ctl_write "$MNT/ctl" "new x1 provider=aws bucket=bkt"
	mkdir "$MNT/x1/workspace/empty"
	echo ok >"$MNT/x1/workspace/f"
	[ "$(s3_obj x1/empty/ meta.mode)" = 40755 ]
	sfs_unmount
	sfs_mount --log-level 3
	[ "$(ls "$MNT/x1/workspace" | tr '\n' ' ')" = "empty f " ]
	[ -d "$MNT/x1/workspace/empty" ]
}

@test "aws: editor saves (temp + rename, backup, vim) land in the bucket" {
	ctl_write "$MNT/ctl" "new e1 provider=aws bucket=bkt"
	W="$MNT/e1/workspace"
	echo v1 >"$W/notes.txt"
	# temp + rename, as most editors save
	echo v2 >"$W/.notes.txt.swp"
	mv "$W/.notes.txt.swp" "$W/notes.txt"
	[ "$(cat "$W/notes.txt")" = v2 ]
	# vim with a backup file
	HOME="$BATS_TEST_TMPDIR" timeout 20 vim -u NONE -i NONE -n -es \
		-c 'set backup' -c 'set backupdir=.' -c '%s/v2/v3/' -c 'wq' "$W/notes.txt" </dev/null
	[ "$(cat "$W/notes.txt")" = v3 ]
	sfs_unmount
	[ "$(s3_obj e1/notes.txt size)" = 3 ]
	[ "$(curl -s "http://127.0.0.1:$EMU_PORT/_emu/objects?bucket=bkt" |
		python3 -c 'import json,sys,hashlib; print(json.load(sys.stdin)["e1/notes.txt"]["sha256"])')" = \
		"$(printf 'v3\n' | sha256sum | cut -d' ' -f1)" ]
}

@test "aws: a file over 8 MiB goes up as a multipart upload and reads back whole" {
	ctl_write "$MNT/ctl" "new m1 provider=aws bucket=bkt"
	head -c $((9 * 1024 * 1024 + 123)) /dev/urandom >"$BATS_TEST_TMPDIR/big"
	cp "$BATS_TEST_TMPDIR/big" "$MNT/m1/workspace/big"
	grep -q 'POST /bkt/m1/big?uploads ' "$EMU_DIR/requests.log"
	grep -q 'PUT /bkt/m1/big?partNumber=2&uploadId=' "$EMU_DIR/requests.log"
	[ "$(s3_obj m1/big sha256)" = "$(sha256sum <"$BATS_TEST_TMPDIR/big" | cut -d' ' -f1)" ]
	sfs_unmount
	sfs_mount --log-level 3
	cmp "$BATS_TEST_TMPDIR/big" "$MNT/m1/workspace/big"
}

@test "aws: throttling (503 SlowDown, Retry-After) is retried; a write during an outage fails with EIO and lands later" {
	# long attribute times: only write-backs meet the outage
	sfs_unmount
	sfs_mount --log-level 3 -o remote.attr_timeout=60
	ctl_write "$MNT/ctl" "new f1 provider=aws bucket=bkt"
	W="$MNT/f1/workspace"
	s3_faults '{"slow_down":2}'
	echo throttled >"$W/t.txt"
	[ "$(s3_obj f1/t.txt size)" = 10 ]
	grep -q ' 503$' "$EMU_DIR/requests.log"
	# every PUT fails: close reports EIO, the bytes stay, and land once S3 is back
	echo before >"$W/keep.txt"
	s3_faults '{"fail_methods":"PUT"}'
	run write_checked "$W/keep.txt" precious
	[ "$status" -eq 5 ]
	[ "$output" = "close: errno 5" ]
	grep -rqx 'keep.txt' "$STATE"/sandboxes/*/rcache/*.pending
	[ "$(cat "$W/keep.txt")" = precious ]
	[ "$(s3_obj f1/keep.txt size)" = 7 ]
	s3_faults '{"fail_methods":""}'
	wait_for no_pending
	[ "$(s3_obj f1/keep.txt size)" = 8 ]
	[ "$(cat "$W/keep.txt")" = precious ]
}

@test "aws: a wrong secret key fails with SignatureDoesNotMatch, clear and redacted" {
	sfs_unmount
	(
		export AWS_SECRET_ACCESS_KEY="wrong-$AWS_SECRET"
		sfs_mount --log-level 3
	)
	run ctl_write "$MNT/ctl" "new s1 provider=aws bucket=bkt"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: aws: s3 PUT s3://bkt/s1/: SignatureDoesNotMatch"*"AWS_SECRET_ACCESS_KEY"* ]]
	run ! grep -q "wrong-$AWS_SECRET" "$BATS_TEST_TMPDIR/daemon.log"
	# and a bucket that does not exist is NoSuchBucket, named
	sfs_unmount
	sfs_mount --log-level 3
	run ctl_write "$MNT/ctl" "new s2 provider=aws bucket=nosuch"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: aws: s3 PUT s3://nosuch/s2/: NoSuchBucket"* ]]
	# AccessDenied the same way
	s3_faults '{"deny":true}'
	run ctl_write "$MNT/ctl" "new s3 provider=aws bucket=bkt"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: aws: s3 PUT s3://bkt/s3/: AccessDenied"* ]]
}

@test "aws: the secret key never appears in anything sandboxfs writes" {
	ctl_write "$MNT/ctl" "new g1 provider=aws bucket=bkt"
	echo data >"$MNT/g1/workspace/f"
	cat "$MNT/g1/status" "$MNT/providers/aws/status" >/dev/null
	run ctl_write "$MNT/g1/ctl" "exec env"
	sfs_unmount
	run ! grep -rqF "$AWS_SECRET" "$STATE" "$BATS_TEST_TMPDIR/daemon.log"
}

@test "aws: virtual-host addressing (BUCKET.localhost) with a session token, signed and checked" {
	sfs_unmount
	s3_stop
	TOKEN="tok-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
	s3_start --session-token "$TOKEN"
	export AWS_SESSION_TOKEN="$TOKEN" AWS_ENDPOINT_URL="http://localhost:$EMU_PORT"
	sfs_mount --log-level 3 -o aws.s3_addressing=virtual
	grep -q "^reason ready: S3 at http://localhost:$EMU_PORT (virtual-host-style" "$MNT/providers/aws/status"
	ctl_write "$MNT/ctl" "new v1 provider=aws bucket=bkt"
	echo vhost >"$MNT/v1/workspace/f"
	[ "$(s3_obj v1/f size)" = 6 ]
	# the bucket was in the host name, not the path
	grep -q '^[0-9:]* PUT /v1/f 200$' "$EMU_DIR/requests.log"
	run grep -c ' /bkt/' "$EMU_DIR/requests.log"
	[ "$output" = 0 ]
	sfs_unmount
	# a wrong session token is refused, clearly
	(
		export AWS_SESSION_TOKEN="bad-token"
		sfs_mount --log-level 3 -o aws.s3_addressing=virtual
	)
	run ctl_write "$MNT/ctl" "new v2 provider=aws bucket=bkt"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: aws: s3 PUT s3://bkt/v2/: InvalidToken"* ]]
	sfs_unmount
	run ! grep -rqF "$TOKEN" "$STATE" "$BATS_TEST_TMPDIR/daemon.log"
}

@test "aws: keys from an AWS_PROFILE of ~/.aws/credentials, region from ~/.aws/config" {
	sfs_unmount
	s3_stop
	s3_start --region eu-west-1
	cat >"$BATS_TEST_TMPDIR/credentials" <<-EOT
		[default]
		aws_access_key_id = AKIDWRONG
		aws_secret_access_key = not-this-one
		[dev]
		aws_access_key_id = AKIDSFSTEST
		aws_secret_access_key = $AWS_SECRET
	EOT
	printf '[profile dev]\nregion = eu-west-1\n' >"$BATS_TEST_TMPDIR/config"
	(
		unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION
		export AWS_PROFILE=dev AWS_SHARED_CREDENTIALS_FILE="$BATS_TEST_TMPDIR/credentials" \
			AWS_CONFIG_FILE="$BATS_TEST_TMPDIR/config"
		sfs_mount --log-level 3
	)
	grep -q "^reason ready: .*region eu-west-1, keys from credentials file $BATS_TEST_TMPDIR/credentials \[dev\]" \
		"$MNT/providers/aws/status"
	ctl_write "$MNT/ctl" "new p1 provider=aws bucket=bkt"
	echo profile >"$MNT/p1/workspace/f"
	[ "$(s3_obj p1/f size)" = 8 ]
	sfs_unmount
	# a profile nobody has is named, with both files
	(
		unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
		export AWS_PROFILE=nosuch AWS_SHARED_CREDENTIALS_FILE="$BATS_TEST_TMPDIR/credentials" \
			AWS_CONFIG_FILE="$BATS_TEST_TMPDIR/config"
		sfs_mount --log-level 3
	)
	grep -qx 'configured false' "$MNT/providers/aws/status"
	grep -q "^reason aws: profile 'nosuch' (AWS_PROFILE) is in neither" "$MNT/providers/aws/status"
}

# ---- resume by id: the settings beside the prefix are the bucket's word

# put_settings NAME TEXT: s3://bkt/.sandboxfs/NAME/settings.json as whoever
# can write the bucket left it.
put_settings() {
	local sum
	sum=$(printf '%s' "$2" | sha256sum | cut -d' ' -f1)
	curl -sf -m 5 --aws-sigv4 aws:amz:us-east-1:s3 -u "AKIDSFSTEST:$AWS_SECRET" \
		-H "x-amz-content-sha256: $sum" -X PUT --data-binary "$2" \
		"$EMU/bkt/.sandboxfs/$1/settings.json" >/dev/null
}

bucket_keys() {
	curl -s -m 5 "$EMU/_emu/objects?bucket=bkt" |
		python3 -c 'import json, sys; print(" ".join(sorted(json.load(sys.stdin))))'
}

# settings_refused TEXT WHAT: a resume of s1 whose settings.json is TEXT
# fails with EINVAL saying WHAT of it; nothing is made.
settings_refused() {
	put_settings s1 "$1"
	local keys
	keys=$(bucket_keys)
	run ctl_write "$MNT/ctl" "resume s2 provider=aws id=bkt/s1/"
	[ "$status" -ne 0 ] || return 1
	[[ "$output" == *"Invalid argument"* ]] || return 1
	[[ "$output" == *"error: aws: resume: s3://bkt/.sandboxfs/s1/settings.json $2"* ]] || return 1
	# the value is shown escaped and cut: one line, never megabytes
	[ "$(printf '%s\n' "$output" | grep -c '^error: ')" = 1 ] || return 1
	[ "${#output}" -lt 1000 ] || return 1
	[ ! -e "$MNT/s2" ] || return 1
	[ "$(bucket_keys)" = "$keys" ]
}

@test "aws: resume by id refuses settings beside the prefix that new would refuse, naming the setting; good ones resume" {
	ctl_write "$MNT/ctl" "new s1 provider=aws bucket=bkt cluster=c1 cpu=256" >/dev/null
	echo kept >"$MNT/s1/workspace/f"
	ctl_write "$MNT/ctl" "forget s1" >/dev/null
	settings_refused '{"job": {"cluster": "c1", "cpu": "256\nstate running"}}' \
		'has a bad cpu ("256\x0astate running"): expected a positive number'
	settings_refused '{"job": {"runner": "../../x"}}' \
		'has a bad runner ("../../x"): expected ecs or codebuild'
	settings_refused "{\"job\": {\"memory\": \"$(printf '1%.0s' $(seq 1 20000))\"}}" \
		'has a bad memory ("111111111111111111111111111111111111111111111111...")'
	settings_refused '{"job": {"endpoint": "http://127.0.0.1:1/"}}' \
		'has a setting new does not take ("endpoint")'
	settings_refused '{"job": {"cluster": ["c1"]}}' 'has a cluster that is not a string'
	settings_refused '["job"]' 'is not the job settings new writes'
	settings_refused 'not json' 'is not the job settings new writes'
	# new refuses the same values
	run ctl_write "$MNT/ctl" "new s3 provider=aws bucket=bkt runner=../../x"
	[[ "$output" == *"error: aws: runner=../../x: expected ecs or codebuild"* ]]
	[ ! -e "$MNT/s3" ]
	# what new wrote resumes, with the workspace
	put_settings s1 '{"job": {"cluster": "c1", "cpu": "256"}}'
	ctl_write "$MNT/ctl" "resume s2 provider=aws id=bkt/s1/" >/dev/null
	grep -qx 'state running' "$MNT/s2/status"
	[ "$(cat "$MNT/s2/workspace/f")" = kept ]
}
