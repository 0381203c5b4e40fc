#!/usr/bin/env python3
"""A local emulator of the Cloudflare sandbox bridge's routes, for tests.

Standard library only.  Listens on 127.0.0.1 only and contacts nothing else.
The routes and shapes are those of provider-apis.md section 4 and of the
Worker in providers/cloudflare/worker (the bridge sandboxfs ships):

    GET    /health                          {"ok": true} (no auth)
    POST   /v1/sandbox                      {"id"} (26 base32 characters)
    GET    /v1/sandbox/ID/running           {"running": true, "workspace"}
    DELETE /v1/sandbox/ID                   204, every process of it ended
    POST   /v1/sandbox/ID/exec              {"argv", "timeout_ms"?} -> SSE:
           stdout/stderr events (base64 data), then exit {"exit_code"}
    GET|PUT /v1/sandbox/ID/file/<path>      raw bytes, paths in the workspace
    POST   /v1/sandbox/ID/persist           a tar of the workspace
    POST   /v1/sandbox/ID/hydrate           a tar unpacked into the workspace
    POST|DELETE /v1/sandbox/ID/tunnel/PORT  {"id","port","url","hostname",...}
    POST   /v1/sandbox/ID/session, DELETE .../session/SID

Each sandbox is a real directory (workspace, tmp as its TMPDIR, home as its
HOME); commands are real child processes (argv, not a shell line) started
in the workspace, in sessions of their own, carrying CF_EMU_SANDBOX=ID in
their environment so DELETE (and the stats) find every one.  Deviation from
Cloudflare: the workspace is a host directory, not /workspace; `running`
names it (the shipped Worker names /workspace there), and the file routes
and exec's cwd are confined to it.

    cloudflare_emulator.py [--port N] [--root DIR] [--token T]...
                           [--latency-ms N] [--fail-rate P] [--drop-rate P]
                           [--slow-rate P] [--log FILE] [--port-file FILE]

Every route but /health needs "Authorization: Bearer T".  The chosen port
is printed as "listening on 127.0.0.1:PORT" and written to --port-file.
Fault switches can be changed while running:
    POST /_emu/faults {"latency_ms":..,"fail_rate":..,"drop_rate":..,
                       "slow_rate":..,"hang":bool,"fail_paths":"substring",
                       "rate_limit":N}   (the next N requests answer 429
                                          with Retry-After: 1)
slow_rate also splits each SSE event across two writes with a pause.
GET /_emu/stats gives request counts, live sandboxes and processes.  Both
need no auth and are not the bridge's.
"""

import base64
import io
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sfs_emu  # noqa: E402

EMU = sfs_emu.Emulator({"rate_limit": 0})
EMU.stats.update(rate_limited=0, execs=0)
LOCK, FAULTS, STATS, CFG = EMU.lock, EMU.faults, EMU.stats, EMU.cfg
SANDBOXES = {}  # id -> {"dir", "ws", "tunnels"}
ID_RE = re.compile(r"^[a-z2-7]{1,128}$")
BODY_MAX = 32 << 20
B32 = "abcdefghijklmnopqrstuvwxyz234567"


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def sandbox(sid, start=True):
    """The sandbox of a valid id; the bridge starts a container for any id."""
    if not ID_RE.match(sid):
        raise ApiError(400, "invalid_request",
                       "invalid sandbox id \"%s\": ids match ^[a-z2-7]{1,128}$" % sid)
    with LOCK:
        sb = SANDBOXES.get(sid)
        if sb is None and start:
            d = os.path.join(CFG["root"], sid)
            for sub in ("workspace", "tmp", "home"):
                os.makedirs(os.path.join(d, sub), exist_ok=True)
            sb = SANDBOXES[sid] = {"dir": d, "ws": os.path.join(d, "workspace"),
                                   "tunnels": {}, "sessions": set()}
        return sb


def procs_of(sid=None):
    """Live processes carrying CF_EMU_SANDBOX (=sid when given)."""
    def match(env):
        mine = [e for e in env if e.startswith(b"CF_EMU_SANDBOX=")]
        if not mine or (sid and mine[0] != b"CF_EMU_SANDBOX=" + sid.encode()):
            return False
        return any(e.startswith(b"HOME=" + CFG["root"].encode()) for e in env)
    return sfs_emu.live_pids(match)


def destroy(sid):
    with LOCK:
        sb = SANDBOXES.pop(sid, None)
    for _ in range(3):
        for p in procs_of(sid):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
    if sb:
        shutil.rmtree(sb["dir"], ignore_errors=True)


def resolve(sb, path):
    """A file route's path (absolute, given without its leading '/') to a
    host path inside the workspace; anything else is 403."""
    norm = os.path.normpath("/" + path)
    if norm != sb["ws"] and not norm.startswith(sb["ws"] + "/"):
        raise ApiError(403, "invalid_request", "path %s is outside the workspace" % norm)
    return norm


def persist(sb, excludes):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name in sorted(os.listdir(sb["ws"])):
            if name in excludes:
                continue
            t.add(os.path.join(sb["ws"], name), arcname=name)
    return buf.getvalue()


def hydrate(sb, body):
    try:
        t = tarfile.open(fileobj=io.BytesIO(body), mode="r:*")
        members = t.getmembers()
    except tarfile.TarError as e:
        raise ApiError(400, "invalid_request", "not a tar archive: %s" % e)
    for m in members:
        dest = os.path.normpath(os.path.join(sb["ws"], m.name))
        if dest != sb["ws"] and not dest.startswith(sb["ws"] + "/"):
            raise ApiError(400, "invalid_request", "archive entry %s leaves the workspace" % m.name)
    try:
        if hasattr(tarfile, "tar_filter"):
            t.extractall(sb["ws"], filter="tar")
        else:
            t.extractall(sb["ws"])
    except (tarfile.TarError, OSError) as e:
        raise ApiError(502, "workspace_archive_error", "hydrate failed: %s" % e)


# ---- HTTP ------------------------------------------------------------------------

class Handler(sfs_emu.Handler):
    emu = EMU

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > BODY_MAX:
            self.rfile.read(n)
            raise ApiError(413, "payload_too_large", "body of %d bytes is over 32 MiB" % n)
        return self.read_body()

    def _error(self, status, code, message, headers=None):
        self.send(status, {"error": message, "code": code}, headers=headers)

    def _injected(self, status, headers):
        if status == 429:
            return self._error(429, "rate_limited", "Too many requests", headers=headers)
        return self._error(status, "capacity_exceeded", "injected failure", headers=headers)

    def dispatch(self):
        url, parts, q = self.split_url()
        self.count("%s /%s" % (self.command, "/".join(parts[:1] + parts[3:4])))
        try:
            body = self._body()
        except ApiError as e:
            return self._error(e.status, e.code, e.message)

        if parts[:1] == ["_emu"]:
            return self._emu(parts, body)
        if parts == ["health"]:
            return self.send(200, {"ok": True})
        # fault injection, before auth so it hits everything
        if self.inject_faults(self._injected):
            return

        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in CFG["tokens"]:
            return self._error(401, "unauthorized", "Unauthorized")
        try:
            if parts[:2] == ["v1", "sandbox"]:
                return self._v1(parts[2:], q, body)
            raise ApiError(404, "not_found", "no route %s %s" % (self.command, url.path))
        except ApiError as e:
            EMU.log("  -> %d %s" % (e.status, e.message))
            return self._error(e.status, e.code, e.message)
        except FileNotFoundError as e:
            return self._error(404, "workspace_read_not_found", "file not found: %s" % e.filename)
        except IsADirectoryError as e:
            return self._error(400, "invalid_request", "is a directory: %s" % e.filename)
        except OSError as e:
            return self._error(400, "invalid_request", "%s: %s" % (e.strerror, e.filename))

    # ---- emulator control -------------------------------------------------------

    def _emu(self, parts, body):
        if not self.emu_control(parts, body, lambda: {"sandboxes": len(SANDBOXES),
                                                      "processes": len(procs_of())}):
            self.send(404, {"error": "no such emulator route", "code": "not_found"})

    # ---- the bridge -------------------------------------------------------------

    def _v1(self, parts, q, body):
        cmd = self.command
        if not parts:
            if cmd != "POST":
                raise ApiError(405, "invalid_request", "use POST /v1/sandbox")
            sid = "".join(random.choice(B32) for _ in range(26))
            return self.send(200, {"id": sid})
        sid, rest = parts[0], parts[1:]
        if not rest and cmd == "DELETE":
            sandbox(sid, start=False)  # validates the id
            destroy(sid)
            return self.send(204)
        sb = sandbox(sid)
        what = rest[0] if rest else ""
        if what == "running" and cmd == "GET":
            return self.send(200, {"running": True, "workspace": sb["ws"]})
        if what == "exec" and cmd == "POST":
            return self._exec(sb, sid, body)
        if what == "file" and cmd in ("GET", "PUT"):
            path = resolve(sb, "/".join(rest[1:]))
            if cmd == "GET":
                with open(path, "rb") as f:
                    return self.send(200, raw=f.read(), ctype="application/octet-stream")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(body)
            return self.send(200, {"ok": True})
        if what == "persist" and cmd == "POST":
            ex = set(x for x in q.get("excludes", "").split(",") if x)
            return self.send(200, raw=persist(sb, ex), ctype="application/x-tar")
        if what == "hydrate" and cmd == "POST":
            hydrate(sb, body)
            return self.send(200, {"ok": True})
        if what == "tunnel" and len(rest) == 2 and rest[1].isdigit():
            port = int(rest[1])
            if port < 1 or port > 65535 or port == 3000:
                raise ApiError(400, "invalid_request", "port %d cannot be tunnelled" % port)
            if cmd == "DELETE":
                sb["tunnels"].pop(port, None)
                return self.send(204)
            host = "%s.trycloudflare.com" % "".join(random.choice(B32) for _ in range(12))
            t = sb["tunnels"].setdefault(port, {
                "id": "tun%d" % port, "port": port, "url": "https://" + host,
                "hostname": host, "name": None,
                "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            return self.send(200, t)
        if what == "session" and cmd == "POST" and len(rest) == 1:
            s = "".join(random.choice(B32) for _ in range(16))
            sb["sessions"].add(s)
            return self.send(200, {"id": s})
        if what == "session" and cmd == "DELETE" and len(rest) == 2:
            sb["sessions"].discard(rest[1])
            return self.send(204)
        raise ApiError(404, "not_found", "no route %s %s" % (cmd, self.path))

    def _event(self, name, data):
        ev = ("event: %s\ndata: %s\n\n" % (name, data)).encode()
        if random.random() < FAULTS["slow_rate"] and len(ev) > 2:
            cut = random.randint(1, len(ev) - 1)  # split anywhere, even mid-line
            self.send_chunk(ev[:cut])
            time.sleep(0.2)
            self.send_chunk(ev[cut:])
        else:
            self.send_chunk(ev)

    def _exec(self, sb, sid, body):
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            raise ApiError(400, "invalid_request", "body is not JSON")
        argv = data.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ApiError(400, "invalid_request", "argv must be a non-empty array of strings")
        cwd = sb["ws"]
        if data.get("cwd"):
            cwd = resolve(sb, data["cwd"].lstrip("/"))
        timeout = data.get("timeout_ms")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.path.join(sb["dir"], "home"),
               "TMPDIR": os.path.join(sb["dir"], "tmp"), "LANG": "C.UTF-8", "CF_EMU_SANDBOX": sid}
        STATS["execs"] += 1
        try:
            p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True)
        except OSError as e:
            raise ApiError(400, "exec_error", "cannot start %s: %s" % (argv[0], e.strerror))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        chunks = []
        cond = threading.Condition()
        open_streams = [2]

        def pump(stream, name):
            for c in iter(lambda: stream.read1(65536), b""):
                with cond:
                    chunks.append((name, c))
                    cond.notify_all()
            with cond:
                open_streams[0] -= 1
                cond.notify_all()

        for s, n in ((p.stdout, "stdout"), (p.stderr, "stderr")):
            threading.Thread(target=pump, args=(s, n), daemon=True).start()
        deadline = time.time() + timeout / 1000.0 if timeout else None
        timed_out = False
        try:
            while True:
                with cond:
                    while not chunks and open_streams[0] > 0:
                        left = None if deadline is None else deadline - time.time()
                        if left is not None and left <= 0:
                            break
                        cond.wait(left if left is not None else 1.0)
                    batch, chunks[:] = list(chunks), []
                    done = open_streams[0] == 0
                for name, c in batch:
                    self._event(name, base64.b64encode(c).decode())
                if done:
                    break
                if deadline is not None and time.time() >= deadline:
                    timed_out = True
                    break
            if timed_out:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
                self._event("error", json.dumps({"error": "command timed out after %d ms" % timeout,
                                                 "code": "exec_error"}))
            else:
                code = p.wait()
                self._event("exit", json.dumps({"exit_code": code if code >= 0 else 128 - code}))
            self.send_chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def main():
    ap = sfs_emu.arg_parser(__doc__, "CF_EMU_")
    ap.add_argument("--token", action="append",
                    help="a bearer token it accepts (repeatable; default emulator-token)")
    a = ap.parse_args()
    EMU.setup(a, root_prefix="cloudflare-emu-")
    CFG["tokens"] = a.token or ["emulator-token"]

    def cleanup():
        for sid in list(SANDBOXES):
            destroy(sid)

    sfs_emu.serve(EMU, Handler, a, cleanup)


if __name__ == "__main__":
    main()
