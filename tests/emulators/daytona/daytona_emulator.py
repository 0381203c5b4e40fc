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
                       "slow_rate":..,"hang":bool,"stall_path":"substring",
                       "fail_paths":"substring",
                       "hostile_names":["../../tmp/x", ".."]}
(hostile_names: directory entries put first in every GET /files listing,
as a hostile sandbox would name them)
GET /_emu/stats gives request counts.  Both need no auth and are not Daytona.
"""

import datetime
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sfs_emu  # noqa: E402
from sfs_emu import now_iso as now  # noqa: E402

EMU = sfs_emu.Emulator()
LOCK, CFG = EMU.lock, EMU.cfg
SANDBOXES = {}   # id -> dict
SNAPSHOTS = {}   # name -> {"id","name","dir","createdAt"}


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
    try:
        return {name: (fn, data) for name, fn, data in sfs_emu.parse_multipart(ctype, body)}
    except ValueError as e:
        raise ApiError(400, str(e))


# ---- the handler ----------------------------------------------------------

class Handler(sfs_emu.Handler):
    emu = EMU
    server_version = "daytona-emulator/1"

    def _error(self, status, message):
        self.send(status, {"statusCode": status, "message": message,
                           "code": REASONS.get(status, "Error"), "timestamp": now(),
                           "path": self.path, "method": self.command,
                           "error": REASONS.get(status, "Error")})

    def dispatch(self):
        url, parts, q = self.split_url()
        body = self.read_body()
        self.count("%s /%s" % (self.command, "/".join(parts[:1] + parts[2:3]
                                                      if parts[:1] == ["toolbox"] else parts[:2])))
        if parts[:1] == ["_emu"]:
            return self._emu(parts, body)
        # fault injection, before auth so it hits everything
        if self.inject_faults(lambda status, _: self._error(status, "injected failure")):
            return

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
            EMU.log("  -> %d %s" % (e.status, e.message))
            return self._error(e.status, e.message)
        except OSError as e:
            status, _, message = sfs_emu.os_error(e)
            return self._error(status, message)

    # ---- emulator control -------------------------------------------------

    def _emu(self, parts, body):
        def stats():
            return {"sandboxes": len([s for s in SANDBOXES.values() if s["state"] != "destroyed"]),
                    "processes": sum(len([p for p in s["procs"] if p.poll() is None])
                                     for s in SANDBOXES.values())}
        if not self.emu_control(parts, body, stats):
            self._error(404, "no such emulator route")

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
                return self.send(200, sandbox_json(sb))
            if parts == ["sandbox"] and m == "GET":
                return self.send(200, {"items": [sandbox_json(s) for s in SANDBOXES.values()
                                                  if s["state"] != "destroyed"],
                                        "nextCursor": None})
            if len(parts) >= 2 and parts[0] == "sandbox":
                sb = find_sandbox(parts[1])
                rest = parts[2:]
                if not rest and m == "GET":
                    return self.send(200, sandbox_json(sb))
                if not rest and m == "DELETE":
                    kill_procs(sb)
                    sb["state"] = "destroyed"
                    shutil.rmtree(sb["dir"], ignore_errors=True)
                    return self.send(200, sandbox_json(sb))
                if rest == ["start"] and m == "POST":
                    sb["state"] = "started"
                    return self.send(200, sandbox_json(sb))
                if rest == ["stop"] and m == "POST":
                    kill_procs(sb)
                    sb["state"] = "stopped"
                    return self.send(200, sandbox_json(sb))
                if rest == ["archive"] and m == "POST":
                    kill_procs(sb)
                    sb["state"] = "archived"
                    return self.send(200, sandbox_json(sb))
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
                    return self.send(200, sandbox_json(sb))
                if rest == ["fork"] and m == "POST":
                    new = new_sandbox({"name": data.get("name"), "env": sb["env"],
                                       "labels": sb["labels"]}, copy_from=sb["dir"])
                    return self.send(200, sandbox_json(new))
                if len(rest) == 3 and rest[0] == "ports" and rest[2] == "preview-url":
                    port = int(rest[1])
                    token = "preview-" + sb["id"][:8]
                    return self.send(200, {"sandboxId": sb["id"], "token": token,
                                            "url": "http://127.0.0.1:%d/_preview/%s/%d"
                                            % (CFG["port"], sb["id"], port)})
            if len(parts) == 2 and parts[0] == "snapshots":
                snap = SNAPSHOTS.get(parts[1]) or next(
                    (s for s in SNAPSHOTS.values() if s["id"] == parts[1]), None)
                if not snap:
                    raise ApiError(404, "Snapshot %s not found" % parts[1])
                if m == "GET":
                    return self.send(200, {"id": snap["id"], "name": snap["name"],
                                            "state": "active", "createdAt": snap["createdAt"]})
                if m == "DELETE":
                    shutil.rmtree(snap["dir"], ignore_errors=True)
                    del SNAPSHOTS[snap["name"]]
                    return self.send(200, None)
        raise ApiError(404, "Cannot %s /api/%s" % (m, "/".join(parts)))

    # ---- toolbox ----------------------------------------------------------

    def _toolbox(self, sb, parts, q, body):
        m = self.command
        if parts in (["work-dir"], ["project-dir"]) and m == "GET":
            return self.send(200, {"dir": sb["home"]})
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
            return self.send(200, {"exitCode": p.returncode,
                                    "result": out.decode("utf-8", "replace")})
        if parts[:2] == ["process", "session"]:
            return self._session(sb, parts[2:], body)
        if parts == ["files"] and m == "GET":
            d = resolve(sb, q.get("path"))
            out = []
            # hostile_names (fault): directory entries a hostile sandbox
            # would name ("../../tmp/x", ".."), first in every listing
            for name in self.emu.faults.get("hostile_names") or []:
                out.append(dict(file_info(d), name=name))
            for name in sorted(os.listdir(d)):
                try:
                    out.append(file_info(os.path.join(d, name), name))
                except FileNotFoundError:
                    pass
            return self.send(200, out)
        if parts == ["files", "info"] and m == "GET":
            return self.send(200, file_info(resolve(sb, q.get("path"))))
        if parts == ["files", "download"] and m == "GET":
            p = resolve(sb, q.get("path"))
            if os.path.isdir(p):
                raise ApiError(400, "path is a directory")
            with open(p, "rb") as f:
                data = f.read()
            return self.send(200, raw=data, ctype="application/octet-stream")
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
            return self.send(200, raw=b"".join(out),
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
            return self.send(200, None)
        if parts == ["files", "folder"] and m == "POST":
            p = resolve(sb, q.get("path"))
            os.mkdir(p, int(q.get("mode") or "0755", 8))
            return self.send(201, None)
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
            return self.send(204, None)
        if parts == ["files", "move"] and m == "POST":
            src, dst = resolve(sb, q.get("source")), resolve(sb, q.get("destination"))
            os.lstat(src)
            os.rename(src, dst)
            return self.send(200, None)
        if parts == ["files", "permissions"] and m == "POST":
            p = resolve(sb, q.get("path"))
            if q.get("mode"):
                os.chmod(p, int(q["mode"], 8))
            return self.send(200, None)
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
                return self.send(201, None)
            if not rest and m == "GET":
                return self.send(200, [{"sessionId": k, "commands": []}
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
                return self.send(204, None)
            if len(rest) == 1 and m == "GET":
                return self.send(200, {"sessionId": rest[0], "commands": [
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
                    return self.send(202, {"cmdId": cid})
        # synchronous session exec: wait outside the lock
        if rest[1:] == ["exec"]:
            p.wait()
            logf.seek(0)
            out = logf.read().decode("utf-8", "replace")
            return self.send(200, {"cmdId": cid, "output": out, "stdout": out, "stderr": "",
                                    "exitCode": p.returncode})
        with LOCK:
            if len(rest) >= 3 and rest[1] == "command":
                c = sess["commands"].get(rest[2])
                if not c:
                    raise ApiError(404, "command not found")
                if len(rest) == 3 and m == "GET":
                    return self.send(200, {"id": rest[2], "command": c["command"],
                                            "exitCode": c["proc"].poll()})
                if rest[3:] == ["logs"] and m == "GET":
                    c["log"].seek(0)
                    out = c["log"].read().decode("utf-8", "replace")
                    return self.send(200, {"output": out, "stdout": out, "stderr": ""})
        raise ApiError(404, "Cannot %s session route" % m)


def main():
    ap = sfs_emu.arg_parser(__doc__, "DAYTONA_EMU_")
    ap.add_argument("--api-key", default=os.environ.get("DAYTONA_EMU_API_KEY", "emulator-key"))
    a = ap.parse_args()
    EMU.setup(a, root_prefix="daytona-emu-")
    CFG["api_key"] = a.api_key

    def cleanup():
        for sb in SANDBOXES.values():
            kill_procs(sb)

    sfs_emu.serve(EMU, Handler, a, cleanup)


if __name__ == "__main__":
    main()
