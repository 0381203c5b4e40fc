"""sfs_emu: what every sandboxfs test emulator shares (standard library only).

An emulator is one Emulator (its lock, fault switches, stats, config and
request log), one Handler subclass (its routes) and a main() that parses
the common flags and calls serve().  Servers bind 127.0.0.x only.

    import os, sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "common"))
    import sfs_emu

    EMU = sfs_emu.Emulator(extra_faults={"rate_limit": 0})

    class Handler(sfs_emu.Handler):
        emu = EMU
        def dispatch(self):                        # every method lands here
            url, parts, q = self.split_url()
            body = self.read_body()
            self.count("%s /%s" % (self.command, "/".join(parts[:2])))
            if parts[:1] == ["_emu"]:
                return self.emu_control(parts, body, lambda: {"sandboxes": 0}) \
                    or self.send(404, {"error": "no such emulator route"})
            if self.inject_faults(lambda st, hdrs: self.send(st, {"error": "x"},
                                                             headers=hdrs)):
                return
            ...

    def main():
        ap = sfs_emu.arg_parser(__doc__, env_prefix="FOO_EMU_")
        ap.add_argument("--token", default="t")     # the emulator's own flags
        a = ap.parse_args()
        root = EMU.setup(a, root_prefix="foo-emu-")
        sfs_emu.serve(EMU, Handler, a, cleanup=lambda: ...)

Emulator(extra_faults=None)
    .lock (RLock), .faults (dict: DEFAULT_FAULTS + extra_faults), .stats
    ({"requests", "by_route"}), .cfg (dict; "port", "root", "log" set here).
    .log(text)         appends a line to --log (if given).
    .setup(args, root_prefix=None)  copies --log and the fault flags found
                       on args into cfg/faults; with root_prefix, makes the
                       root (args.root or a fresh temp dir) and returns it.
arg_parser(doc, env_prefix, root=True, faults=True)
    argparse with --port --log --port-file [--root] [--latency-ms
    --fail-rate --drop-rate --slow-rate], each defaulting to the env var
    env_prefix + NAME (PORT, ROOT, LOG, PORT_FILE, LATENCY_MS, ...).
serve(emu, handler_cls, args, cleanup=None, host="127.0.0.1")
    binds host:args.port, sets emu.cfg["port"], writes --port-file
    (atomically, "PORT\\n"), prints "listening on HOST:PORT", serves until
    SIGTERM/SIGINT, then runs cleanup() and removes a temp root it made.
Handler (BaseHTTPRequestHandler, HTTP/1.1, quiet): set `emu`, define
    dispatch().  read_body(), split_url() -> (url, parts, q: last value of
    each query key), send(status, payload=None, ctype, raw, headers) (JSON
    unless raw; no body on 204; the slow_rate fault stalls half way),
    send_chunk(data), drop(), count(route, tag=""), inject_faults(fail), emu_control(parts,
    body, stats).

Helpers: now_iso(), live_pids(match), parse_multipart(ctype, body),
    os_error(e) -> (status, code, message) of a file route's OSError.

Fault switches (POST /_emu/faults merges JSON into emu.faults):
    latency_ms, hang, stall_path (while set, a request whose path holds it
    waits, as all do under hang), fail_paths (substring a request's path
    must hold for drop/fail/slow), drop_rate, fail_rate, slow_rate; optional (present
    when given in extra_faults): rate_limit (next N requests get 429 with
    Retry-After: 1), fail_count (next N targeted requests fail), status
    (the injected failure's status, default 503), retry_after.
"""

import argparse
import datetime
import json
import os
import random
import shutil
import signal
import socket
import tempfile
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_FAULTS = {"latency_ms": 0, "fail_rate": 0.0, "drop_rate": 0.0, "slow_rate": 0.0,
                  "hang": False, "fail_paths": "", "stall_path": ""}


def now_iso():
    """The current UTC time as 2026-01-02T03:04:05.678901Z."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def live_pids(match):
    """Pids of the live (not zombie) processes whose environment (a list of
    b"K=V") satisfies match: how emulators find what they started, setsid'd
    process groups included."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                env = f.read().split(b"\0")
            if not match(env):
                continue
            with open("/proc/%s/stat" % d, "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            pids.append(int(d))
    return pids


def parse_multipart(ctype, body):
    """[(field, filename, bytes)] of a multipart/form-data body whose
    Content-Type is ctype; ValueError without a boundary."""
    marker = "boundary="
    if marker not in ctype:
        raise ValueError("multipart boundary missing")
    boundary = ctype.split(marker, 1)[1].split(";")[0].strip().strip('"').encode()
    parts = []
    for chunk in body.split(b"--" + boundary):
        if not chunk or chunk.startswith(b"--"):
            continue
        if chunk.startswith(b"\r\n"):
            chunk = chunk[2:]
        head, _, data = chunk.partition(b"\r\n\r\n")
        if data.endswith(b"\r\n"):
            data = data[:-2]
        name = filename = None
        for line in head.decode("utf-8", "replace").split("\r\n"):
            if line.lower().startswith("content-disposition"):
                for item in line.split(";"):
                    item = item.strip()
                    if item.startswith("name="):
                        name = item[5:].strip('"')
                    elif item.startswith("filename="):
                        filename = item[9:].strip('"')
        if name:
            parts.append((name, filename, data))
    return parts


def os_error(e):
    """(status, code, message) for an OSError a file route raised."""
    for cls, status, code, text in ((FileNotFoundError, 404, "file_not_found", "file not found"),
                                    (NotADirectoryError, 400, "not_a_directory", "not a directory"),
                                    (IsADirectoryError, 400, "is_a_directory", "is a directory"),
                                    (FileExistsError, 409, "file_exists", "file exists")):
        if isinstance(e, cls):
            return status, code, "%s: %s" % (text, e.filename)
    return 400, "bad_request", "%s: %s" % (e.strerror, e.filename)


class Emulator:
    def __init__(self, extra_faults=None):
        self.lock = threading.RLock()
        self.faults = dict(DEFAULT_FAULTS, **(extra_faults or {}))
        self.stats = {"requests": 0, "by_route": {}}
        self.cfg = {}
        self._tmp_root = None

    def log(self, text):
        path = self.cfg.get("log")
        if path:
            with self.lock:
                with open(path, "a") as f:
                    f.write(text + "\n")

    def setup(self, args, root_prefix=None):
        self.cfg["log"] = getattr(args, "log", None)
        for k in ("latency_ms", "fail_rate", "drop_rate", "slow_rate"):
            if hasattr(args, k):
                self.faults[k] = getattr(args, k)
        if root_prefix is None:
            return None
        root = getattr(args, "root", None)
        if not root:
            root = self._tmp_root = tempfile.mkdtemp(prefix=root_prefix)
        os.makedirs(root, exist_ok=True)
        self.cfg["root"] = os.path.realpath(root)
        return self.cfg["root"]


def arg_parser(doc, env_prefix, root=True, faults=True):
    def env(name, default=None):
        return os.environ.get(env_prefix + name, default)

    ap = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    ap.add_argument("--port", type=int, default=int(env("PORT", "0")))
    if root:
        ap.add_argument("--root", default=env("ROOT"))
    if faults:
        ap.add_argument("--latency-ms", type=int, default=int(env("LATENCY_MS", "0")))
        ap.add_argument("--fail-rate", type=float, default=float(env("FAIL_RATE", "0")))
        ap.add_argument("--drop-rate", type=float, default=float(env("DROP_RATE", "0")))
        ap.add_argument("--slow-rate", type=float, default=float(env("SLOW_RATE", "0")))
    ap.add_argument("--log", default=env("LOG"))
    ap.add_argument("--port-file", default=env("PORT_FILE"))
    return ap


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(emu, handler_cls, args, cleanup=None, host="127.0.0.1"):
    # only loopback: nothing a test starts may be reachable from elsewhere
    if not host.startswith("127."):
        raise ValueError("emulators bind 127.0.0.x only, not %s" % host)
    srv = Server((host, getattr(args, "port", 0) or 0), handler_cls)
    emu.cfg["port"] = srv.server_address[1]
    port_file = getattr(args, "port_file", None)
    if port_file:
        with open(port_file + ".tmp", "w") as f:
            f.write("%d\n" % emu.cfg["port"])
        os.rename(port_file + ".tmp", port_file)
    print("listening on %s:%d" % (host, emu.cfg["port"]), flush=True)

    def stop(*_):
        # shutdown() waits for serve_forever: not from the thread running it
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        srv.serve_forever(poll_interval=0.2)
    finally:
        if cleanup:
            with emu.lock:
                cleanup()
        if emu._tmp_root:
            shutil.rmtree(emu._tmp_root, ignore_errors=True)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    emu = None  # the Emulator; set by the subclass

    def log_message(self, fmt, *args):
        pass

    def dispatch(self):
        self.send_error(501, "Unsupported method (%r)" % self.command)

    def do_GET(self):
        self.dispatch()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_GET

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def split_url(self):
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        parts = [urllib.parse.unquote(p) for p in url.path.split("/") if p]
        return url, parts, q

    def targeted(self):
        f = self.emu.faults
        return not f["fail_paths"] or f["fail_paths"] in self.path

    def send(self, status, payload=None, ctype="application/json", raw=None, headers=None):
        data = raw if raw is not None else (b"" if payload is None else
                                            json.dumps(payload).encode())
        no_body = status == 204 or self.command == "HEAD"
        self.send_response(status)
        if status != 204:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        # head and body in one write: two small writes meet Nagle and the
        # client's delayed ACK (40 ms a request)
        self._headers_buffer.append(b"\r\n")
        slow = (not no_body and len(data) > 1 and self.targeted() and
                random.random() < self.emu.faults["slow_rate"])
        if not no_body and not slow:
            self._headers_buffer.append(data)
        self.flush_headers()
        if slow:  # a body that stalls half way
            half = len(data) // 2
            self.wfile.write(data[:half])
            self.wfile.flush()
            time.sleep(1.0)
            self.wfile.write(data[half:])
            self.wfile.flush()

    def send_chunk(self, data):
        """One chunk of a Transfer-Encoding: chunked body (str or bytes);
        b"" ends the body."""
        if isinstance(data, str):
            data = data.encode()
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def drop(self):
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True

    def count(self, route, tag=""):
        """Counts a request under route in stats and logs it."""
        st = self.emu.stats
        with self.emu.lock:
            st["requests"] += 1
            st["by_route"][route] = st["by_route"].get(route, 0) + 1
        self.emu.log("%s %s%s %s" % (time.strftime("%H:%M:%S"), tag + " " if tag else "",
                                     self.command, self.path))

    def inject_faults(self, fail):
        """Applies the fault switches to this request; fail(status, headers)
        answers an injected failure.  True when the request was answered."""
        f, lock = self.emu.faults, self.emu.lock
        while f["hang"] or (f["stall_path"] and f["stall_path"] in self.path):
            time.sleep(0.05)
        if f["latency_ms"]:
            time.sleep(f["latency_ms"] / 1000.0)
        with lock:
            limited = f.get("rate_limit", 0) > 0
            if limited:
                f["rate_limit"] -= 1
                self.emu.stats["rate_limited"] = self.emu.stats.get("rate_limited", 0) + 1
        if limited:
            self.emu.log("  -> injected 429")
            fail(429, {"Retry-After": "1"})
            return True
        targeted = self.targeted()
        if targeted and random.random() < f["drop_rate"]:
            self.emu.log("  -> dropped")
            self.drop()
            return True
        counted = False
        if targeted and f.get("fail_count", 0) > 0:
            with lock:
                counted = f["fail_count"] > 0
                f["fail_count"] -= 1 if counted else 0
        if targeted and (counted or random.random() < f["fail_rate"]):
            status = int(f.get("status", 503))
            self.emu.log("  -> injected %d" % status)
            fail(status, {"Retry-After": str(f["retry_after"])} if f.get("retry_after") else None)
            return True
        return False

    def emu_control(self, parts, body, stats):
        """Serves POST /_emu/faults and GET /_emu/stats (stats() gives what
        joins the counts); False for any other /_emu route."""
        if parts[1:] == ["faults"] and self.command == "POST":
            with self.emu.lock:
                self.emu.faults.update(json.loads(body or b"{}"))
                out = dict(self.emu.faults)
            self.send(200, out)
            return True
        if parts[1:] == ["stats"]:
            with self.emu.lock:
                out = dict(self.emu.stats, by_route=dict(self.emu.stats["by_route"]),
                           **stats())
            self.send(200, out)
            return True
        return False
