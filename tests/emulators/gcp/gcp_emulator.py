#!/usr/bin/env python3
"""A local emulator of the Google APIs sandboxfs's gcp provider uses, for tests.

Standard library only; listens on 127.0.0.1 and contacts nothing but the
OAuth emulator it is told about (and the local dockerd with --docker).
One port serves:
  Cloud Storage JSON API   /storage/v1/b/B/o[...], /upload/storage/v1/b/B/o
                           (gcs_store.py: buckets over real files)
  Cloud Run Admin API v2   /v2/projects/P/locations/L/jobs[...], executions,
                           tasks, operations (run_jobs.py: executions are
                           local process groups, or containers with --docker)
  Cloud Logging v2         POST /v2/entries:list
  metadata server token    /computeMetadata/v1/instance/service-accounts/default/token
                           (with --metadata-token: hands out that token)

Every API request needs "Authorization: Bearer T" with a T that the OAuth
emulator (tests/emulators/gcp_oauth, --oauth URL) issued (asked once per
token at its /_emu/tokeninfo) or the --metadata-token; otherwise 401
UNAUTHENTICATED.  Tokens revoked with /_emu/faults {"revoke":true} are 401
until a new one is fetched.

    gcp_emulator.py --root DIR [--bucket B]... [--oauth URL] [--metadata-token T]
                    [--port N] [--port-file F] [--log F] [--latency-ms N] [--docker]

Test-only routes (no auth):
  POST /_emu/faults {"latency_ms", "fail_rate" (503 at random), "drop_rate"
        (connection closed unanswered), "slow_rate" (2 s delay), "hang",
        "fail_paths" (substring the rates and counts apply to), "fail_status"
        + "fail_count" + "retry_after" (the next N matching requests answer
        that status, with Retry-After), "deny" (403 PERMISSION_DENIED),
        "revoke" (every token so far is refused), "rewrite_chunk" (bytes a
        rewrite call copies; more needs rewriteToken calls)}
  GET  /_emu/stats  {"requests", "sandboxes" (jobs), "processes" (live
        executions), "by" {"METHOD route": n}, "uploads" {type: n},
        "fields" (the fields= of the last list)}
  GET  /_emu/objects?bucket=B  {name: {size, sha256, metadata}}
  POST /_emu/put?bucket=B&name=N  body = the object (no metadata)
"""

import argparse
import json
import os
import random
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gcs_store import GcsError, Store, apply_fields  # noqa: E402
from run_jobs import RunError, Runs  # noqa: E402

LOCK = threading.RLock()
FAULTS = {"latency_ms": 0, "fail_rate": 0.0, "drop_rate": 0.0, "slow_rate": 0.0, "hang": False,
          "fail_paths": "", "fail_status": 0, "fail_count": 0, "retry_after": None,
          "deny": False, "revoke": False, "rewrite_chunk": 0}
STATS = {"requests": 0, "by": {}, "uploads": {}, "fields": "", "auth_checks": 0}
GOOD, REVOKED = set(), set()
CFG = {}
STORE = None
RUNS = None
REWRITES = {}  # token -> (src bucket, src, dst bucket, dst, done bytes)


def log_line(text):
    if CFG.get("log"):
        with LOCK, open(CFG["log"], "a") as f:
            f.write("%.3f %s\n" % (time.time(), text))


def token_ok(tok):
    if not tok:
        return False
    with LOCK:
        if FAULTS["revoke"]:
            REVOKED.update(GOOD)
            GOOD.clear()
            FAULTS["revoke"] = False
        if tok in REVOKED:
            return False
        if tok in GOOD:
            return True
    if CFG.get("metadata_token") and tok == CFG["metadata_token"]:
        ok = True
    elif CFG.get("oauth"):
        with LOCK:
            STATS["auth_checks"] += 1
        url = CFG["oauth"] + "/_emu/tokeninfo?access_token=" + urllib.parse.quote(tok, safe="")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                ok = r.status == 200
        except (urllib.error.URLError, OSError):
            ok = False
    else:
        ok = False
    if ok:
        with LOCK:
            GOOD.add(tok)
    return ok


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    # ---- replies -------------------------------------------------------------

    def send(self, status, data=b"", ctype="application/json; charset=UTF-8", headers=()):
        self.send_response(status)
        if status != 204:
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        if status != 204 and self.command != "HEAD":
            self.wfile.write(data)
        log_line("%s %s -> %d" % (self.command, self.path, status))

    def json(self, status, obj, headers=()):
        self.send(status, json.dumps(obj).encode(), headers=headers)

    def setup(self):
        super().setup()
        # headers and body are separate writes: without this, Nagle and
        # delayed ACKs add 40 ms to every answer
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def body(self):
        """The request body, read once (an unread body would be parsed as
        the next request on this connection)."""
        if getattr(self, "_body", None) is None:
            n = int(self.headers.get("Content-Length") or 0)
            self._body = self.rfile.read(n) if n else b""
        return self._body

    # ---- dispatch -------------------------------------------------------------

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_PATCH(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def faults(self):
        """True when a fault answered (or dropped) the request."""
        with LOCK:
            while FAULTS["hang"]:
                LOCK.release()
                time.sleep(0.05)
                LOCK.acquire()
            f = dict(FAULTS)
        if f["latency_ms"]:
            time.sleep(f["latency_ms"] / 1000.0)
        targeted = not f["fail_paths"] or f["fail_paths"] in self.path
        if not targeted:
            return False
        if f["slow_rate"] and random.random() < f["slow_rate"]:
            time.sleep(2)
        if f["drop_rate"] and random.random() < f["drop_rate"]:
            log_line("%s %s -> dropped" % (self.command, self.path))
            self.body()
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return True
        status, ra = 0, None
        with LOCK:
            if FAULTS["fail_count"] > 0:
                FAULTS["fail_count"] -= 1
                status, ra = FAULTS["fail_status"] or 503, FAULTS["retry_after"]
        if not status and f["fail_rate"] and random.random() < f["fail_rate"]:
            status = 503
        if status:
            self.body()
            log_line("%s %s -> injected %d" % (self.command, self.path, status))
            names = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE", 500: "INTERNAL",
                     403: "PERMISSION_DENIED", 404: "NOT_FOUND"}
            hdrs = [("Retry-After", str(ra))] if ra is not None else []
            self.json(status, {"error": {"code": status, "message": "emulated failure",
                                         "status": names.get(status, "UNKNOWN")}}, hdrs)
            return True
        if f["deny"]:
            self.body()
            self.json(403, {"error": {"code": 403, "message": "sfs-test@sfs-test-project.iam."
                                      "gserviceaccount.com does not have storage.objects.list "
                                      "access to the Google Cloud Storage bucket. Permission "
                                      "'storage.objects.list' denied on resource (or it may not "
                                      "exist).", "status": "PERMISSION_DENIED"}})
            return True
        return False

    def dispatch(self):
        self._body = None
        self.body()
        url = urllib.parse.urlsplit(self.path)
        path, q = url.path, urllib.parse.parse_qs(url.query, keep_blank_values=True)
        q = {k: v[0] for k, v in q.items()}
        if path.startswith("/_emu/"):
            return self.emu(path, q)
        with LOCK:
            STATS["requests"] += 1
        if self.faults():
            return
        if path.startswith("/computeMetadata/"):
            return self.metadata(path)
        auth = self.headers.get("Authorization") or ""
        if not token_ok(auth[7:] if auth.startswith("Bearer ") else ""):
            self.body()
            return self.json(401, {"error": {
                "code": 401, "status": "UNAUTHENTICATED",
                "message": "Request had invalid authentication credentials. Expected OAuth 2 "
                           "access token, login cookie or other valid authentication credential."}})
        try:
            if path.startswith("/storage/v1/") or path.startswith("/upload/storage/v1/"):
                return self.gcs(path, q)
            if path == "/v2/entries:list":
                self.count("POST entries:list")
                return self.json(200, RUNS.list_entries(json.loads(self.body() or b"{}")))
            if path.startswith("/v2/"):
                return self.run(path[4:], q)
            self.json(404, {"error": {"code": 404, "message": "no route " + path,
                                      "status": "NOT_FOUND"}})
        except GcsError as e:
            self.json(e.status, e.body())
        except RunError as e:
            self.json(e.status, e.body())
        except (ValueError, KeyError) as e:
            self.json(400, {"error": {"code": 400, "message": "bad request: %s" % e,
                                      "status": "INVALID_ARGUMENT"}})

    def count(self, what):
        with LOCK:
            STATS["by"][what] = STATS["by"].get(what, 0) + 1

    def metadata(self, path):
        if self.headers.get("Metadata-Flavor") != "Google":
            return self.send(403, b"Missing required header: Metadata-Flavor", "text/plain")
        if path == "/computeMetadata/v1/instance/service-accounts/default/token" and \
                CFG.get("metadata_token"):
            return self.json(200, {"access_token": CFG["metadata_token"], "expires_in": 3599,
                                   "token_type": "Bearer"}, [("Metadata-Flavor", "Google")])
        self.send(404, b"not found", "text/plain")

    # ---- Cloud Storage ------------------------------------------------------------

    def gcs(self, path, q):
        upload = path.startswith("/upload/")
        parts = path.split("/")[4 if upload else 3:]  # b, BUCKET, o, NAME...
        if len(parts) < 2 or parts[0] != "b":
            raise GcsError(404, "Not Found", "notFound")
        bucket = urllib.parse.unquote(parts[1])
        m = self.command
        if upload:
            return self.upload(bucket, q)
        if len(parts) == 2:
            self.count("GET bucket")
            STORE.bucket_dir(bucket)
            return self.json(200, {"kind": "storage#bucket", "name": bucket})
        if len(parts) == 3 and parts[2] == "o" and m == "GET":
            self.count("GET list")
            with LOCK:
                STATS["fields"] = q.get("fields", "")
            start = Store.token_start(q["pageToken"]) if q.get("pageToken") else ""
            out = STORE.list(bucket, q.get("prefix", ""), q.get("delimiter", ""), start,
                             min(int(q.get("maxResults") or 1000), 1000))
            return self.json(200, apply_fields(out, q.get("fields", "")))
        if len(parts) >= 4 and parts[2] == "o":
            name = urllib.parse.unquote(parts[3])
            if len(parts) == 9 and parts[4] == "rewriteTo" and parts[5] == "b" and m == "POST":
                return self.rewrite(bucket, name, urllib.parse.unquote(parts[6]),
                                    urllib.parse.unquote(parts[8]), q)
            if len(parts) != 4:
                raise GcsError(404, "Not Found", "notFound")
            if m == "GET" and q.get("alt") == "media":
                self.count("GET media")
                return self.media(bucket, name)
            if m == "GET":
                self.count("GET object")
                r = STORE.resource(bucket, name)
                return self.json(200, apply_fields(r, q.get("fields", "")))
            if m == "PATCH":
                self.count("PATCH object")
                r = STORE.patch(bucket, name, json.loads(self.body() or b"{}"))
                return self.json(200, apply_fields(r, q.get("fields", "")))
            if m == "DELETE":
                self.count("DELETE object")
                STORE.delete(bucket, name)
                return self.send(204)
        raise GcsError(404, "Not Found", "notFound")

    def media(self, bucket, name):
        data = STORE.data(bucket, name)
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes="):
            a, _, b = rng[6:].partition("-")
            a = int(a) if a else max(0, len(data) - int(b))
            b = int(b) if b and rng[6:][0] != "-" else len(data) - 1
            if a >= len(data):
                return self.json(416, {"error": {"code": 416, "message": "Requested range not satisfiable"}})
            chunk = data[a:b + 1]
            return self.send(206, chunk, "application/octet-stream",
                             [("Content-Range", "bytes %d-%d/%d" % (a, a + len(chunk) - 1, len(data)))])
        self.send(200, data, "application/octet-stream")

    def upload(self, bucket, q):
        STORE.bucket_dir(bucket)
        kind = q.get("uploadType", "")
        if self.command == "POST":  # an upload, not one of its session's chunks
            with LOCK:
                STATS["uploads"][kind] = STATS["uploads"].get(kind, 0) + 1
        self.count("%s upload %s" % (self.command, kind))
        body = self.body()
        if kind == "media" and self.command == "POST":
            return self.json(200, STORE.put(bucket, q.get("name", ""), body, None,
                                            q.get("ifGenerationMatch")))
        if kind == "multipart" and self.command == "POST":
            res, data = self.parse_related(body)
            return self.json(200, STORE.put(bucket, res.get("name") or q.get("name", ""), data, res,
                                            q.get("ifGenerationMatch")))
        if kind == "resumable" and self.command == "POST":
            res = json.loads(body or b"{}")
            uid = "emu-%d-%s" % (time.time_ns(), os.urandom(4).hex())
            with LOCK:
                STORE.uploads[uid] = {"bucket": bucket, "resource": res, "data": bytearray(),
                                      "name": res.get("name") or q.get("name", ""),
                                      "igm": q.get("ifGenerationMatch")}
            host = self.headers.get("Host") or "127.0.0.1"
            loc = "http://%s/upload/storage/v1/b/%s/o?uploadType=resumable&upload_id=%s" % (
                host, urllib.parse.quote(bucket, safe=""), uid)
            return self.send(200, b"", "text/plain", [("Location", loc)])
        if kind == "resumable" and q.get("upload_id"):
            with LOCK:
                up = STORE.uploads.get(q["upload_id"])
            if not up:
                raise GcsError(404, "No such upload session", "notFound")
            if self.command == "DELETE":
                with LOCK:
                    STORE.uploads.pop(q["upload_id"], None)
                return self.send(499, b"", "text/plain")
            cr = self.headers.get("Content-Range", "")
            # "bytes a-b/total", "bytes */total" (status), "bytes a-b/*"
            rng, _, total = cr[6:].partition("/")
            if rng != "*":
                a, _, b = rng.partition("-")
                a, b = int(a), int(b)
                if a != len(up["data"]) or b - a + 1 != len(body):
                    raise GcsError(400, "Invalid Content-Range %s (have %d bytes)" % (cr, len(up["data"])),
                                   "invalid")
                if total == "*" or int(total) != b + 1:
                    if len(body) % (256 * 1024):
                        raise GcsError(400, "Chunks must be multiples of 256 KiB", "invalid")
                up["data"] += body
            if total != "*" and len(up["data"]) == int(total):
                with LOCK:
                    STORE.uploads.pop(q["upload_id"], None)
                return self.json(200, STORE.put(up["bucket"], up["name"], bytes(up["data"]),
                                                up["resource"], up["igm"]))
            hdrs = [("Range", "bytes=0-%d" % (len(up["data"]) - 1))] if up["data"] else []
            return self.send(308, b"", "text/plain", hdrs)
        raise GcsError(400, "Unsupported uploadType %r" % kind, "invalid")

    def parse_related(self, body):
        ctype = self.headers.get("Content-Type", "")
        if not ctype.startswith("multipart/related") or "boundary=" not in ctype:
            raise GcsError(400, "multipart upload needs Content-Type multipart/related", "invalid")
        boundary = ctype.split("boundary=", 1)[1].strip().strip('"').encode()
        parts = body.split(b"--" + boundary)
        # ['', part1, part2, '--\r\n']
        if len(parts) < 4 or not parts[-1].startswith(b"--"):
            raise GcsError(400, "Malformed multipart body", "invalid")
        out = []
        for p in parts[1:3]:
            head, _, data = p.partition(b"\r\n\r\n")
            if data.endswith(b"\r\n"):
                data = data[:-2]
            out.append(data)
        return json.loads(out[0]), out[1]

    def rewrite(self, sb, so, db, do, q):
        self.count("POST rewrite")
        self.body()
        data = STORE.data(sb, so)
        res = STORE.resource(sb, so)
        chunk = FAULTS["rewrite_chunk"]
        done = 0
        if q.get("rewriteToken"):
            with LOCK:
                st = REWRITES.pop(q["rewriteToken"], None)
            if not st or st[:4] != (sb, so, db, do):
                raise GcsError(400, "Invalid rewrite token", "invalid")
            done = st[4]
        if chunk and len(data) - done > chunk:
            tok = os.urandom(8).hex()
            with LOCK:
                REWRITES[tok] = (sb, so, db, do, done + chunk)
            return self.json(200, {"kind": "storage#rewriteResponse",
                                   "totalBytesRewritten": str(done + chunk),
                                   "objectSize": str(len(data)), "done": False,
                                   "rewriteToken": tok})
        r = STORE.put(db, do, data, {"contentType": res.get("contentType"),
                                     "metadata": res.get("metadata", {})})
        self.json(200, {"kind": "storage#rewriteResponse", "totalBytesRewritten": str(len(data)),
                        "objectSize": str(len(data)), "done": True, "resource": r})

    # ---- Cloud Run ---------------------------------------------------------------

    def run(self, path, q):
        m = self.command
        body = json.loads(self.body() or b"{}") if m in ("POST", "PATCH") else {}
        parts = path.split("/")
        if len(parts) < 4 or parts[0] != "projects" or parts[2] != "locations":
            raise RunError(404, "no route /v2/" + path)
        if len(parts) == 5 and parts[4] == "jobs" and m == "POST":
            self.count("POST jobs.create")
            return self.json(200, RUNS.create_job("/".join(parts[:4]), q.get("jobId"), body))
        if len(parts) == 6 and parts[4] == "operations" and m == "GET":
            return self.json(200, RUNS.operation(path))
        if len(parts) == 6 and parts[4] == "jobs":
            if parts[5].endswith(":run") and m == "POST":
                self.count("POST jobs.run")
                return self.json(200, RUNS.run_job(path[:-4], body))
            if m == "GET":
                self.count("GET jobs.get")
                return self.json(200, RUNS.get_job(path))
            if m == "DELETE":
                self.count("DELETE jobs.delete")
                return self.json(200, RUNS.delete_job(path))
        if len(parts) == 8 and parts[6] == "executions":
            if parts[7].endswith(":cancel") and m == "POST":
                self.count("POST executions.cancel")
                return self.json(200, RUNS.cancel(path[:-7]))
            if m == "GET":
                self.count("GET executions.get")
                return self.json(200, RUNS.get_execution(path))
        if len(parts) == 9 and parts[6] == "executions" and parts[8] == "tasks" and m == "GET":
            self.count("GET tasks.list")
            return self.json(200, RUNS.tasks("/".join(parts[:8])))
        raise RunError(404, "no route %s /v2/%s" % (m, path))

    # ---- test-only routes --------------------------------------------------------

    def emu(self, path, q):
        if path == "/_emu/faults":
            with LOCK:
                FAULTS.update(json.loads(self.body() or b"{}"))
            return self.json(200, dict(FAULTS))
        if path == "/_emu/stats":
            with LOCK:
                s = json.loads(json.dumps(STATS))
                s["sandboxes"] = len(RUNS.jobs)
            s["processes"] = RUNS.live()
            return self.json(200, s)
        if path == "/_emu/objects":
            return self.json(200, STORE.snapshot(q.get("bucket", "")))
        if path == "/_emu/put":
            STORE.put(q["bucket"], q["name"], self.body())
            return self.json(200, {})
        self.json(404, {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--bucket", action="append", default=[])
    ap.add_argument("--oauth", default="")
    ap.add_argument("--metadata-token", default="")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    ap.add_argument("--latency-ms", type=int, default=0)
    ap.add_argument("--docker", action="store_true",
                    help="run executions as containers of the job's image on the local dockerd")
    a = ap.parse_args()
    global STORE, RUNS
    CFG.update({"log": a.log, "oauth": a.oauth.rstrip("/"), "metadata_token": a.metadata_token})
    FAULTS["latency_ms"] = a.latency_ms
    os.makedirs(a.root, exist_ok=True)
    STORE = Store(a.root)
    for b in a.bucket:
        STORE.add_bucket(b)
    RUNS = Runs(a.root, STORE, docker_image=a.docker, log=log_line)
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]

    def stop(*_):
        RUNS.stop_all()
        threading.Thread(target=srv.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.replace(a.port_file + ".tmp", a.port_file)
    print("listening on 127.0.0.1:%d" % port, flush=True)
    srv.serve_forever()
    RUNS.stop_all()


if __name__ == "__main__":
    main()
