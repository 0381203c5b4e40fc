#!/usr/bin/env bats
# Secrets (SPEC §12): secret.NAME=env:VAR|file:PATH on new and the `secret`
# verb; the value reaches runs as NAME and nothing sandboxfs writes shows it.

load helpers
load docker_helpers
load daytona_helpers

# Values long enough to be unmistakable; the env one comes from the
# daemon's own environment.
ENV_VALUE="sfs-env-secret-4f8a2c91d7"
FILE_VALUE="sfs-file-secret-b03e77a1c5"

setup() {
	export SFS_TEST_SECRET="$ENV_VALUE"
	SECRET_FILE="$BATS_TEST_TMPDIR/secret.txt"
	printf '%s\n' "$FILE_VALUE" >"$SECRET_FILE"
	sfs_mount
}

teardown() {
	cd "$BATS_TEST_TMPDIR"
	sfs_teardown
	docker_cleanup
	emu_stop
}

# wait_run SANDBOX N: waits until run N ended.
wait_run() {
	timeout 20 cat "$MNT/$1/runs/$2/wait" >/dev/null
}

# no_value_anywhere VALUE: the state directory (but the runs' own journal
# files: what a run printed, kept as printed), the daemon log and every
# synthetic file of the mount hold no VALUE.
no_value_anywhere() {
	local v="$1" f
	run grep -rlF --exclude=journal --exclude=journal.mirror -- "$v" "$STATE"
	[ "$status" -eq 1 ]
	run grep -cF -- "$v" "$BATS_TEST_TMPDIR/daemon.log"
	[ "$output" = 0 ]
	while IFS= read -r f; do
		[ -r "$f" ] || continue
		case "$f" in */stdin) continue ;; esac
		# audit never ends: read what it holds without waiting for more
		if [[ "$f" == */audit ]]; then
			run grep -cF -- "$v" <(dd if="$f" iflag=nonblock status=none)
		else
			run timeout 10 grep -cF -- "$v" "$f"
		fi
		[ "$output" = 0 ] || { echo "$f shows the value" >&2; return 1; }
	done < <(find "$MNT" -path "$MNT/*/workspace" -prune -o -type f -print)
}

# bats test_tags=core
@test "a secret from the daemon's env and one from a file reach every run as NAME; status lists names only" {
	echo "new demo secret.API_TOKEN=env:SFS_TEST_SECRET secret.DB_PASS=file:$SECRET_FILE" >"$MNT/ctl"
	grep -qx 'secrets API_TOKEN DB_PASS' "$MNT/demo/status"
	echo 'exec printf "%s|%s\n" "$API_TOKEN" "$DB_PASS" >"$PWD/seen"; env | grep -c "^SFS_TEST_SECRET=" || true' >"$MNT/demo/ctl"
	wait_run demo 1
	ws=$(awk '$1=="workspace"{print $2}' "$MNT/demo/status")
	# the file's one trailing newline is not part of the value
	[ "$(cat "$ws/seen")" = "$ENV_VALUE|$FILE_VALUE" ]
	# the variable it was read from is not passed on under its own name
	[ "$(cat "$MNT/demo/runs/1/journal")" = 0 ]
	rm "$ws/seen"
	# the registry keeps the references, never the values
	grep -q '"from": "env:SFS_TEST_SECRET"' "$STATE/registry.json"
	grep -q "\"from\": \"file:$SECRET_FILE\"" "$STATE/registry.json"
	no_value_anywhere "$ENV_VALUE"
	no_value_anywhere "$FILE_VALUE"
}

# bats test_tags=core
@test "bad secrets fail new with a clear error and create nothing" {
	big="$BATS_TEST_TMPDIR/big"
	head -c 70000 /dev/zero | tr '\0' x >"$big"
	printf 'abc\n' >"$BATS_TEST_TMPDIR/short"
	mkfifo "$BATS_TEST_TMPDIR/fifo"
	local spec want
	while IFS='|' read -r spec want; do
		run ctl_write "$MNT/ctl" "new bad $spec"
		[ "$status" -ne 0 ] || { echo "new bad $spec succeeded" >&2; return 1; }
		[[ "$output" == *error:*"$want"* ]] || { echo "$spec: $output" >&2; return 1; }
		[ ! -e "$MNT/bad" ]
	done <<EOF
secret.1BAD=env:SFS_TEST_SECRET|bad secret name "1BAD"
secret.A-B=env:SFS_TEST_SECRET|bad secret name "A-B"
secret.X=env:SFS_NO_SUCH_VARIABLE|env:SFS_NO_SUCH_VARIABLE is not set in the daemon's environment
secret.X=file:$BATS_TEST_TMPDIR/missing|No such file or directory
secret.X=file:$BATS_TEST_TMPDIR|is not a regular file
secret.X=file:$BATS_TEST_TMPDIR/fifo|is not a regular file
secret.X=file:$big|holds more than 65536 bytes
secret.X=file:$BATS_TEST_TMPDIR/short|holds 3 bytes, fewer than 4
secret.X=file:relative/path|is not an absolute path
secret.X=vault:thing|its source is env:VAR or file:PATH
redact=everything|redact=everything: expected journal or none
EOF
	# nothing was made: no directory, no registry entry, no state dir
	[ "$(ls "$STATE/sandboxes" | wc -l)" -eq 0 ]
	run ls "$MNT"
	[[ "$output" != *bad* ]]
}

# bats test_tags=core
@test "a secret file inside the mount itself (a run's wait, a journal) is refused at once, never read" {
	echo 'new own' >"$MNT/ctl"
	echo 'exec sleep 302' >"$MNT/own/ctl"
	ln -s "$MNT/own/runs/1/wait" "$BATS_TEST_TMPDIR/link"
	# LINE into ctl FILE, its answer printed; 124 if it is still waiting
	# after 10 s (reading the wait would park a daemon thread until the run ends)
	write_ctl() {
		timeout 10 bash -c 'exec 7<>"$1"; printf "%s\n" "$2" >&7; rc=$?; cat <&7; exit $rc' _ "$@"
	}
	local f
	for f in "$MNT/own/runs/1/wait" "$MNT/own/runs/1/journal" "$BATS_TEST_TMPDIR/link"; do
		run write_ctl "$MNT/own/ctl" "secret K=file:$f"
		[ "$status" -ne 0 ] && [ "$status" -ne 124 ] || { echo "$f: status $status" >&2; return 1; }
		[[ "$output" == *"error:"*"is a file of the sandboxfs mount itself"* ]]
	done
	run write_ctl "$MNT/ctl" "new own2 secret.K=file:$MNT/own/runs/1/wait"
	[ "$status" -ne 0 ] && [ "$status" -ne 124 ]
	[[ "$output" == *"is a file of the sandboxfs mount itself"* ]]
	[ ! -e "$MNT/own2" ]
	run grep '^secrets' "$MNT/own/status"
	[[ "$output" != *K* ]]
	echo kill >"$MNT/own/ctl"
}

# bats test_tags=core
@test "a secret file another user owns or may change (the file, a directory or a symlink on its path) is refused; a sticky /tmp-like directory is fine" {
	echo 'new own' >"$MNT/ctl"
	local d="$BATS_TEST_TMPDIR/sec" f want
	mkdir -p "$d/theirs" "$d/sticky"
	chmod 1777 "$d/sticky"
	chown nobody "$d/theirs"
	printf 'value-of-nobody\n' >"$d/nobody.txt"
	chown nobody "$d/nobody.txt"
	printf 'value-world-writable\n' >"$d/open.txt"
	chmod 0666 "$d/open.txt"
	printf 'value-group-writable\n' >"$d/group.txt"
	chmod 0620 "$d/group.txt"
	# a sandbox's workspace (its uid's) where a run put a file or a symlink
	# to a root file
	printf 'value-in-their-dir\n' >"$d/theirs/token"
	ln -s /etc/shadow "$d/link"
	chown -h nobody "$d/link"
	printf 'value-in-sticky-dir\n' >"$d/sticky/mine"
	while IFS='|' read -r f want; do
		run ctl_write "$MNT/own/ctl" "secret K=file:$f"
		[ "$status" -ne 0 ] || { echo "$f was taken" >&2; return 1; }
		[[ "$output" == *"error:"*"$want"* ]] || { echo "$f: $output" >&2; return 1; }
		[[ "$output" == *"Operation not permitted"* ]]
	done <<EOF
$d/nobody.txt|belongs to uid 65534
$d/open.txt|may be written by others (mode 0666)
$d/group.txt|may be written by others (mode 0620)
$d/theirs/token|is in $d/theirs (uid 65534, mode 0755), which someone else may change
$d/link|goes through the symlink $d/link of uid 65534
EOF
	run grep '^secrets' "$MNT/own/status"
	[[ "$output" != *K* ]]
	# and nothing of theirs was registered: it is not redacted
	echo "exec echo value-of-nobody value-in-their-dir" >"$MNT/own/ctl"
	timeout 20 cat "$MNT/own/runs/1/wait" >/dev/null
	grep -qx "value-of-nobody value-in-their-dir" "$MNT/own/runs/1/journal"
	ctl_write "$MNT/own/ctl" "secret K=file:$d/sticky/mine"
	grep -qx 'secrets K' "$MNT/own/status"
}

@test "the secret verb sets, replaces and removes a secret for later runs, saved as a reference" {
	mkdir "$MNT/demo"
	run ctl_write "$MNT/demo/ctl" "secret API_KEY=file:$SECRET_FILE"
	[ "$status" -eq 0 ]
	grep -qx 'secrets API_KEY' "$MNT/demo/status"
	echo 'exec printf "%s\n" "${API_KEY:-unset}" | md5sum' >"$MNT/demo/ctl"
	wait_run demo 1
	[ "$(cat "$MNT/demo/runs/1/journal")" = "$(printf '%s\n' "$FILE_VALUE" | md5sum)" ]
	echo "secret API_KEY=env:SFS_TEST_SECRET" >"$MNT/demo/ctl"
	echo 'exec printf "%s\n" "${API_KEY:-unset}" | md5sum' >"$MNT/demo/ctl"
	wait_run demo 2
	[ "$(cat "$MNT/demo/runs/2/journal")" = "$(printf '%s\n' "$ENV_VALUE" | md5sum)" ]
	grep -q '"from": "env:SFS_TEST_SECRET"' "$STATE/registry.json"
	# NAME= removes it
	echo "secret API_KEY=" >"$MNT/demo/ctl"
	grep -qx 'secrets ' "$MNT/demo/status"
	echo 'exec printf "%s\n" "${API_KEY:-unset}"' >"$MNT/demo/ctl"
	wait_run demo 3
	[ "$(cat "$MNT/demo/runs/3/journal")" = unset ]
	run grep -c API_KEY "$STATE/registry.json"
	[ "$output" = 0 ]
	# a bad one changes nothing
	run ctl_write "$MNT/demo/ctl" "secret OK=env:SFS_TEST_SECRET MISSING=env:SFS_NO_SUCH_VARIABLE"
	[ "$status" -ne 0 ]
	[[ "$output" == *error:*"SFS_NO_SUCH_VARIABLE is not set"* ]]
	grep -qx 'secrets ' "$MNT/demo/status"
	no_value_anywhere "$ENV_VALUE"
	no_value_anywhere "$FILE_VALUE"
}

@test "a restarted daemon reads secrets again; one it cannot read fails runs saying which" {
	echo "new demo secret.API_TOKEN=env:SFS_TEST_SECRET" >"$MNT/ctl"
	sfs_unmount
	sfs_mount
	echo 'exec printf "%s\n" "$API_TOKEN" | md5sum' >"$MNT/demo/ctl"
	wait_run demo 1
	[ "$(cat "$MNT/demo/runs/1/journal")" = "$(printf '%s\n' "$ENV_VALUE" | md5sum)" ]
	sfs_unmount
	unset SFS_TEST_SECRET
	sfs_mount
	grep -q '^error the secret API_TOKEN: env:SFS_TEST_SECRET is not set' "$MNT/demo/status"
	run ctl_write "$MNT/demo/ctl" 'exec true'
	[ "$status" -ne 0 ]
	[[ "$output" == *"the secret API_TOKEN could not be read from env:SFS_TEST_SECRET"* ]]
	[ "$(tree_runs demo)" = 1 ]
	# setting it again from a source this daemon can read repairs it
	echo "secret API_TOKEN=file:$SECRET_FILE" >"$MNT/demo/ctl"
	echo 'exec printf "%s\n" "$API_TOKEN" | md5sum' >"$MNT/demo/ctl"
	wait_run demo 2
	[ "$(cat "$MNT/demo/runs/2/journal")" = "$(printf '%s\n' "$FILE_VALUE" | md5sum)" ]
}

# bats test_tags=core
@test "a file: secret beside the mount point (the same host filesystem) is read again after a restart; one inside the mount is still refused" {
	# SECRET_FILE is $BATS_TEST_TMPDIR/secret.txt, and $MNT is $BATS_TEST_TMPDIR/mnt
	[ "$(stat -c %d "$SECRET_FILE")" = "$(stat -c %d "$BATS_TEST_TMPDIR")" ]
	echo "new demo secret.DB_PASS=file:$SECRET_FILE" >"$MNT/ctl"
	sfs_unmount
	sfs_mount
	run grep '^error' "$MNT/demo/status"
	[ "$status" -eq 1 ]
	echo 'exec printf "%s\n" "$DB_PASS" | md5sum' >"$MNT/demo/ctl"
	wait_run demo 1
	[ "$(cat "$MNT/demo/runs/1/journal")" = "$(printf '%s\n' "$FILE_VALUE" | md5sum)" ]
	run ctl_write "$MNT/demo/ctl" "secret K=file:$MNT/demo/status"
	[ "$status" -ne 0 ]
	[[ "$output" == *"is a file of the sandboxfs mount itself"* ]]
}

# bats test_tags=core
@test "redact=journal: journal reads hide a value even when the run writes it in halves and readers read 1 byte at a time" {
	echo "new demo secret.API_TOKEN=env:SFS_TEST_SECRET redact=journal" >"$MNT/ctl"
	grep -qx 'redact journal' "$MNT/demo/status"
	# the value in two halves a second apart, then whole
	echo 'exec v="$API_TOKEN"; printf "before %s" "$(printf %s "$v" | cut -c1-12)"; sleep 1; printf "%s after\n" "$(printf %s "$v" | cut -c13-)"; echo "again $v end"' >"$MNT/demo/ctl"
	# live readers: one byte per read, and 7 bytes per read
	dd if="$MNT/demo/runs/1/journal" of="$BATS_TEST_TMPDIR/bs1" bs=1 status=none &
	d1=$!
	dd if="$MNT/demo/runs/1/journal" of="$BATS_TEST_TMPDIR/bs7" bs=7 status=none &
	d7=$!
	# while the first half is out, it is held back from readers
	sleep 0.5
	[ "$(stat -c %s "$MNT/demo/runs/1/journal")" -le 7 ]
	wait "$d1"
	wait "$d7"
	# each byte of the value is replaced: "[redacted]", then one * a byte
	mask="[redacted]$(printf '%*s' $((${#ENV_VALUE} - 10)) '' | tr ' ' '*')"
	want="before $mask after
again $mask end"
	[ "$(cat "$BATS_TEST_TMPDIR/bs1")" = "$want" ]
	[ "$(cat "$BATS_TEST_TMPDIR/bs7")" = "$want" ]
	[ "$(cat "$MNT/demo/journal")" = "$want" ]
	# same length as what the run wrote: offsets mean the same bytes
	raw=$(ls "$STATE"/sandboxes/*/runs/1/journal)
	[ "$(stat -c %s "$MNT/demo/runs/1/journal")" -eq "$(stat -c %s "$raw")" ]
	[ "$(dd if="$MNT/demo/runs/1/journal" bs=1 skip=10 count=20 status=none)" = "${want:10:20}" ]
	[ "$(tail -c 16 "$MNT/demo/runs/1/journal")" = "${want: -15}" ]
	no_value_anywhere "$ENV_VALUE"
}

@test "without redact=journal a run's journal reads as the run wrote it" {
	echo "new demo secret.API_TOKEN=env:SFS_TEST_SECRET" >"$MNT/ctl"
	grep -qx 'redact none' "$MNT/demo/status"
	echo 'exec echo "$API_TOKEN"' >"$MNT/demo/ctl"
	wait_run demo 1
	[ "$(cat "$MNT/demo/runs/1/journal")" = "$ENV_VALUE" ]
}

@test "docker: a secret reaches runs through the exec API, never the container's config, and redact=journal hides it" {
	docker_require
	echo "new dk provider=docker image=$SFS_DOCKER_IMAGE secret.API_TOKEN=env:SFS_TEST_SECRET redact=journal" >"$MNT/ctl"
	echo 'exec printf "%s\n" "$API_TOKEN" | md5sum' >"$MNT/dk/ctl"
	wait_run dk 1
	[ "$(cat "$MNT/dk/runs/1/journal")" = "$(printf '%s\n' "$ENV_VALUE" | md5sum)" ]
	id=$(awk '$1=="id"{print $2}' "$MNT/dk/status")
	run docker inspect "$id"
	[ "$status" -eq 0 ]
	[[ "$output" != *"$ENV_VALUE"* ]]
	echo 'exec echo "tok $API_TOKEN end"' >"$MNT/dk/ctl"
	wait_run dk 2
	[[ "$(cat "$MNT/dk/runs/2/journal")" == "tok [redacted]"*" end" ]]
	no_value_anywhere "$ENV_VALUE"
}

@test "daytona: a secret reaches runs (as the journal wrapper's arguments) and nothing sandboxfs writes" {
	sfs_unmount
	dt_setup
	dt_new dt "secret.API_TOKEN=env:SFS_TEST_SECRET"
	out=$(dt_run dt 'printf "%s\n" "$API_TOKEN" | md5sum')
	[ "$out" = "$(printf '%s\n' "$ENV_VALUE" | md5sum)" ]
	grep -qx 'secrets API_TOKEN' "$MNT/dt/status"
	# a remote workspace's changes are audited too (fs/remote's rws_where)
	echo x >"$MNT/dt/workspace/remote-file"
	wait_for eval 'dd if="$MNT/dt/audit" iflag=nonblock status=none | grep -q " create workspace/remote-file 0$"'
	no_value_anywhere "$ENV_VALUE"
}

tree_runs() {
	awk '$1=="runs"{print $2}' "$MNT/$1/status"
}
