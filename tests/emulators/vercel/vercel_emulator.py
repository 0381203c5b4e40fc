#!/usr/bin/env python3
"""A local emulator of the Vercel Sandbox API (v2: named sandboxes and sessions), for tests.

Standard library only.  Listens on 127.0.0.1 only and contacts nothing else.
The routes and JSON shapes are those of provider-apis.md section 2 (from
vercel/sandbox's api-client and its in-repo mock).  Each sandbox is a real
directory (its VM's disk: vercel/sandbox is the working directory, tmp its
TMPDIR); commands are real child processes (argv, not a shell line) run in
it.  Paths are host paths confined to the sandbox's directory (the cwd a
session reports is a host path), so commands and the file routes see the
same files.  Snapshots are copies of the directory.

    vercel_emulator.py [--port N] [--root DIR] [--token T]... [--team ID]
                       [--project ID] [--latency-ms N] [--fail-rate P]
                       [--drop-rate P] [--slow-rate P] [--log FILE]
                       [--port-file FILE]

Every request needs "Authorization: Bearer T" and ?teamId=ID; creates and
sandbox routes need the project (projectId in the body or query, or
?project=).  The chosen port is printed as "listening on 127.0.0.1:PORT"
and written to --port-file.  Fault switches can be changed while running:
    POST /_emu/faults {"latency_ms":..,"fail_rate":..,"drop_rate":..,
                       "slow_rate":..,"hang":bool,"fail_paths":"substring",
                       "rate_limit":N}   (the next N requests answer 429
                                          with Retry-After: 1)
GET /_emu/stats gives request counts, live sandboxes and processes.  Both
need no auth and are not Vercel's.
"""

import gzip
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sfs_emu  # noqa: E402

EMU = sfs_emu.Emulator({"rate_limit": 0})
EMU.stats["rate_limited"] = 0
LOCK, CFG = EMU.lock, EMU.cfg
SANDBOXES = {}  # name -> dict
SESSIONS = {}   # session id -> dict
SNAPSHOTS = {}  # snapshot id -> dict


def now_ms():
    return int(time.time() * 1000)


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def new_id(prefix):
    return prefix + "_" + uuid.uuid4().hex[:20]


# ---- sandboxes and sessions --------------------------------------------------

def routes(sb):
    return [{"url": "https://%s-%d.vercel.run" % (sb["subdomain"], p),
             "subdomain": "%s-%d" % (sb["subdomain"], p), "port": p} for p in sb["ports"]]


def sandbox_json(sb):
    out = {k: sb[k] for k in ("name", "persistent", "region", "vcpus", "memory", "timeout",
                              "createdAt", "updatedAt", "currentSessionId", "status",
                              "statusUpdatedAt", "tags")}
    for k in ("runtime", "image", "currentSnapshotId", "networkPolicy"):
        if sb.get(k) is not None:
            out[k] = sb[k]
    out["cwd"] = os.path.join(sb["dir"], "vercel/sandbox")
    return out


def session_json(se):
    sb = SANDBOXES.get(se["sandbox"])
    out = {k: se[k] for k in ("id", "memory", "vcpus", "region", "timeout", "status",
                              "requestedAt", "createdAt", "updatedAt", "cwd")}
    for k in ("startedAt", "stoppedAt", "sourceSnapshotId", "runtime"):
        if se.get(k) is not None:
            out[k] = se[k]
    if sb and sb.get("networkPolicy"):
        out["networkPolicy"] = sb["networkPolicy"]
    return out


def find_sandbox(name):
    sb = SANDBOXES.get(name)
    if not sb or sb["status"] == "deleted":
        raise ApiError(404, "sandbox_not_found", "Sandbox %s not found" % name)
    return sb


def find_session(sid, running=True):
    se = SESSIONS.get(sid)
    if not se:
        raise ApiError(404, "session_not_found", "Session %s not found" % sid)
    if running and se["status"] != "running":
        raise ApiError(410, "sandbox_stopped", "Session %s is %s" % (sid, se["status"]))
    return se


def fill_dir(sb, snapshot_id):
    """The sandbox's disk: empty, or a copy of a snapshot."""
    shutil.rmtree(sb["dir"], ignore_errors=True)
    if snapshot_id:
        shutil.copytree(SNAPSHOTS[snapshot_id]["dir"], sb["dir"], symlinks=True)
    else:
        for d in ("vercel/sandbox", "tmp", "home"):
            os.makedirs(os.path.join(sb["dir"], d), exist_ok=True)


def new_session(sb, snapshot_id=None):
    t = now_ms()
    se = {"id": new_id("sbx"), "sandbox": sb["name"], "memory": sb["memory"],
          "vcpus": sb["vcpus"], "region": sb["region"], "timeout": sb["timeout"],
          "status": "running", "requestedAt": t, "startedAt": t, "createdAt": t,
          "updatedAt": t, "cwd": os.path.join(sb["dir"], "vercel/sandbox"),
          "sourceSnapshotId": snapshot_id, "runtime": sb.get("runtime"), "cmds": {}}
    SESSIONS[se["id"]] = se
    sb["currentSessionId"] = se["id"]
    sb["status"] = "running"
    sb["statusUpdatedAt"] = sb["updatedAt"] = t
    return se


def check_snapshot(sid):
    snap = SNAPSHOTS.get(sid)
    if not snap or snap["status"] != "created":
        raise ApiError(410, "snapshot_not_found", "Snapshot %s not found" % sid)
    return snap


def network_policy(p):
    if p is None:
        return None
    if not isinstance(p, dict):
        raise ApiError(400, "bad_request", "networkPolicy must be an object")
    if p.get("mode") in ("allow-all", "deny-all"):
        return {"mode": p["mode"]}
    if "allow" in p:
        allow = p["allow"]
        domains = allow if isinstance(allow, list) else list(allow)
        return {"mode": "custom", "allowedDomains": domains, "allowedCIDRs": [],
                "deniedCIDRs": [], "injectionRules": [], "forwardRules": []}
    raise ApiError(400, "bad_request", "networkPolicy: unknown shape")


def create_sandbox(data, project, source_snapshot=None):
    name = data.get("name") or new_id("sandbox")
    if name in SANDBOXES and SANDBOXES[name]["status"] != "deleted":
        raise ApiError(409, "sandbox_exists", "A sandbox named %s already exists" % name)
    if data.get("runtime") and data.get("image"):
        raise ApiError(400, "bad_request", "runtime and image are exclusive")
    rt = data.get("runtime")
    if rt and rt not in ("node22", "node24", "node26", "python3.13"):
        raise ApiError(400, "bad_request", "Unknown runtime %s" % rt)
    ports = data.get("ports") or []
    if len(ports) > 4 or any(not isinstance(p, int) or not 1 <= p <= 65535 for p in ports):
        raise ApiError(400, "bad_request", "ports: at most 4 numbers from 1 to 65535")
    vcpus = (data.get("resources") or {}).get("vcpus", 2)
    if vcpus not in (1, 2, 4, 8):
        raise ApiError(400, "bad_request", "resources.vcpus must be 1, 2, 4 or 8")
    src = data.get("source")
    snap = source_snapshot
    if src:
        if src.get("type") != "snapshot":
            raise ApiError(400, "bad_request", "the emulator takes only snapshot sources")
        snap = check_snapshot(src.get("snapshotId"))["id"]
    t = now_ms()
    sb = {"name": name, "project": project, "persistent": bool(data.get("persistent", False)),
          "region": data.get("region", "iad1"), "vcpus": vcpus, "memory": 2048 * vcpus,
          "timeout": int(data.get("timeout", 300000)), "createdAt": t, "updatedAt": t,
          "statusUpdatedAt": t, "currentSessionId": None, "status": "pending",
          "tags": data.get("tags") or {}, "runtime": rt, "image": data.get("image"),
          "currentSnapshotId": snap, "env": {k: str(v) for k, v in (data.get("env") or {}).items()},
          "ports": list(ports), "networkPolicy": network_policy(data.get("networkPolicy")),
          "subdomain": "sb-" + uuid.uuid4().hex[:10],
          "dir": os.path.join(CFG["root"], "sb-" + uuid.uuid4().hex[:12])}
    fill_dir(sb, snap)
    SANDBOXES[name] = sb
    se = new_session(sb, snap)
    return sb, se


def session_procs(sid):
    """Live processes started in a session: they carry its id in their environment."""
    marker = ("VERCEL_EMU_SESSION=%s" % sid).encode()
    return sfs_emu.live_pids(lambda env: marker in env)


def stop_session(se, status="stopped"):
    for _ in range(3):
        pids = session_procs(se["id"])
        if not pids:
            break
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.05)
    for c in se["cmds"].values():
        if c["proc"].poll() is None:
            try:
                c["proc"].kill()
            except OSError:
                pass
    se["status"] = status
    se["stoppedAt"] = se["updatedAt"] = now_ms()


def take_snapshot(sb, se):
    sid = new_id("snap")
    d = os.path.join(CFG["root"], "_snapshots", sid)
    shutil.copytree(sb["dir"], d, symlinks=True)
    size = sum(os.lstat(os.path.join(r, f)).st_size for r, _, fs in os.walk(d) for f in fs)
    t = now_ms()
    snap = {"id": sid, "sourceSessionId": se["id"], "region": sb["region"], "status": "created",
            "sizeBytes": size, "createdAt": t, "updatedAt": t, "dir": d,
            "sandbox": sb["name"]}
    SNAPSHOTS[sid] = snap
    sb["currentSnapshotId"] = sid
    return snap


def snapshot_json(s):
    return {k: v for k, v in s.items() if k not in ("dir", "sandbox")}


def stop_sandbox(sb):
    """Stops the current session; a persistent sandbox snapshots on stop."""
    se = SESSIONS.get(sb["currentSessionId"])
    snap = None
    if se and se["status"] == "running":
        stop_session(se)
        if sb["persistent"]:
            snap = take_snapshot(sb, se)
    sb["status"] = "stopped"
    sb["statusUpdatedAt"] = sb["updatedAt"] = now_ms()
    return se, snap


def resume_sandbox(sb):
    """A new session from the current snapshot (a stopped sandbox)."""
    snap = sb.get("currentSnapshotId")
    if snap and snap != sb.get("disk_snapshot"):
        check_snapshot(snap)
        fill_dir(sb, snap)
    elif not snap and not sb["persistent"]:
        fill_dir(sb, None)
    sb["disk_snapshot"] = snap
    return new_session(sb, snap)


# ---- commands ------------------------------------------------------------------

def resolve(sb, path, cwd=None):
    """A path (absolute host path under the sandbox, or relative to cwd) to
    a host path; anything outside the sandbox is refused."""
    base = cwd or os.path.join(sb["dir"], "vercel/sandbox")
    if not path:
        raise ApiError(400, "bad_request", "path is required")
    if not path.startswith("/"):
        path = os.path.join(base, path)
    norm = os.path.normpath(path)
    if norm != sb["dir"] and not norm.startswith(sb["dir"] + "/"):
        raise ApiError(403, "forbidden", "path %s is outside the sandbox" % path)
    return norm


def command_json(c):
    code = c["proc"].poll()
    if code is not None and code < 0:
        code = 128 - code
    out = {"id": c["id"], "name": c["name"], "args": c["args"], "cwd": c["cwd"],
           "sessionId": c["session"], "exitCode": code, "startedAt": c["startedAt"]}
    if code is not None:
        out["durationMs"] = c.get("durationMs", 0)
    return out


def start_command(sb, se, data):
    cmd = data.get("command")
    if not isinstance(cmd, str) or not cmd:
        raise ApiError(400, "bad_request", "command is required")
    args = data.get("args") or []
    if not all(isinstance(a, str) for a in args):
        raise ApiError(400, "bad_request", "args must be strings")
    cwd = resolve(sb, data.get("cwd") or se["cwd"])
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           "HOME": os.path.join(sb["dir"], "home"), "TMPDIR": os.path.join(sb["dir"], "tmp"),
           "LANG": "C.UTF-8", "VERCEL_EMU_SESSION": se["id"]}
    env.update(sb["env"])
    env.update({k: str(v) for k, v in (data.get("env") or {}).items()})
    try:
        p = subprocess.Popen([cmd] + args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    except OSError as e:
        raise ApiError(400, "command_failed", "cannot start %s: %s" % (cmd, e.strerror))
    c = {"id": new_id("cmd"), "name": cmd, "args": args, "cwd": cwd, "session": se["id"],
         "startedAt": now_ms(), "proc": p, "logs": [], "cond": threading.Condition(),
         "open": 2}

    def pump(stream, name):
        for chunk in iter(lambda: stream.read1(65536), b""):
            with c["cond"]:
                c["logs"].append((name, chunk))
                c["cond"].notify_all()
        with c["cond"]:
            c["open"] -= 1
            if c["open"] == 0:
                p.wait()
                c["durationMs"] = now_ms() - c["startedAt"]
            c["cond"].notify_all()

    for s, n in ((p.stdout, "stdout"), (p.stderr, "stderr")):
        threading.Thread(target=pump, args=(s, n), daemon=True).start()
    se["cmds"][c["id"]] = c
    return c


def wait_command(c):
    with c["cond"]:
        while c["open"] > 0:
            c["cond"].wait(0.2)


def log_line_json(name, chunk):
    return json.dumps({"stream": name, "data": chunk.decode("utf-8", "surrogateescape")
                       .encode("utf-8", "replace").decode("utf-8", "replace")}) + "\n"


# ---- files ---------------------------------------------------------------------

def untar_into(sb, dest, body):
    try:
        raw = gzip.decompress(body)
    except (OSError, EOFError):
        raise ApiError(400, "bad_request", "the body is not gzip")
    try:
        tf = tarfile.open(fileobj=io.BytesIO(raw), mode="r:")
        members = tf.getmembers()
    except tarfile.TarError as e:
        raise ApiError(400, "bad_request", "bad tar: %s" % e)
    for m in members:
        path = resolve(sb, m.name.lstrip("/") if not m.name.startswith(dest) else m.name,
                       dest)
        parent = os.path.dirname(path)
        if os.path.realpath(parent) != parent and not os.path.realpath(parent).startswith(sb["dir"] + "/"):
            raise ApiError(403, "forbidden", "%s leads outside the sandbox" % m.name)
        os.makedirs(parent, exist_ok=True)
        if m.isdir():
            os.makedirs(path, exist_ok=True)
            os.chmod(path, m.mode & 0o7777)
        elif m.issym():
            if os.path.lexists(path):
                os.unlink(path)
            os.symlink(m.linkname, path)
        elif m.isfile():
            if os.path.islink(path):
                os.unlink(path)
            data = tf.extractfile(m).read()
            tmp = path + ".vercel-emu-tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, m.mode & 0o7777)
            os.rename(tmp, path)


# ---- HTTP ------------------------------------------------------------------------

class Handler(sfs_emu.Handler):
    emu = EMU

    def _error(self, status, code, message, headers=None):
        self.send(status, {"error": {"code": code, "message": message}}, headers=headers)

    def _ndjson_start(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _ndjson_end(self):
        self.send_chunk(b"")

    def _injected(self, status, headers):
        if status == 429:
            return self._error(429, "rate_limited", "Too many requests", headers=headers)
        return self._error(status, "internal_server_error", "injected failure", headers=headers)

    def dispatch(self):
        url, parts, q = self.split_url()
        body = self.read_body()
        self.count("%s /%s" % (self.command, "/".join(parts[:3])))
        if parts[:1] == ["_emu"]:
            return self._emu(parts, body)
        # fault injection, before auth so it hits everything
        if self.inject_faults(self._injected):
            return

        auth = self.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or auth[7:] not in CFG["tokens"]:
            return self._error(401, "unauthorized", "Not authorized: invalid token")
        if q.get("teamId") != CFG["team"]:
            return self._error(403, "forbidden", "Not authorized for team %s" % q.get("teamId"))
        try:
            if parts[:1] in (["v2"], ["v3"]) and parts[1:2] == ["sandboxes"]:
                return self._v2(parts[2:], q, body)
            raise ApiError(404, "not_found", "Cannot %s %s" % (self.command, url.path))
        except ApiError as e:
            EMU.log("  -> %d %s" % (e.status, e.message))
            return self._error(e.status, e.code, e.message)
        except OSError as e:
            return self._error(*sfs_emu.os_error(e))

    # ---- emulator control -------------------------------------------------------

    def _emu(self, parts, body):
        def stats():
            live = [s for s in SANDBOXES.values() if s["status"] != "deleted"]
            procs = sum(1 for se in SESSIONS.values() for c in se["cmds"].values()
                        if c["proc"].poll() is None)
            return {"sandboxes": len(live), "processes": procs,
                    "snapshots": len([s for s in SNAPSHOTS.values()
                                      if s["status"] == "created"])}
        if not self.emu_control(parts, body, stats):
            self._error(404, "not_found", "no such emulator route")

    # ---- the API ----------------------------------------------------------------

    def _project(self, q, data):
        p = data.get("projectId") or q.get("projectId") or q.get("project")
        if p != CFG["project"]:
            raise ApiError(404, "project_not_found", "Project %s not found" % p)
        return p

    def _v2(self, parts, q, body):
        m = self.command
        ctype = self.headers.get("Content-Type", "")
        data = {}
        if body and ctype.startswith("application/json"):
            try:
                data = json.loads(body)
            except ValueError:
                raise ApiError(400, "bad_request", "invalid JSON body")
        if parts[:1] == ["sessions"]:
            return self._session(parts[1:], q, data, body)
        if parts[:1] == ["snapshots"] and len(parts) == 2:
            with LOCK:
                snap = SNAPSHOTS.get(parts[1])
                if not snap or snap["status"] == "deleted":
                    raise ApiError(404, "snapshot_not_found", "Snapshot %s not found" % parts[1])
                if m == "DELETE":
                    snap["status"] = "deleted"
                    shutil.rmtree(snap["dir"], ignore_errors=True)
                return self.send(200, {"snapshot": snapshot_json(snap)})
        with LOCK:
            if not parts and m == "POST":
                project = self._project(q, data)
                sb, se = create_sandbox(data, project)
                return self.send(200, {"sandbox": sandbox_json(sb), "session": session_json(se),
                                        "routes": routes(sb), "resumed": False})
            if not parts and m == "GET":
                self._project(q, data)
                live = [sandbox_json(s) for s in SANDBOXES.values() if s["status"] != "deleted"]
                return self.send(200, {"sandboxes": live,
                                        "pagination": {"count": len(live), "next": None}})
            if not parts:
                raise ApiError(405, "method_not_allowed", "Cannot %s /sandboxes" % m)
            self._project(q, data)
            sb = find_sandbox(parts[0])
            rest = parts[1:]
            if not rest and m == "GET":
                resumed = False
                if q.get("resume") == "true" and sb["status"] != "running":
                    resume_sandbox(sb)
                    resumed = True
                se = SESSIONS.get(sb["currentSessionId"])
                return self.send(200, {"sandbox": sandbox_json(sb),
                                        "session": session_json(se) if se else None,
                                        "routes": routes(sb), "resumed": resumed})
            if not rest and m == "PATCH":
                if "ports" in data:
                    ports = data["ports"] or []
                    if len(ports) > 4 or any(not isinstance(p, int) or not 1 <= p <= 65535
                                             for p in ports):
                        raise ApiError(400, "bad_request",
                                       "ports: at most 4 numbers from 1 to 65535")
                    sb["ports"] = list(ports)
                if "currentSnapshotId" in data:
                    check_snapshot(data["currentSnapshotId"])
                    if sb["status"] == "running":
                        raise ApiError(422, "sandbox_running",
                                       "stop the sandbox before changing its snapshot")
                    sb["currentSnapshotId"] = data["currentSnapshotId"]
                    sb["disk_snapshot"] = None
                for k in ("persistent", "timeout", "tags"):
                    if k in data:
                        sb[k] = data[k]
                if "networkPolicy" in data:
                    sb["networkPolicy"] = network_policy(data["networkPolicy"])
                sb["updatedAt"] = now_ms()
                return self.send(200, {"sandbox": sandbox_json(sb), "routes": routes(sb)})
            if not rest and m == "DELETE":
                for se in SESSIONS.values():
                    if se["sandbox"] == sb["name"] and se["status"] == "running":
                        stop_session(se)
                sb["status"] = "deleted"
                shutil.rmtree(sb["dir"], ignore_errors=True)
                out = sandbox_json(sb)
                del SANDBOXES[sb["name"]]
                return self.send(200, {"sandbox": out})
            if rest == ["fork"] and m == "POST":
                # a new sandbox booted from the source's current snapshot
                if not sb.get("currentSnapshotId"):
                    raise ApiError(400, "no_snapshot", "Sandbox %s has no snapshot to fork"
                                   % sb["name"])
                check_snapshot(sb["currentSnapshotId"])
                d = dict(data)
                for k in ("ports", "persistent", "timeout", "env", "tags"):
                    d.setdefault(k, sb[k] if k != "env" else sb["env"])
                d.setdefault("resources", {"vcpus": sb["vcpus"]})
                nsb, nse = create_sandbox(d, sb["project"], sb["currentSnapshotId"])
                nsb["disk_snapshot"] = sb["currentSnapshotId"]
                return self.send(200, {"sandbox": sandbox_json(nsb),
                                        "session": session_json(nse), "routes": routes(nsb),
                                        "resumed": False})
        raise ApiError(404, "not_found", "Cannot %s /v2/sandboxes/%s" % (m, "/".join(parts)))

    def _session(self, parts, q, data, body):
        m = self.command
        if not parts:
            raise ApiError(404, "not_found", "no session given")
        with LOCK:
            se = find_session(parts[0], running=False)
            sb = SANDBOXES.get(se["sandbox"])
            if not sb:
                raise ApiError(410, "sandbox_stopped", "the sandbox is gone")
            rest = parts[1:]
            if not rest and m == "GET":
                return self.send(200, {"session": session_json(se), "routes": routes(sb)})
            if rest == ["stop"] and m == "POST":
                snap = None
                if se["status"] == "running":
                    _, snap = stop_sandbox(sb)
                out = {"session": session_json(se), "sandbox": sandbox_json(sb)}
                if snap:
                    out["snapshot"] = snapshot_json(snap)
                return self.send(200, out)
            find_session(parts[0])  # the rest needs a running session
            if rest == ["snapshot"] and m == "POST":
                stop_session(se, "stopped")
                snap = take_snapshot(sb, se)
                sb["disk_snapshot"] = snap["id"]
                sb["status"] = "stopped"
                return self.send(200, {"snapshot": snapshot_json(snap),
                                        "session": session_json(se)})
            if rest == ["extend-timeout"] and m == "POST":
                se["timeout"] += int(data.get("duration", 0))
                return self.send(200, {"session": session_json(se)})
            if rest == ["network-policy"] and m == "POST":
                sb["networkPolicy"] = network_policy(data)
                return self.send(200, {"session": session_json(se)})
            if rest == ["fs", "read"] and m == "POST":
                path = resolve(sb, data.get("path"), data.get("cwd"))
                if not os.path.isfile(path):
                    if os.path.isdir(path):
                        raise ApiError(400, "is_a_directory", "%s is a directory" % path)
                    return self.send(404, raw=b"")
                with open(path, "rb") as f:
                    raw = f.read()
                return self.send(200, raw=raw, ctype="application/octet-stream")
            if rest == ["fs", "write"] and m == "POST":
                if self.headers.get("Content-Type") != "application/gzip":
                    raise ApiError(400, "bad_request", "Content-Type must be application/gzip")
                dest = resolve(sb, self.headers.get("x-cwd") or se["cwd"])
                untar_into(sb, dest, body)
                return self.send(200, {})
            if rest == ["fs", "mkdir"] and m == "POST":
                path = resolve(sb, data.get("path"), data.get("cwd"))
                if data.get("recursive"):
                    os.makedirs(path, exist_ok=True)
                else:
                    os.mkdir(path, 0o755)
                return self.send(200, {})
            if rest == ["cmd"] and m == "POST":
                c = start_command(sb, se, data)
            elif rest == ["cmd"] and m == "GET":
                return self.send(200, {"commands": [command_json(c) for c in se["cmds"].values()]})
            elif len(rest) >= 2 and rest[0] == "cmd":
                c = se["cmds"].get(rest[1])
                if not c:
                    raise ApiError(404, "command_not_found", "Command %s not found" % rest[1])
            else:
                raise ApiError(404, "not_found", "Cannot %s session route" % m)
        # outside the lock: these wait on the command
        if rest == ["cmd"]:
            if not data.get("wait"):
                return self.send(200, {"command": command_json(c)})
            self._ndjson_start()
            self.send_chunk(json.dumps({"command": command_json(c)}) + "\n")
            if data.get("logs"):
                self._stream_logs(c)
            wait_command(c)
            self.send_chunk(json.dumps({"command": command_json(c)}) + "\n")
            return self._ndjson_end()
        if len(rest) == 2 and m == "GET":
            if q.get("wait") == "true":
                wait_command(c)
            return self.send(200, {"command": command_json(c)})
        if rest[2:] == ["logs"] and m == "GET":
            self._ndjson_start()
            self._stream_logs(c)
            return self._ndjson_end()
        if rest[2:] == ["kill"] and m == "POST":
            sig = int(data.get("signal", 15))
            if c["proc"].poll() is None:
                try:
                    os.kill(c["proc"].pid, sig)
                except OSError:
                    pass
            return self.send(200, {"command": command_json(c)})
        raise ApiError(404, "not_found", "Cannot %s command route" % m)

    def _stream_logs(self, c):
        i = 0
        while True:
            with c["cond"]:
                while i >= len(c["logs"]) and c["open"] > 0:
                    c["cond"].wait(0.2)
                batch = c["logs"][i:]
                i = len(c["logs"])
                done = c["open"] == 0
            for name, chunk in batch:
                self.send_chunk(log_line_json(name, chunk))
            if done and i >= len(c["logs"]):
                return


def main():
    env = os.environ.get
    ap = sfs_emu.arg_parser(__doc__, "VERCEL_EMU_")
    ap.add_argument("--token", action="append",
                    help="a bearer token it accepts (repeatable; default emulator-token)")
    ap.add_argument("--team", default=env("VERCEL_EMU_TEAM", "team_emulator"))
    ap.add_argument("--project", default=env("VERCEL_EMU_PROJECT", "prj_emulator"))
    a = ap.parse_args()
    EMU.setup(a, root_prefix="vercel-emu-")
    CFG.update(tokens=a.token or ["emulator-token"], team=a.team, project=a.project)

    def cleanup():
        for se in SESSIONS.values():
            if se["status"] == "running":
                stop_session(se)

    sfs_emu.serve(EMU, Handler, a, cleanup)


if __name__ == "__main__":
    main()
