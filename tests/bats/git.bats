#!/usr/bin/env bats
# bats file_tags=git
# new … source= ref= setup= (SPEC §9) on the local provider: repositories made
# by the test itself, served from a host path, file:// and `git daemon` on
# 127.0.0.1; nothing reaches outside this machine.

load helpers
load docker_helpers
load git_helpers

setup() {
	export SANDBOXFS_GIT_TOKEN=tok-$RANDOM-sekrit-$RANDOM
	sfs_mount -o log_level=2 # the mirror's fetch counts are logged at info
	REPO="$BATS_TEST_TMPDIR/repo"
	make_repo "$REPO"
}

teardown() {
	if [ -n "${RELAY_PID:-}" ]; then kill "$RELAY_PID" 2>/dev/null || true; fi
	if [ -n "${HB:-}" ]; then rm -rf "$HB"; fi
	if [ -n "${GITD_PID:-}" ]; then kill "$GITD_PID" 2>/dev/null || true; fi
	sfs_teardown
	docker_cleanup
}

gitc() { git -c user.email=t@example.org -c user.name=t -c init.defaultBranch=main "$@"; }

# make_repo DIR: main with two commits (tag v1 on the first), branch feature
# from the first with a commit of its own.
make_repo() {
	gitc init -q "$1"
	echo one >"$1/a.txt"
	gitc -C "$1" add a.txt
	gitc -C "$1" commit -qm one
	gitc -C "$1" tag v1
	gitc -C "$1" checkout -qb feature
	echo feat >"$1/f.txt"
	gitc -C "$1" add f.txt
	gitc -C "$1" commit -qm feat
	gitc -C "$1" checkout -q main
	echo two >"$1/b.txt"
	gitc -C "$1" add b.txt
	gitc -C "$1" commit -qm two
}

ws() { awk '$1=="workspace"{print $2}' "$MNT/$1/status"; }
state_of() { awk '$1=="state"{print $2}' "$MNT/$1/status"; }

# nothing_left: no sandbox, no state dir, no temporary mirror, no lock file
# of a failed mirror
nothing_left() {
	[ "$(ls "$MNT")" = "$(printf 'ctl\nproviders')" ]
	[ -z "$(ls -A "$STATE/sandboxes" 2>/dev/null)" ]
	[ -z "$(find "$STATE/git" -name '.tmp-*' 2>/dev/null)" ]
	local l
	for l in $(find "$STATE/git" -name '*.lock' 2>/dev/null); do
		[ -d "${l%.lock}.git" ]
	done
}

# nothing_left_but NAME: as nothing_left, with sandbox NAME the only one
nothing_left_but() {
	[ "$(ls "$MNT")" = "$(printf '%s\n' ctl providers "$1" | sort)" ]
	[ "$(ls -A "$STATE/sandboxes" | wc -l)" -eq 1 ]
	[ -z "$(find "$STATE/git" -name '.tmp-*' 2>/dev/null)" ]
}

@test "source=HOSTPATH clones the default branch into the workspace" {
	run ctl_write "$MNT/ctl" "new s source=$REPO"
	[ "$status" -eq 0 ]
	[ "$output" = s ]
	[ "$(state_of s)" = running ]
	run grep -c '^progress' "$MNT/s/status"
	[ "$output" = 0 ]
	[ "$(cat "$MNT/s/workspace/a.txt")" = one ]
	[ "$(cat "$MNT/s/workspace/b.txt")" = two ]
	[ ! -e "$MNT/s/workspace/f.txt" ]
	w=$(ws s)
	[ "$(git -C "$w" rev-parse HEAD)" = "$(git -C "$REPO" rev-parse main)" ]
	[ "$(git -C "$w" symbolic-ref --short HEAD)" = main ]
	[ "$(git -C "$w" remote get-url origin)" = "$REPO" ]
	[ "$(git -C "$w" rev-parse --abbrev-ref main@{upstream})" = origin/main ]
	[ -z "$(git -C "$w" status --porcelain)" ]
	# the tags and other branches came along
	git -C "$w" rev-parse -q --verify refs/tags/v1
	git -C "$w" rev-parse -q --verify refs/remotes/origin/feature
	# and the workspace is an ordinary one: runs see the tree
	n=$(ctl_write "$MNT/s/ctl" "exec cat b.txt")
	wait_for grep -q '^exited 0' "$MNT/s/runs/$n/status"
	[ "$(cat "$MNT/s/runs/$n/journal")" = two ]
}

@test "source=file:// with ref= a tag, a branch, a commit id" {
	ctl_write "$MNT/ctl" "new t source=file://$REPO ref=v1"
	w=$(ws t)
	[ "$(git -C "$w" rev-parse HEAD)" = "$(git -C "$REPO" rev-parse v1^{commit})" ]
	run git -C "$w" symbolic-ref -q HEAD
	[ "$status" -ne 0 ] # a tag is checked out detached
	[ ! -e "$w/b.txt" ]

	ctl_write "$MNT/ctl" "new b source=file://$REPO ref=feature"
	w=$(ws b)
	[ "$(git -C "$w" symbolic-ref --short HEAD)" = feature ]
	[ "$(cat "$w/f.txt")" = feat ]
	[ "$(git -C "$w" remote get-url origin)" = "file://$REPO" ]

	sha=$(git -C "$REPO" rev-parse feature)
	ctl_write "$MNT/ctl" "new c source=$REPO ref=${sha:0:10}"
	w=$(ws c)
	[ "$(git -C "$w" rev-parse HEAD)" = "$sha" ]
	run git -C "$w" symbolic-ref -q HEAD
	[ "$status" -ne 0 ]

	ctl_write "$MNT/ctl" "new d source=$REPO ref=refs/heads/feature depth=1"
	[ "$(git -C "$(ws d)" rev-parse HEAD)" = "$sha" ]
}

@test "source=git:// from git daemon on 127.0.0.1" {
	serve_git "$BATS_TEST_TMPDIR"
	run ctl_write "$MNT/ctl" "new g source=git://127.0.0.1:$GITD_PORT/repo ref=feature"
	[ "$status" -eq 0 ]
	w=$(ws g)
	[ "$(git -C "$w" rev-parse HEAD)" = "$(git -C "$REPO" rev-parse feature)" ]
	[ "$(git -C "$w" remote get-url origin)" = "git://127.0.0.1:$GITD_PORT/repo" ]
	# a repository the daemon does not have
	run ctl_write "$MNT/ctl" "new h source=git://127.0.0.1:$GITD_PORT/nothing-here"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: source: git://127.0.0.1:$GITD_PORT/nothing-here"* ]]
	nothing_left_but g
}

@test "source=http:// from git http-backend behind a CGI server on 127.0.0.1" {
	HB=$(mktemp -d /tmp/sfs-git-http.XXXXXX)
	git_cgi_root "$HB" "$REPO"
	port=$((20000 + RANDOM % 20000))
	python3 -m http.server --cgi --bind 127.0.0.1 --directory "$HB" "$port" \
		>"$BATS_TEST_TMPDIR/http.log" 2>&1 3>&- &
	GITD_PID=$!
	wait_for bash -c "exec 9<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
	url="http://127.0.0.1:$port/cgi-bin/git/r.git"
	run ctl_write "$MNT/ctl" "new h source=$url ref=v1"
	[ "$status" -eq 0 ]
	w=$(ws h)
	[ "$(git -C "$w" rev-parse HEAD)" = "$(git -C "$REPO" rev-parse v1^{commit})" ]
	[ "$(git -C "$w" remote get-url origin)" = "$url" ]
	# the smart protocol was used (not a dumb file walk)
	grep -q 'info/refs?service=git-upload-pack' "$BATS_TEST_TMPDIR/http.log"
	grep -q 'POST /cgi-bin/git/r.git/git-upload-pack' "$BATS_TEST_TMPDIR/http.log"
}

@test "a second sandbox from the same source fetches only what is new" {
	ctl_write "$MNT/ctl" "new m1 source=$REPO"
	mirrors=("$STATE"/git/mirrors/*.git)
	[ "${#mirrors[@]}" -eq 1 ]
	mirror=${mirrors[0]}
	before=$(ls "$mirror/objects/pack/"*.idx | sort)
	echo three >"$REPO/c.txt"
	gitc -C "$REPO" add c.txt
	gitc -C "$REPO" commit -qm three
	ctl_write "$MNT/ctl" "new m2 source=$REPO"
	[ "$(cat "$MNT/m2/workspace/c.txt")" = three ]
	[ ! -e "$MNT/m1/workspace/c.txt" ]
	# still one mirror; one new pack holding exactly the new commit, tree and blob
	[ "$(ls -d "$STATE"/git/mirrors/*.git | wc -l)" -eq 1 ]
	new=$(comm -13 <(echo "$before") <(ls "$mirror/objects/pack/"*.idx | sort))
	[ "$(echo "$new" | wc -l)" -eq 1 ]
	run git verify-pack -v "$new"
	[ "$status" -eq 0 ]
	objects=$(echo "$output" | grep -cE '^[0-9a-f]{40} (commit|tree|blob|tag) ')
	[ "$objects" -eq 3 ]
	grep -q "m2: source $REPO: mirror updated, 3 objects fetched" "$BATS_TEST_TMPDIR/daemon.log"
	# nothing new: nothing fetched
	ctl_write "$MNT/ctl" "new m3 source=$REPO"
	grep -q "m3: source $REPO: mirror updated, 0 objects fetched" "$BATS_TEST_TMPDIR/daemon.log"
}

@test "two sandboxes from one new source at once share one mirror" {
	( ctl_write "$MNT/ctl" "new p1 source=$REPO" >"$BATS_TEST_TMPDIR/p1.out" 2>&1 ) &
	p1=$!
	( ctl_write "$MNT/ctl" "new p2 source=file://$REPO" >"$BATS_TEST_TMPDIR/p2.out" 2>&1 ) &
	p2=$!
	( ctl_write "$MNT/ctl" "new p3 source=$REPO ref=feature" >"$BATS_TEST_TMPDIR/p3.out" 2>&1 ) &
	p3=$!
	wait "$p1" "$p2" "$p3"
	[ "$(cat "$BATS_TEST_TMPDIR/p1.out")" = p1 ]
	[ "$(cat "$BATS_TEST_TMPDIR/p2.out")" = p2 ]
	[ "$(cat "$BATS_TEST_TMPDIR/p3.out")" = p3 ]
	[ "$(cat "$MNT/p1/workspace/b.txt")" = two ]
	[ "$(cat "$MNT/p3/workspace/f.txt")" = feat ]
	# one mirror for the path, one for the file:// URL, nothing half-made
	[ "$(ls -d "$STATE"/git/mirrors/*.git | wc -l)" -eq 2 ]
	[ -z "$(find "$STATE/git" -name '.tmp-*')" ]
	grep -q "p[13]: source $REPO: new mirror" "$BATS_TEST_TMPDIR/daemon.log"
	grep -q "p[13]: source $REPO: mirror updated, 0 objects fetched" "$BATS_TEST_TMPDIR/daemon.log"
}

# serve_git DIR: `git daemon` on 127.0.0.1 exporting DIR's repositories; sets GITD_PORT
serve_git() {
	GITD_PORT=$((20000 + RANDOM % 20000))
	git daemon --reuseaddr --export-all --listen=127.0.0.1 --port="$GITD_PORT" \
		--base-path="$1" "$1" 3>&- &
	GITD_PID=$!
	wait_for bash -c "exec 9<>/dev/tcp/127.0.0.1/$GITD_PORT" 2>/dev/null
}

@test "progress shows in status while the clone lasts, state creating until the tree is there" {
	big="$BATS_TEST_TMPDIR/srv/big"
	gitc init -q "$big"
	for i in $(seq 1 1500); do head -c 300 /dev/urandom | base64 >"$big/f$i"; done
	gitc -C "$big" add .
	gitc -C "$big" commit -qm big
	serve_git "$BATS_TEST_TMPDIR/srv"
	# a relay that trickles the pack: the clone lasts a few seconds
	rport=$((GITD_PORT + 1))
	python3 "$BATS_TEST_DIRNAME/slow_relay.py" "$rport" "$GITD_PORT" 3>&- &
	RELAY_PID=$!
	wait_for bash -c "exec 9<>/dev/tcp/127.0.0.1/$rport" 2>/dev/null
	( ctl_write "$MNT/ctl" "new big source=git://127.0.0.1:$rport/big" >"$BATS_TEST_TMPDIR/new.out" 2>&1 ) &
	newpid=$!
	seen="$BATS_TEST_TMPDIR/seen"
	: >"$seen"
	while kill -0 "$newpid" 2>/dev/null; do
		grep -E '^(state|progress) ' "$MNT/big/status" 2>/dev/null | paste -sd' ' >>"$seen" || true
		sleep 0.05
	done
	wait "$newpid"
	[ "$(cat "$BATS_TEST_TMPDIR/new.out")" = big ]
	# lines of the documented shape were seen, always with state creating,
	# and the count moved (not one frozen line)
	run grep -E '^state creating progress clone [0-9]+% [0-9]+/[0-9]+ objects' "$seen"
	[ "$status" -eq 0 ]
	[ "$(echo "$output" | sort -u | wc -l)" -ge 3 ]
	run grep -E 'progress' "$seen"
	if echo "$output" | grep -qv '^state creating'; then false; fi
	[ "$(state_of big)" = running ]
	run grep -c '^progress' "$MNT/big/status"
	[ "$output" = 0 ]
	cmp "$big/f1500" "$MNT/big/workspace/f1500"
}

@test "setup= commands run in order as runs 1..k; running only after all succeed" {
	run ctl_write "$MNT/ctl" "new s source=$REPO setup='echo first >>order; cat a.txt' setup='sleep 1; echo second >>order'"
	[ "$status" -eq 0 ]
	[ "$(state_of s)" = running ]
	[ "$(cat "$MNT/s/workspace/order")" = "$(printf 'first\nsecond')" ]
	[ "$(cat "$MNT/s/runs/1/cmd")" = "echo first >>order; cat a.txt" ]
	[ "$(cat "$MNT/s/runs/1/journal")" = one ]
	grep -q '^exited 0' "$MNT/s/runs/2/status"
	# the next run is 3
	n=$(ctl_write "$MNT/s/ctl" "exec true")
	[ "$n" = 3 ]
}

@test "setup= without source= on an empty workspace; state creating while it runs" {
	( ctl_write "$MNT/ctl" "new p setup='sleep 1.5'" >"$BATS_TEST_TMPDIR/new.out" 2>&1 ) &
	newpid=$!
	wait_for grep -q '^progress setup 1/1' "$MNT/p/status"
	[ "$(state_of p)" = creating ]
	run ctl_write "$MNT/p/ctl" "exec true"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "*"creating, not running"* ]]
	wait "$newpid"
	[ "$(cat "$BATS_TEST_TMPDIR/new.out")" = p ]
	[ "$(state_of p)" = running ]
}

@test "a failed setup leaves state error, the message in status, its journal readable" {
	run ctl_write "$MNT/ctl" "new e source=$REPO setup='echo ok' setup='echo broken >&2; exit 3' setup='touch never'"
	[ "$status" -ne 0 ]
	[[ "$output" == *"Input/output error"* ]]
	[[ "$output" == *"error: setup 2/3 (run 2) exited 3; see runs/2/cmd and runs/2/journal"* ]]
	[ "$(state_of e)" = error ]
	grep -q '^error setup 2/3 (run 2) exited 3' "$MNT/e/status"
	# status is readable by others: it never carries the command's text
	run grep -c 'broken' "$MNT/e/status"
	[ "$output" = 0 ]
	run grep -c '^progress' "$MNT/e/status"
	[ "$output" = 0 ]
	[ "$(cat "$MNT/e/runs/2/journal")" = broken ]
	[ ! -e "$MNT/e/runs/3" ]
	[ ! -e "$MNT/e/workspace/never" ]
	run ctl_write "$MNT/e/ctl" "exec true"
	[ "$status" -ne 0 ]
	# restarts keep the state and the reason
	sfs_unmount
	sfs_mount
	sfs_unmount
	sfs_mount
	[ "$(state_of e)" = error ]
	grep -q '^error setup 2/3 (run 2) exited 3' "$MNT/e/status"
	# it stays until the user removes it, and then nothing is left
	rmdir "$MNT/e"
	nothing_left
}

@test "bad sources fail new with a clear error and leave nothing behind" {
	export REPO
	check() { # check ERRNO-TEXT MESSAGE-GLOB LINE
		run ctl_write "$MNT/ctl" "$3"
		[ "$status" -ne 0 ]
		[[ "$output" == *"$1"* ]]
		[[ "$output" == *"error: "$2* ]]
		nothing_left
	}
	check "Invalid argument" '*unknown scheme "ftp"*' "new x source=ftp://127.0.0.1/r"
	check "Invalid argument" '*a host path must be absolute*' "new x source=relative/repo"
	check "Invalid argument" '*no host*' "new x source=https:///r"
	check "Invalid argument" '*not a valid ref name*' "new x source=$REPO ref=a..b"
	check "Invalid argument" '*depth=0*' "new x source=$REPO depth=0"
	check "Invalid argument" '*ref= needs source=*' "new x ref=main"
	check "Invalid argument" '*setup= needs a command*' "new x setup=' '"
	check "Input/output error" "*127.0.0.1*" "new x source=git://127.0.0.1:1/r"
	check "Input/output error" "*127.0.0.1*" "new x source=http://127.0.0.1:1/r"
	check "No such file or directory" '*ref "nope": no branch, tag or commit*' \
		"new x source=$REPO ref=nope"
	check "No such file or directory" '*not a git repository*' \
		"new x source=$BATS_TEST_TMPDIR"
	check "No such file or directory" '*' "new x source=$BATS_TEST_TMPDIR/missing"
	check "No such file or directory" '*' "new x source=file://$BATS_TEST_TMPDIR/missing"
	# a mirror of the good source is kept (a cache), nothing else
	ctl_write "$MNT/ctl" "new ok source=$REPO"
	[ "$(ls "$STATE/git/mirrors" | grep -v '\.lock$')" = "$(basename "$STATE"/git/mirrors/*.git)" ]
}

@test "source=/dir= into a non-empty directory is refused and the directory kept" {
	d="$BATS_TEST_TMPDIR/mine"
	mkdir "$d"
	echo precious >"$d/p"
	run ctl_write "$MNT/ctl" "new x dir=$d source=$REPO"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: new: source=: workspace $d is not empty"* ]]
	[ "$(ls "$d")" = p ]
	nothing_left
	# an empty one is filled; a failed clone into it empties it again
	e="$BATS_TEST_TMPDIR/empty"
	mkdir "$e"
	run ctl_write "$MNT/ctl" "new x dir=$e source=$REPO ref=nope"
	[ "$status" -ne 0 ]
	[ -z "$(ls -A "$e")" ]
	ctl_write "$MNT/ctl" "new y dir=$e source=$REPO"
	[ "$(cat "$e/a.txt")" = one ]
}

@test "credentials in a source URL and \$SANDBOXFS_GIT_TOKEN are never shown" {
	run ctl_write "$MNT/ctl" "new x source=http://alice:pw-$SANDBOXFS_GIT_TOKEN@127.0.0.1:1/r"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: "* ]]
	[[ "$output" != *"pw-$SANDBOXFS_GIT_TOKEN"* ]]
	run grep -rF "pw-$SANDBOXFS_GIT_TOKEN" "$BATS_TEST_TMPDIR/daemon.log" "$STATE"
	[ "$status" -ne 0 ]
	# an http server on 127.0.0.1 that asks for a password gets the token
	# (Basic, user x-access-token) and refuses it: new fails, the token shows nowhere
	port=$((20000 + RANDOM % 20000))
	python3 - "$port" "$BATS_TEST_TMPDIR/auth.seen" 3>&- <<-'PY' &
	import http.server, sys
	port, seen = int(sys.argv[1]), sys.argv[2]
	class H(http.server.BaseHTTPRequestHandler):
	    def do_GET(self):
	        auth = self.headers.get("Authorization")
	        if auth:
	            open(seen, "a").write(auth + "\n")
	        self.send_response(403 if auth else 401)
	        self.send_header("WWW-Authenticate", 'Basic realm="t"')
	        self.send_header("Content-Length", "0")
	        self.end_headers()
	    def log_message(self, *a):
	        pass
	http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
	PY
	GITD_PID=$!
	wait_for bash -c "exec 9<>/dev/tcp/127.0.0.1/$port" 2>/dev/null
	run ctl_write "$MNT/ctl" "new y source=http://127.0.0.1:$port/r.git"
	[ "$status" -ne 0 ]
	[[ "$output" == *"error: source: http://127.0.0.1:$port/r.git"* ]]
	want="Basic $(printf 'x-access-token:%s' "$SANDBOXFS_GIT_TOKEN" | base64 -w0)"
	grep -qxF "$want" "$BATS_TEST_TMPDIR/auth.seen"
	nothing_left
	# a run never gets the token in its environment
	mkdir "$MNT/r"
	n=$(ctl_write "$MNT/r/ctl" "exec env; echo \"[\$SANDBOXFS_GIT_TOKEN]\"")
	wait_for grep -q '^exited 0' "$MNT/r/runs/$n/status"
	grep -qx '\[\]' "$MNT/r/runs/$n/journal"
	run grep -rF "$SANDBOXFS_GIT_TOKEN" "$BATS_TEST_TMPDIR/daemon.log" "$STATE" "$MNT/r/runs/$n/journal"
	[ "$status" -ne 0 ]
}

@test "git sources leak no memory (the ASan build, leak checks on)" {
	asan="$SFS_ROOT/build-asan/sandboxfs"
	[ -x "$asan" ] || skip "no build-asan/sandboxfs (cmake -B build-asan -DSFS_SANITIZE=ON)"
	sfs_unmount
	STATE="$BATS_TEST_TMPDIR/state-asan"
	MNT="$BATS_TEST_TMPDIR/mnt-asan"
	ASAN_OPTIONS="detect_leaks=1:log_path=$BATS_TEST_TMPDIR/asan" SFS_BIN="$asan" sfs_mount
	ctl_write "$MNT/ctl" "new a source=$REPO"
	ctl_write "$MNT/ctl" "new b source=file://$REPO ref=feature setup=true"
	ctl_write "$MNT/ctl" "new c source=$REPO ref=v1"
	run ctl_write "$MNT/ctl" "new d source=$REPO ref=nope"
	[ "$status" -ne 0 ]
	run ctl_write "$MNT/ctl" "new e source=git://127.0.0.1:1/r"
	[ "$status" -ne 0 ]
	sfs_unmount
	reports=$(ls "$BATS_TEST_TMPDIR"/asan.* 2>/dev/null || true)
	if [ -n "$reports" ]; then
		cat $reports >&2
		false
	fi
}

@test "docker: the checked-out tree goes up in one archive upload, setup runs in the container" {
	docker_require
	run dk_new d "source=$REPO ref=feature setup='cat f.txt; git --version >/dev/null 2>&1 || true'"
	[ "$status" -eq 0 ]
	[ "$(state_of d)" = running ]
	[ "$(cat "$MNT/d/workspace/f.txt")" = feat ]
	[ "$(cat "$MNT/d/workspace/a.txt")" = one ]
	[ "$(cat "$MNT/d/workspace/.git/HEAD")" = "ref: refs/heads/feature" ]
	[ "$(cat "$MNT/d/runs/1/journal")" = feat ]
	# the repository inside is whole: the container sees the same files
	id=$(dk_id d)
	[ "$(docker exec -w "$(ws d)" "$id" cat f.txt)" = feat ]
	[ "$(docker exec -w "$(ws d)" "$id" cat .git/HEAD)" = "ref: refs/heads/feature" ]
	# nothing left on the host but the mirror
	[ ! -e "$STATE/sandboxes/$(ls "$STATE/sandboxes")/source.tar" ]
	[ ! -e "$STATE/sandboxes/$(ls "$STATE/sandboxes")/source-tree" ]
}

@test "docker: a missing ref fails new and leaves no container" {
	docker_require
	run dk_new d "source=$REPO ref=nope"
	[ "$status" -ne 0 ]
	[[ "$output" == *'ref "nope": no branch, tag or commit'* ]]
	[ -z "$(docker ps -aq --filter "label=sandboxfs.state=$STATE")" ]
	nothing_left
}
