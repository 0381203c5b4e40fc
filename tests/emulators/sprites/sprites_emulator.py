#!/usr/bin/env python3
"""A local emulator of the Sprites API (provider-apis.md section 3), for tests.

Standard library only, including a minimal WebSocket server (RFC 6455
handshake and framing).  Listens on 127.0.0.1 only and contacts nothing else.
Each sprite is a real directory ROOT/NAME with home/ (HOME, the default
working directory) and tmp/ (TMPDIR); exec sessions are real child processes
(argv, no shell added) in sessions of their own.  Paths in the fs routes are
host paths confined to the sprite's directory (HOME is a host path), so
commands and the file API see the same files.

    sprites_emulator.py [--port N] [--root DIR] [--token TOKEN]
                        [--latency-ms N] [--fail-rate P] [--drop-rate P]
                        [--slow-rate P] [--log FILE] [--port-file FILE]

Flags also read env vars (SPRITES_EMU_PORT, ..._TOKEN, ...).  The chosen port
is printed and written to --port-file.  Fault switches, changeable while
running (no auth; not Sprites):
    POST /_emu/faults {"latency_ms":..,"fail_rate":..,"drop_rate":..,
                       "slow_rate":..,"hang":bool,"fail_paths":"substring",
                       "no_session_info":bool (exec sends no session_info)}
    GET  /_emu/stats  {"requests", "sandboxes" (sprites), "sessions" (live exec
                       sessions), "processes" (live processes started for any
                       sprite, setsid'd ones included), "by_route"}

Conventions where the real API is UNSURE (documented, not guessed silently):
- exec over WebSocket only (the HTTP POST exec's output format is unknown);
  non-TTY framing: binary messages = 1 stream-id byte + payload (0 stdin,
  1 stdout, 2 stderr, 3 exit with the code byte, 4 stdin EOF); the first
  text message is {"type":"session_info","session_id":ID}; the exit also
  comes as text {"type":"exit","exit_code":N}; then a close 1000.
- env=K=V adds to (replaces entries of) the default environment, which
  keeps PATH, HOME and TMPDIR.
- max_run_after_disconnect: Go durations (300ms, 10s, 1h); default 10s;
  after the last socket of a running session goes, the session's process
  group is KILLed when it expires.
- kill signals the session's process group; NDJSON signal, then exited or
  timeout+killed, then complete; 410 once the session ended.
- fs/list of a symlink reports type "symlink" with "target".
- checkpoints copy home/ (tmp/ is scratch); DELETE checkpoints/{id} exists.
"""

import base64
import datetime
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import struct
import subprocess
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sfs_emu  # noqa: E402

EMU = sfs_emu.Emulator({"no_session_info": False})
LOCK, FAULTS, CFG = EMU.lock, EMU.faults, EMU.cfg
SPRITES = {}   # name -> dict
NEXT_SESSION = [1]
MARK = "SPRITES_EMU_SPRITE"  # env var naming the sprite dir in every child


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class ApiError(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def parse_duration(s, default):
    if s is None or s == "":
        return default
    total = 0.0
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for num, unit in re.findall(r"([0-9.]+)(ms|s|m|h)", s):
        total += float(num) * units[unit]
    if not re.fullmatch(r"([0-9.]+(ms|s|m|h))+|0", s):
        raise ApiError(400, "bad_request", "bad duration %r" % s)
    return total


# ---- sprites ------------------------------------------------------------------

def sprite_json(sp):
    return {"id": sp["id"], "name": sp["name"], "organization": "emulator-org",
            "url": "https://%s-emu.sprites.app" % sp["name"],
            "status": "running" if live_sessions(sp) else "warm",
            "created_at": sp["created_at"], "updated_at": now(),
            "url_settings": sp["url_settings"], "labels": sp["labels"]}


def find_sprite(name):
    sp = SPRITES.get(name)
    if not sp:
        raise ApiError(404, "not_found", "sprite %s not found" % name)
    return sp


def live_sessions(sp):
    return [s for s in sp["sessions"].values() if s.proc.poll() is None]


def marked_pids(sp=None):
    """Live processes started for a sprite (or any), setsid'd or not: they
    carry MARK in their environment.  Zombies are dead: not counted."""
    prefix = ("%s=%s" % (MARK, sp["dir"] if sp else CFG["root"] + "/")).encode()
    return sfs_emu.live_pids(
        lambda env: any(e == prefix or (not sp and e.startswith(prefix)) for e in env))


def kill_everything(sp):
    for pid in marked_pids(sp):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def resolve(sp, path, workdir=None):
    base = workdir or sp["home"]
    if not path:
        raise ApiError(400, "bad_request", "path is required")
    p = path if path.startswith("/") else os.path.join(base, path)
    p = os.path.normpath(p)
    parent = os.path.realpath(os.path.dirname(p))
    full = os.path.join(parent, os.path.basename(p)) if os.path.basename(p) else parent
    root = sp["dir"]
    if full != root and not full.startswith(root + "/"):
        raise ApiError(403, "forbidden", "path %s is outside the sprite" % path)
    return full


def entry(path):
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        typ = "symlink"
    elif stat.S_ISDIR(st.st_mode):
        typ = "directory"
    else:
        typ = "file"
    e = {"name": os.path.basename(path), "path": path, "type": typ, "size": st.st_size,
         "mode": "%04o" % stat.S_IMODE(st.st_mode),
         "modTime": datetime.datetime.fromtimestamp(st.st_mtime, datetime.timezone.utc)
         .strftime("%Y-%m-%dT%H:%M:%SZ"), "isDir": typ == "directory"}
    if typ == "symlink":
        e["target"] = os.readlink(path)
    return e


# ---- WebSocket (server side) -----------------------------------------------------

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class WsConn:
    def __init__(self, rfile, sock):
        self.rfile, self.sock = rfile, sock
        self.wlock = threading.Lock()
        self.closed = False

    def send(self, opcode, payload):
        n = len(payload)
        if n < 126:
            hdr = struct.pack("!BB", 0x80 | opcode, n)
        elif n < 65536:
            hdr = struct.pack("!BBH", 0x80 | opcode, 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x80 | opcode, 127, n)
        with self.wlock:
            if self.closed:
                return False
            try:
                self.sock.sendall(hdr + payload)
            except OSError:
                self.closed = True
                return False
        return True

    def close(self, code=1000):
        self.send(0x8, struct.pack("!H", code))
        with self.wlock:
            self.closed = True

    def _read(self, n):
        b = self.rfile.read(n)
        if len(b) != n:
            raise EOFError
        return b

    def recv(self):
        """One whole message: (opcode, payload); pings answered; None at the end."""
        buf, first = b"", None
        while True:
            try:
                b0, b1 = self._read(2)
            except (EOFError, OSError, ValueError):
                return None
            op, fin, n = b0 & 0x0F, b0 & 0x80, b1 & 0x7F
            if not b1 & 0x80 or b0 & 0x70:
                self.close(1002)
                return None
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4)
            data = bytearray(self._read(n))
            for i in range(n):
                data[i] ^= mask[i & 3]
            data = bytes(data)
            if op == 0x9:
                self.send(0xA, data)
                continue
            if op == 0xA:
                continue
            if op == 0x8:
                code = struct.unpack("!H", data[:2])[0] if len(data) >= 2 else 1000
                self.close(code)
                return None
            if op != 0:
                first = op
            buf += data
            if fin:
                return (first, buf)


# ---- exec sessions ----------------------------------------------------------------

class Session:
    def __init__(self, sp, argv, cwd, env, want_stdin, after):
        with LOCK:
            self.id = NEXT_SESSION[0]
            NEXT_SESSION[0] += 1
        self.sp, self.argv, self.after = sp, argv, after
        self.conns, self.lock = set(), threading.Lock()
        self.exit_code, self.timer = None, None
        self.done = threading.Event()
        self.created = now()
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, start_new_session=True,
            stdin=subprocess.PIPE if want_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.pumps = [threading.Thread(target=self._pump, args=(self.proc.stdout, 1), daemon=True),
                      threading.Thread(target=self._pump, args=(self.proc.stderr, 2), daemon=True)]

    def start(self):
        for t in self.pumps:
            t.start()
        threading.Thread(target=self._reap, daemon=True).start()

    def _broadcast(self, opcode, payload):
        with self.lock:
            conns = list(self.conns)
        for c in conns:
            c.send(opcode, payload)

    def _pump(self, f, stream):
        fd = f.fileno()
        while True:
            try:
                b = os.read(fd, 65536)
            except OSError:
                b = b""
            if not b:
                return
            self._broadcast(0x2, bytes([stream]) + b)

    def _reap(self):
        rc = self.proc.wait()
        for t in self.pumps:
            t.join()
        code = rc if rc >= 0 else 128 - rc
        self.exit_code = code
        self._broadcast(0x2, bytes([3, code & 0xFF]))
        self._broadcast(0x1, json.dumps({"type": "exit", "exit_code": code}).encode())
        with self.lock:
            conns = list(self.conns)
            if self.timer:
                self.timer.cancel()
        for c in conns:
            c.close(1000)
        self.done.set()

    def attach(self, conn):
        with self.lock:
            self.conns.add(conn)
            if self.timer:
                self.timer.cancel()
                self.timer = None

    def detach(self, conn):
        with self.lock:
            self.conns.discard(conn)
            if self.conns or self.proc.poll() is not None:
                return
            self.timer = threading.Timer(self.after, self.expire)
            self.timer.daemon = True
            self.timer.start()

    def expire(self):
        EMU.log("  session %d: max_run_after_disconnect expired, killed" % self.id)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def feed(self, opcode, data):
        if opcode != 0x2 or not data or not self.proc.stdin:
            return
        try:
            if data[0] == 0:
                self.proc.stdin.write(data[1:])
                self.proc.stdin.flush()
            elif data[0] == 4:
                self.proc.stdin.close()
        except (OSError, ValueError):
            pass

    def json(self):
        return {"id": self.id, "command": " ".join(self.argv), "workdir": self.sp["home"],
                "created": self.created, "bytes_per_second": 0,
                "is_active": self.proc.poll() is None, "tty": False}


def child_env(sp, extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": sp["home"],
           "TMPDIR": sp["tmp"], "LANG": "C.UTF-8", MARK: sp["dir"]}
    for kv in extra:
        k, _, v = kv.partition("=")
        if k and k != MARK:
            env[k] = v
    return env


# ---- HTTP ------------------------------------------------------------------------------

class Handler(sfs_emu.Handler):
    emu = EMU

    def send(self, status, payload=None, ctype="application/json", raw=None, headers=None):
        super().send(status, payload, ctype, raw, dict(headers or {}, **{"Sprite-Version": "emulator"}))

    def _ndjson(self, lines):
        data = b"".join(json.dumps(l).encode() + b"\n" for l in lines)
        self.send(200, raw=data, ctype="application/x-ndjson")

    def _injected(self, status, headers):
        self.read_body()
        self.send(status, {"error": "unavailable", "message": "injected fault"}, headers=headers)

    def dispatch(self):
        u = urllib.parse.urlsplit(self.path)
        parts = [urllib.parse.unquote(p) for p in u.path.strip("/").split("/") if p]
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)  # lists: env= repeats
        self.count(self.command + " " + ("/".join(parts[:1] + ["*"] + parts[3:])
                                         if len(parts) > 2 else "/".join(parts)))
        if parts[:1] == ["_emu"]:
            return self._emu(parts)
        if self.inject_faults(self._injected):
            return
        try:
            auth = self.headers.get("Authorization", "")
            if auth != "Bearer " + CFG["token"]:
                self.read_body()
                raise ApiError(401, "unauthorized", "missing or bad token")
            if parts[:2] != ["v1", "sprites"]:
                raise ApiError(404, "not_found", "no route %s" % u.path)
            self._api(parts[2:], q)
        except ApiError as e:
            EMU.log("  -> %d %s" % (e.status, e.message))
            self.send(e.status, {"error": e.code, "message": e.message})
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _emu(self, parts):
        def stats():
            return {"sandboxes": len(SPRITES),
                    "sessions": sum(len(live_sessions(sp)) for sp in SPRITES.values()),
                    "processes": len(marked_pids())}
        if not self.emu_control(parts, self.read_body(), stats):
            self.send(404, {"error": "not_found", "message": "no such emulator route"})

    def _json_body(self):
        b = self.read_body()
        try:
            return json.loads(b) if b else {}
        except ValueError:
            raise ApiError(400, "bad_request", "body is not JSON")

    def _api(self, rest, q):
        m = self.command
        if not rest:
            if m == "POST":
                return self._create(self._json_body())
            if m == "GET":
                with LOCK:
                    sps = [sprite_json(s) for s in SPRITES.values()]
                return self.send(200, {"sprites": sps, "has_more": False, "name": "emulator-org",
                                        "running": 0, "warm": len(sps), "cold": 0})
            raise ApiError(405, "method_not_allowed", m)
        sp = find_sprite(rest[0])
        sub = rest[1:]
        if not sub:
            if m == "GET":
                return self.send(200, sprite_json(sp))
            if m == "DELETE":
                with LOCK:
                    SPRITES.pop(sp["name"], None)
                kill_everything(sp)
                shutil.rmtree(sp["dir"], ignore_errors=True)
                return self.send(204)
            raise ApiError(405, "method_not_allowed", m)
        if sub[0] == "exec":
            return self._exec(sp, sub[1:], q)
        if sub[0] == "fs" and len(sub) == 2:
            return self._fs(sp, sub[1], q)
        if sub == ["policy", "network"]:
            if m == "POST":
                body = self._json_body()
                rules = body.get("rules")
                if not isinstance(rules, list):
                    raise ApiError(400, "bad_request", "rules must be a list")
                sp["network"] = rules
            else:
                self.read_body()
            return self.send(200, {"rules": sp["network"]})
        if sub == ["checkpoint"] and m == "POST":
            return self._checkpoint(sp, self._json_body())
        if sub[0] == "checkpoints":
            return self._checkpoints(sp, sub[1:])
        raise ApiError(404, "not_found", "no route")

    def _create(self, body):
        name = body.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name) \
                or "--" in name or name.endswith("-"):
            raise ApiError(400, "invalid_name", "sprite name %r is not a DNS label "
                           "(lowercase letters, digits, single '-' inside)" % name)
        with LOCK:
            if name in SPRITES:
                raise ApiError(400, "already_exists", "sprite %s already exists" % name)
            d = os.path.join(CFG["root"], name)
            home, tmp = os.path.join(d, "home"), os.path.join(d, "tmp")
            os.makedirs(home, exist_ok=True)
            os.makedirs(tmp, exist_ok=True)
            sp = {"id": "sprite-%s" % hashlib.sha1(name.encode()).hexdigest()[:12], "name": name,
                  "dir": d, "home": home, "tmp": tmp, "created_at": now(),
                  "url_settings": body.get("url_settings") or {"auth": "sprite"},
                  "labels": body.get("labels") or [], "sessions": {}, "network": [],
                  "checkpoints": []}
            SPRITES[name] = sp
        self.send(201, sprite_json(sp))

    # -- exec -------------------------------------------------------------------

    def _exec(self, sp, rest, q):
        m = self.command
        if rest and len(rest) == 2 and rest[1] == "kill" and m == "POST":
            return self._kill(sp, rest[0], q)
        if self.headers.get("Upgrade", "").lower() != "websocket":
            if m == "GET" and not rest:
                return self.send(200, {"sessions": [s.json() for s in sp["sessions"].values()]})
            raise ApiError(400, "bad_request", "exec needs a WebSocket upgrade here")
        key = self.headers.get("Sec-WebSocket-Key")
        if not key or self.headers.get("Sec-WebSocket-Version") != "13":
            raise ApiError(400, "bad_request", "bad WebSocket upgrade")
        sid = rest[0] if rest else (q.get("id") or [None])[0]
        if sid is not None:
            sess = sp["sessions"].get(int(sid)) if sid.isdigit() else None
            if not sess:
                raise ApiError(404, "not_found", "session %s not found" % sid)
        else:
            argv = q.get("cmd") or []
            if not argv:
                raise ApiError(400, "bad_request", "cmd is required")
            if (q.get("tty") or ["false"])[0] == "true":
                raise ApiError(400, "bad_request", "the emulator has no TTY mode")
            after = parse_duration((q.get("max_run_after_disconnect") or [""])[0], 10.0)
            cwd = resolve(sp, (q.get("dir") or [sp["home"]])[0])
            if not os.path.isdir(cwd):
                raise ApiError(400, "bad_request", "dir %s is not a directory" % cwd)
            if q.get("path"):
                argv = [q["path"][0]] + argv[1:]
            try:
                sess = Session(sp, argv, cwd, child_env(sp, q.get("env") or []),
                               (q.get("stdin") or ["false"])[0] == "true", after)
            except OSError as e:
                raise ApiError(400, "exec_failed", "cannot start %s: %s" % (argv[0], e.strerror))
            sp["sessions"][sess.id] = sess
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("X-Sprite-Capabilities", "signal")
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        conn = WsConn(self.rfile, self.connection)
        if not FAULTS["no_session_info"]:
            conn.send(0x1, json.dumps({"type": "session_info", "session_id": sess.id}).encode())
        sess.attach(conn)
        if sid is None:
            sess.start()
        elif sess.exit_code is not None:
            conn.send(0x2, bytes([3, sess.exit_code & 0xFF]))
            conn.close(1000)
        while True:
            msg = conn.recv()
            if msg is None:
                break
            op, data = msg
            if op == 0x1:
                try:
                    j = json.loads(data)
                except ValueError:
                    continue
                if j.get("type") == "signal" and sess.proc.poll() is None:
                    try:
                        os.killpg(sess.proc.pid, getattr(signal, "SIG" + j.get("signal", "TERM")))
                    except (OSError, AttributeError):
                        pass
            else:
                sess.feed(op, data)
        sess.detach(conn)

    def _kill(self, sp, sid, q):
        self.read_body()
        sess = sp["sessions"].get(int(sid)) if sid.isdigit() else None
        if not sess:
            raise ApiError(404, "not_found", "session %s not found" % sid)
        if sess.proc.poll() is not None:
            raise ApiError(410, "gone", "session %s already exited" % sid)
        name = (q.get("signal") or ["SIGTERM"])[0]
        name = name if name.startswith("SIG") else "SIG" + name
        sig = getattr(signal, name, None)
        if sig is None:
            raise ApiError(400, "bad_request", "bad signal %s" % name)
        timeout = parse_duration((q.get("timeout") or ["10s"])[0], 10.0)
        lines = [{"type": "signal", "message": "sent %s" % name, "signal": name,
                  "pid": sess.proc.pid}]
        try:
            os.killpg(sess.proc.pid, sig)
        except OSError:
            pass
        if timeout and sess.done.wait(timeout):
            lines.append({"type": "exited", "message": "process exited"})
        elif not sess.done.is_set():
            lines.append({"type": "timeout", "message": "still running after %gs" % timeout})
            try:
                os.killpg(sess.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            sess.done.wait(10)
            lines.append({"type": "killed", "message": "sent SIGKILL"})
        lines.append({"type": "complete", "exit_code": sess.exit_code})
        self._ndjson(lines)

    # -- files --------------------------------------------------------------------

    def _fs(self, sp, op, q):
        m = self.command
        arg = lambda k: (q.get(k) or [None])[0]
        wd = resolve(sp, arg("workingDir")) if arg("workingDir") else None
        if op == "read" and m == "GET":
            p = resolve(sp, arg("path"), wd)
            if not os.path.lexists(p):
                raise ApiError(404, "not_found", "%s: no such file" % arg("path"))
            if os.path.isdir(p):
                raise ApiError(400, "is_directory", "%s is a directory" % arg("path"))
            with open(p, "rb") as f:
                return self.send(200, raw=f.read(), ctype="application/octet-stream")
        if op == "write" and m == "PUT":
            data = self.read_body()
            p = resolve(sp, arg("path"), wd)
            if arg("mkdir") == "true" or arg("mkdirParents") == "true":
                os.makedirs(os.path.dirname(p), exist_ok=True)
            elif not os.path.isdir(os.path.dirname(p)):
                raise ApiError(404, "not_found", "%s: no such directory" % os.path.dirname(p))
            if os.path.isdir(p):
                raise ApiError(400, "is_directory", "%s is a directory" % arg("path"))
            mode = int(arg("mode") or "0644", 8)
            tmp = p + ".sprites-emu-tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.chmod(tmp, mode)
            os.replace(tmp, p)
            return self.send(200, {"path": p, "size": len(data), "mode": "%04o" % mode})
        if op == "list" and m == "GET":
            p = resolve(sp, arg("path"), wd)
            if not os.path.lexists(p):
                raise ApiError(404, "not_found", "%s: no such file or directory" % arg("path"))
            if os.path.isdir(p) and not os.path.islink(p):
                ents = [entry(os.path.join(p, n)) for n in sorted(os.listdir(p))]
            else:
                ents = [entry(p)]
            return self.send(200, {"path": p, "entries": ents, "count": len(ents)})
        if op == "delete" and m == "DELETE":
            body = self._json_body()
            path = body.get("path") or arg("path")
            rec = body.get("recursive") is True or arg("recursive") == "true"
            p = resolve(sp, path, wd)
            if p in (sp["dir"], sp["home"]):
                raise ApiError(403, "forbidden", "will not delete %s" % path)
            if not os.path.lexists(p):
                raise ApiError(404, "not_found", "%s: no such file or directory" % path)
            if os.path.isdir(p) and not os.path.islink(p):
                if rec:
                    shutil.rmtree(p)
                elif os.listdir(p):
                    raise ApiError(400, "not_empty", "%s: directory not empty" % path)
                else:
                    os.rmdir(p)
            else:
                os.unlink(p)
            return self.send(200, {"deleted": [p], "count": 1})
        if op == "rename" and m == "POST":
            body = self._json_body()
            wd = resolve(sp, body["workingDir"]) if body.get("workingDir") else wd
            src, dst = resolve(sp, body.get("source"), wd), resolve(sp, body.get("dest"), wd)
            if not os.path.lexists(src):
                raise ApiError(404, "not_found", "%s: no such file or directory" % body["source"])
            try:
                os.rename(src, dst)
            except OSError as e:
                raise ApiError(400, "rename_failed", "%s" % e.strerror)
            return self.send(200, {"source": src, "dest": dst})
        if op == "chmod" and m == "POST":
            body = self._json_body()
            p = resolve(sp, body.get("path"), wd)
            if not os.path.lexists(p):
                raise ApiError(404, "not_found", "%s: no such file or directory" % body.get("path"))
            mode = int(body.get("mode") or "0", 8)
            os.chmod(p, mode)
            return self.send(200, {"affected": [{"path": p, "mode": "%04o" % mode}], "count": 1})
        raise ApiError(404, "not_found", "no fs route %s %s" % (m, op))

    # -- checkpoints ------------------------------------------------------------------

    def _checkpoint(self, sp, body):
        with LOCK:
            cid = "v%d" % len(sp["checkpoints"])
            d = os.path.join(CFG["root"], ".checkpoints", sp["name"], cid)
            shutil.rmtree(d, ignore_errors=True)
            shutil.copytree(sp["home"], d, symlinks=True)
            sp["checkpoints"].append({"id": cid, "create_time": now(),
                                      "comment": body.get("comment") or "", "dir": d})
        self._ndjson([{"type": "info", "data": "Creating checkpoint", "time": now()},
                      {"type": "complete", "data": "Checkpoint %s created" % cid, "time": now()}])

    def _checkpoints(self, sp, rest):
        m = self.command
        self.read_body()
        cps = [c for c in sp["checkpoints"] if not c.get("deleted")]
        pub = lambda c: {k: c[k] for k in ("id", "create_time", "comment")}
        if not rest and m == "GET":
            return self.send(200, [pub(c) for c in cps])
        cp = next((c for c in cps if c["id"] == rest[0]), None)
        if not cp:
            raise ApiError(404, "not_found", "checkpoint %s not found" % rest[0])
        if len(rest) == 1 and m == "GET":
            return self.send(200, pub(cp))
        if len(rest) == 1 and m == "DELETE":
            cp["deleted"] = True
            shutil.rmtree(cp["dir"], ignore_errors=True)
            return self.send(204)
        if rest[1:] == ["restore"] and m == "POST":
            kill_everything(sp)  # "running processes are stopped"
            shutil.rmtree(sp["home"], ignore_errors=True)
            shutil.copytree(cp["dir"], sp["home"], symlinks=True)
            return self._ndjson([{"type": "info", "data": "Restoring %s" % cp["id"], "time": now()},
                                 {"type": "complete", "data": "Restored %s" % cp["id"],
                                  "time": now()}])
        raise ApiError(404, "not_found", "no checkpoint route")


def main():
    ap = sfs_emu.arg_parser(__doc__, "SPRITES_EMU_")
    ap.add_argument("--token", default=os.environ.get("SPRITES_EMU_TOKEN", "emulator/org/token/x"))
    a = ap.parse_args()
    EMU.setup(a, root_prefix="sprites-emu-")
    CFG["token"] = a.token

    def cleanup():
        for sp in list(SPRITES.values()):
            kill_everything(sp)

    sfs_emu.serve(EMU, Handler, a, cleanup)


if __name__ == "__main__":
    main()
