#!/usr/bin/env python3
"""A local emulator of the S3 subset sandboxfs uses, verifying SigV4, for tests.

Standard library only.  Listens on 127.0.0.1 only and contacts nothing else.
Shapes are those of provider-apis-aws-gcp.md section 5: ListObjectsV2 (prefix,
delimiter, continuation), GetObject (Range), HeadObject, PutObject (x-amz-meta-*
kept), CopyObject (metadata directive COPY|REPLACE), DeleteObject, multi-object
delete, multipart upload (create, upload part, complete, abort; parts under
5 MiB but the last are EntityTooSmall).  Objects live in memory.

Path-style (/BUCKET/KEY) and virtual-host (Host: BUCKET.localhost:PORT, or
BUCKET.<--vhost-suffix>) addressing both work.

Every request must carry a valid AWS Signature Version 4 Authorization
header for a configured key pair: the emulator recomputes the canonical
request and signature, so a client signing bug or a wrong secret fails with
403 SignatureDoesNotMatch (the XML carries the canonical request and string
to sign, as S3 does).  x-amz-content-sha256 must be UNSIGNED-PAYLOAD or the
body's hash (else 400 XAmzContentSHA256Mismatch).  With --session-token the
signed X-Amz-Security-Token must match (else 403 InvalidToken).

    s3_emulator.py [--port N] [--bucket B]... [--key AKID:SECRET]...
                   [--session-token T] [--region R] [--latency-ms N]
                   [--log FILE] [--port-file FILE] [--vhost-suffix S]

Fault switches (no auth; not S3's):
    POST /_emu/faults {"latency_ms":N, "slow_down":N (the next N requests
        answer 503 SlowDown with Retry-After: 1), "fail_rate":P (503
        SlowDown at random), "fail_methods":"PUT,POST" (every such request
        answers 500 InternalError), "fail_paths":"substring" (restricts
        fail_rate/fail_methods), "deny":bool (403 AccessDenied), "hang":bool}
    GET /_emu/stats    request counts by method and status
    GET /_emu/objects?bucket=B   {key: {size, sha256, meta}} of a bucket
"""

import hashlib
import hmac
import json
import os
import random
import re
import sys
import time
import urllib.parse
import uuid
import xml.sax.saxutils as sx
from email.utils import formatdate

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sfs_emu  # noqa: E402

EMU = sfs_emu.Emulator()  # its lock, config and log; S3 has fault switches of its own
LOCK, CFG = EMU.lock, EMU.cfg
BUCKETS = {}   # name -> {key: obj}; obj = {data, meta, etag, mtime, ctype}
UPLOADS = {}   # upload id -> {bucket, key, meta, ctype, parts: {n: (etag, data)}}
FAULTS = {"latency_ms": 0, "slow_down": 0, "fail_rate": 0.0, "fail_methods": "",
          "fail_paths": "", "deny": False, "hang": False}
STATS = {"requests": 0, "by": {}}
MIN_PART = 5 * 1024 * 1024


class S3Error(Exception):
    def __init__(self, status, code, message, extra=None, headers=None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.extra = extra or {}
        self.headers = headers or {}


# ---- SigV4 ---------------------------------------------------------------------

def uri_encode(b, keep_slash):
    out = []
    for c in b:
        ch = chr(c)
        if ch.isascii() and (ch.isalnum() or ch in "-_.~") or (keep_slash and ch == "/"):
            out.append(ch)
        else:
            out.append("%%%02X" % c)
    return "".join(out)


def canonical_query(raw):
    ps = []
    for piece in raw.split("&") if raw else []:
        if not piece:
            continue
        k, _, v = piece.partition("=")
        ps.append((uri_encode(urllib.parse.unquote_to_bytes(k), False),
                   uri_encode(urllib.parse.unquote_to_bytes(v), False)))
    ps.sort()
    return "&".join("%s=%s" % kv for kv in ps)


def canonical_request(h, path, query, names, payload):
    """SigV4's canonical request of h's method, path (as on the wire), query,
    the signed header names and the payload line (also tests/emulators/aws's
    JSON services and presigned URLs)."""
    return "\n".join([
        h.command,
        uri_encode(urllib.parse.unquote_to_bytes(path or "/"), True),
        canonical_query(query),
        "".join("%s:%s\n" % (n, ",".join(squeeze(v) for v in (h.headers.get_all(n) or [])))
                for n in names),
        ";".join(names),
        payload,
    ])


def squeeze(v):
    return " ".join(v.split())


def hm(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def verify_sigv4(h, body):
    auth = h.headers.get("Authorization", "")
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,\s*"
                 r"SignedHeaders=([^,]+),\s*Signature=([0-9a-f]{64})$", auth)
    if not m:
        raise S3Error(403, "AccessDenied" if not auth else "AuthorizationHeaderMalformed",
                      "a SigV4 Authorization header is required")
    akid, date, region, service, signed, sig = m.groups()
    secret = CFG["keys"].get(akid)
    if secret is None:
        raise S3Error(403, "InvalidAccessKeyId",
                      "The AWS Access Key Id you provided does not exist in our records.")
    if region != CFG["region"] or service != "s3":
        raise S3Error(400, "AuthorizationHeaderMalformed",
                      "the region '%s' is wrong; expecting '%s'" % (region, CFG["region"]))
    amz_date = h.headers.get("X-Amz-Date", "")
    if not amz_date.startswith(date):
        raise S3Error(403, "SignatureDoesNotMatch", "X-Amz-Date does not match the scope")
    try:
        t = time.mktime(time.strptime(amz_date, "%Y%m%dT%H%M%SZ")) - time.timezone
    except ValueError:
        raise S3Error(403, "AccessDenied", "bad X-Amz-Date")
    if abs(time.time() - t) > 900:
        raise S3Error(403, "RequestTimeTooSkewed",
                      "The difference between the request time and the current time is too large.")
    payload = h.headers.get("X-Amz-Content-Sha256")
    if payload is None:
        raise S3Error(400, "InvalidRequest", "Missing required header x-amz-content-sha256")
    if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(body).hexdigest():
        raise S3Error(400, "XAmzContentSHA256Mismatch",
                      "The provided 'x-amz-content-sha256' header does not match what was computed.")
    names = signed.split(";")
    for need in ("host", "x-amz-date", "x-amz-content-sha256"):
        if need not in names:
            raise S3Error(403, "AccessDenied", "%s must be signed" % need)
    url = urllib.parse.urlsplit(h.path)
    creq = canonical_request(h, url.path, url.query, names, payload)
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, "%s/%s/%s/aws4_request" % (date, region, service),
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = hm(("AWS4" + secret).encode(), date)
    k = hm(hm(hm(k, region), service), "aws4_request")
    want = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, sig):
        raise S3Error(403, "SignatureDoesNotMatch",
                      "The request signature we calculated does not match the signature you "
                      "provided. Check your key and signing method.",
                      {"AWSAccessKeyId": akid, "StringToSign": sts, "CanonicalRequest": creq})
    tok = CFG.get("session_token")
    if tok is not None:
        got = h.headers.get("X-Amz-Security-Token")
        if got != tok or "x-amz-security-token" not in names:
            raise S3Error(403, "InvalidToken", "The provided token is malformed or otherwise invalid.")


# ---- objects -------------------------------------------------------------------

def iso(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


def xml_doc(root, inner):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<%s xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            '%s</%s>' % (root, inner, root)).encode()


def el(name, text):
    return "<%s>%s</%s>" % (name, sx.escape(str(text)), name)


def bucket_of(name):
    b = BUCKETS.get(name)
    if b is None:
        raise S3Error(404, "NoSuchBucket", "The specified bucket does not exist", {"BucketName": name})
    return b


def user_meta(headers):
    return {k.lower()[11:]: v for k, v in headers.items() if k.lower().startswith("x-amz-meta-")}


def put_obj(bucket, key, data, meta, ctype, etag=None):
    with LOCK:
        bucket_of(bucket)[key] = {"data": data, "meta": meta, "ctype": ctype, "mtime": time.time(),
                                  "etag": etag or '"%s"' % hashlib.md5(data).hexdigest()}
        return BUCKETS[bucket][key]


def list_v2(bucket, q):
    b = bucket_of(bucket)
    prefix, delim = q.get("prefix", ""), q.get("delimiter", "")
    maxk = min(int(q.get("max-keys", "1000") or 1000), 1000)
    after = q.get("continuation-token") or q.get("start-after") or ""
    with LOCK:
        keys = sorted(k for k in b if k.startswith(prefix))
    contents, prefixes, n, truncated, last = [], [], 0, False, ""
    for k in keys:
        rest = k[len(prefix):]
        # a key with the delimiter after the prefix rolls up into a common
        # prefix, even one that ends there (an empty directory's marker)
        rolled = bool(delim) and delim in rest
        entry = prefix + rest[:rest.index(delim) + len(delim)] if rolled else k
        if entry <= after or (prefixes and prefixes[-1] == entry):
            continue
        if n == maxk:
            truncated = True
            break
        if rolled:
            prefixes.append(entry)
        else:
            o = b[k]
            contents.append("<Contents>%s%s%s%s%s</Contents>" % (
                el("Key", k), el("LastModified", iso(o["mtime"])), el("ETag", o["etag"]),
                el("Size", len(o["data"])), el("StorageClass", "STANDARD")))
        n += 1
        last = entry
    inner = el("Name", bucket) + el("Prefix", prefix) + (el("Delimiter", delim) if delim else "")
    inner += el("MaxKeys", maxk) + el("KeyCount", n) + el("IsTruncated", "true" if truncated else "false")
    if q.get("continuation-token"):
        inner += el("ContinuationToken", q["continuation-token"])
    if truncated:
        inner += el("NextContinuationToken", last)
    inner += "".join(contents) + "".join("<CommonPrefixes>%s</CommonPrefixes>" % el("Prefix", p)
                                         for p in prefixes)
    return xml_doc("ListBucketResult", inner)


# ---- HTTP ----------------------------------------------------------------------

class Handler(sfs_emu.Handler):
    emu = EMU

    def _send(self, status, data=b"", ctype="application/xml", headers=None, head=False):
        self.send_response(status)
        if data or not head:
            self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head and self.command != "HEAD":
            self.wfile.write(data)
        self.wfile.flush()
        self.status_sent = status

    def _error(self, e):
        inner = el("Code", e.code) + el("Message", e.message)
        for k, v in e.extra.items():
            inner += el(k, v)
        inner += el("RequestId", uuid.uuid4().hex[:16])
        data = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error>%s</Error>' % inner).encode()
        self._send(e.status, data if self.command != "HEAD" else b"", headers=e.headers)

    def dispatch(self):
        self.status_sent = 0
        body = self.read_body()
        url, _, q = self.split_url()
        try:
            if url.path.startswith("/_emu/"):
                return self._emu(url.path[6:], q, body)
            with LOCK:
                STATS["requests"] += 1
            while FAULTS["hang"]:
                time.sleep(0.05)
            if FAULTS["latency_ms"]:
                time.sleep(FAULTS["latency_ms"] / 1000.0)
            targeted = not FAULTS["fail_paths"] or FAULTS["fail_paths"] in self.path
            with LOCK:
                slow = FAULTS["slow_down"] > 0
                if slow:
                    FAULTS["slow_down"] -= 1
            if slow or (targeted and random.random() < FAULTS["fail_rate"]):
                raise S3Error(503, "SlowDown", "Please reduce your request rate.",
                              headers={"Retry-After": "1"})
            if targeted and FAULTS["fail_methods"] and \
                    self.command in FAULTS["fail_methods"].split(","):
                raise S3Error(500, "InternalError", "We encountered an internal error (injected).")
            verify_sigv4(self, body)
            if FAULTS["deny"]:
                raise S3Error(403, "AccessDenied", "Access Denied")
            self._s3(url, q, body)
        except S3Error as e:
            self._error(e)
        finally:
            key = "%s %d" % (self.command, self.status_sent)
            with LOCK:
                STATS["by"][key] = STATS["by"].get(key, 0) + 1
            EMU.log("%s %s %s %d" % (time.strftime("%H:%M:%S"), self.command, self.path,
                                      self.status_sent))

    def _bucket_key(self, url):
        host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
        path = urllib.parse.unquote(url.path)
        for suffix in [".localhost"] + ([CFG["vhost"]] if CFG.get("vhost") else []):
            if host.endswith(suffix) and len(host) > len(suffix):
                return host[:-len(suffix)], path[1:]
        parts = path[1:].split("/", 1)
        return parts[0], parts[1] if len(parts) > 1 else ""

    def _s3(self, url, q, body):
        bucket, key = self._bucket_key(url)
        cmd = self.command
        if not bucket:
            raise S3Error(400, "InvalidRequest", "no bucket in the request")
        if not key:
            if cmd == "GET" and q.get("list-type") == "2":
                return self._send(200, list_v2(bucket, q))
            if cmd == "HEAD":
                bucket_of(bucket)
                return self._send(200)
            if cmd == "POST" and "delete" in q:
                return self._multi_delete(bucket, body)
            raise S3Error(400, "InvalidRequest", "unsupported bucket operation")
        if cmd in ("GET", "HEAD"):
            with LOCK:
                o = bucket_of(bucket).get(key)
            if o is None:
                raise S3Error(404, "NoSuchKey", "The specified key does not exist.", {"Key": key})
            hdrs = {"ETag": o["etag"], "Last-Modified": formatdate(o["mtime"], usegmt=True),
                    "Accept-Ranges": "bytes"}
            hdrs.update({"x-amz-meta-" + k: v for k, v in o["meta"].items()})
            data, status = o["data"], 200
            rng = self.headers.get("Range")
            if rng:
                m = re.match(r"bytes=(\d*)-(\d*)$", rng)
                size = len(data)
                if m and (m.group(1) or m.group(2)):
                    a = int(m.group(1)) if m.group(1) else max(0, size - int(m.group(2)))
                    b = int(m.group(2)) if m.group(1) and m.group(2) else size - 1
                    if a >= size:
                        raise S3Error(416, "InvalidRange", "The requested range is not satisfiable")
                    b = min(b, size - 1)
                    hdrs["Content-Range"] = "bytes %d-%d/%d" % (a, b, size)
                    data, status = data[a:b + 1], 206
            if cmd == "HEAD":
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Content-Type", o["ctype"])
                for k, v in hdrs.items():
                    self.send_header(k, v)
                self.end_headers()
                self.status_sent = status
                return
            return self._send(status, data, o["ctype"], hdrs)
        if cmd == "PUT" and "uploadId" in q:
            up = UPLOADS.get(q["uploadId"])
            if up is None or up["bucket"] != bucket or up["key"] != key:
                raise S3Error(404, "NoSuchUpload", "The specified upload does not exist.")
            pn = int(q.get("partNumber", "0"))
            if not 1 <= pn <= 10000:
                raise S3Error(400, "InvalidArgument", "Part number must be 1 to 10000")
            etag = '"%s"' % hashlib.md5(body).hexdigest()
            with LOCK:
                up["parts"][pn] = (etag, body)
            return self._send(200, headers={"ETag": etag})
        if cmd == "PUT":
            src = self.headers.get("x-amz-copy-source")
            if src:
                return self._copy(bucket, key, src)
            o = put_obj(bucket, key, body, user_meta(self.headers),
                        self.headers.get("Content-Type", "application/octet-stream"))
            return self._send(200, headers={"ETag": o["etag"]})
        if cmd == "DELETE" and "uploadId" in q:
            with LOCK:
                UPLOADS.pop(q["uploadId"], None)
            return self._send(204)
        if cmd == "DELETE":
            with LOCK:
                bucket_of(bucket).pop(key, None)
            return self._send(204)
        if cmd == "POST" and "uploads" in q:
            bucket_of(bucket)
            uid = uuid.uuid4().hex
            with LOCK:
                UPLOADS[uid] = {"bucket": bucket, "key": key, "meta": user_meta(self.headers),
                                "ctype": self.headers.get("Content-Type", "application/octet-stream"),
                                "parts": {}}
            return self._send(200, xml_doc("InitiateMultipartUploadResult",
                                           el("Bucket", bucket) + el("Key", key) + el("UploadId", uid)))
        if cmd == "POST" and "uploadId" in q:
            return self._complete(bucket, key, q["uploadId"], body)
        raise S3Error(405, "MethodNotAllowed", "The specified method is not allowed")

    def _copy(self, bucket, key, src):
        src = urllib.parse.unquote(src.split("?", 1)[0]).lstrip("/")
        sb, _, sk = src.partition("/")
        with LOCK:
            o = bucket_of(sb).get(sk)
        if o is None:
            raise S3Error(404, "NoSuchKey", "The specified key does not exist.", {"Key": sk})
        if (self.headers.get("x-amz-metadata-directive") or "COPY").upper() == "REPLACE":
            meta = user_meta(self.headers)
            ctype = self.headers.get("Content-Type", o["ctype"])
        else:
            if sb == bucket and sk == key:
                raise S3Error(400, "InvalidRequest", "This copy request is illegal because it is "
                              "trying to copy an object to itself without changing the object's "
                              "metadata.")
            meta, ctype = dict(o["meta"]), o["ctype"]
        n = put_obj(bucket, key, o["data"], meta, ctype, o["etag"])
        return self._send(200, xml_doc("CopyObjectResult", el("ETag", n["etag"]) +
                                       el("LastModified", iso(n["mtime"]))))

    def _complete(self, bucket, key, uid, body):
        up = UPLOADS.get(uid)
        if up is None or up["bucket"] != bucket or up["key"] != key:
            raise S3Error(404, "NoSuchUpload", "The specified upload does not exist.")
        text = body.decode("utf-8", "replace")
        want = [(int(n), e) for n, e in re.findall(
            r"<Part>\s*<PartNumber>(\d+)</PartNumber>\s*<ETag>([^<]+)</ETag>\s*</Part>", text)]
        if not want:
            raise S3Error(400, "MalformedXML", "The XML you provided was not well-formed")
        if [n for n, _ in want] != sorted({n for n, _ in want}):
            raise S3Error(400, "InvalidPartOrder", "The list of parts was not in ascending order.")
        data, md5s = [], b""
        for i, (n, e) in enumerate(want):
            got = up["parts"].get(n)
            if got is None or got[0] != sx.unescape(e.replace("&quot;", '"')):
                raise S3Error(400, "InvalidPart", "One or more of the specified parts could not be found.")
            if i < len(want) - 1 and len(got[1]) < MIN_PART:
                raise S3Error(400, "EntityTooSmall",
                              "Your proposed upload is smaller than the minimum allowed size")
            data.append(got[1])
            md5s += bytes.fromhex(got[0].strip('"'))
        etag = '"%s-%d"' % (hashlib.md5(md5s).hexdigest(), len(want))
        put_obj(bucket, key, b"".join(data), up["meta"], up["ctype"], etag)
        with LOCK:
            UPLOADS.pop(uid, None)
        return self._send(200, xml_doc("CompleteMultipartUploadResult",
                                       el("Bucket", bucket) + el("Key", key) + el("ETag", etag)))

    def _multi_delete(self, bucket, body):
        keys = [sx.unescape(k) for k in re.findall(r"<Key>([^<]*)</Key>", body.decode("utf-8", "replace"))]
        with LOCK:
            b = bucket_of(bucket)
            for k in keys:
                b.pop(k, None)
        return self._send(200, xml_doc("DeleteResult", "".join(
            "<Deleted>%s</Deleted>" % el("Key", k) for k in keys)))

    def _emu(self, what, q, body):
        if what == "faults" and self.command == "POST":
            with LOCK:
                FAULTS.update(json.loads(body or b"{}"))
                data = json.dumps(FAULTS).encode()
            return self._send(200, data, "application/json")
        if what == "stats":
            with LOCK:
                data = json.dumps(STATS).encode()
            return self._send(200, data, "application/json")
        if what == "objects":
            with LOCK:
                b = BUCKETS.get(q.get("bucket", ""), {})
                data = json.dumps({k: {"size": len(o["data"]), "meta": o["meta"],
                                       "sha256": hashlib.sha256(o["data"]).hexdigest()}
                                   for k, o in b.items()}).encode()
            return self._send(200, data, "application/json")
        self._send(404, b"no such emulator route", "text/plain")


def main():
    env = os.environ.get
    ap = sfs_emu.arg_parser(__doc__, "S3_EMU_", root=False, faults=False)
    ap.add_argument("--bucket", action="append", help="a bucket that exists (repeatable)")
    ap.add_argument("--key", action="append",
                    help="AKID:SECRET it accepts (repeatable; default AKIDEMULATOR:emulator-secret)")
    ap.add_argument("--session-token", default=env("S3_EMU_SESSION_TOKEN"))
    ap.add_argument("--region", default=env("S3_EMU_REGION", "us-east-1"))
    ap.add_argument("--latency-ms", type=int, default=int(env("S3_EMU_LATENCY_MS", "0")))
    ap.add_argument("--vhost-suffix", default=env("S3_EMU_VHOST_SUFFIX"))
    a = ap.parse_args()
    keys = dict(k.split(":", 1) for k in (a.key or ["AKIDEMULATOR:emulator-secret"]))
    CFG.update(keys=keys, session_token=a.session_token, region=a.region, log=a.log,
               vhost=("." + a.vhost_suffix.lstrip(".")) if a.vhost_suffix else None)
    for b in a.bucket or []:
        BUCKETS[b] = {}
    FAULTS["latency_ms"] = a.latency_ms
    sfs_emu.serve(EMU, Handler, a)


if __name__ == "__main__":
    main()
