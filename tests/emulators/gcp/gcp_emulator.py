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
  POST /_emu/faults  the shared switches (tests/emulators/common/sfs_emu.py:
        latency_ms, fail_rate, drop_rate, slow_rate, hang, fail_paths,
        fail_count + status + retry_after) and "deny" (403
        PERMISSION_DENIED), "revoke" (every token so far is refused),
        "rewrite_chunk" (bytes a rewrite call copies; more needs rewriteToken
        calls)
  GET  /_emu/stats  {"requests", "by_route" {"METHOD route": n}, "sandboxes"
        (jobs), "processes" (live executions), "uploads" {type: n},
        "resumable_308" (chunks answered 308), "fields" (the fields= of the
        last list), "auth_checks"}
  GET  /_emu/objects?bucket=B  {name: {size, sha256, metadata}}
  POST /_emu/put?bucket=B&name=N[&metadata=JSON]  body = the object; metadata
        (a JSON object of strings) as another writer of the bucket left it
"""

import json
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "common"))
import sfs_emu  # noqa: E402
from gcs_store import GcsError, Store, apply_fields  # noqa: E402
from run_jobs import RunError, Runs  # noqa: E402

EMU = sfs_emu.Emulator(extra_faults={"fail_count": 0, "status": 503, "retry_after": None,
                                     "deny": False, "revoke": False, "rewrite_chunk": 0})
LOCK = EMU.lock
FAULTS = EMU.faults
STATS = EMU.stats
STATS.update({"uploads": {}, "resumable_308": 0, "fields": "", "auth_checks": 0})
GOOD, REVOKED = set(), set()
CFG = EMU.cfg
STORE = None
RUNS = None
REWRITES = {}  # token -> (src bucket, src, dst bucket, dst, done bytes)

STATUS_NAMES = {429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE", 500: "INTERNAL",
                403: "PERMISSION_DENIED", 404: "NOT_FOUND"}


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


class Handler(sfs_emu.Handler):
    emu = EMU

    # ---- replies -------------------------------------------------------------

    def reply(self, status, data=b"", ctype="application/json; charset=UTF-8", headers=()):
        self.send(status, raw=data, ctype=ctype, headers=dict(headers))

    def json(self, status, obj, headers=()):
        self.send(status, obj, ctype="application/json; charset=UTF-8", headers=dict(headers))

    def body(self):
        return self._body

    def fail(self, status, headers):
        self.json(status, {"error": {"code": status, "message": "emulated failure",
                                     "status": STATUS_NAMES.get(status, "UNKNOWN")}},
                  (headers or {}).items())

    # ---- dispatch -------------------------------------------------------------

    def dispatch(self):
        # read once: an unread body would be parsed as the next request
        self._body = self.read_body()
        url, parts, q = self.split_url()
        path = url.path
        if parts[:1] == ["_emu"]:
            return self.emu_routes(parts, q)
        self.route = self.command + " " + path
        if self.inject_faults(self.fail):
            return
        if FAULTS["deny"]:
            return self.json(403, {"error": {"code": 403, "message": "sfs-test@sfs-test-project.iam."
                                             "gserviceaccount.com does not have storage.objects.list "
                                             "access to the Google Cloud Storage bucket. Permission "
                                             "'storage.objects.list' denied on resource (or it may not "
                                             "exist).", "status": "PERMISSION_DENIED"}})
        if path.startswith("/computeMetadata/"):
            self.count("GET metadata")
            return self.metadata(path)
        auth = self.headers.get("Authorization") or ""
        if not token_ok(auth[7:] if auth.startswith("Bearer ") else ""):
            self.count("unauthenticated")
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
            self.count("unknown")
            self.json(404, {"error": {"code": 404, "message": "no route " + path,
                                      "status": "NOT_FOUND"}})
        except GcsError as e:
            self.json(e.status, e.body())
        except RunError as e:
            self.json(e.status, e.body())
        except (ValueError, KeyError) as e:
            self.json(400, {"error": {"code": 400, "message": "bad request: %s" % e,
                                      "status": "INVALID_ARGUMENT"}})

    def metadata(self, path):
        if self.headers.get("Metadata-Flavor") != "Google":
            return self.reply(403, b"Missing required header: Metadata-Flavor", "text/plain")
        if path == "/computeMetadata/v1/instance/service-accounts/default/token" and \
                CFG.get("metadata_token"):
            return self.json(200, {"access_token": CFG["metadata_token"], "expires_in": 3599,
                                   "token_type": "Bearer"}, [("Metadata-Flavor", "Google")])
        self.reply(404, b"not found", "text/plain")

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
                             min(int(q.get("maxResults") or 1000), 1000),
                             q.get("includeTrailingDelimiter") == "true")
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
            return self.reply(206, chunk, "application/octet-stream",
                             [("Content-Range", "bytes %d-%d/%d" % (a, a + len(chunk) - 1, len(data)))])
        self.reply(200, data, "application/octet-stream")

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
            return self.reply(200, b"", "text/plain", [("Location", loc)])
        if kind == "resumable" and q.get("upload_id"):
            with LOCK:
                up = STORE.uploads.get(q["upload_id"])
            if not up:
                raise GcsError(404, "No such upload session", "notFound")
            if self.command == "DELETE":
                with LOCK:
                    STORE.uploads.pop(q["upload_id"], None)
                return self.reply(499, b"", "text/plain")
            cr = self.headers.get("Content-Range", "")
            # "bytes a-b/total", "bytes */total" (status), "bytes a-b/*"
            rng, _, total = cr[6:].partition("/")
            if up.get("done"):  # the last chunk again (its answer was lost)
                return self.json(200, up["done"])
            if rng != "*":
                a, _, b = rng.partition("-")
                a, b = int(a), int(b)
                have = len(up["data"])
                if a > have or b - a + 1 != len(body):
                    raise GcsError(400, "Invalid Content-Range %s (have %d bytes)" % (cr, have),
                                   "invalid")
                if (total == "*" or int(total) != b + 1) and len(body) % (256 * 1024):
                    raise GcsError(400, "Chunks must be multiples of 256 KiB", "invalid")
                # a chunk sent again (its answer was lost): keep what is new of it
                up["data"] += body[have - a:]
            if total != "*" and len(up["data"]) == int(total):
                up["done"] = STORE.put(up["bucket"], up["name"], bytes(up["data"]),
                                       up["resource"], up["igm"])
                up["data"] = bytearray()
                return self.json(200, up["done"])
            hdrs = [("Range", "bytes=0-%d" % (len(up["data"]) - 1))] if up["data"] else []
            with LOCK:
                STATS["resumable_308"] += 1
            return self.reply(308, b"", "text/plain", hdrs)
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
            self.count("GET operations.get")
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

    def emu_routes(self, parts, q):
        def extra():
            return {"sandboxes": len(RUNS.jobs), "processes": RUNS.live()}
        if self.emu_control(parts, self._body, extra):
            return
        if parts[1:] == ["objects"]:
            return self.json(200, STORE.snapshot(q.get("bucket", "")))
        if parts[1:] == ["put"]:
            md = json.loads(q["metadata"]) if q.get("metadata") else None
            STORE.put(q["bucket"], q["name"], self._body, {"metadata": md} if md else None)
            return self.json(200, {})
        self.json(404, {"error": "no such emulator route"})


def main():
    ap = sfs_emu.arg_parser(__doc__, env_prefix="GCP_EMU_")
    ap.add_argument("--bucket", action="append", default=[])
    ap.add_argument("--oauth", default="")
    ap.add_argument("--metadata-token", default="")
    ap.add_argument("--docker", action="store_true",
                    help="run executions as containers of the job's image on the local dockerd")
    a = ap.parse_args()
    global STORE, RUNS
    root = EMU.setup(a, root_prefix="gcp-emu-")
    CFG.update({"oauth": a.oauth.rstrip("/"), "metadata_token": a.metadata_token})
    STORE = Store(root)
    for b in a.bucket:
        STORE.add_bucket(b)
    RUNS = Runs(root, STORE, docker_image=a.docker, log=EMU.log)
    sfs_emu.serve(EMU, Handler, a, cleanup=RUNS.stop_all)


if __name__ == "__main__":
    main()
