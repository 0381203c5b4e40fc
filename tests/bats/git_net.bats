#!/usr/bin/env bats
# bats file_tags=git
# new … source= over ssh:// (libgit2's libssh2 transport) and https:// (its
# TLS stream) against servers the test starts on 127.0.0.1: a private sshd
# with its own host key, config and authorized_keys, and git http-backend
# behind python's TLS server with a CA made here.  Nothing reaches outside
# this machine.

load helpers
load git_helpers

setup() {
	REPO="$BATS_TEST_TMPDIR/repo"
	git -c init.defaultBranch=main init -q "$REPO"
	echo one >"$REPO/a.txt"
	git -C "$REPO" add a.txt
	git -C "$REPO" -c user.email=t@example.org -c user.name=t commit -qm one
	git -C "$REPO" checkout -qb feature
	echo feat >"$REPO/f.txt"
	git -C "$REPO" add f.txt
	git -C "$REPO" -c user.email=t@example.org -c user.name=t commit -qm feat
	git -C "$REPO" checkout -q main
}

teardown() {
	sfs_teardown
	if [ -n "${SSHD_PID:-}" ]; then kill "$SSHD_PID" 2>/dev/null || true; fi
	if [ -n "${AGENT_PID:-}" ]; then kill "$AGENT_PID" 2>/dev/null || true; fi
	if [ -n "${HTTPS_PID:-}" ]; then kill "$HTTPS_PID" 2>/dev/null || true; fi
	if [ -n "${HB:-}" ]; then rm -rf "$HB"; fi
}

ws() { awk '$1=="workspace"{print $2}' "$MNT/$1/status"; }

# cloned NAME URL REF: `new NAME source=URL ref=REF` succeeds, and the
# workspace is REPO's REF with origin URL
cloned() {
	run ctl_write "$MNT/ctl" "new $1 source=$2 ref=$3"
	[ "$status" -eq 0 ]
	[ "$output" = "$1" ]
	w=$(ws "$1")
	[ "$(git -C "$w" rev-parse HEAD)" = "$(git -C "$REPO" rev-parse "$3")" ]
	[ "$(git -C "$w" remote get-url origin)" = "$2" ]
}

# nothing_left: no sandbox, no state dir, no temporary mirror
nothing_left() {
	[ "$(ls "$MNT")" = "$(printf 'ctl\nproviders')" ]
	[ -z "$(ls -A "$STATE/sandboxes" 2>/dev/null)" ]
	[ -z "$(find "$STATE/git" -name '.tmp-*' 2>/dev/null)" ]
	[ -z "$(ls -A "$STATE/git/mirrors" 2>/dev/null | grep '\.git$')" ]
}

# refused URL TEXT [MOUNT OPTIONS…]: mounted with the options, `new s
# source=URL` fails saying TEXT and leaves nothing; unmounted after
refused() {
	local url=$1 want=$2
	shift 2
	sfs_mount "$@"
	run ctl_write "$MNT/ctl" "new s source=$url"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: source: "*"$want"* ]]
	nothing_left
	sfs_unmount
}

# serve_ssh: sshd on 127.0.0.1:$SSH_PORT (foreground, its own config, host
# key and authorized_keys in $SD); keys: agent_key (no passphrase), file_key
# (passphrase $SSH_PASS); known_hosts: the right host key for [127.0.0.1]:PORT
serve_ssh() {
	SD="$BATS_TEST_TMPDIR/sshd"
	mkdir -p "$SD" /run/sshd
	ssh-keygen -q -t ed25519 -N '' -C host -f "$SD/host_key"
	ssh-keygen -q -t ed25519 -N '' -C other -f "$SD/other_host_key"
	ssh-keygen -q -t ed25519 -N '' -C agent -f "$SD/agent_key"
	SSH_PASS="pp-$RANDOM-secret-$RANDOM"
	ssh-keygen -q -t ed25519 -N "$SSH_PASS" -C file -f "$SD/file_key"
	cat "$SD/agent_key.pub" "$SD/file_key.pub" >"$SD/authorized_keys"
	SSH_PORT=$((20000 + RANDOM % 20000))
	cat >"$SD/config" <<-EOF
	ListenAddress 127.0.0.1
	Port $SSH_PORT
	HostKey $SD/host_key
	AuthorizedKeysFile $SD/authorized_keys
	PidFile none
	StrictModes no
	UsePAM no
	PasswordAuthentication no
	KbdInteractiveAuthentication no
	PermitRootLogin prohibit-password
	AllowUsers $(id -un)
	LogLevel VERBOSE
	EOF
	/usr/sbin/sshd -D -e -f "$SD/config" 2>"$SD/log" 3>&- &
	SSHD_PID=$!
	wait_for bash -c "exec 9<>/dev/tcp/127.0.0.1/$SSH_PORT" 2>/dev/null
	echo "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$SD/host_key.pub")" >"$SD/known_hosts"
	SSH_URL="ssh://$(id -un)@127.0.0.1:$SSH_PORT$REPO"
}

@test "ssh:// with the key from an ssh agent; host key from git.known_hosts (hashed entries too)" {
	serve_ssh
	ssh-keygen -q -H -f "$SD/known_hosts" 2>/dev/null
	run grep -c 127.0.0.1 "$SD/known_hosts"
	[ "$output" = 0 ]
	eval "$(ssh-agent -s)" >/dev/null
	AGENT_PID=$SSH_AGENT_PID
	ssh-add -q "$SD/agent_key" 2>/dev/null
	sfs_mount -o "git.known_hosts=$SD/known_hosts"
	cloned s "$SSH_URL" feature
	[ "$(cat "$w/f.txt")" = feat ]
	grep -q "Accepted publickey for $(id -un) .* ED25519 $(ssh-keygen -lf "$SD/agent_key.pub" | cut -d' ' -f2)" "$SD/log"
}

@test "ssh:// with git.ssh_key and its passphrase from the environment, never shown" {
	serve_ssh
	unset SSH_AUTH_SOCK
	export SANDBOXFS_GIT_SSH_PASSPHRASE=$SSH_PASS
	sfs_mount -o "git.known_hosts=$SD/known_hosts" -o "git.ssh_key=$SD/file_key"
	cloned s "$SSH_URL" main
	grep -q "Accepted publickey for $(id -un) .* ED25519 $(ssh-keygen -lf "$SD/file_key.pub" | cut -d' ' -f2)" "$SD/log"
	# a run never gets the passphrase; it is nowhere in logs or state
	n=$(ctl_write "$MNT/s/ctl" "exec echo \"[\$SANDBOXFS_GIT_SSH_PASSPHRASE]\"")
	wait_for grep -q '^exited 0' "$MNT/s/runs/$n/status"
	grep -qx '\[\]' "$MNT/s/runs/$n/journal"
	run grep -rF "$SSH_PASS" "$BATS_TEST_TMPDIR/daemon.log" "$STATE"
	[ "$status" -ne 0 ]
}

@test "ssh:// refuses a host key that does not match, an unknown host and a key it may not use; nothing left" {
	serve_ssh
	eval "$(ssh-agent -s)" >/dev/null
	AGENT_PID=$SSH_AGENT_PID
	ssh-add -q "$SD/agent_key" 2>/dev/null
	echo "[127.0.0.1]:$SSH_PORT $(cut -d' ' -f1,2 "$SD/other_host_key.pub")" >"$SD/wrong_hosts"
	echo "[127.0.0.1]:$((SSH_PORT + 1)) $(cut -d' ' -f1,2 "$SD/host_key.pub")" >"$SD/other_port_hosts"
	# a changed host key: refused before any key is offered
	refused "$SSH_URL" "$SSH_URL: ssh host key of 127.0.0.1 port $SSH_PORT does NOT match the one listed in git.known_hosts $SD/wrong_hosts" \
		-o "git.known_hosts=$SD/wrong_hosts"
	# listed for another port only: unknown
	refused "$SSH_URL" "is not listed in git.known_hosts $SD/other_port_hosts" \
		-o "git.known_hosts=$SD/other_port_hosts"
	# no git.known_hosts: libgit2 checks ~/.ssh/known_hosts, here empty
	mkdir -p "$BATS_TEST_TMPDIR/home/.ssh"
	HOME="$BATS_TEST_TMPDIR/home" refused "$SSH_URL" "$SSH_URL: invalid or unknown remote ssh hostkey"
	run grep -c 'Accepted publickey' "$SD/log"
	[ "$output" = 0 ]
	# the right host, a key it does not accept
	ssh-add -qD 2>/dev/null
	ssh-keygen -q -t ed25519 -N '' -f "$SD/stranger"
	ssh-add -q "$SD/stranger" 2>/dev/null
	refused "$SSH_URL" "$SSH_URL: error authenticating" -o "git.known_hosts=$SD/known_hosts"
}

# make_ca NAME: a CA (DIR/NAME-ca.pem) and a server certificate it signed for
# localhost and 127.0.0.1 (DIR/NAME-cert.pem, DIR/NAME-key.pem), DIR=$TLS
make_ca() {
	TLS="$BATS_TEST_TMPDIR/tls"
	mkdir -p "$TLS"
	local n=$1
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$n test CA" \
		-keyout "$TLS/$n-ca.key" -out "$TLS/$n-ca.pem" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj /CN=localhost \
		-keyout "$TLS/$n-key.pem" -out "$TLS/$n.csr" 2>/dev/null
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$TLS/$n.ext"
	openssl x509 -req -in "$TLS/$n.csr" -CA "$TLS/$n-ca.pem" -CAkey "$TLS/$n-ca.key" \
		-CAcreateserial -days 2 -extfile "$TLS/$n.ext" -out "$TLS/$n-cert.pem" 2>/dev/null
}

# serve_https [AUTH]: git http-backend behind TLS (certificate of CA "good")
# on localhost:$HTTPS_PORT; with AUTH, requests need that Authorization
serve_https() {
	make_ca good
	HB=$(mktemp -d /tmp/sfs-git-https.XXXXXX)
	git_cgi_root "$HB" "$REPO"
	HTTPS_PORT=$((20000 + RANDOM % 20000))
	: >"$BATS_TEST_TMPDIR/auth.seen"
	python3 "$BATS_TEST_DIRNAME/https_git.py" "$HTTPS_PORT" "$HB" "$TLS/good-cert.pem" \
		"$TLS/good-key.pem" "$BATS_TEST_TMPDIR/auth.seen" "$@" \
		>"$BATS_TEST_TMPDIR/https.log" 2>&1 3>&- &
	HTTPS_PID=$!
	wait_for bash -c "exec 9<>/dev/tcp/127.0.0.1/$HTTPS_PORT" 2>/dev/null
	HTTPS_URL="https://localhost:$HTTPS_PORT/cgi-bin/git/r.git"
}

@test "https:// trusted through git.ca_file, with \$SANDBOXFS_GIT_TOKEN as the Basic password, never shown" {
	export SANDBOXFS_GIT_TOKEN=tok-$RANDOM-sekrit-$RANDOM
	want="Basic $(printf 'x-access-token:%s' "$SANDBOXFS_GIT_TOKEN" | base64 -w0)"
	serve_https "$want"
	sfs_mount -o "git.ca_file=$TLS/good-ca.pem"
	cloned h "$HTTPS_URL" feature
	# the smart protocol through the TLS server, authorised by the token
	grep -q 'info/refs?service=git-upload-pack' "$BATS_TEST_TMPDIR/https.log"
	grep -q 'POST /cgi-bin/git/r.git/git-upload-pack' "$BATS_TEST_TMPDIR/https.log"
	grep -qxF "$want" "$BATS_TEST_TMPDIR/auth.seen"
	run grep -rF "$SANDBOXFS_GIT_TOKEN" "$BATS_TEST_TMPDIR/daemon.log" "$STATE" "$w"
	[ "$status" -ne 0 ]
	# SSL_CERT_FILE does the same when git.ca_file is not set
	sfs_unmount
	SSL_CERT_FILE="$TLS/good-ca.pem" sfs_mount
	cloned h2 "$HTTPS_URL" main
}

@test "https:// with a certificate nobody trusted fails new with a clear error and leaves nothing" {
	serve_https
	make_ca other
	# the system's list (no test CA in it), then another CA
	untrusted="$HTTPS_URL: the SSL certificate is invalid: 0x08 - The certificate is not correctly signed by the trusted CA"
	refused "$HTTPS_URL" "$untrusted"
	refused "$HTTPS_URL" "$untrusted" -o "git.ca_file=$TLS/other-ca.pem"
	# a CA file that is not there: said before any connection
	refused "$HTTPS_URL" "git.ca_file $TLS/missing.pem: No such file or directory" \
		-o "git.ca_file=$TLS/missing.pem"
	run grep -c 'GET /' "$BATS_TEST_TMPDIR/https.log"
	[ "$output" = 0 ]
}
