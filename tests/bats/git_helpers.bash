# Shared by git.bats and git_net.bats: a directory to serve with
# `git http-backend` as a CGI.

# git_cgi_root DIR REPO: DIR/srv/r.git (a bare clone of REPO) and
# DIR/cgi-bin/git (the CGI script serving DIR/srv), all world-readable
# (http.server runs CGI scripts as nobody when started by root).
git_cgi_root() {
	chmod 755 "$1"
	mkdir "$1/cgi-bin" "$1/srv"
	git clone -q --bare "$2" "$1/srv/r.git"
	cat >"$1/cgi-bin/git" <<-EOF
	#!/bin/sh
	export GIT_PROJECT_ROOT=$1/srv GIT_HTTP_EXPORT_ALL=1
	export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'
	exec git http-backend
	EOF
	chmod -R a+rX "$1"
	chmod 755 "$1/cgi-bin/git"
}
