#!/usr/bin/env python3
"""A local emulator of the Daytona API (control plane and toolbox), for tests.

Standard library only.  Listens on 127.0.0.1 only and contacts nothing else.
Each sandbox is a real directory; exec and session commands are real child
processes run with /bin/sh in the sandbox's work dir.  Paths are host paths
confined to the sandbox's directory (the work dir it reports is a host path),
so commands and the file API see the same files.

    daytona_emulator.py [--port N] [--root DIR] [--api-key KEY]
                        [--latency-ms N] [--fail-rate P] [--drop-rate P]
                        [--slow-rate P] [--log FILE] [--port-file FILE]

Every flag also reads an env var (DAYTONA_EMU_PORT, ..._API_KEY, ...).  The
chosen port is printed as "listening on 127.0.0.1:PORT" and written to
--port-file.  Fault switches can be changed while running:
    POST /_emu/faults {"latency_ms":..,"fail_rate":..,"drop_rate":..,
                       "slow_rate":..,"hang":bool,"fail_paths":"substring"}
GET /_emu/stats gives request counts.  Both need no auth and are not Daytona.
"""

import argparse
import base64
import datetime
import io
import json
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.RLock()
SANDBOXES = {}   # id -> dict
SNAPSHOTS = {}   # name -> {"id","name","dir","createdAt"}
FAULTS = {"latency_ms": 0, "fail_rate": 0.0, "drop_rate": 0.0, "slow_rate": 0.0,
          "hang": False, "fail_paths": ""}
STATS = {"requests": 0, "by_route": {}}
CFG = {}


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def log_line(text):
    path = CFG.get("log")
    if not path:
        return
    with LOCK:
        with open(path, "a") as f:
            f.write(text + "\n")


class ApiError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


REASONS = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           408: "Request Timeout", 409: "Conflict", 500: "Internal Server Error",
           502: "Bad Gateway", 503: "Service Unavailable"}


# ---- sandboxes ------------------------------------------------------------

def sandbox_json(sb):
    return {
        "id": sb["id"], "organizationId": "org-emulator", "name": sb["name"],
        "snapshot": sb.get("snapshot"), "user": "daytona", "env": sb["env"],
        "labels": sb["labels"], "public": False,
        "networkBlockAll": sb["networkBlockAll"], "networkAllowList": sb.get("networkAllowList"),
        "target": "us", "cpu": 1, "gpu": 0, "memory": 1, "disk": 3,
        "state": sb["state"], "desiredState": sb["state"], "errorReason": None,
        "autoStopInterval": sb["autoStopInterval"], "autoArchiveInterval": 10080,
        "autoDeleteInterval": sb["autoDeleteInterval"],
        "createdAt": sb["createdAt"], "updatedAt": now(),
        "toolboxProxyUrl": "http://127.0.0.1:%d/toolbox" % CFG["port"],
    }


def new_sandbox(body, copy_from=None):
    sid = str(uuid.uuid4())
    base = os.path.join(CFG["root"], sid)
    home = os.path.join(base, "home", "daytona")
    os.makedirs(os.path.join(base, "tmp"), exist_ok=True)
    if copy_from:
        shutil.copytree(os.path.join(copy_from, "home"), os.path.join(base, "home"),
                        symlinks=True)
    else:
        os.makedirs(home, exist_ok=True)
    sb = {
        "id": sid, "name": body.get("name") or sid, "dir": base, "home": home,
        "env": dict(body.get("env") or {}), "labels": dict(body.get("labels") or {}),
        "networkBlockAll": bool(body.get("networkBlockAll", False)),
        "networkAllowList": body.get("networkAllowList"),
        "autoStopInterval": body.get("autoStopInterval", 15),
        "autoDeleteInterval": body.get("autoDeleteInterval", -1),
        "snapshot": body.get("snapshot"), "state": "started", "createdAt": now(),
        "sessions": {}, "procs": [],
    }
    SANDBOXES[sid] = sb
    return sb


def find_sandbox(id_or_name):
    sb = SANDBOXES.get(id_or_name)
    if not sb:
        for s in SANDBOXES.values():
            if s["name"] == id_or_name:
                sb = s
    if not sb or sb["state"] == "destroyed":
        raise ApiError(404, "Sandbox with ID or name %s not found" % id_or_name)
    return sb


def kill_procs(sb):
    for p in sb["procs"]:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
    for p in sb["procs"]:
        try:
            p.wait(timeout=5)
        except Exception:
            pass
    sb["procs"] = []
    sb["sessions"] = {}


def reap(sb):
    sb["procs"] = [p for p in sb["procs"] if p.poll() is None]


# ---- paths and processes --------------------------------------------------

def resolve(sb, path):
    """A toolbox path (absolute host path under the sandbox, or relative to
    the work dir) to a host path; anything outside the sandbox is refused."""
    if not path:
        path = sb["home"]
    if not path.startswith("/"):
        path = os.path.join(sb["home"], path)
    norm = os.path.normpath(path)
    if norm != sb["dir"] and not norm.startswith(sb["dir"] + "/"):
        raise ApiError(403, "path %s is outside the sandbox" % path)
    return norm


def child_env(sb, extra=None):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": sb["home"],
           "TMPDIR": os.path.join(sb["dir"], "tmp"), "LANG": "C.UTF-8"}
    env.update(sb["env"])
    env.update(extra or {})
    return env


def spawn(sb, command, cwd=None, env=None, stdout=subprocess.PIPE):
    p = subprocess.Popen(["/bin/sh", "-c", command], cwd=cwd or sb["home"],
                         env=child_env(sb, env), stdin=subprocess.DEVNULL, stdout=stdout,
                         stderr=subprocess.STDOUT, start_new_session=True)
    sb["procs"].append(p)
    return p


def file_info(path, name=None):
    st = os.lstat(path)
    mode = stat.S_IMODE(st.st_mode)
    mt = datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc)
    info = {
        "name": name if name is not None else os.path.basename(path),
        "size": st.st_size, "mode": stat.filemode(st.st_mode),
        "permissions": "0%o" % mode, "isDir": stat.S_ISDIR(st.st_mode),
        "owner": "daytona", "group": "daytona",
        "modifiedAt": mt.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "modTime": mt.strftime("%Y-%m-%d %H:%M:%S.%f +0000 UTC"),
    }
    if stat.S_ISLNK(st.st_mode):
        info["symlinkTarget"] = os.readlink(path)
    return info


def parse_multipart(ctype, body):
    """Returns {field: (filename, bytes)} of a multipart/form-data body."""
    marker = "boundary="
    if marker not in ctype:
        raise ApiError(400, "multipart boundary missing")
    boundary = ctype.split(marker, 1)[1].split(";")[0].strip().strip('"').encode()
    parts = {}
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
            parts[name] = (filename, data)
    return parts


# ---- the handler ----------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "daytona-emulator/1"

    def log_message(self, fmt, *args):
        pass

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, status, payload=None, ctype="application/json", raw=None):
        data = raw if raw is not None else (b"" if payload is None else
                                            json.dumps(payload).encode())
        slow = random.random() < FAULTS["slow_rate"]
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if slow and len(data) > 1:
            half = len(data) // 2
            self.wfile.write(data[:half])
            self.wfile.flush()
            time.sleep(1.0)
            self.wfile.write(data[half:])
        else:
            self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status, message):
        self._send(status, {"statusCode": status, "message": message,
                            "code": REASONS.get(status, "Error"), "timestamp": now(),
                            "path": self.path, "method": self.command,
                            "error": REASONS.get(status, "Error")})

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
        body = self._body()
        STATS["requests"] += 1
        route = "%s /%s" % (self.command, "/".join(parts[:1] + parts[2:3] if parts[:1] == ["toolbox"] else parts[:2]))
        STATS["by_route"][route] = STATS["by_route"].get(route, 0) + 1
        log_line("%s %s %s" % (time.strftime("%H:%M:%S"), self.command, self.path))

        if parts[:1] == ["_emu"]:
            return self._emu(parts, body)
        # fault injection, before auth so it hits everything
        while FAULTS["hang"]:
            time.sleep(0.05)
        if FAULTS["latency_ms"]:
            time.sleep(FAULTS["latency_ms"] / 1000.0)
        targeted = not FAULTS["fail_paths"] or FAULTS["fail_paths"] in self.path
        if targeted and random.random() < FAULTS["drop_rate"]:
            log_line("  -> dropped")
            return self._drop()
        if targeted and random.random() < FAULTS["fail_rate"]:
            log_line("  -> injected 503")
            return self._error(503, "injected failure")

        auth = self.headers.get("Authorization", "")
        if auth != "Bearer " + CFG["api_key"]:
            return self._error(401, "Invalid credentials")
        try:
            if parts[:1] == ["api"]:
                return self._api(parts[1:], q, body)
            if parts[:1] == ["toolbox"] and len(parts) >= 2:
                with LOCK:
                    sb = find_sandbox(parts[1])
                if sb["state"] != "started":
                    raise ApiError(409, "sandbox is %s" % sb["state"])
                return self._toolbox(sb, parts[2:], q, body)
            raise ApiError(404, "Cannot %s %s" % (self.command, url.path))
        except ApiError as e:
            log_line("  -> %d %s" % (e.status, e.message))
            return self._error(e.status, e.message)
        except FileNotFoundError as e:
            return self._error(404, "file not found: %s" % e.filename)
        except NotADirectoryError as e:
            return self._error(400, "not a directory: %s" % e.filename)
        except IsADirectoryError as e:
            return self._error(400, "is a directory: %s" % e.filename)
        except FileExistsError as e:
            return self._error(409, "file exists: %s" % e.filename)
        except OSError as e:
            return self._error(400, "%s: %s" % (e.strerror, e.filename))

    def do_GET(self):
        self._dispatch()

    def do_POST(self):
        self._dispatch()

    def do_DELETE(self):
        self._dispatch()

    def do_PUT(self):
        self._dispatch()

    # ---- emulator control -------------------------------------------------

    def _emu(self, parts, body):
        if parts[1:] == ["faults"] and self.command == "POST":
            FAULTS.update(json.loads(body or b"{}"))
            return self._send(200, FAULTS)
        if parts[1:] == ["stats"]:
            with LOCK:
                return self._send(200, dict(STATS, sandboxes=len(
                    [s for s in SANDBOXES.values() if s["state"] != "destroyed"]),
                    processes=sum(len([p for p in s["procs"] if p.poll() is None])
                                  for s in SANDBOXES.values())))
        return self._error(404, "no such emulator route")

    # ---- control plane ----------------------------------------------------

    def _api(self, parts, q, body):
        data = json.loads(body) if body else {}
        m = self.command
        with LOCK:
            if parts == ["sandbox"] and m == "POST":
                src = None
                if data.get("snapshot"):
                    snap = SNAPSHOTS.get(data["snapshot"])
                    if not snap:
                        raise ApiError(404, "Snapshot %s not found" % data["snapshot"])
                    src = snap["dir"]
                sb = new_sandbox(data, copy_from=src)
                return self._send(200, sandbox_json(sb))
            if parts == ["sandbox"] and m == "GET":
                return self._send(200, {"items": [sandbox_json(s) for s in SANDBOXES.values()
                                                  if s["state"] != "destroyed"],
                                        "nextCursor": None})
            if len(parts) >= 2 and parts[0] == "sandbox":
                sb = find_sandbox(parts[1])
                rest = parts[2:]
                if not rest and m == "GET":
                    return self._send(200, sandbox_json(sb))
                if not rest and m == "DELETE":
                    kill_procs(sb)
                    sb["state"] = "destroyed"
                    shutil.rmtree(sb["dir"], ignore_errors=True)
                    return self._send(200, sandbox_json(sb))
                if rest == ["start"] and m == "POST":
                    sb["state"] = "started"
                    return self._send(200, sandbox_json(sb))
                if rest == ["stop"] and m == "POST":
                    kill_procs(sb)
                    sb["state"] = "stopped"
                    return self._send(200, sandbox_json(sb))
                if rest == ["archive"] and m == "POST":
                    kill_procs(sb)
                    sb["state"] = "archived"
                    return self._send(200, sandbox_json(sb))
                if rest == ["snapshot"] and m == "POST":
                    name = data.get("name")
                    if not name:
                        raise ApiError(400, "name must be a string")
                    if name in SNAPSHOTS:
                        raise ApiError(409, "Snapshot %s already exists" % name)
                    d = os.path.join(CFG["root"], "snapshots", name)
                    shutil.copytree(os.path.join(sb["dir"], "home"), os.path.join(d, "home"),
                                    symlinks=True)
                    SNAPSHOTS[name] = {"id": str(uuid.uuid4()), "name": name, "dir": d,
                                       "createdAt": now()}
                    return self._send(200, sandbox_json(sb))
                if rest == ["fork"] and m == "POST":
                    new = new_sandbox({"name": data.get("name"), "env": sb["env"],
                                       "labels": sb["labels"]}, copy_from=sb["dir"])
                    return self._send(200, sandbox_json(new))
                if len(rest) == 3 and rest[0] == "ports" and rest[2] == "preview-url":
                    port = int(rest[1])
                    token = "preview-" + sb["id"][:8]
                    return self._send(200, {"sandboxId": sb["id"], "token": token,
                                            "url": "http://127.0.0.1:%d/_preview/%s/%d"
                                            % (CFG["port"], sb["id"], port)})
            if len(parts) == 2 and parts[0] == "snapshots":
                snap = SNAPSHOTS.get(parts[1]) or next(
                    (s for s in SNAPSHOTS.values() if s["id"] == parts[1]), None)
                if not snap:
                    raise ApiError(404, "Snapshot %s not found" % parts[1])
                if m == "GET":
                    return self._send(200, {"id": snap["id"], "name": snap["name"],
                                            "state": "active", "createdAt": snap["createdAt"]})
                if m == "DELETE":
                    shutil.rmtree(snap["dir"], ignore_errors=True)
                    del SNAPSHOTS[snap["name"]]
                    return self._send(200, None)
        raise ApiError(404, "Cannot %s /api/%s" % (m, "/".join(parts)))

    # ---- toolbox ----------------------------------------------------------

    def _toolbox(self, sb, parts, q, body):
        m = self.command
        if parts in (["work-dir"], ["project-dir"]) and m == "GET":
            return self._send(200, {"dir": sb["home"]})
        if parts == ["process", "execute"] and m == "POST":
            data = json.loads(body or b"{}")
            cmd = data.get("command")
            if not cmd:
                raise ApiError(400, "command is required")
            cwd = resolve(sb, data["cwd"]) if data.get("cwd") else sb["home"]
            with LOCK:
                p = spawn(sb, cmd, cwd=cwd, env=data.get("envs"))
            try:
                out, _ = p.communicate(timeout=data.get("timeout") or None)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.communicate()
                raise ApiError(408, "command timed out")
            with LOCK:
                reap(sb)
            return self._send(200, {"exitCode": p.returncode,
                                    "result": out.decode("utf-8", "replace")})
        if parts[:2] == ["process", "session"]:
            return self._session(sb, parts[2:], body)
        if parts == ["files"] and m == "GET":
            d = resolve(sb, q.get("path"))
            out = []
            for name in sorted(os.listdir(d)):
                try:
                    out.append(file_info(os.path.join(d, name), name))
                except FileNotFoundError:
                    pass
            return self._send(200, out)
        if parts == ["files", "info"] and m == "GET":
            return self._send(200, file_info(resolve(sb, q.get("path"))))
        if parts == ["files", "download"] and m == "GET":
            p = resolve(sb, q.get("path"))
            if os.path.isdir(p):
                raise ApiError(400, "path is a directory")
            with open(p, "rb") as f:
                data = f.read()
            return self._send(200, raw=data, ctype="application/octet-stream")
        if parts == ["files", "bulk-download"] and m == "POST":
            # provider-apis.md 1.4: multipart/form-data, one part named "file"
            # per file (filename = the path as asked), a part named "error"
            # with an ErrorResponse for each path that cannot be read
            paths = json.loads(body or b"{}").get("paths")
            if not isinstance(paths, list) or not paths:
                raise ApiError(400, "paths must be a non-empty list")
            boundary = "sfs-emu-" + uuid.uuid4().hex
            out = []
            for path in paths:
                quoted = str(path).replace("\\", "\\\\").replace('"', '\\"')
                try:
                    fp = resolve(sb, path)
                    if os.path.isdir(fp):
                        raise ApiError(400, "path is a directory")
                    with open(fp, "rb") as f:
                        data = f.read()
                    head = ('Content-Disposition: form-data; name="file"; filename="%s"\r\n'
                            "Content-Type: application/octet-stream\r\n" % quoted)
                except (ApiError, OSError) as e:
                    code = e.status if isinstance(e, ApiError) else 404
                    data = json.dumps({"statusCode": code, "message": str(e),
                                       "path": path}).encode()
                    head = ('Content-Disposition: form-data; name="error"; filename="%s"\r\n'
                            "Content-Type: application/json\r\n" % quoted)
                out.append(b"--" + boundary.encode() + b"\r\n" + head.encode() + b"\r\n" +
                           data + b"\r\n")
            out.append(b"--" + boundary.encode() + b"--\r\n")
            return self._send(200, raw=b"".join(out),
                              ctype="multipart/form-data; boundary=" + boundary)
        if parts == ["files", "upload"] and m == "POST":
            dest = resolve(sb, q.get("path"))
            fields = parse_multipart(self.headers.get("Content-Type", ""), body)
            if "file" not in fields:
                raise ApiError(400, "file is required")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            tmp = dest + ".emu-upload-%d" % threading.get_ident()
            with open(tmp, "wb") as f:
                f.write(fields["file"][1])
            if os.path.exists(dest) and not os.path.islink(dest):
                os.chmod(tmp, stat.S_IMODE(os.stat(dest).st_mode))
            os.replace(tmp, dest)
            return self._send(200, None)
        if parts == ["files", "folder"] and m == "POST":
            p = resolve(sb, q.get("path"))
            os.mkdir(p, int(q.get("mode") or "0755", 8))
            return self._send(201, None)
        if parts == ["files"] and m == "DELETE":
            p = resolve(sb, q.get("path"))
            if p == sb["home"]:
                raise ApiError(400, "refusing to delete the work dir")
            if os.path.isdir(p) and not os.path.islink(p):
                if q.get("recursive") == "true":
                    shutil.rmtree(p)
                else:
                    os.rmdir(p)
            else:
                os.unlink(p)
            return self._send(204, None)
        if parts == ["files", "move"] and m == "POST":
            src, dst = resolve(sb, q.get("source")), resolve(sb, q.get("destination"))
            os.lstat(src)
            os.rename(src, dst)
            return self._send(200, None)
        if parts == ["files", "permissions"] and m == "POST":
            p = resolve(sb, q.get("path"))
            if q.get("mode"):
                os.chmod(p, int(q["mode"], 8))
            return self._send(200, None)
        raise ApiError(404, "Cannot %s /toolbox/%s" % (m, "/".join(parts)))

    def _session(self, sb, rest, body):
        m = self.command
        data = json.loads(body) if body else {}
        with LOCK:
            if not rest and m == "POST":
                sid = data.get("sessionId")
                if not sid:
                    raise ApiError(400, "sessionId is required")
                if sid in sb["sessions"]:
                    raise ApiError(409, "session already exists")
                sb["sessions"][sid] = {"commands": {}}
                return self._send(201, None)
            if not rest and m == "GET":
                return self._send(200, [{"sessionId": k, "commands": []}
                                        for k in sb["sessions"]])
            sess = sb["sessions"].get(rest[0]) if rest else None
            if not sess:
                raise ApiError(404, "session not found")
            if len(rest) == 1 and m == "DELETE":
                for c in sess["commands"].values():
                    if c["proc"].poll() is None:
                        try:
                            os.killpg(c["proc"].pid, signal.SIGKILL)
                        except OSError:
                            pass
                del sb["sessions"][rest[0]]
                return self._send(204, None)
            if len(rest) == 1 and m == "GET":
                return self._send(200, {"sessionId": rest[0], "commands": [
                    {"id": k, "command": c["command"], "exitCode": c["proc"].poll()}
                    for k, c in sess["commands"].items()]})
            if rest[1:] == ["exec"] and m == "POST":
                cmd = data.get("command")
                if not cmd:
                    raise ApiError(400, "command is required")
                cid = str(uuid.uuid4())
                logf = tempfile.TemporaryFile()
                p = spawn(sb, cmd, stdout=logf)
                sess["commands"][cid] = {"command": cmd, "proc": p, "log": logf}
                if data.get("runAsync") or data.get("async"):
                    return self._send(202, {"cmdId": cid})
        # synchronous session exec: wait outside the lock
        if rest[1:] == ["exec"]:
            p.wait()
            logf.seek(0)
            out = logf.read().decode("utf-8", "replace")
            return self._send(200, {"cmdId": cid, "output": out, "stdout": out, "stderr": "",
                                    "exitCode": p.returncode})
        with LOCK:
            if len(rest) >= 3 and rest[1] == "command":
                c = sess["commands"].get(rest[2])
                if not c:
                    raise ApiError(404, "command not found")
                if len(rest) == 3 and m == "GET":
                    return self._send(200, {"id": rest[2], "command": c["command"],
                                            "exitCode": c["proc"].poll()})
                if rest[3:] == ["logs"] and m == "GET":
                    c["log"].seek(0)
                    out = c["log"].read().decode("utf-8", "replace")
                    return self._send(200, {"output": out, "stdout": out, "stderr": ""})
        raise ApiError(404, "Cannot %s session route" % m)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    env = os.environ.get
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=int(env("DAYTONA_EMU_PORT", "0")))
    ap.add_argument("--root", default=env("DAYTONA_EMU_ROOT"))
    ap.add_argument("--api-key", default=env("DAYTONA_EMU_API_KEY", "emulator-key"))
    ap.add_argument("--latency-ms", type=int, default=int(env("DAYTONA_EMU_LATENCY_MS", "0")))
    ap.add_argument("--fail-rate", type=float, default=float(env("DAYTONA_EMU_FAIL_RATE", "0")))
    ap.add_argument("--drop-rate", type=float, default=float(env("DAYTONA_EMU_DROP_RATE", "0")))
    ap.add_argument("--slow-rate", type=float, default=float(env("DAYTONA_EMU_SLOW_RATE", "0")))
    ap.add_argument("--log", default=env("DAYTONA_EMU_LOG"))
    ap.add_argument("--port-file", default=env("DAYTONA_EMU_PORT_FILE"))
    a = ap.parse_args()
    root = a.root or tempfile.mkdtemp(prefix="daytona-emu-")
    os.makedirs(root, exist_ok=True)
    CFG.update(root=os.path.realpath(root), api_key=a.api_key, log=a.log)
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
        with LOCK:
            for sb in SANDBOXES.values():
                kill_procs(sb)
        if not a.root:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
