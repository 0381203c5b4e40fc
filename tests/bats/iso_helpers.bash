# Fixtures for the tests of isolation=bwrap and the network allow-list
# proxy (isolation.bats, netproxy.bats): namespace holders, runs inside,
# HTTP servers on loopback addresses of their own.

# iso_require: skips the test when bwrap is missing (fails it in CI: sfs_need).
iso_require() {
	command -v bwrap >/dev/null || sfs_need "bubblewrap is not installed (.ci/setup installs it)"
}

# iso_teardown: the servers, the namespace holders, the daemon, the
# containers a test left.
iso_teardown() {
	net_teardown_servers
	iso_kill_holders
	sfs_teardown
	docker_cleanup
}

# Kills every namespace holder this test's daemon started (they are not
# the daemon's runs: their environment is bwrap's own, empty one).
iso_kill_holders() {
	local st="${STATE:-$BATS_TEST_TMPDIR/state}" f p
	for f in "$st"/sandboxes/*/holder; do
		[ -f "$f" ] || continue
		for p in $(jq -r '.holder.init, .holder.target' "$f" 2>/dev/null); do
			[ "$p" -gt 1 ] 2>/dev/null || continue
			grep -qs -e bwrap -e sleep "/proc/$p/cmdline" && { kill -9 "$p" 2>/dev/null || true; }
		done
	done
	# and any holder whose log is in this state dir (one the file no
	# longer names: replaced, or made by a daemon that died before writing it)
	for f in /proc/[0-9]*/fd/1; do
		case "$(readlink "$f" 2>/dev/null)" in
		"$st"/sandboxes/*/holder.log*)
			p=${f#/proc/}
			kill -9 "${p%%/*}" 2>/dev/null
			;;
		esac
	done
	return 0
}

# run_in SANDBOX CMD: runs CMD in SANDBOX, waits for it, prints its journal;
# fails unless it exited 0.
run_in() {
	local n
	n=$(ctl_write "$MNT/$1/ctl" "exec $2") || return 1
	local st
	st=$(cat "$MNT/$1/runs/$n/wait")
	cat "$MNT/$1/runs/$n/journal"
	[ "$st" = "exited 0" ] || {
		echo "run $n: $st" >&2
		return 1
	}
}

# crash_daemon: kill -9 of the daemon; returns once it has exited (its
# state-dir lock is free then) and its mount is gone.
crash_daemon() {
	kill -9 "$SFS_PID"
	wait_for daemon_gone
	umount -l "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT" 2>/dev/null || true
}

daemon_gone() {
	local st
	st=$(awk '{print $3}' "/proc/$SFS_PID/stat" 2>/dev/null) || return 0
	[ "$st" = Z ]
}

new_iso() {
	ctl_write "$MNT/ctl" "new $1 provider=local isolation=bwrap ${2:-}"
}

# serve NAME ADDR [CMD...]: a static HTTP server on ADDR:$PORT whose page
# says NAME, or CMD (a server of the caller's on ADDR:$PORT) run in the
# same directory, $BATS_TEST_TMPDIR/www-NAME.
serve() {
	local name=$1 addr=$2
	shift 2
	[ $# -gt 0 ] || set -- python3 -m http.server "$PORT" --bind "$addr"
	mkdir -p "$BATS_TEST_TMPDIR/www-$name"
	echo "page of $name" >"$BATS_TEST_TMPDIR/www-$name/index.html"
	(cd "$BATS_TEST_TMPDIR/www-$name" && exec "$@" >"$BATS_TEST_TMPDIR/www-$name.log" 2>&1 3>&-) &
	echo $! >>"$BATS_TEST_TMPDIR/servers.pids"
	wait_for curl -sf -o /dev/null "http://$addr:$PORT/"
}

# Two servers on two loopback addresses of their own, the names good.test,
# a.good.test and bad.test mapped to them by the proxy's resolver override.
net_setup() {
	PORT=$((20000 + RANDOM % 20000))
	A=127.0.0.$((100 + RANDOM % 50))
	B=127.0.0.$((150 + RANDOM % 50))
	serve good "$A"
	serve bad "$B"
	sfs_unmount
	sfs_mount -o "proxy.resolve=good.test=$A;a.good.test=$A;bad.test=$B"
}

net_teardown_servers() {
	local p f
	if [ -f "$BATS_TEST_TMPDIR/servers.pids" ]; then
		while read -r p; do kill "$p" 2>/dev/null || true; done <"$BATS_TEST_TMPDIR/servers.pids"
	fi
	# and by where they serve from, should a pid have been another's
	for f in /proc/[0-9]*/cwd; do
		case "$(readlink "$f" 2>/dev/null)" in
		"$BATS_TEST_TMPDIR"/www-*)
			p=${f#/proc/}
			kill "${p%%/*}" 2>/dev/null || true
			;;
		esac
	done
	return 0
}

# new_box NAME: a local sandbox, isolated with bwrap where bwrap is there
new_box() {
	if command -v bwrap >/dev/null; then
		new_iso "$1" >/dev/null
	else
		ctl_write "$MNT/ctl" "new $1 provider=local" >/dev/null
	fi
}

# host_ws: the workspace directory on the host of the test's one sandbox
host_ws() {
	local d=("$STATE"/sandboxes/*/workspace)
	[ "${#d[@]}" -eq 1 ] && [ -d "${d[0]}" ] && echo "${d[0]}"
}
