#!/usr/bin/env python3
"""A local emulator of ECS (Fargate tasks) and CloudWatch Logs on top of the S3 one, for tests.

Standard library only.  Listens on 127.0.0.1 only.  One port serves:
  - S3 as tests/emulators/s3 does (the same in-memory buckets and SigV4
    checks), plus query-string presigned URLs (X-Amz-Signature, expiry
    checked) and browser POST uploads with a SigV4-signed policy (bucket,
    starts-with $key / $x-amz-meta-*, algorithm, credential, date, token;
    an extra field or an expired policy is 403 AccessDenied);
  - ECS (awsJson1.1, X-Amz-Target AmazonEC2ContainerServiceV20141113.*):
    DescribeTaskDefinition, RegisterTaskDefinition, RunTask, DescribeTasks,
    StopTask, ListTasks;
  - CodeBuild (X-Amz-Target CodeBuild_20161006.*): StartBuild, BatchGetBuilds,
    StopBuild of the --codebuild-project projects: a build runs the commands
    of its buildspecOverride's build phase (JSON-shaped YAML only) with sh -c,
    exactly as a task runs (same runner, environmentVariablesOverride, its
    output in logsConfigOverride's group, stream STREAMNAME/BUILD-UUID, else
    /aws/codebuild/PROJECT and BUILD-UUID); StopBuild is StopTask's TERM then
    KILL; buildStatus SUCCEEDED (exit 0), FAILED, STOPPED;
  - CloudWatch Logs (X-Amz-Target Logs_20140328.*): GetLogEvents with forward
    tokens (the same token back at the end; ResourceNotFoundException before
    the stream's first line), FilterLogEvents.
JSON requests are SigV4-checked for their service (ecs, logs) with the same
keys; a bad signature is 400 InvalidSignatureException, an unknown key 400
UnrecognizedClientException.

A task really runs: its container's command (the override's, else the task
definition's) runs in a bubblewrap sandbox standing in for the container
(read-only /usr and /etc of this machine, its own /tmp and root, its own pid
namespace with the command as pid 1, this machine's network so it reaches
the emulator), or with --runner process as a plain process group in --root
(on this machine's file system: the task's workspace, aws.workdir, must then
be a directory the test owns), or with --runner docker as a container of the
task definition's image on the test dockerd (host network; this machine's
curl is mounted in, run by its dynamic loader, for images without one;
StopTask is `docker stop`; containers carry the label
sandboxfs.aws-emu=ROOT and are removed when the emulator stops).  Its
stdout and stderr, line by line, are the log events of
{awslogs-stream-prefix}/{container}/{task id} in awslogs-group.  StopTask
sends TERM to the container's pid 1 and KILL after --stop-timeout seconds;
the exit status is the container's exitCode (128+N for a signal).  The
image is not pulled: whatever the task definition names, the sandbox has
this machine's tools (the S3 sync of sandboxfs's task script needs curl).

    aws_emulator.py [s3_emulator flags: --bucket --key --session-token
                    --region --port --port-file --log] [--cluster C]...
                    [--task-def FAMILY:CONTAINER:GROUP:PREFIX[:IMAGE]]...
                    [--codebuild-project NAME[:IMAGE]]...
                    [--runner bwrap|process] [--stop-timeout S]

Fault switches (POST /_emu/faults; they apply to every service): the shared
ones of tests/emulators/common (latency_ms, fail_rate, drop_rate, slow_rate,
hang, fail_paths: "injected 503" / "dropped" in the log), S3's own
(slow_down, fail_methods), "deny" (403 AccessDenied / 400 AccessDeniedException),
"expired" (ExpiredToken / ExpiredTokenException), "throttle": N (the next N
JSON requests answer 400 ThrottlingException), "throttle_retry_after": S (sent
with them), "log_page": N (GetLogEvents pages of at most N events),
"run_fail": "reason" (RunTask answers a failure instead of a task),
"task_delay_ms": N (a task stays PROVISIONING that long).
GET /_emu/stats: requests, sandboxes (workspace root markers), processes
(tasks not stopped).  GET /_emu/tasks: every task with its status, exit code
and pids.  Task processes carry AWS_EMU_TASK_DIR (under --root) in their
environment.
"""

import base64
import datetime
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "common"))
sys.path.insert(0, os.path.join(HERE, "..", "s3"))
import sfs_emu  # noqa: E402
import s3_emulator as s3  # noqa: E402

EMU, LOCK, CFG, FAULTS = s3.EMU, s3.LOCK, s3.CFG, s3.FAULTS
FAULTS.update({"expired": False, "throttle": 0, "throttle_retry_after": 0, "log_page": 0,
               "run_fail": "", "task_delay_ms": 0})
ACCOUNT = "000000000000"
CLUSTERS = set()
TASKDEFS = {}   # family -> [revision dicts]; revision n is index n-1
TASKS = {}      # task id -> task dict (the API's shape) + "_proc", "_stop"
LOGS = {}       # (group, stream) -> [events]
ECS_PREFIX = "AmazonEC2ContainerServiceV20141113."
LOGS_PREFIX = "Logs_20140328."
CB_PREFIX = "CodeBuild_20161006."
PROJECTS = {}   # CodeBuild project name -> its image
BUILDS = {}     # build id -> task id (TASKS holds the build as a task)


class JsonError(Exception):
    def __init__(self, status, typ, message, headers=None):
        super().__init__(message)
        self.status, self.typ, self.message, self.headers = status, typ, message, headers or {}


# ---- signatures ------------------------------------------------------------------

def signing_key(secret, date, region, service):
    k = s3.hm(("AWS4" + secret).encode(), date)
    return s3.hm(s3.hm(s3.hm(k, region), service), "aws4_request")


def check_time(amz_date):
    try:
        t = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        raise s3.S3Error(403, "AccessDenied", "bad X-Amz-Date")
    return t


def verify_json_sigv4(h, body, service):
    """SigV4 of an awsJson request for service; JsonError when wrong."""
    auth = h.headers.get("Authorization", "")
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,\s*"
                 r"SignedHeaders=([^,]+),\s*Signature=([0-9a-f]{64})$", auth)
    if not m:
        raise JsonError(400, "MissingAuthenticationTokenException", "Missing Authentication Token")
    akid, date, region, svc, signed, sig = m.groups()
    secret = CFG["keys"].get(akid)
    if secret is None:
        raise JsonError(400, "UnrecognizedClientException",
                        "The security token included in the request is invalid.")
    if region != CFG["region"] or svc != service:
        raise JsonError(400, "InvalidSignatureException",
                        "Credential should be scoped to a valid region/service (%s, %s)."
                        % (CFG["region"], service))
    amz_date = h.headers.get("X-Amz-Date", "")
    if abs(time.time() - check_time(amz_date)) > 900 or not amz_date.startswith(date):
        raise JsonError(400, "InvalidSignatureException", "Signature expired")
    names = signed.split(";")
    for need in ("host", "x-amz-date", "x-amz-target"):
        if need not in names:
            raise JsonError(400, "InvalidSignatureException", "%s must be signed" % need)
    url = urllib.parse.urlsplit(h.path)
    creq = s3.canonical_request(h, url.path, url.query, names, hashlib.sha256(body).hexdigest())
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, "%s/%s/%s/aws4_request" % (date, region, svc),
                     hashlib.sha256(creq.encode()).hexdigest()])
    want = hmac.new(signing_key(secret, date, region, svc), sts.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, sig):
        raise JsonError(400, "InvalidSignatureException",
                        "The request signature we calculated does not match the signature you "
                        "provided. The Canonical String for this request should have been\n'%s'\n"
                        "The String-to-Sign should have been\n'%s'" % (creq, sts))
    tok = CFG.get("session_token")
    if tok is not None and (h.headers.get("X-Amz-Security-Token") != tok
                            or "x-amz-security-token" not in names):
        raise JsonError(400, "UnrecognizedClientException",
                        "The security token included in the request is invalid.")


def verify_presigned(h, url, q):
    """A query-string presigned S3 request; S3Error when wrong or expired."""
    m = re.match(r"([^/]+)/(\d{8})/([^/]+)/s3/aws4_request$", q.get("X-Amz-Credential", ""))
    if q.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or not m:
        raise s3.S3Error(400, "AuthorizationQueryParametersError", "bad presigned parameters")
    akid, date, region = m.groups()
    secret = CFG["keys"].get(akid)
    if secret is None:
        raise s3.S3Error(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does "
                         "not exist in our records.")
    amz_date = q.get("X-Amz-Date", "")
    if check_time(amz_date) + int(q.get("X-Amz-Expires", "0")) < time.time():
        raise s3.S3Error(403, "AccessDenied", "Request has expired")
    tok = CFG.get("session_token")
    if tok is not None and q.get("X-Amz-Security-Token") != tok:
        raise s3.S3Error(403, "InvalidToken", "The provided token is malformed or otherwise invalid.")
    names = q.get("X-Amz-SignedHeaders", "").split(";")
    raw = "&".join(p for p in url.query.split("&") if not p.startswith("X-Amz-Signature="))
    creq = s3.canonical_request(h, url.path, raw, names, "UNSIGNED-PAYLOAD")
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, "%s/%s/s3/aws4_request" % (date, region),
                     hashlib.sha256(creq.encode()).hexdigest()])
    want = hmac.new(signing_key(secret, date, region, "s3"), sts.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, q.get("X-Amz-Signature", "")):
        raise s3.S3Error(403, "SignatureDoesNotMatch", "The request signature we calculated does "
                         "not match the signature you provided.",
                         {"StringToSign": sts, "CanonicalRequest": creq})


def post_upload(bucket, ctype, body):
    """A browser POST upload: checks the policy and its signature, stores."""
    try:
        fields = sfs_emu.parse_multipart(ctype, body)
    except ValueError as e:
        raise s3.S3Error(400, "MalformedPOSTRequest", str(e))
    form, data = {}, None
    for name, _, value in fields:
        if name == "file":
            data = value
            break  # S3 ignores what follows the file
        form[name.lower()] = value.decode("utf-8", "replace")
    if data is None:
        raise s3.S3Error(400, "InvalidArgument", "POST requires exactly one file upload per request.")
    try:
        policy = json.loads(base64.b64decode(form.get("policy", "")))
    except ValueError:
        raise s3.S3Error(400, "InvalidPolicyDocument", "Invalid Policy: Invalid JSON.")
    m = re.match(r"([^/]+)/(\d{8})/([^/]+)/s3/aws4_request$", form.get("x-amz-credential", ""))
    secret = CFG["keys"].get(m.group(1)) if m else None
    if not m or secret is None:
        raise s3.S3Error(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does "
                         "not exist in our records.")
    want = hmac.new(signing_key(secret, m.group(2), m.group(3), "s3"),
                    form["policy"].encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, form.get("x-amz-signature", "")):
        raise s3.S3Error(403, "SignatureDoesNotMatch", "The request signature we calculated does "
                         "not match the signature you provided.")
    exp = datetime.datetime.strptime(policy.get("expiration", "1970-01-01T00:00:00.000Z"),
                                     "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    if exp.timestamp() < time.time():
        raise s3.S3Error(403, "AccessDenied", "Invalid according to Policy: Policy expired.")
    allowed = {"policy", "x-amz-signature"}
    for c in policy.get("conditions", []):
        if isinstance(c, dict):
            (k, v), = c.items()
            k = k.lower()
            got = bucket if k == "bucket" else form.get(k)
            if got != v:
                raise s3.S3Error(403, "AccessDenied", "Invalid according to Policy: Policy "
                                 "Condition failed: [\"eq\", \"$%s\", \"%s\"]" % (k, v))
        else:
            op, k, v = c
            k = k.lstrip("$").lower()
            if op == "starts-with" and not form.get(k, "").startswith(v):
                raise s3.S3Error(403, "AccessDenied", "Invalid according to Policy: Policy "
                                 "Condition failed: [\"starts-with\", \"$%s\", \"%s\"]" % (k, v))
        allowed.add(k)
    extra = [k for k in form if k not in allowed]
    if extra:
        raise s3.S3Error(403, "AccessDenied", "Invalid according to Policy: Extra input fields: "
                         + ", ".join(extra))
    tok = CFG.get("session_token")
    if tok is not None and form.get("x-amz-security-token") != tok:
        raise s3.S3Error(403, "InvalidToken", "The provided token is malformed or otherwise invalid.")
    meta = {k[11:]: v for k, v in form.items() if k.startswith("x-amz-meta-")}
    s3.put_obj(bucket, form["key"], data, meta, "application/octet-stream")


# ---- tasks -----------------------------------------------------------------------

def taskdef_arn(d):
    return "arn:aws:ecs:%s:%s:task-definition/%s:%d" % (CFG["region"], ACCOUNT, d["family"],
                                                         d["revision"])


def register(family, containers, extra=None):
    with LOCK:
        revs = TASKDEFS.setdefault(family, [])
        d = dict(extra or {})
        d.update(family=family, revision=len(revs) + 1, status="ACTIVE",
                 containerDefinitions=containers, requiresCompatibilities=["FARGATE"],
                 networkMode="awsvpc")
        d["taskDefinitionArn"] = taskdef_arn(d)
        revs.append(d)
        return d


def find_taskdef(ref):
    m = re.match(r"(?:arn:aws:ecs:[^:]+:\d+:task-definition/)?([A-Za-z0-9_-]+)(?::(\d+))?$", ref or "")
    if not m or m.group(1) not in TASKDEFS:
        raise JsonError(400, "ClientException", "Unable to describe task definition.")
    revs = TASKDEFS[m.group(1)]
    n = int(m.group(2)) if m.group(2) else len(revs)
    if not 1 <= n <= len(revs):
        raise JsonError(400, "ClientException", "Unable to describe task definition.")
    return revs[n - 1]


def log_line(group, stream, text):
    now = int(time.time() * 1000)
    with LOCK:
        LOGS.setdefault((group, stream), []).append(
            {"timestamp": now, "message": text, "ingestionTime": now})


def sandbox_argv(argv):
    """argv inside bubblewrap: this machine's /usr and /etc read-only, the
    rest of the root a tmpfs, its own pid namespace with argv as pid 1."""
    b = ["bwrap", "--die-with-parent", "--unshare-pid", "--as-pid-1", "--unshare-ipc",
         "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for d in ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64"):
        p = "/" + d
        if os.path.islink(p):
            b += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            b += ["--ro-bind", p, p]
    return b + ["--"] + argv


def docker_argv(t, argv, env, image):
    """argv as a container of the test dockerd: image (the task definition's),
    the host network (to reach the emulator), this machine's curl run from
    its /usr by the dynamic loader (a busybox image has none), the
    environment, a label and name to find it by."""
    loader = os.path.realpath("/lib64/ld-linux-x86-64.so.2")
    b = ["docker", "run", "--rm", "--name", container_name(t), "--network", "host",
         "--label", "sandboxfs.aws-emu=%s" % CFG["root"], "-v", "/usr:/sfs-host-usr:ro",
         "-v", "%s:/sfs-bin:ro" % CFG["bindir"]]
    for k, v in env.items():
        b += ["-e", "%s=%s" % (k, "/sfs-bin:" + v if k == "PATH" else v)]
    if loader.startswith("/usr/"):
        with open(os.path.join(CFG["bindir"], "curl"), "w") as f:
            f.write("#!/bin/sh\nexec /sfs-host-usr%s --library-path /sfs-host-usr%s "
                    "/sfs-host-usr/bin/curl \"$@\"\n" % (loader[4:], os.path.dirname(loader)[4:]))
        os.chmod(os.path.join(CFG["bindir"], "curl"), 0o755)
    return b + [image] + argv


def container_name(t):
    return "sfs-aws-emu-" + t["taskArn"].rsplit("/", 1)[-1].replace(":", "-")


def main_pid(t):
    """The container's pid 1 (bubblewrap's child), or the process itself."""
    proc = t["_proc"]
    if CFG["runner"] != "bwrap":
        return proc.pid
    try:
        with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
            kids = f.read().split()
        return int(kids[0]) if kids else None
    except OSError:
        return None


def run_task(t, argv, env, group, stream):
    delay = FAULTS["task_delay_ms"]
    if delay:
        time.sleep(delay / 1000.0)
    with LOCK:
        if t["desiredStatus"] == "STOPPED":  # stopped before it started
            t.update(lastStatus="STOPPED", stoppedAt=time.time())
            return
        t["lastStatus"] = "PENDING"
    if CFG["runner"] == "docker":
        argv = docker_argv(t, argv, env, t["containers"][0]["image"])
    elif CFG["runner"] == "bwrap":
        argv = sandbox_argv(argv)
    try:
        proc = subprocess.Popen(argv,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                cwd="/" if CFG["runner"] == "bwrap" else CFG["root"])
    except OSError as e:
        with LOCK:
            t.update(lastStatus="STOPPED", desiredStatus="STOPPED", stopCode="TaskFailedToStart",
                     stoppedReason="CannotStartContainerError: %s" % e, stoppedAt=time.time())
        return
    with LOCK:
        t["_proc"] = proc
        t.update(lastStatus="RUNNING", startedAt=time.time())
    for raw in proc.stdout:
        log_line(group, stream, raw.decode("utf-8", "replace").rstrip("\n"))
    rc = proc.wait()
    with LOCK:
        t["containers"][0]["exitCode"] = rc if rc >= 0 else 128 - rc
        t["containers"][0]["lastStatus"] = "STOPPED"
        t.update(lastStatus="STOPPED", desiredStatus="STOPPED", stoppedAt=time.time())
        t.setdefault("stopCode", "EssentialContainerExited")
        t.setdefault("stoppedReason", "Essential container in task exited")


def kill_task(t):
    """KILL what is left of a task: its process group and the container's pid 1
    (whose death ends its pid namespace)."""
    proc = t.get("_proc")
    if proc is None or proc.poll() is not None:
        return
    pids = [-proc.pid, main_pid(t)]
    for p in pids:
        if p:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def stop_task(t, reason):
    with LOCK:
        if t["lastStatus"] == "STOPPED" or t["desiredStatus"] == "STOPPED":
            return
        t.update(desiredStatus="STOPPED", stopCode="UserInitiated", stoppedReason=reason,
                 stoppingAt=time.time())
        proc = t.get("_proc")
    if proc is None:
        return
    if CFG["runner"] == "docker":
        # docker's own TERM, then KILL after the timeout (ECS's stopTimeout)
        threading.Thread(target=subprocess.run, daemon=True, kwargs={
            "args": ["docker", "stop", "-t", str(int(CFG["stop_timeout"])), container_name(t)],
            "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}).start()
        return
    pid = main_pid(t)
    if pid:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass

    def escalate():
        deadline = time.time() + CFG["stop_timeout"]
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        kill_task(t)
    threading.Thread(target=escalate, daemon=True).start()


def public(t):
    return {k: v for k, v in t.items() if not k.startswith("_")}


# ---- the JSON services -----------------------------------------------------------

def cluster_of(req):
    c = req.get("cluster") or "default"
    name = c.rsplit("/", 1)[-1]
    if name not in CLUSTERS:
        raise JsonError(400, "ClusterNotFoundException", "Cluster not found.")
    return name


def ecs(op, req):
    if op == "DescribeTaskDefinition":
        return {"taskDefinition": find_taskdef(req.get("taskDefinition"))}
    if op == "RegisterTaskDefinition":
        if not req.get("family") or not req.get("containerDefinitions"):
            raise JsonError(400, "ClientException", "family and containerDefinitions are required")
        extra = {k: v for k, v in req.items() if k not in ("family", "containerDefinitions")}
        return {"taskDefinition": register(req["family"], req["containerDefinitions"], extra)}
    if op == "RunTask":
        cluster = cluster_of(req)
        d = find_taskdef(req.get("taskDefinition"))
        vpc = (req.get("networkConfiguration") or {}).get("awsvpcConfiguration") or {}
        if not vpc.get("subnets"):
            raise JsonError(400, "InvalidParameterException",
                            "Network Configuration must be provided when networkMode 'awsvpc' "
                            "is specified.")
        if req.get("launchType", "FARGATE") != "FARGATE":
            raise JsonError(400, "InvalidParameterException", "launchType must be FARGATE")
        if FAULTS["run_fail"]:
            return {"tasks": [], "failures": [{"arn": d["taskDefinitionArn"],
                                               "reason": FAULTS["run_fail"]}]}
        ctr = d["containerDefinitions"][0]
        ovr = {}
        for o in (req.get("overrides") or {}).get("containerOverrides") or []:
            if o.get("name") == ctr["name"]:
                ovr = o
        argv = ovr.get("command") or ctr.get("command")
        if not argv:
            raise JsonError(400, "InvalidParameterException", "the container has no command")
        opts = (ctr.get("logConfiguration") or {}).get("options") or {}
        tid = uuid.uuid4().hex
        arn = "arn:aws:ecs:%s:%s:task/%s/%s" % (CFG["region"], ACCOUNT, cluster, tid)
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": "/root", "ECS_CONTAINER_METADATA_URI_V4": "http://169.254.170.2/v4/" + tid,
               # a path under --root: the test suite's teardown finds the
               # task's processes by it (tests/bats/remote_helpers.bash)
               "AWS_EMU_TASK_DIR": os.path.join(CFG["root"], "tasks", tid)}
        for e in (ctr.get("environment") or []) + (ovr.get("environment") or []):
            env[e["name"]] = e["value"]
        t = {"taskArn": arn, "clusterArn": "arn:aws:ecs:%s:%s:cluster/%s" % (CFG["region"], ACCOUNT,
                                                                           cluster),
             "taskDefinitionArn": d["taskDefinitionArn"], "lastStatus": "PROVISIONING",
             "desiredStatus": "RUNNING", "createdAt": time.time(), "launchType": "FARGATE",
             "cpu": (req.get("overrides") or {}).get("cpu") or d.get("cpu", "256"),
             "memory": (req.get("overrides") or {}).get("memory") or d.get("memory", "512"),
             "startedBy": req.get("startedBy", ""), "overrides": req.get("overrides") or {},
             "containers": [{"name": ctr["name"], "image": ctr.get("image", ""),
                             "lastStatus": "PENDING"}]}
        with LOCK:
            TASKS[tid] = t
        stream = "%s/%s/%s" % (opts.get("awslogs-stream-prefix", "ecs"), ctr["name"], tid)
        threading.Thread(target=run_task, daemon=True,
                         args=(t, argv, env, opts.get("awslogs-group", "/ecs/none"), stream)).start()
        with LOCK:
            return {"tasks": [public(t)], "failures": []}
    if op == "DescribeTasks":
        cluster_of(req)
        tasks, failures = [], []
        for ref in req.get("tasks") or []:
            t = TASKS.get(ref.rsplit("/", 1)[-1])
            with LOCK:
                if t is None:
                    failures.append({"arn": ref, "reason": "MISSING"})
                else:
                    tasks.append(public(t))
        return {"tasks": tasks, "failures": failures}
    if op == "StopTask":
        cluster_of(req)
        t = TASKS.get((req.get("task") or "").rsplit("/", 1)[-1])
        if t is None:
            raise JsonError(400, "InvalidParameterException", "The referenced task was not found.")
        stop_task(t, req.get("reason") or "Task stopped by the user")
        with LOCK:
            return {"task": public(t)}
    if op == "ListTasks":
        cluster = cluster_of(req)
        with LOCK:
            arns = [t["taskArn"] for t in TASKS.values()
                    if t["clusterArn"].endswith("/" + cluster)
                    and (req.get("desiredStatus", "RUNNING") == t["desiredStatus"])]
        return {"taskArns": arns}
    raise JsonError(400, "UnknownOperationException", "unknown operation %s" % op)


def build_of(t):
    """A task standing for a build, in BatchGetBuilds' shape."""
    st = t["lastStatus"]
    code = t["containers"][0].get("exitCode")
    status = ("IN_PROGRESS" if st != "STOPPED" else
              "STOPPED" if t.get("stopCode") == "UserInitiated" else
              "SUCCEEDED" if code == 0 else "FAILED")
    return {"id": t["_build"], "arn": "arn:aws:codebuild:%s:%s:build/%s" % (
                CFG["region"], ACCOUNT, t["_build"]),
            "projectName": t["_build"].split(":")[0], "buildStatus": status,
            "buildComplete": st == "STOPPED", "currentPhase":
                "COMPLETED" if st == "STOPPED" else "BUILD",
            "environment": {"image": t["containers"][0]["image"]},
            "logs": {"groupName": t["_group"], "streamName": t["_stream"]}}


def codebuild(op, req):
    if op == "StartBuild":
        name = req.get("projectName") or ""
        if name not in PROJECTS:
            raise JsonError(400, "ResourceNotFoundException", "Project cannot be found: "
                            "arn:aws:codebuild:%s:%s:project/%s" % (CFG["region"], ACCOUNT, name))
        try:
            spec = json.loads(req.get("buildspecOverride") or "")
            cmds = spec["phases"]["build"]["commands"]
        except (ValueError, KeyError, TypeError):
            raise JsonError(400, "InvalidInputException",
                            "the emulator reads only a JSON buildspecOverride with phases.build.commands")
        uid = str(uuid.uuid4())
        bid = "%s:%s" % (name, uid)
        cw = (req.get("logsConfigOverride") or {}).get("cloudWatchLogs") or {}
        group = cw.get("groupName") or "/aws/codebuild/" + name
        stream = "%s/%s" % (cw["streamName"], uid) if cw.get("streamName") else uid
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOME": "/root", "CODEBUILD_BUILD_ID": bid,
               "AWS_EMU_TASK_DIR": os.path.join(CFG["root"], "tasks", uid)}
        for e in req.get("environmentVariablesOverride") or []:
            env[e["name"]] = e["value"]
        t = {"taskArn": "arn:aws:codebuild:%s:%s:build/%s" % (CFG["region"], ACCOUNT, bid),
             "clusterArn": "", "lastStatus": "PROVISIONING", "desiredStatus": "RUNNING",
             "createdAt": time.time(), "overrides": {}, "startedBy": "codebuild",
             "containers": [{"name": "build", "lastStatus": "PENDING",
                             "image": req.get("imageOverride") or PROJECTS[name]}],
             "_build": bid, "_group": group, "_stream": stream}
        with LOCK:
            TASKS[uid] = t
            BUILDS[bid] = uid
        threading.Thread(target=run_task, daemon=True,
                         args=(t, ["sh", "-c", "\n".join(cmds)], env, group, stream)).start()
        with LOCK:
            return {"build": build_of(t)}
    if op == "BatchGetBuilds":
        builds, missing = [], []
        with LOCK:
            for i in req.get("ids") or []:
                t = TASKS.get(BUILDS.get(i, ""))
                (missing.append(i) if t is None else builds.append(build_of(t)))
        return {"builds": builds, "buildsNotFound": missing}
    if op == "StopBuild":
        t = TASKS.get(BUILDS.get(req.get("id") or "", ""))
        if t is None:
            raise JsonError(400, "ResourceNotFoundException", "Build not found")
        stop_task(t, "StopBuild")
        with LOCK:
            return {"build": build_of(t)}
    raise JsonError(400, "UnknownOperationException", "unknown operation %s" % op)


def logs(op, req):
    if op == "GetLogEvents":
        key = (req.get("logGroupName"), req.get("logStreamName"))
        with LOCK:
            events = LOGS.get(key)
            if events is None:
                raise JsonError(400, "ResourceNotFoundException", "The specified log stream does "
                                "not exist.")
            tok = req.get("nextToken")
            if tok:
                m = re.match(r"f/(\d+)$", tok)
                if not m:
                    raise JsonError(400, "InvalidParameterException",
                                    "The specified nextToken is invalid.")
                start = int(m.group(1))
            elif req.get("startFromHead"):
                start = 0
            else:
                start = max(0, len(events) - 10000)
            limit = min(int(req.get("limit") or 10000), 10000)
            if FAULTS["log_page"]:
                limit = min(limit, FAULTS["log_page"])
            page = events[start:start + limit]
            end = start + len(page)
        return {"events": page, "nextForwardToken": "f/%020d" % end,
                "nextBackwardToken": "b/%020d" % start}
    if op == "FilterLogEvents":
        group = req.get("logGroupName")
        with LOCK:
            out = [dict(e, logStreamName=s) for (g, s), evs in LOGS.items() if g == group
                   for e in evs if s.startswith(req.get("logStreamNamePrefix", ""))]
        return {"events": out}
    raise JsonError(400, "UnknownOperationException", "unknown operation %s" % op)


# ---- HTTP ------------------------------------------------------------------------

def stats():
    """What the conformance suite reads: sandboxes (workspace root markers,
    PREFIX/NAME/ with no deeper slash, outside .sandboxfs/) and processes
    (tasks not stopped)."""
    with LOCK:
        roots = sum(1 for b in s3.BUCKETS.values() for k in b
                    if k.endswith("/") and ".sandboxfs/" not in k and
                    k.count("/") == 1 + CFG.get("prefix_depth", 0))
        procs = sum(1 for t in TASKS.values() if t["lastStatus"] != "STOPPED")
        most = TASK_S3["most"]
    return {"sandboxes": roots, "processes": procs, "task_s3_most_at_once": most}


# presigned and POST-upload requests (a task's) in flight, and the most seen
TASK_S3 = {"now": 0, "most": 0}


class Handler(s3.Handler):
    def _json(self, status, obj, headers=None):
        self._send(status, json.dumps(obj).encode(), "application/x-amz-json-1.1", headers)

    def _control(self, url, body):
        """/_emu/faults and /_emu/stats: the shared switches (latency_ms,
        fail_rate, drop_rate, slow_rate, hang, fail_paths; sfs_emu) and S3's
        and this emulator's own (the rest) in one call."""
        parts = [p for p in url.path.split("/") if p]
        if parts[1:] == ["faults"] and self.command == "POST":
            req = json.loads(body or b"{}")
            with LOCK:
                for k, v in req.items():
                    (EMU.faults if k in sfs_emu.DEFAULT_FAULTS else FAULTS)[k] = v
                # S3's fail_methods are targeted by the same fail_paths
                FAULTS["fail_paths"] = EMU.faults["fail_paths"]
                out = dict(FAULTS, **EMU.faults)
            return self.send(200, out)
        if parts[1:] == ["stats"]:
            with LOCK:
                out = dict(s3.STATS, **EMU.stats)
            out.update(stats())
            return self.send(200, out)
        return None

    def read_body(self):
        """The body, read once: dispatch reads it before a fault is injected
        (an unread body left on a kept-alive connection would be parsed as
        the next request, and fail it), the routes read it again."""
        if self._body is None:
            self._body = super().read_body()
        return self._body

    def dispatch(self):
        url = urllib.parse.urlsplit(self.path)
        q = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        # presigned or a POST upload: a task's request, signed in itself
        task = "X-Amz-Signature" in q or (
            self.command == "POST" and
            self.headers.get("Content-Type", "").startswith("multipart/form-data"))
        if task:
            with LOCK:
                TASK_S3["now"] += 1
                TASK_S3["most"] = max(TASK_S3["most"], TASK_S3["now"])
        try:
            self._dispatch(url, q, task)
        finally:
            if task:
                with LOCK:
                    TASK_S3["now"] -= 1

    def _dispatch(self, url, q, task):
        self._body = None
        self.read_body()
        target = self.headers.get("X-Amz-Target")
        if url.path in ("/_emu/faults", "/_emu/stats"):
            self.status_sent = 0
            return self._control(url, self.read_body())
        if not url.path.startswith("/_emu/"):
            with LOCK:
                EMU.stats["requests"] += 1
            if self.inject_faults(self._fail):
                return
        if url.path.startswith("/_emu/tasks"):
            self.status_sent = 0
            with LOCK:
                data = [dict(public(t), pid=(t["_proc"].pid if t.get("_proc") else None),
                             mainPid=(main_pid(t) if t.get("_proc") else None))
                        for t in TASKS.values()]
            return self._json(200, data)
        if target:
            return self._json_dispatch(target)
        if task:
            return self._unsigned_s3(url, q, self.headers.get("Content-Type", ""))
        if FAULTS["expired"] and not url.path.startswith("/_emu/"):
            self.status_sent = 0
            self.read_body()
            return self._error(s3.S3Error(400, "ExpiredToken",
                                          "The provided token has expired."))
        return super().dispatch()

    def _fail(self, status, headers):
        """An injected failure, in the protocol of the request."""
        self.status_sent = status
        if self.headers.get("X-Amz-Target"):
            return self._json(status, {"__type": "ServiceUnavailableException",
                                       "message": "injected %d" % status}, headers)
        self._error(s3.S3Error(status, "SlowDown" if status == 503 else "InternalError",
                               "injected %d" % status, headers=headers))

    def _unsigned_s3(self, url, q, ctype):
        """Presigned URLs and POST uploads: the signature is in the request."""
        self.status_sent = 0
        body = self.read_body()
        try:
            if FAULTS["expired"]:
                raise s3.S3Error(400, "ExpiredToken", "The provided token has expired.")
            bucket, key = self._bucket_key(url)
            if self.command == "POST" and not key and "X-Amz-Signature" not in q:
                post_upload(bucket, ctype, body)
                return self._send(204)
            verify_presigned(self, url, q)
            if FAULTS["deny"]:
                raise s3.S3Error(403, "AccessDenied", "Access Denied")
            self._s3(url, {k: v for k, v in q.items() if not k.startswith("X-Amz-")}, body)
        except s3.S3Error as e:
            self._error(e)
        finally:
            EMU.log("%s %s %s %d" % (time.strftime("%H:%M:%S"), self.command,
                                     url.path + " (presigned/post)", self.status_sent))

    def _json_dispatch(self, target):
        self.status_sent = 0
        body = self.read_body()
        service, op = ("ecs", target[len(ECS_PREFIX):]) if target.startswith(ECS_PREFIX) else \
            ("logs", target[len(LOGS_PREFIX):]) if target.startswith(LOGS_PREFIX) else \
            ("codebuild", target[len(CB_PREFIX):]) if target.startswith(CB_PREFIX) else (None, target)
        try:
            if service is None:
                raise JsonError(400, "UnknownOperationException", "unknown target %s" % target)
            with LOCK:
                throttle = FAULTS["throttle"] > 0
                if throttle:
                    FAULTS["throttle"] -= 1
            if throttle:
                ra = FAULTS["throttle_retry_after"]
                raise JsonError(400, "ThrottlingException", "Rate exceeded",
                                {"Retry-After": str(ra)} if ra else None)
            if FAULTS["expired"]:
                raise JsonError(400, "ExpiredTokenException",
                                "The security token included in the request is expired")
            verify_json_sigv4(self, body, service)
            if FAULTS["deny"]:
                raise JsonError(400, "AccessDeniedException",
                                "User: arn:aws:iam::%s:user/test is not authorized to perform: "
                                "%s:%s" % (ACCOUNT, service, op))
            try:
                req = json.loads(body or b"{}")
            except ValueError:
                raise JsonError(400, "SerializationException", "the body is not JSON")
            self._json(200, ecs(op, req) if service == "ecs" else
                       codebuild(op, req) if service == "codebuild" else logs(op, req))
        except JsonError as e:
            self._json(e.status, {"__type": e.typ, "message": e.message}, e.headers)
        finally:
            EMU.log("%s POST %s %d" % (time.strftime("%H:%M:%S"), target, self.status_sent))


def cleanup():
    with LOCK:
        tasks = list(TASKS.values())
    for t in tasks:
        kill_task(t)
    if CFG["runner"] == "docker":
        ids = subprocess.run(["docker", "ps", "-aq", "--filter",
                              "label=sandboxfs.aws-emu=%s" % CFG["root"]],
                             capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f"] + ids, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)


def main():
    env = os.environ.get
    ap = sfs_emu.arg_parser(__doc__, "AWS_EMU_", root=True, faults=False)
    ap.add_argument("--bucket", action="append", help="a bucket that exists (repeatable)")
    ap.add_argument("--key", action="append", help="AKID:SECRET it accepts (repeatable)")
    ap.add_argument("--session-token", default=env("AWS_EMU_SESSION_TOKEN"))
    ap.add_argument("--region", default=env("AWS_EMU_REGION", "us-east-1"))
    ap.add_argument("--latency-ms", type=int, default=int(env("AWS_EMU_LATENCY_MS", "0")))
    ap.add_argument("--cluster", action="append", help="a cluster that exists (repeatable)")
    ap.add_argument("--task-def", action="append",
                    help="FAMILY:CONTAINER:GROUP:PREFIX[:IMAGE], registered as revision 1")
    ap.add_argument("--codebuild-project", action="append",
                    help="NAME[:IMAGE], a CodeBuild project that exists (repeatable)")
    ap.add_argument("--runner", choices=("bwrap", "process", "docker"),
                    default=env("AWS_EMU_RUNNER") or ("bwrap" if shutil.which("bwrap") else "process"))
    ap.add_argument("--prefix-depth", type=int, default=0,
                    help="slashes in the workspace prefix (/_emu/stats counts sandboxes by it)")
    ap.add_argument("--stop-timeout", type=float, default=5.0,
                    help="seconds between StopTask's TERM and KILL (ECS: stopTimeout)")
    a = ap.parse_args()
    keys = dict(k.split(":", 1) for k in (a.key or ["AKIDEMULATOR:emulator-secret"]))
    CFG.update(keys=keys, session_token=a.session_token, region=a.region, log=a.log,
               vhost=None, runner=a.runner, stop_timeout=a.stop_timeout,
               prefix_depth=a.prefix_depth)
    EMU.setup(a, root_prefix="aws-emu-")
    CFG["bindir"] = os.path.join(CFG["root"], "bin")
    os.makedirs(CFG["bindir"], exist_ok=True)
    for b in a.bucket or []:
        s3.BUCKETS[b] = {}
    for c in a.cluster or ["default"]:
        CLUSTERS.add(c)
    for spec in a.codebuild_project or []:
        n, _, img = spec.partition(":")
        PROJECTS[n] = img or "sandboxfs-test:latest"
    for spec in a.task_def or []:
        f = spec.split(":", 4)
        if len(f) < 4:
            ap.error("--task-def wants FAMILY:CONTAINER:GROUP:PREFIX[:IMAGE]")
        register(f[0], [{"name": f[1], "image": f[4] if len(f) > 4 else "sandboxfs-test:latest",
                         "essential": True,
                         "logConfiguration": {"logDriver": "awslogs", "options": {
                             "awslogs-group": f[2], "awslogs-region": a.region,
                             "awslogs-stream-prefix": f[3]}}}], {"cpu": "256", "memory": "512"})
    sfs_emu.serve(EMU, Handler, a, cleanup=cleanup)


if __name__ == "__main__":
    main()
