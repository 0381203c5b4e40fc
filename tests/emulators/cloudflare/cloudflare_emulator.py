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

import argparse
import base64
import io
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import tarfile
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.RLock()
SANDBOXES = {}  # id -> {"dir", "ws", "tunnels"}
FAULTS = {"latency_ms": 0, "fail_rate": 0.0, "drop_rate": 0.0, "slow_rate": 0.0,
          "hang": False, "fail_paths": "", "rate_limit": 0}
STATS = {"requests": 0, "by_route": {}, "rate_limited": 0, "execs": 0}
CFG = {}
ID_RE = re.compile(r"^[a-z2-7]{1,128}$")
BODY_MAX = 32 << 20
B32 = "abcdefghijklmnopqrstuvwxyz234567"


def log_line(text):
    path = CFG.get("log")
    if not path:
        return
    with LOCK:
        with open(path, "a") as f:
            f.write(text + "\n")


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
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                env = f.read().split(b"\0")
            mine = [e for e in env if e.startswith(b"CF_EMU_SANDBOX=")]
            if not mine or (sid and mine[0] != b"CF_EMU_SANDBOX=" + sid.encode()):
                continue
            if not any(e.startswith(b"HOME=" + CFG["root"].encode()) for e in env):
                continue
            with open("/proc/%s/stat" % d) as s:
                if s.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    pids.append(int(d))
        except OSError:
            pass
    return pids


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

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > BODY_MAX:
            self.rfile.read(n)
            raise ApiError(413, "payload_too_large", "body of %d bytes is over 32 MiB" % n)
        return self.rfile.read(n) if n else b""

    def _send(self, status, payload=None, ctype="application/json", raw=None, headers=None):
        data = raw if raw is not None else (b"" if payload is None else
                                            json.dumps(payload).encode())
        slow = random.random() < FAULTS["slow_rate"]
        self.send_response(status)
        if status != 204:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if slow and len(data) > 1:
            half = len(data) // 2
            self.wfile.write(data[:half])
            self.wfile.flush()
            time.sleep(1.0)
            self.wfile.write(data[half:])
        elif status != 204:
            self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status, code, message, headers=None):
        self._send(status, {"error": message, "code": code}, headers=headers)

    def _drop(self):
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True

    def _dispatch(self):
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        STATS["requests"] += 1
        route = "%s /%s" % (self.command, "/".join(parts[:1] + parts[3:4]))
        STATS["by_route"][route] = STATS["by_route"].get(route, 0) + 1
        log_line("%s %s %s" % (time.strftime("%H:%M:%S"), self.command, self.path))
        try:
            body = self._body()
        except ApiError as e:
            return self._error(e.status, e.code, e.message)

        if parts[:1] == ["_emu"]:
            return self._emu(parts, body)
        if parts == ["health"]:
            return self._send(200, {"ok": True})
        # fault injection, before auth so it hits everything
        while FAULTS["hang"]:
            time.sleep(0.05)
        if FAULTS["latency_ms"]:
            time.sleep(FAULTS["latency_ms"] / 1000.0)
        with LOCK:
            limited = FAULTS["rate_limit"] > 0
            if limited:
                FAULTS["rate_limit"] -= 1
                STATS["rate_limited"] += 1
        if limited:
            log_line("  -> injected 429")
            return self._error(429, "rate_limited", "Too many requests",
                               headers={"Retry-After": "1"})
        targeted = not FAULTS["fail_paths"] or FAULTS["fail_paths"] in self.path
        if targeted and random.random() < FAULTS["drop_rate"]:
            log_line("  -> dropped")
            return self._drop()
        if targeted and random.random() < FAULTS["fail_rate"]:
            log_line("  -> injected 503")
            return self._error(503, "capacity_exceeded", "injected failure")

        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in CFG["tokens"]:
            return self._error(401, "unauthorized", "Unauthorized")
        try:
            if parts[:2] == ["v1", "sandbox"]:
                return self._v1(parts[2:], q, body)
            raise ApiError(404, "not_found", "no route %s %s" % (self.command, url.path))
        except ApiError as e:
            log_line("  -> %d %s" % (e.status, e.message))
            return self._error(e.status, e.code, e.message)
        except FileNotFoundError as e:
            return self._error(404, "workspace_read_not_found", "file not found: %s" % e.filename)
        except IsADirectoryError as e:
            return self._error(400, "invalid_request", "is a directory: %s" % e.filename)
        except OSError as e:
            return self._error(400, "invalid_request", "%s: %s" % (e.strerror, e.filename))

    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def do_PUT(self):
        self._dispatch()

    def do_DELETE(self):
        self._dispatch()

    # ---- emulator control -------------------------------------------------------

    def _emu(self, parts, body):
        if parts[1:] == ["faults"] and self.command == "POST":
            FAULTS.update(json.loads(body or b"{}"))
            return self._send(200, FAULTS)
        if parts[1:] == ["stats"]:
            with LOCK:
                n = len(SANDBOXES)
            return self._send(200, dict(STATS, sandboxes=n, processes=len(procs_of())))
        return self._send(404, {"error": "no such emulator route", "code": "not_found"})

    # ---- the bridge -------------------------------------------------------------

    def _v1(self, parts, q, body):
        cmd = self.command
        if not parts:
            if cmd != "POST":
                raise ApiError(405, "invalid_request", "use POST /v1/sandbox")
            sid = "".join(random.choice(B32) for _ in range(26))
            return self._send(200, {"id": sid})
        sid, rest = parts[0], parts[1:]
        if not rest and cmd == "DELETE":
            sandbox(sid, start=False)  # validates the id
            destroy(sid)
            return self._send(204)
        sb = sandbox(sid)
        what = rest[0] if rest else ""
        if what == "running" and cmd == "GET":
            return self._send(200, {"running": True, "workspace": sb["ws"]})
        if what == "exec" and cmd == "POST":
            return self._exec(sb, sid, body)
        if what == "file" and cmd in ("GET", "PUT"):
            path = resolve(sb, "/".join(rest[1:]))
            if cmd == "GET":
                with open(path, "rb") as f:
                    return self._send(200, raw=f.read(), ctype="application/octet-stream")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(body)
            return self._send(200, {"ok": True})
        if what == "persist" and cmd == "POST":
            ex = set(x for x in q.get("excludes", "").split(",") if x)
            return self._send(200, raw=persist(sb, ex), ctype="application/x-tar")
        if what == "hydrate" and cmd == "POST":
            hydrate(sb, body)
            return self._send(200, {"ok": True})
        if what == "tunnel" and len(rest) == 2 and rest[1].isdigit():
            port = int(rest[1])
            if port < 1 or port > 65535 or port == 3000:
                raise ApiError(400, "invalid_request", "port %d cannot be tunnelled" % port)
            if cmd == "DELETE":
                sb["tunnels"].pop(port, None)
                return self._send(204)
            host = "%s.trycloudflare.com" % "".join(random.choice(B32) for _ in range(12))
            t = sb["tunnels"].setdefault(port, {
                "id": "tun%d" % port, "port": port, "url": "https://" + host,
                "hostname": host, "name": None,
                "createdAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
            return self._send(200, t)
        if what == "session" and cmd == "POST" and len(rest) == 1:
            s = "".join(random.choice(B32) for _ in range(16))
            sb["sessions"].add(s)
            return self._send(200, {"id": s})
        if what == "session" and cmd == "DELETE" and len(rest) == 2:
            sb["sessions"].discard(rest[1])
            return self._send(204)
        raise ApiError(404, "not_found", "no route %s %s" % (cmd, self.path))

    def _event(self, name, data):
        ev = ("event: %s\ndata: %s\n\n" % (name, data)).encode()
        if random.random() < FAULTS["slow_rate"] and len(ev) > 2:
            cut = random.randint(1, len(ev) - 1)  # split anywhere, even mid-line
            self._chunk(ev[:cut])
            time.sleep(0.2)
            self._chunk(ev[cut:])
        else:
            self._chunk(ev)

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

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
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=int(env("CF_EMU_PORT", "0")))
    ap.add_argument("--root", default=env("CF_EMU_ROOT"))
    ap.add_argument("--token", action="append",
                    help="a bearer token it accepts (repeatable; default emulator-token)")
    ap.add_argument("--latency-ms", type=int, default=int(env("CF_EMU_LATENCY_MS", "0")))
    ap.add_argument("--fail-rate", type=float, default=float(env("CF_EMU_FAIL_RATE", "0")))
    ap.add_argument("--drop-rate", type=float, default=float(env("CF_EMU_DROP_RATE", "0")))
    ap.add_argument("--slow-rate", type=float, default=float(env("CF_EMU_SLOW_RATE", "0")))
    ap.add_argument("--log", default=env("CF_EMU_LOG"))
    ap.add_argument("--port-file", default=env("CF_EMU_PORT_FILE"))
    a = ap.parse_args()
    root = a.root or tempfile.mkdtemp(prefix="cloudflare-emu-")
    os.makedirs(root, exist_ok=True)
    CFG.update(root=os.path.realpath(root), tokens=a.token or ["emulator-token"], log=a.log)
    FAULTS.update(latency_ms=a.latency_ms, fail_rate=a.fail_rate, drop_rate=a.drop_rate,
                  slow_rate=a.slow_rate)
    srv = Server(("127.0.0.1", a.port), Handler)
    CFG["port"] = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write("%d\n" % CFG["port"])
        os.rename(a.port_file + ".tmp", a.port_file)
    print("listening on 127.0.0.1:%d" % CFG["port"], flush=True)

    def stop(*_):
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        for sid in list(SANDBOXES):
            destroy(sid)
        if not a.root:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
