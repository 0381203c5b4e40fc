#!/usr/bin/env python3
"""A local emulator of Google's OAuth token endpoint and the metadata server's token, for tests.

Standard library only (plus the `openssl` command: Python's standard library
has no RSA, so the JWT's RS256 signature is checked with
`openssl dgst -sha256 -verify PUB -signature SIG`).  Listens on 127.0.0.1
only and contacts nothing else.  Shapes: provider-apis-aws-gcp.md §7.2, §11.

    gcp_oauth_emulator.py --pubkey PUB.pem [--email ISS] [--kid KID]
                          [--port N] [--port-file FILE] [--expires-in N]

POST /token  form grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer,
             assertion=JWT.  The JWT must be RS256, signed by the private half
             of PUB.pem, with iss (= --email when given), a non-empty scope,
             aud https://oauth2.googleapis.com/token or this server's /token,
             iat not in the future (60 s slack), exp in the future and
             exp - iat <= 3600; kid = --kid when given.  -> 200
             {access_token, expires_in, token_type:"Bearer"}; otherwise 400
             {"error":"invalid_grant","error_description":...} (401
             invalid_client for an unknown iss or kid).
GET /computeMetadata/v1/instance/service-accounts/default/token
             needs "Metadata-Flavor: Google" (403 without); same token JSON.
Test-only routes (no auth, not Google's):
    POST /_emu/faults {"fail_status":503,"fail_count":N,   next N token calls fail
                       "retry_after":S,                    with Retry-After: S
                       "expires_in":N,                     lifetime of new tokens
                       "reject":"text"}                    every grant 400 invalid_grant
    GET  /_emu/stats  {"requests" (not counting /_emu/ ones),"tokens","last_claims",
                       "last_header","rejected"}
    GET  /_emu/tokeninfo?access_token=T  200 when this server issued T, else 400
"""

import base64
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
import sfs_emu  # noqa: E402

GOOGLE_AUD = "https://oauth2.googleapis.com/token"
GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
LOCK = threading.Lock()
FAULTS = {"fail_status": 0, "fail_count": 0, "retry_after": None, "expires_in": None, "reject": ""}
STATS = {"requests": 0, "tokens": 0, "rejected": 0, "last_claims": None, "last_header": None}
ISSUED = set()
CFG = {}


def b64url_decode(s):
    s += "=" * (-len(s) % 4)
    return base64.urlsafe_b64decode(s.encode("ascii"))


def verify_rs256(signing_input, sig):
    """True when sig is the RS256 signature of signing_input by --pubkey."""
    with tempfile.TemporaryDirectory() as d:
        data, sigf = os.path.join(d, "data"), os.path.join(d, "sig")
        with open(data, "wb") as f:
            f.write(signing_input)
        with open(sigf, "wb") as f:
            f.write(sig)
        r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", CFG["pubkey"],
                            "-signature", sigf, data], capture_output=True, check=False)
        return r.returncode == 0


def check_jwt(jwt, own_aud):
    """(status, error, description) of a bad assertion, or None when it is good."""
    parts = jwt.split(".")
    if len(parts) != 3:
        return 400, "invalid_grant", "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe"
    try:
        header = json.loads(b64url_decode(parts[0]))
        claims = json.loads(b64url_decode(parts[1]))
        sig = b64url_decode(parts[2])
    except (ValueError, UnicodeDecodeError):
        return 400, "invalid_grant", "Invalid JWT: not base64url JSON"
    if any(p.endswith("=") for p in parts):
        return 400, "invalid_grant", "Invalid JWT: padded base64"
    with LOCK:
        STATS["last_header"], STATS["last_claims"] = header, claims
    if header.get("alg") != "RS256" or header.get("typ") != "JWT":
        return 400, "invalid_grant", "Invalid JWT: alg must be RS256 and typ JWT"
    if CFG["kid"] and header.get("kid") != CFG["kid"]:
        return 401, "invalid_client", "Invalid key id."
    if CFG["email"] and claims.get("iss") != CFG["email"]:
        return 401, "invalid_client", "The OAuth client was not found."
    if not claims.get("scope"):
        return 400, "invalid_scope", "Invalid OAuth scope or ID token audience provided."
    if claims.get("aud") not in (GOOGLE_AUD, own_aud):
        return 400, "invalid_grant", "Invalid JWT: audience"
    iat, exp, now = claims.get("iat"), claims.get("exp"), time.time()
    if not isinstance(iat, int) or not isinstance(exp, int) or iat > now + 60 or exp <= now \
            or exp - iat > 3600:
        return 400, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
    if not verify_rs256((parts[0] + "." + parts[1]).encode("ascii"), sig):
        return 400, "invalid_grant", "Invalid JWT Signature."
    return None


class Handler(sfs_emu.Handler):
    emu = sfs_emu.Emulator()  # serve() and the request framing only: faults are this file's

    def reply(self, status, obj, headers=()):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def fault(self):
        """Answers with the scripted failure and returns True while one is armed."""
        with LOCK:
            if FAULTS["fail_count"] <= 0:
                return False
            FAULTS["fail_count"] -= 1
            status, ra = FAULTS["fail_status"] or 503, FAULTS["retry_after"]
        hdrs = [("Retry-After", str(ra))] if ra is not None else []
        self.reply(status, {"error": "temporarily_unavailable",
                            "error_description": "emulated failure"}, hdrs)
        return True

    def issue(self, extra_headers=()):
        tok = "ya29.emu-" + secrets.token_hex(16)
        with LOCK:
            ISSUED.add(tok)
            STATS["tokens"] += 1
            exp = FAULTS["expires_in"] if FAULTS["expires_in"] is not None else CFG["expires_in"]
        self.reply(200, {"access_token": tok, "expires_in": exp, "token_type": "Bearer"},
                   extra_headers)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        if not url.path.startswith("/_emu/"):
            with LOCK:
                STATS["requests"] += 1
        if url.path == "/_emu/stats":
            with LOCK:
                self.reply(200, dict(STATS))
            return
        if url.path == "/_emu/tokeninfo":
            t = urllib.parse.parse_qs(url.query).get("access_token", [""])[0]
            with LOCK:
                ok = t in ISSUED
            self.reply(200 if ok else 400, {"issued": ok} if ok else {"error": "invalid_token"})
            return
        if url.path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if self.headers.get("Metadata-Flavor") != "Google":
                self.reply(403, {"error": "Missing required header: Metadata-Flavor"})
                return
            if self.fault():
                return
            self.issue([("Metadata-Flavor", "Google")])
            return
        self.reply(404, {"error": {"code": 404, "message": "not found", "status": "NOT_FOUND"}})

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        if not url.path.startswith("/_emu/"):
            with LOCK:
                STATS["requests"] += 1
        raw = self.read_body()
        if url.path == "/_emu/faults":
            with LOCK:
                FAULTS.update(json.loads(raw or b"{}"))
            self.reply(200, {})
            return
        if url.path != "/token":
            self.reply(404, {"error": "not_found"})
            return
        if self.fault():
            return
        form = urllib.parse.parse_qs(raw.decode("utf-8", "replace"))
        if form.get("grant_type", [""])[0] != GRANT:
            self.reply(400, {"error": "unsupported_grant_type",
                             "error_description": "Invalid grant_type: " + form.get("grant_type", [""])[0]})
            return
        with LOCK:
            reject = FAULTS["reject"]
        host = self.headers.get("Host") or "127.0.0.1"
        bad = (400, "invalid_grant", reject) if reject else \
            check_jwt(form.get("assertion", [""])[0], "http://%s/token" % host)
        if bad:
            with LOCK:
                STATS["rejected"] += 1
            self.reply(bad[0], {"error": bad[1], "error_description": bad[2]})
            return
        self.issue()


def main():
    ap = sfs_emu.arg_parser(__doc__, "GCP_OAUTH_EMU_", root=False, faults=False)
    ap.add_argument("--pubkey", required=True)
    ap.add_argument("--email", default="")
    ap.add_argument("--kid", default="")
    ap.add_argument("--expires-in", type=int, default=3599)
    a = ap.parse_args()
    CFG.update(pubkey=a.pubkey, email=a.email, kid=a.kid, expires_in=a.expires_in)
    sfs_emu.serve(Handler.emu, Handler, a)


if __name__ == "__main__":
    main()
