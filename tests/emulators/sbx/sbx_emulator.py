#!/usr/bin/env python3
"""The control side of the fake sbx CLI (bin/sbx), for the conformance
suite's emulator contract (tests/bats/remote_helpers.bash): it serves
POST /_emu/faults (stored in ROOT/faults.json, which the CLI reads on each
call) and GET /_emu/stats {requests, sandboxes, processes} on 127.0.0.1,
and tells the CLI where the request log is (ROOT/emu.json).  On SIGTERM it
ends every process of every fake sandbox.
"""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sfs_emu  # noqa: E402

ap = sfs_emu.arg_parser(__doc__, "SBX_EMU_", root=False, faults=False)
ap.add_argument("--root", required=True)
ap.add_argument("--latency-ms", type=int, default=0)
ap.add_argument("--token", default="")  # the suite's secret: sbx has none
A = ap.parse_args()
if not A.port_file or not A.log:
    ap.error("--port-file and --log are required")
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
    return sfs_emu.live_pids(
        lambda env: root in env and any(e.startswith(b"SBX_FAKE_SANDBOX=") for e in env))


class H(sfs_emu.Handler):
    # the faults live in faults.json (the CLI applies them); this serves them
    emu = sfs_emu.Emulator()

    def dispatch(self):
        _, parts, _ = self.split_url()
        if self.command == "POST" and parts == ["_emu", "faults"]:
            try:
                body = json.loads(self.read_body() or b"{}")
            except ValueError:
                return self.send_error(400)
            try:
                with open(FAULTS) as f:
                    cur = json.load(f)
            except (OSError, ValueError):
                cur = {}
            cur.update(body)
            write_faults(cur)
            return self.send(200, cur)
        if self.command == "GET" and parts == ["_emu", "stats"]:
            with open(A.log) as f:
                reqs = sum(1 for line in f if '"argv"' in line)
            d = os.path.join(ROOT, "sandboxes")
            sbs = [n for n in os.listdir(d) if os.path.isfile(os.path.join(d, n, "meta.json"))]
            return self.send(200, {"requests": reqs, "sandboxes": len(sbs),
                                   "processes": len(sandbox_pids())})
        self.send_error(404)


def stop():
    # containers of the docker backend (SBX_FAKE_BACKEND=docker)
    try:
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


sfs_emu.serve(H.emu, H, A, cleanup=stop)
