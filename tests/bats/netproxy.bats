#!/usr/bin/env bats
# The network=allow: proxy against a hostile sandbox: a run that lies in
# its Host field, smuggles fields past the proxy, floods it with connections
# or sends its head a byte at a time must reach nothing it was not allowed
# and must not take the daemon (every sandbox's mount) down with it.

load helpers
load docker_helpers
load iso_helpers

setup() {
	iso_require
	sfs_mount
}

teardown() {
	iso_teardown
}

# echo_server ADDR: an HTTP/1.1 server on ADDR:$PORT that answers each
# request with the request line and fields it received, and counts them.
echo_server() {
	mkdir -p "$BATS_TEST_TMPDIR/www-echo"
	cat >"$BATS_TEST_TMPDIR/www-echo/echo.py" <<'PY'
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = ("%s\n%s" % (self.requestline, self.headers)).encode()
        open("requests.log", "a").write(self.requestline + "\n")
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
PY
	serve echo "$1" python3 echo.py "$1" "$PORT"
}

# box OPTS...: remounts with OPTS and the names good.test -> $A, evil.test
# -> $B, makes the sandbox `box` allowed good.test:$PORT only, with the
# client script in its workspace.
box() {
	PORT=$((20000 + RANDOM % 20000))
	A=127.0.0.$((100 + RANDOM % 50))
	B=127.0.0.$((150 + RANDOM % 50))
	sfs_unmount
	sfs_mount -o "proxy.resolve=good.test=$A;evil.test=$B" "$@"
	new_iso box "network=allow:good.test:$PORT"
	cp "$BATS_TEST_DIRNAME/proxy_client.py" "$MNT/box/workspace/pc.py"
}

# daemon_fds: how many fds the daemon holds.
daemon_fds() {
	ls "/proc/$SFS_PID/fd" | wc -l
}

# daemon_lowest_free_fd: the number the daemon's next fd would get; a
# soft limit there makes its next open fail with EMFILE.
daemon_lowest_free_fd() {
	local i=0
	while [ -e "/proc/$SFS_PID/fd/$i" ]; do i=$((i + 1)); done
	echo "$i"
}

# daemon_cpu_ms: the daemon's utime + stime in ms.
daemon_cpu_ms() {
	awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$SFS_PID/stat"
}

@test "netproxy: an absolute-URI request reaches its server with the URI's Host, not the client's, and one request per connection" {
	box
	echo_server "$A"
	run run_in box "python3 pc.py raw 'GET http://good.test:$PORT/one HTTP/1.1\r\nHost: evil.test\r\nhost: evil.test\r\nProxy-Authorization: Basic eDp5\r\n\r\nGET http://evil.test/two HTTP/1.1\r\nHost: evil.test\r\n\r\n'"
	[ "$status" -eq 0 ]
	grep -q "^GET /one HTTP/1.1" <<<"$output"
	grep -qix "Host: good.test:$PORT" <<<"$output"
	[[ "$output" != *evil.test* ]]
	[[ "$output" != *Proxy-Authorization* ]]
	# the pipelined second request went nowhere
	run cat "$BATS_TEST_TMPDIR/www-echo/requests.log"
	[ "${lines[-1]}" = "GET /one HTTP/1.1" ]
	[[ "$output" != *two* ]]
}

@test "netproxy: a head a server could read otherwise than the proxy (a lone LF, a folded or blank-named field, Content-Length with chunked) is 400 and sent nowhere" {
	box
	echo_server "$A"
	for head in \
		"GET http://good.test:$PORT/lf HTTP/1.1\r\nX: a\nHost: evil.test\r\n\r\n" \
		"GET http://good.test:$PORT/fold HTTP/1.1\r\nX: a\r\n Host: evil.test\r\n\r\n" \
		"GET http://good.test:$PORT/blank HTTP/1.1\r\nHost : evil.test\r\n\r\n" \
		"GET http://good.test:$PORT/both HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"; do
		run run_in box "python3 pc.py raw '$head'"
		[ "$status" -eq 0 ]
		[[ "$output" == "HTTP/1.1 400 Bad Request"* ]]
	done
	run grep -E "lf|fold|blank|both" "$BATS_TEST_TMPDIR/www-echo/requests.log"
	[ "$status" -eq 1 ]
}

@test "netproxy: a sandbox holds at most proxy.max_connections; more are answered 503 and logged once, and it is served again when they close" {
	box -o proxy.max_connections=8
	serve good "$A"
	run run_in box "python3 pc.py flood 30"
	[ "$status" -eq 0 ]
	grep -qx "answered503 22 open 8" <<<"$output"
	[ "$(grep -c 'box: network: refusing connections: 8 open (proxy.max_connections 8)' "$BATS_TEST_TMPDIR/daemon.log")" = 1 ]
	run run_in box "curl -sf -m 5 http://good.test:$PORT/"
	[[ "$output" == *"page of good"* ]]
}

@test "netproxy: a run flooding the proxy cannot exhaust the daemon's fds: the mount keeps working" {
	box
	serve good "$A"
	# a daemon limit such a flood would have used up (root's default is
	# often 1024): the proxy may take a quarter of it
	prlimit --pid "$SFS_PID" --nofile=400:400
	n=$(ctl_write "$MNT/box/ctl" "exec python3 pc.py flood 380 6")
	wait_for grep -q answered503 "$MNT/box/runs/$n/journal"
	mkdir "$MNT/other"
	echo kept >"$MNT/box/workspace/file"
	grep -qx kept "$MNT/box/workspace/file"
	[ "$(daemon_fds)" -lt 200 ]
	[ "$(cat "$MNT/box/runs/$n/wait")" = "exited 0" ]
	grep -q "answered503 [1-9][0-9]* open 50" "$MNT/box/runs/$n/journal"
}

@test "netproxy: when the daemon is out of fds the proxy waits instead of spinning, and serves the waiting client once one is free" {
	box
	serve good "$A"
	ctl_write "$MNT/box/ctl" "exec sleep 1; curl -s -m 20 -o got.html http://good.test:$PORT/" >/dev/null
	# each with an fd that would free a slot below the limit: the proxy
	# would accept with it and fail for want of another
	wait_exec_later_done
	prlimit --pid "$SFS_PID" --nofile="$(daemon_lowest_free_fd):$(ulimit -Hn)"
	sleep 2
	before=$(daemon_cpu_ms)
	sleep 3
	after=$(daemon_cpu_ms)
	prlimit --pid "$SFS_PID" --nofile="$(ulimit -Hn):$(ulimit -Hn)"
	echo "daemon cpu while starved: $((after - before)) ms" >&3
	[ $((after - before)) -lt 1000 ]
	wait_for grep -qs "page of good" "$MNT/box/workspace/got.html"
	grep -q "network: proxy cannot accept: Too many open files" "$BATS_TEST_TMPDIR/daemon.log"
}

@test "netproxy: a head sent a byte at a time is cut at proxy.head_timeout (408), not kept for hours" {
	box -o proxy.head_timeout=2
	run run_in box "python3 pc.py slow"
	[ "$status" -eq 0 ]
	[[ "$output" =~ closed\ after\ [23]\ s:\ HTTP/1.1\ 408 ]]
}

@test "netproxy: a sandbox cannot plant anything beside its proxy socket (the daemon makes it again there as root after a restart)" {
	box
	serve good "$A"
	run run_in box "ln -s /etc/hostname /run/sandboxfs/planted || echo no-link; mv /run/sandboxfs/proxy.sock /run/sandboxfs/moved || echo no-move; test -S /run/sandboxfs/proxy.sock && echo socket"
	grep -qx no-link <<<"$output"
	grep -qx no-move <<<"$output"
	grep -qx socket <<<"$output"
	[ ! -e "$STATE"/sandboxes/*/net/planted ]
	[ "$(stat -c %u "$STATE"/sandboxes/*/net)" = 0 ]
	run run_in box "curl -sf -m 5 --unix-socket /run/sandboxfs/proxy.sock -x http://localhost http://good.test:$PORT/ || curl -sf -m 5 http://good.test:$PORT/"
	[[ "$output" == *"page of good"* ]]
}

@test "netproxy: every sandbox's proxy is served however many there are (130 allow-list sandboxes: 260 listeners)" {
	box
	serve good "$A"
	local i
	for i in $(seq 2 130); do
		new_iso "b$i" "network=allow:good.test:$PORT" >/dev/null
	done
	# the first made and the last made both reach their allowed name
	run run_in box "curl -sf -m 5 http://good.test:$PORT/"
	[[ "$output" == *"page of good"* ]]
	run run_in b130 "curl -sf -m 5 http://good.test:$PORT/"
	[[ "$output" == *"page of good"* ]]
}

@test "netproxy: a name the allow-list matches (any case, a trailing dot) is resolved as the policy read it" {
	box
	serve good "$A"
	run run_in box "curl -sf -m 5 http://GOOD.Test.:$PORT/; curl -sf -m 5 -p http://good.test.:$PORT/"
	[ "$status" -eq 0 ]
	[ "$(grep -c '^page of good$' <<<"$output")" = 2 ]
}

@test "netproxy: a docker sandbox on a base directory with an allow-list has both binds, its base and its proxy" {
	docker_require
	box
	serve good "$A"
	mkdir -p "$BATS_TEST_TMPDIR/base"
	echo from-base >"$BATS_TEST_TMPDIR/base/f"
	ctl_write "$MNT/ctl" "new db provider=docker image=$SFS_DOCKER_IMAGE base=$BATS_TEST_TMPDIR/base network=allow:good.test:$PORT" >/dev/null
	run run_in db "cat f; test -S /run/sandboxfs/proxy.sock && echo socket; wget -q -O - http://good.test:$PORT/"
	[[ "$output" == *from-base* ]]
	[[ "$output" == *socket* ]]
	[[ "$output" == *"page of good"* ]]
}
