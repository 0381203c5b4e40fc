#!/usr/bin/env python3
"""A local emulator of E2B (control plane and envd), for tests.

Standard library only.  Listens on 127.0.0.1 only and contacts nothing else.
One server answers both planes: control-plane routes need X-API-Key; envd
routes are found by the E2b-Sandbox-Id header (how E2B's SDKs reach envd
through E2B_SANDBOX_URL).  envd speaks Connect-RPC: unary JSON calls and
server-streaming envelopes (flag byte, 4-byte big-endian length, JSON; flag
0x02 ends the stream) for process.Process/Start and Connect.

Each sandbox is a real directory; its home (/home/user on E2B) is a host
path, so commands and the file API see the same files.  Processes are real
children, each a session and process group of its own; SendSignal signals
the process envd started (its pid), as envd does.  Pause stops every process
of the sandbox (SIGSTOP) and resume continues them, as a memory snapshot
would.

    e2b_emulator.py [--port N] [--root DIR] [--api-key KEY] [--latency-ms N]
                    [--fail-rate P] [--drop-rate P] [--slow-rate P] [--log FILE]
                    [--port-file FILE]

Fault switches can be changed while running:
    POST /_emu/faults {"latency_ms":..,"fail_rate":..,"drop_rate":..,"slow_rate":..,
                       "hang":bool,"fail_paths":"substring","status":503,"retry_after":N,
                       "fail_count":N}
("fail_count": the next N requests matching fail_paths fail for certain.)
GET /_emu/stats gives request counts, sandboxes, snapshots and processes
(every live process carrying a sandbox's HOME, so a process group that a
kill missed still counts).  Both
need no auth and are not E2B.
"""

import base64
import datetime
import json
import os
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sfs_emu  # noqa: E402
from sfs_emu import now_iso as now  # noqa: E402

EMU = sfs_emu.Emulator({"status": 503, "retry_after": 0, "fail_count": 0})
LOCK, CFG = EMU.lock, EMU.cfg
SANDBOXES = {}   # id -> dict
SNAPSHOTS = {}   # snapshotID -> {"dir", "names", "sandboxID", "createdAt"}
ENVD_VERSION = "0.6.4"


class ApiError(Exception):
    """A control-plane error: {code, message} with an HTTP status."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


class RpcError(Exception):
    """A Connect error: {code, message}; its HTTP status for unary calls."""

    HTTP = {"invalid_argument": 400, "not_found": 404, "already_exists": 409,
            "permission_denied": 403, "failed_precondition": 412, "internal": 500,
            "unavailable": 503, "unauthenticated": 401}

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


# ---- sandboxes ------------------------------------------------------------

def new_sandbox(body, copy_from=None):
    sid = "i" + uuid.uuid4().hex[:19]
    base = os.path.join(CFG["root"], sid)
    home = os.path.join(base, "home", "user")
    os.makedirs(os.path.join(base, "tmp"), exist_ok=True)
    if copy_from:
        shutil.copytree(os.path.join(copy_from, "home"), os.path.join(base, "home"),
                        symlinks=True)
    else:
        os.makedirs(home, exist_ok=True)
    sb = {"sandboxID": sid, "templateID": body.get("templateID") or "base", "dir": base,
          "home": home, "metadata": dict(body.get("metadata") or {}),
          "envVars": dict(body.get("envVars") or {}), "timeout": body.get("timeout", 300),
          "state": "running", "startedAt": now(), "procs": {}}
    SANDBOXES[sid] = sb
    return sb


def sandbox_json(sb, detail=False):
    o = {"sandboxID": sb["sandboxID"], "templateID": sb["templateID"], "clientID": "emulator",
         "envdVersion": ENVD_VERSION, "domain": "127.0.0.1:%d" % CFG["port"]}
    if detail:
        o.update(startedAt=sb["startedAt"], endAt=now(), cpuCount=2, memoryMB=512,
                 diskSizeMB=1024, metadata=sb["metadata"], state=sb["state"])
    return o


def find_sandbox(sid):
    sb = SANDBOXES.get(sid)
    if not sb or sb["state"] == "killed":
        raise ApiError(404, "sandbox \"%s\" not found" % sid)
    return sb


def live(sb):
    return {pid: p for pid, p in sb["procs"].items() if p["proc"].poll() is None}


def signal_groups(sb, sig):
    for p in live(sb).values():
        try:
            os.killpg(p["proc"].pid, sig)
        except OSError:
            pass


def sandbox_pids(sb):
    """Every process carrying this sandbox's HOME: what envd started and
    whatever those started, setsid'd process groups too."""
    mark = b"HOME=" + sb["home"].encode()
    return sfs_emu.live_pids(lambda env: mark in env)


def descendants_signal(sb, sig):
    for pid in sandbox_pids(sb):
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def kill_all(sb):
    descendants_signal(sb, signal.SIGCONT)
    descendants_signal(sb, signal.SIGKILL)
    for p in sb["procs"].values():
        try:
            p["proc"].wait(timeout=5)
        except Exception:
            pass
    sb["procs"] = {}


# ---- paths ----------------------------------------------------------------

def resolve(sb, path):
    """An envd path (absolute, or relative to the user's home) to a host
    path; anything outside the sandbox is refused."""
    if not path:
        path = sb["home"]
    if not path.startswith("/"):
        path = os.path.join(sb["home"], path)
    norm = os.path.normpath(path)
    if norm != sb["dir"] and not norm.startswith(sb["dir"] + "/"):
        raise RpcError("permission_denied", "path %s is outside the sandbox" % path)
    return norm


FILE_TYPES = {stat.S_IFREG: "FILE_TYPE_FILE", stat.S_IFDIR: "FILE_TYPE_DIRECTORY",
              stat.S_IFLNK: "FILE_TYPE_SYMLINK"}


def entry_info(path, name=None):
    st = os.lstat(path)
    mt = datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc)
    e = {"name": name if name is not None else os.path.basename(path),
         "type": FILE_TYPES.get(stat.S_IFMT(st.st_mode), "FILE_TYPE_UNSPECIFIED"),
         "path": path, "size": str(st.st_size), "mode": stat.S_IMODE(st.st_mode),
         "permissions": stat.filemode(st.st_mode), "owner": "user", "group": "user",
         "modifiedTime": mt.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}
    if stat.S_ISLNK(st.st_mode):
        e["symlinkTarget"] = os.readlink(path)
    return e


def parse_multipart(ctype, body):
    """[(field, filename, bytes)] of a multipart/form-data body."""
    try:
        return sfs_emu.parse_multipart(ctype, body)
    except ValueError as e:
        raise RpcError("invalid_argument", str(e))


# ---- processes ------------------------------------------------------------

def envelope(obj, flags=0):
    data = json.dumps(obj).encode()
    return struct.pack(">BI", flags, len(data)) + data


def start_process(sb, req):
    proc = req.get("process") or {}
    cmd = proc.get("cmd")
    if not cmd:
        raise RpcError("invalid_argument", "process.cmd is required")
    cwd = resolve(sb, proc["cwd"]) if proc.get("cwd") else sb["home"]
    if not os.path.isdir(cwd):
        raise RpcError("invalid_argument", "cwd %s does not exist" % proc.get("cwd"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": sb["home"],
           "TMPDIR": os.path.join(sb["dir"], "tmp"), "LANG": "C.UTF-8", "USER": "user"}
    env.update(sb["envVars"])
    env.update(proc.get("envs") or {})
    want_stdin = bool(req.get("stdin"))
    p = subprocess.Popen([cmd] + list(proc.get("args") or []), cwd=cwd, env=env,
                         stdin=subprocess.PIPE if want_stdin else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    rec = {"proc": p, "tag": req.get("tag"), "config": proc, "events": [], "cv":
           threading.Condition(), "done": False}

    def pump(stream, key):
        while True:
            chunk = os.read(stream.fileno(), 65536)
            if not chunk:
                break
            with rec["cv"]:
                rec["events"].append({"data": {key: base64.b64encode(chunk).decode()}})
                rec["cv"].notify_all()

    def waiter(threads):
        for t in threads:
            t.join()
        code = p.wait()
        end = {"exited": code >= 0, "status": ("exit status %d" % code) if code >= 0
               else "signal: %s" % signal.Signals(-code).name.lower()[3:]}
        if code > 0:
            end["exitCode"] = code   # proto3 JSON leaves out a 0
        elif code < 0:
            end["exitCode"] = -1
        with rec["cv"]:
            rec["events"].append({"end": end})
            rec["done"] = True
            rec["cv"].notify_all()

    threads = [threading.Thread(target=pump, args=(p.stdout, "stdout"), daemon=True),
               threading.Thread(target=pump, args=(p.stderr, "stderr"), daemon=True)]
    for t in threads:
        t.start()
    threading.Thread(target=waiter, args=(threads,), daemon=True).start()
    sb["procs"][p.pid] = rec
    return p.pid, rec


def find_process(sb, sel):
    sel = sel or {}
    if "pid" in sel:
        rec = sb["procs"].get(int(sel["pid"]))
    else:
        rec = next((r for r in sb["procs"].values() if r["tag"] == sel.get("tag")), None)
    if not rec:
        raise RpcError("not_found", "process with %s not found" % json.dumps(sel))
    return rec


SIGNALS = {"SIGNAL_SIGKILL": signal.SIGKILL, "SIGNAL_SIGTERM": signal.SIGTERM,
           "SIGNAL_SIGINT": signal.SIGINT, "SIGNAL_SIGHUP": signal.SIGHUP}


# ---- the handler ----------------------------------------------------------

class Handler(sfs_emu.Handler):
    emu = EMU
    server_version = "e2b-emulator/1"

    def _api_error(self, status, message, headers=None):
        self.send(status, {"code": status, "message": message}, headers=headers)

    def _rpc_error(self, e):
        self.send(RpcError.HTTP.get(e.code, 500), {"code": e.code, "message": e.message})

    def dispatch(self):
        url, parts, q = self.split_url()
        body = self.read_body()
        sid = self.headers.get("E2b-Sandbox-Id")
        plane = "envd" if sid else "api"
        self.count("%s %s /%s" % (plane, self.command, "/".join(
            parts[:1] if plane == "envd" else parts[:1] + parts[2:3])), tag=plane)
        if parts[:1] == ["_emu"]:
            return self._emu(parts, body)
        if self.inject_faults(lambda status, hdr: self._api_error(status, "injected failure",
                                                                  headers=hdr)):
            return
        try:
            if plane == "envd":
                with LOCK:
                    sb = SANDBOXES.get(sid)
                    if not sb or sb["state"] == "killed":
                        raise ApiError(502, "The sandbox %s was not found" % sid)
                    if sb["state"] != "running":
                        raise ApiError(502, "The sandbox %s is paused" % sid)
                if self.headers.get("E2b-Sandbox-Port") != "49983":
                    raise ApiError(502, "no service on port %s" %
                                   self.headers.get("E2b-Sandbox-Port"))
                return self._envd(sb, parts, q, body)
            if self.headers.get("X-API-Key") != CFG["api_key"]:
                raise ApiError(401, "Invalid API key, please visit https://e2b.dev/docs")
            return self._api(parts, q, body)
        except ApiError as e:
            EMU.log("  -> %d %s" % (e.status, e.message))
            return self._api_error(e.status, e.message)
        except RpcError as e:
            EMU.log("  -> %s %s" % (e.code, e.message))
            return self._rpc_error(e)

    # ---- emulator control -------------------------------------------------

    def _emu(self, parts, body):
        def stats():
            running = [s for s in SANDBOXES.values() if s["state"] != "killed"]
            return {"sandboxes": len(running),
                    "processes": sum(len(sandbox_pids(s)) for s in running),
                    "snapshots": len(SNAPSHOTS)}
        if not self.emu_control(parts, body, stats):
            self._api_error(404, "no such emulator route")

    # ---- control plane ----------------------------------------------------

    def _api(self, parts, q, body):
        data = json.loads(body) if body else {}
        m = self.command
        with LOCK:
            if parts == ["sandboxes"] and m == "POST":
                tpl = data.get("templateID") or "base"
                src = SNAPSHOTS[tpl]["dir"] if tpl in SNAPSHOTS else None
                if not src and tpl not in ("base", "code-interpreter-v1", "desktop"):
                    raise ApiError(404, "template '%s' not found" % tpl)
                return self.send(201, sandbox_json(new_sandbox(data, copy_from=src)))
            if parts in (["sandboxes"], ["v2", "sandboxes"]) and m == "GET":
                return self.send(200, [sandbox_json(s, True) for s in SANDBOXES.values()
                                        if s["state"] != "killed"])
            if parts == ["snapshots"] and m == "GET":
                return self.send(200, [{"snapshotID": k, "names": v["names"]}
                                        for k, v in SNAPSHOTS.items()
                                        if not q.get("sandboxID") or
                                        v["sandboxID"] == q["sandboxID"]])
            if len(parts) == 2 and parts[0] == "templates" and m == "DELETE":
                snap = SNAPSHOTS.pop(parts[1], None)
                if not snap:
                    raise ApiError(404, "template '%s' not found" % parts[1])
                shutil.rmtree(snap["dir"], ignore_errors=True)
                return self.send(204)
            if len(parts) >= 2 and parts[0] == "sandboxes":
                sb = find_sandbox(parts[1])
                rest = parts[2:]
                if not rest and m == "GET":
                    return self.send(200, sandbox_json(sb, True))
                if not rest and m == "DELETE":
                    kill_all(sb)
                    sb["state"] = "killed"
                    shutil.rmtree(sb["dir"], ignore_errors=True)
                    return self.send(204)
                if rest == ["timeout"] and m == "POST":
                    sb["timeout"] = data.get("timeout")
                    return self.send(204)
                if rest == ["pause"] and m == "POST":
                    if sb["state"] != "running":
                        raise ApiError(409, "sandbox %s is not running" % sb["sandboxID"])
                    descendants_signal(sb, signal.SIGSTOP)
                    sb["state"] = "paused"
                    return self.send(204)
                if rest in (["connect"], ["resume"]) and m == "POST":
                    if sb["state"] == "running":
                        if rest == ["resume"]:
                            raise ApiError(409, "sandbox %s is already running" %
                                           sb["sandboxID"])
                        return self.send(200, sandbox_json(sb))
                    descendants_signal(sb, signal.SIGCONT)
                    sb["state"] = "running"
                    return self.send(201, sandbox_json(sb))
                if rest == ["snapshots"] and m == "POST":
                    snap_id = "snap_" + uuid.uuid4().hex[:16]
                    d = os.path.join(CFG["root"], "snapshots", snap_id)
                    shutil.copytree(os.path.join(sb["dir"], "home"), os.path.join(d, "home"),
                                    symlinks=True)
                    names = [data["name"]] if data.get("name") else []
                    SNAPSHOTS[snap_id] = {"dir": d, "names": names, "createdAt": now(),
                                          "sandboxID": sb["sandboxID"]}
                    return self.send(201, {"snapshotID": snap_id, "names": names})
                if rest == ["fork"] and m == "POST":
                    out = []
                    for _ in range(int(data.get("count") or 1)):
                        new = new_sandbox({"templateID": sb["templateID"],
                                           "metadata": sb["metadata"],
                                           "envVars": sb["envVars"]}, copy_from=sb["dir"])
                        out.append({"sandbox": sandbox_json(new)})
                    return self.send(201, out)
        raise ApiError(404, "Cannot %s /%s" % (m, "/".join(parts)))

    # ---- envd -------------------------------------------------------------

    def _envd(self, sb, parts, q, body):
        m = self.command
        if parts == ["health"]:
            return self.send(204)
        if parts == ["files"] and m == "GET":
            p = resolve(sb, q.get("path"))
            if os.path.isdir(p):
                raise RpcError("invalid_argument", "path '%s' is a directory" % q.get("path"))
            try:
                with open(p, "rb") as f:
                    data = f.read()
            except FileNotFoundError:
                raise RpcError("not_found", "path '%s' does not exist" % q.get("path"))
            return self.send(200, raw=data, ctype="application/octet-stream")
        if parts == ["files"] and m == "POST":
            ctype = self.headers.get("Content-Type", "")
            if ctype.startswith("multipart/form-data"):
                items = [(fn or q.get("path"), data) for name, fn, data in
                         parse_multipart(ctype, body) if name == "file"]
            else:
                items = [(q.get("path"), body)]
            if not items or not all(i[0] for i in items):
                raise RpcError("invalid_argument", "a file and its path are required")
            out = []
            for path, data in items:
                dest = resolve(sb, path)
                if os.path.isdir(dest) and not os.path.islink(dest):
                    raise RpcError("invalid_argument", "path '%s' is a directory" % path)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                tmp = dest + ".emu-upload-%d" % threading.get_ident()
                with open(tmp, "wb") as f:
                    f.write(data)
                if os.path.exists(dest) and not os.path.islink(dest):
                    os.chmod(tmp, stat.S_IMODE(os.stat(dest).st_mode))
                os.replace(tmp, dest)
                out.append({"path": dest, "name": os.path.basename(dest), "type": "file"})
            return self.send(200, out)
        if len(parts) == 2 and m == "POST":
            if parts[0] == "process.Process" and parts[1] in ("Start", "Connect"):
                return self._stream(sb, parts[1], body)
            try:
                req = json.loads(body) if body else {}
            except ValueError:
                raise RpcError("invalid_argument", "the request is not JSON")
            if parts[0] == "filesystem.Filesystem":
                return self._filesystem(sb, parts[1], req)
            if parts[0] == "process.Process":
                return self._process(sb, parts[1], req)
        raise RpcError("unimplemented", "%s /%s is not implemented" % (m, "/".join(parts)))

    def _filesystem(self, sb, method, req):
        try:
            if method == "Stat":
                return self.send(200, {"entry": entry_info(resolve(sb, req.get("path")))})
            if method == "ListDir":
                d = resolve(sb, req.get("path"))
                if not os.path.isdir(d) or os.path.islink(d):
                    raise RpcError("invalid_argument", "path '%s' is not a directory"
                                   % req.get("path"))
                out = []
                for name in sorted(os.listdir(d)):
                    try:
                        out.append(entry_info(os.path.join(d, name), name))
                    except FileNotFoundError:
                        pass
                return self.send(200, {"entries": out})
            if method == "MakeDir":
                p = resolve(sb, req.get("path"))
                if os.path.lexists(p):
                    raise RpcError("already_exists", "directory '%s' already exists"
                                   % req.get("path"))
                os.makedirs(p)
                return self.send(200, {"entry": entry_info(p)})
            if method == "Move":
                src, dst = resolve(sb, req.get("source")), resolve(sb, req.get("destination"))
                os.lstat(src)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                os.rename(src, dst)
                return self.send(200, {"entry": entry_info(dst)})
            if method == "Remove":
                p = resolve(sb, req.get("path"))
                if p == sb["home"]:
                    raise RpcError("permission_denied", "refusing to remove the home dir")
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p)   # envd removes recursively
                else:
                    os.unlink(p)
                return self.send(200, {})
        except FileNotFoundError:
            raise RpcError("not_found", "path '%s' does not exist" %
                           (req.get("path") or req.get("source")))
        except OSError as e:
            raise RpcError("internal", "%s: %s" % (e.strerror, e.filename))
        raise RpcError("unimplemented", "filesystem.Filesystem/%s" % method)

    def _process(self, sb, method, req):
        with LOCK:
            if method == "List":
                return self.send(200, {"processes": [
                    {"config": r["config"], "pid": pid, "tag": r["tag"]}
                    for pid, r in live(sb).items()]})
            rec = find_process(sb, req.get("process"))
        p = rec["proc"]
        if method == "SendSignal":
            sig = SIGNALS.get(req.get("signal"))
            if not sig:
                raise RpcError("invalid_argument", "unknown signal %s" % req.get("signal"))
            if p.poll() is None:
                os.kill(p.pid, sig)
            return self.send(200, {})
        if method in ("SendInput", "CloseStdin"):
            if not p.stdin:
                raise RpcError("failed_precondition", "stdin is not enabled for the process")
            try:
                if method == "SendInput":
                    data = base64.b64decode((req.get("input") or {}).get("stdin") or "")
                    p.stdin.write(data)
                    p.stdin.flush()
                else:
                    p.stdin.close()
            except (BrokenPipeError, ValueError):
                raise RpcError("failed_precondition", "stdin of the process is closed")
            return self.send(200, {})
        raise RpcError("unimplemented", "process.Process/%s" % method)

    def _stream(self, sb, method, body):
        if self.headers.get("Content-Type") != "application/connect+json":
            raise RpcError("invalid_argument", "a streaming call needs application/connect+json")
        if len(body) < 5:
            raise RpcError("invalid_argument", "the request is not an envelope")
        flags, n = struct.unpack(">BI", body[:5])
        req = json.loads(body[5:5 + n] or b"{}")
        with LOCK:
            if method == "Start":
                pid, rec = start_process(sb, req)
                sent = 0
            else:
                rec = find_process(sb, req.get("process"))
                pid = rec["proc"].pid
                with rec["cv"]:
                    # Connect replays no output, only what comes from now on
                    # (and the end, when it already came)
                    sent = len(rec["events"]) - (1 if rec["done"] else 0)
        self.send_response(200)
        self.send_header("Content-Type", "application/connect+json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        keepalive = float(self.headers.get("Keepalive-Ping-Interval") or 0)
        try:
            self.wfile.write(envelope({"event": {"start": {"pid": pid}}}))
            self.wfile.flush()
            while True:
                with rec["cv"]:
                    while len(rec["events"]) <= sent:
                        if not rec["cv"].wait(timeout=keepalive or 1.0):
                            break
                    batch = rec["events"][sent:]
                    sent += len(batch)
                if not batch:
                    if keepalive:
                        self.wfile.write(envelope({"event": {"keepalive": {}}}))
                        self.wfile.flush()
                    continue
                for ev in batch:
                    self.wfile.write(envelope({"event": ev}))
                self.wfile.flush()
                if any("end" in ev for ev in batch):
                    break
            self.wfile.write(envelope({}, 0x02))
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            EMU.log("  -> stream of pid %d dropped by the client" % pid)


def main():
    ap = sfs_emu.arg_parser(__doc__, "E2B_EMU_")
    ap.add_argument("--api-key", default=os.environ.get("E2B_EMU_API_KEY", "e2b_emulator_key"))
    a = ap.parse_args()
    EMU.setup(a, root_prefix="e2b-emu-")
    CFG["api_key"] = a.api_key

    def cleanup():
        for sb in SANDBOXES.values():
            kill_all(sb)

    sfs_emu.serve(EMU, Handler, a, cleanup)


if __name__ == "__main__":
    main()
