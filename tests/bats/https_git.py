#!/usr/bin/env python3
"""git http-backend behind HTTPS on 127.0.0.1, for tests/bats/git_net.bats.

usage: https_git.py PORT ROOT CERT KEY SEEN [AUTH]
ROOT holds cgi-bin/git (a script running `git http-backend`).  Every
Authorization header received is appended to SEEN; with AUTH (a whole
header value, "Basic …"), requests without exactly that header get 401.
The CGI runs as a subprocess (have_fork off): a forked CGI would read and
write the TLS socket's raw bytes.
"""
import http.server
import os
import ssl
import sys

port, root, cert, key, seen = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
want = sys.argv[6] if len(sys.argv) > 6 else None


class H(http.server.CGIHTTPRequestHandler):
    have_fork = False

    def _allowed(self):
        auth = self.headers.get("Authorization")
        if auth:
            with open(seen, "a") as f:
                f.write(auth + "\n")
        if want is None or auth == want:
            return True
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="git"')
        self.send_header("Content-Length", "0")
        self.end_headers()
        return False

    def do_GET(self):
        if self._allowed():
            super().do_GET()

    def do_POST(self):
        if self._allowed():
            super().do_POST()


os.chdir(root)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
