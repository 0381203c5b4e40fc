#!/usr/bin/env python3
"""The control side of the fake sbx CLI (bin/sbx), for the conformance
suite's emulator contract (tests/bats/remote_helpers.bash): it serves
POST /_emu/faults (stored in ROOT/faults.json, which the CLI reads on each
call) and GET /_emu/stats {requests, sandboxes, processes} on 127.0.0.1,
and tells the CLI where the request log is (ROOT/emu.json).  On SIGTERM it
ends every process of every fake sandbox.
"""
import argparse
import json
import os
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ap = argparse.ArgumentParser()
ap.add_argument("--root", required=True)
ap.add_argument("--port-file", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--latency-ms", type=int, default=0)
ap.add_argument("--token", default="")  # the suite's secret: sbx has none
A = ap.parse_args()
ROOT = os.path.abspath(A.root)
os.makedirs(os.path.join(ROOT, "sandboxes"), exist_ok=True)
with open(os.path.join(ROOT, "emu.json"), "w") as f:
    json.dump({"log": os.path.abspath(A.log)}, f)
FAULTS = os.path.join(ROOT, "faults.json")


def write_faults(f):
    tmp = FAULTS + ".tmp"
    with open(tmp, "w") as o:
        json.dump(f, o)
    os.rename(tmp, FAULTS)


write_faults({"latency_ms": A.latency_ms} if A.latency_ms else {})
open(A.log, "a").close()


def sandbox_pids():
    root = ("SBX_FAKE_ROOT=%s" % ROOT).encode()
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % p, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if root in env and any(e.startswith(b"SBX_FAKE_SANDBOX=") for e in env):
            out.append(int(p))
    return out


class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, obj):
        b = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_POST(self):
        if self.path != "/_emu/faults":
            self.send_error(404)
            return
        n = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            self.send_error(400)
            return
        try:
            with open(FAULTS) as f:
                cur = json.load(f)
        except (OSError, ValueError):
            cur = {}
        cur.update(body)
        write_faults(cur)
        self.reply(cur)

    def do_GET(self):
        if self.path != "/_emu/stats":
            self.send_error(404)
            return
        with open(A.log) as f:
            reqs = sum(1 for line in f if '"argv"' in line)
        d = os.path.join(ROOT, "sandboxes")
        sbs = [n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n, "meta.json"))]
        self.reply({"requests": reqs, "sandboxes": len(sbs),
                    "processes": len(sandbox_pids())})


def stop(*_):
    # containers of the docker backend (SBX_FAKE_BACKEND=docker)
    try:
        import subprocess
        ids = subprocess.run(["docker", "ps", "-aq", "--filter", "label=sbxfake.root=" + ROOT],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             timeout=20).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f"] + [i.decode() for i in ids],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)
    except (OSError, subprocess.SubprocessError):
        pass
    for p in sandbox_pids():
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    os._exit(0)


signal.signal(signal.SIGTERM, stop)
srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(A.port_file + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(A.port_file + ".tmp", A.port_file)
print("listening on 127.0.0.1:%d" % srv.server_address[1], flush=True)
srv.serve_forever()
