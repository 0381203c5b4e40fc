"""The Cloud Storage side of the gcp emulator: buckets over real files.

An object is two files under ROOT/gcs/BUCKET/: NAME-QUOTED.data (its bytes)
and NAME-QUOTED.json (name, generation, metageneration, metadata, times).
Shapes: provider-apis-aws-gcp.md section 9.  Standard library only.
"""

import base64
import hashlib
import json
import os
import threading
import time
import urllib.parse

LOCK = threading.RLock()


def rfc3339(t):
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % int((t % 1) * 1000)


class GcsError(Exception):
    def __init__(self, status, message, reason):
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason

    def body(self):
        return {"error": {"code": self.status, "message": self.message,
                          "errors": [{"domain": "global", "reason": self.reason,
                                      "message": self.message}]}}


class Store:
    def __init__(self, root):
        self.root = os.path.join(root, "gcs")
        os.makedirs(self.root, exist_ok=True)
        self.uploads = {}  # upload_id -> {bucket, resource, data: bytearray, total}
        self.generation = int(time.time() * 1000)

    # ---- buckets and files -------------------------------------------------

    def add_bucket(self, b):
        os.makedirs(os.path.join(self.root, b), exist_ok=True)

    def bucket_dir(self, b):
        d = os.path.join(self.root, b)
        if "/" in b or b in ("", ".", "..") or not os.path.isdir(d):
            raise GcsError(404, "The specified bucket does not exist.", "notFound")
        return d

    def _paths(self, b, name):
        q = urllib.parse.quote(name, safe="")
        d = self.bucket_dir(b)
        return os.path.join(d, q + ".data"), os.path.join(d, q + ".json")

    def _meta(self, b, name):
        _, mp = self._paths(b, name)
        try:
            with open(mp) as f:
                return json.load(f)
        except FileNotFoundError:
            raise GcsError(404, "No such object: %s/%s" % (b, name), "notFound") from None

    def resource(self, b, name):
        m = self._meta(b, name)
        dp, _ = self._paths(b, name)
        with open(dp, "rb") as f:
            data = f.read()
        return self._resource(b, m, data)

    def _resource(self, b, m, data):
        r = {"kind": "storage#object", "id": "%s/%s/%s" % (b, m["name"], m["generation"]),
             "name": m["name"], "bucket": b, "generation": str(m["generation"]),
             "metageneration": str(m["metageneration"]),
             "contentType": m.get("contentType", "application/octet-stream"),
             "size": str(len(data)), "md5Hash": base64.b64encode(hashlib.md5(data).digest()).decode(),
             "timeCreated": rfc3339(m["created"]), "updated": rfc3339(m["updated"]),
             "storageClass": "STANDARD", "etag": "CJ%d" % m["generation"]}
        if m.get("metadata"):
            r["metadata"] = dict(m["metadata"])
        return r

    def data(self, b, name):
        self._meta(b, name)
        dp, _ = self._paths(b, name)
        with open(dp, "rb") as f:
            return f.read()

    def put(self, b, name, data, resource=None, if_generation_match=None):
        if not name or len(name.encode()) > 1024 or "\n" in name:
            raise GcsError(400, "The object name is invalid.", "invalid")
        with LOCK:
            dp, mp = self._paths(b, name)
            exists = os.path.exists(mp)
            if if_generation_match == "0" and exists:
                raise GcsError(412, "At least one of the pre-conditions you specified did not hold.",
                               "conditionNotMet")
            self.generation += 1
            now = time.time()
            m = {"name": name, "generation": self.generation, "metageneration": 1,
                 "created": now, "updated": now,
                 "contentType": (resource or {}).get("contentType") or "application/octet-stream",
                 "metadata": {k: str(v) for k, v in ((resource or {}).get("metadata") or {}).items()
                              if v is not None}}
            tmp = dp + ".tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, dp)
            with open(mp + ".tmp", "w") as f:
                json.dump(m, f)
            os.replace(mp + ".tmp", mp)
            return self._resource(b, m, data)

    def patch(self, b, name, fields):
        with LOCK:
            m = self._meta(b, name)
            md = m.setdefault("metadata", {})
            for k, v in (fields.get("metadata") or {}).items():
                if v is None:
                    md.pop(k, None)
                else:
                    md[k] = str(v)
            if fields.get("contentType"):
                m["contentType"] = fields["contentType"]
            m["metageneration"] += 1
            m["updated"] = time.time()
            _, mp = self._paths(b, name)
            with open(mp + ".tmp", "w") as f:
                json.dump(m, f)
            os.replace(mp + ".tmp", mp)
            return self.resource(b, name)

    def delete(self, b, name):
        with LOCK:
            dp, mp = self._paths(b, name)
            if not os.path.exists(mp):
                raise GcsError(404, "No such object: %s/%s" % (b, name), "notFound")
            os.unlink(mp)
            os.unlink(dp)

    def names(self, b):
        d = self.bucket_dir(b)
        out = []
        for f in os.listdir(d):
            if f.endswith(".json"):
                out.append(urllib.parse.unquote(f[:-5]))
        return sorted(out)

    def snapshot(self, b):
        """{name: {size, sha256, metadata}} of a bucket (tests)."""
        out = {}
        with LOCK:
            for n in self.names(b):
                try:
                    data = self.data(b, n)
                    m = self._meta(b, n)
                except GcsError:
                    continue
                out[n] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                          "metadata": m.get("metadata", {})}
        return out

    # ---- list ---------------------------------------------------------------

    def list(self, b, prefix="", delimiter="", page_token="", max_results=1000,
             include_trailing=False):
        names = [n for n in self.names(b) if n.startswith(prefix)]
        items, prefixes = [], []
        seen = set()
        start = page_token or ""
        count = 0
        next_token = None
        for n in names:
            if start and n <= start:
                continue
            rest = n[len(prefix):]
            if delimiter and delimiter in rest:
                p = prefix + rest[:rest.index(delimiter) + len(delimiter)]
                if p in seen:
                    continue
                seen.add(p)
                if count >= max_results:
                    next_token = last
                    break
                prefixes.append(p)
                last = p + "\U0010ffff"  # skip the rest of this prefix on the next page
                count += 1
                if include_trailing and n == p:
                    # includeTrailingDelimiter: the marker's metadata comes along
                    try:
                        items.append(self.resource(b, n))
                    except GcsError:
                        pass
                continue
            if count >= max_results:
                next_token = last
                break
            try:
                items.append(self.resource(b, n))
            except GcsError:
                continue
            last = n
            count += 1
        out = {"kind": "storage#objects"}
        if items:
            out["items"] = items
        if prefixes:
            out["prefixes"] = prefixes
        if next_token:
            out["nextPageToken"] = base64.urlsafe_b64encode(next_token.encode()).decode()
        return out

    @staticmethod
    def token_start(tok):
        try:
            return base64.urlsafe_b64decode(tok.encode()).decode()
        except (ValueError, UnicodeDecodeError):
            raise GcsError(400, "Invalid page token.", "invalid") from None


def apply_fields(obj, fields):
    """Trims a list answer to fields= (the subset items(a,b),prefixes,nextPageToken)."""
    if not fields:
        return obj
    want, sub = {}, None
    depth, cur = 0, ""
    for ch in fields + ",":
        if ch == "(":
            depth += 1
            if depth == 1:
                sub, cur = cur, ""
                continue
        elif ch == ")":
            depth -= 1
            if depth == 0:
                want[sub] = set(x.strip() for x in cur.split(","))
                cur, sub = "", None
                continue
        elif ch == "," and depth == 0:
            if cur.strip():
                want[cur.strip()] = None
            cur = ""
            continue
        cur += ch
    out = {}
    for k, v in obj.items():
        if k not in want:
            continue
        if want[k] is not None and isinstance(v, list):
            out[k] = [{a: b for a, b in it.items() if a in want[k]} for it in v]
        elif want[k] is not None and isinstance(v, dict):
            out[k] = {a: b for a, b in v.items() if a in want[k]}
        else:
            out[k] = v
    return out
