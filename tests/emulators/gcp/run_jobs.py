"""Cloud Run Jobs (Admin API v2) and Cloud Logging entries:list for the gcp emulator.

An execution is a real process: a local process group (default) or a
container on the test dockerd (--docker), started with the job's command
and the run's overridden args/env.  A job's gcs volume (bucket + mountOptions
only-dir=PREFIX) is emulated by copying the prefix out of the emulated
bucket into a directory before the run and syncing it back after (new and
changed files uploaded with their mode and mtime, removed ones deleted), so
a run really reads and writes the workspace.  stdout/stderr lines become
log entries of resource.type "cloud_run_job".  Shapes: provider-apis-aws-
gcp.md sections 8 and 10.  Standard library only.
"""

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time

from gcs_store import GcsError, rfc3339

LOCK = threading.RLock()
MODE_KEY, MTIME_KEY = "goog-reserved-posix-mode", "goog-reserved-file-mtime"
LINK_KEY = "gcsfuse_symlink_target"  # gcsfuse's symlinks: an empty object, the target in metadata
BWRAP = shutil.which("bwrap")


def norm_ts(s):
    """2026-12-01T01:02:03[.fff]Z -> 2026-12-01T01:02:03.fffffffff"""
    frac = s[20:].rstrip("Z") if len(s) > 19 and s[19] == "." else ""
    return s[:19] + "." + frac.ljust(9, "0")[:9]


class RunError(Exception):
    STATUS = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 409: "ALREADY_EXISTS",
              412: "FAILED_PRECONDITION", 429: "RESOURCE_EXHAUSTED"}

    def __init__(self, status, message):
        super().__init__(message)
        self.status, self.message = status, message

    def body(self):
        return {"error": {"code": self.status, "message": self.message,
                          "status": self.STATUS.get(self.status, "UNKNOWN")}}


class Runs:
    def __init__(self, root, store, docker_image=None, log=print):
        self.root, self.store, self.docker, self.log = root, store, docker_image, log
        self.jobs = {}        # full name -> Job
        self.executions = {}  # full name -> dict (+ "_proc" etc.)
        self.operations = {}  # full name -> Operation
        self.entries = []     # log entries, in order
        self.seq = 0

    # ---- helpers -------------------------------------------------------------

    def _op(self, parent, done, response=None, metadata=None):
        name = "%s/operations/%s" % (parent, secrets.token_hex(8))
        op = {"name": name}
        if metadata is not None:
            op["metadata"] = metadata
        if done:
            op["done"] = True
            if response is not None:
                op["response"] = response
        with LOCK:
            self.operations[name] = op
        return op

    @staticmethod
    def _loc(name):
        m = re.match(r"^(projects/[^/]+/locations/[^/]+)/", name + "/")
        return m.group(1)

    def live(self):
        with LOCK:
            return sum(1 for e in self.executions.values() if not e.get("completionTime"))

    # ---- jobs -----------------------------------------------------------------

    def create_job(self, parent, job_id, body):
        if not re.match(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", job_id or ""):
            raise RunError(400, "Invalid job id: %r" % job_id)
        tmpl = ((body.get("template") or {}).get("template") or {})
        cs = tmpl.get("containers") or []
        if not cs or not cs[0].get("image"):
            raise RunError(400, "template.template.containers[0].image: is required")
        name = "%s/jobs/%s" % (parent, job_id)
        with LOCK:
            if name in self.jobs:
                raise RunError(409, "Resource '%s' already exists." % job_id)
            job = dict(body)
            job.update({"name": name, "uid": secrets.token_hex(8), "generation": "1",
                        "createTime": rfc3339(time.time()), "executionCount": 0})
            self.jobs[name] = job
        return self._op(parent, True, dict(job, **{"@type": "type.googleapis.com/google.cloud.run.v2.Job"}))

    def get_job(self, name):
        with LOCK:
            j = self.jobs.get(name)
        if not j:
            raise RunError(404, "Resource '%s' was not found" % name.rsplit("/", 1)[-1])
        return j

    def delete_job(self, name):
        with LOCK:
            j = self.jobs.pop(name, None)
        if not j:
            raise RunError(404, "Resource '%s' was not found" % name.rsplit("/", 1)[-1])
        return self._op(self._loc(name), True, j)

    # ---- executions -------------------------------------------------------------

    def run_job(self, name, body):
        job = self.get_job(name)
        overrides = (body or {}).get("overrides") or {}
        tmpl = job["template"]["template"]
        c = dict(tmpl["containers"][0])
        env = {e["name"]: e.get("value", "") for e in c.get("env") or []}
        for co in overrides.get("containerOverrides") or []:
            if co.get("name") and co["name"] != c.get("name"):
                raise RunError(400, "containerOverrides: no container named %s" % co["name"])
            if co.get("clearArgs"):
                c["args"] = []
            if "args" in co:
                c["args"] = co["args"]
            for e in co.get("env") or []:
                env[e["name"]] = e.get("value", "")
        short = name.rsplit("/", 1)[-1]
        ex_id = "%s-%s" % (short, secrets.token_hex(3)[:5])
        ex_name = "%s/executions/%s" % (name, ex_id)
        now = time.time()
        ex = {"name": ex_name, "uid": secrets.token_hex(8), "job": short, "generation": "1",
              "createTime": rfc3339(now), "startTime": rfc3339(now), "taskCount": 1,
              "parallelism": 1, "runningCount": 1,
              "conditions": [{"type": "Completed", "state": "CONDITION_RECONCILING"}],
              "logUri": "https://console.cloud.google.com/logs/viewer?execution=" + ex_id}
        with LOCK:
            job["executionCount"] = job.get("executionCount", 0) + 1
            job["latestCreatedExecution"] = {"name": ex_name, "createTime": ex["createTime"]}
            self.executions[ex_name] = ex
        op = self._op(self._loc(name), False,
                      metadata=dict(ex, **{"@type": "type.googleapis.com/google.cloud.run.v2.Execution"}))
        ex["_op"] = op["name"]
        threading.Thread(target=self._execute, args=(job, ex, c, env, tmpl), daemon=True).start()
        return op

    def get_execution(self, name):
        with LOCK:
            ex = self.executions.get(name)
            if not ex:
                raise RunError(404, "Resource '%s' was not found" % name.rsplit("/", 1)[-1])
            return {k: v for k, v in ex.items() if not k.startswith("_")}

    def tasks(self, name):
        ex = self.get_execution(name)
        with LOCK:
            raw = self.executions[name]
            t = {"name": name + "/tasks/%s-task0" % name.rsplit("/", 1)[-1], "index": 0,
                 "job": ex["job"], "execution": name.rsplit("/", 1)[-1]}
            if "_exit" in raw:
                r = {"status": {"code": 0 if raw["_exit"] == 0 else 2,
                                "message": "" if raw["_exit"] == 0 else
                                "Task failed with message: exit %d." % raw["_exit"]}}
                if raw.get("_signal"):
                    r["termSignal"] = raw["_signal"]
                else:
                    r["exitCode"] = raw["_exit"]
                t["lastAttemptResult"] = r
        return {"tasks": [t]}

    def cancel(self, name):
        ex = self.get_execution(name)
        if ex.get("completionTime"):
            raise RunError(412, "Execution %s has already completed." % name.rsplit("/", 1)[-1])
        with LOCK:
            raw = self.executions[name]
            raw["_cancel"] = True
            proc = raw.get("_proc")
        if self.docker and raw.get("_container"):
            subprocess.run(["docker", "kill", "--signal", "TERM", raw["_container"]],
                           capture_output=True, check=False)
        elif proc:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        threading.Thread(target=self._escalate, args=(raw,), daemon=True).start()
        return self._op(self._loc(name), False, metadata=dict(ex, **{
            "@type": "type.googleapis.com/google.cloud.run.v2.Execution"}))

    def _escalate(self, raw):
        time.sleep(3)
        with LOCK:
            proc = raw.get("_proc")
        if raw.get("completionTime") or not proc:
            return
        if self.docker and raw.get("_container"):
            subprocess.run(["docker", "kill", raw["_container"]], capture_output=True, check=False)
        else:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def operation(self, name):
        with LOCK:
            op = self.operations.get(name)
        if not op:
            raise RunError(404, "Operation %s not found" % name)
        return op

    def stop_all(self):
        with LOCK:
            raws = list(self.executions.values())
        for raw in raws:
            if raw.get("_container"):
                subprocess.run(["docker", "rm", "-f", raw["_container"]], capture_output=True,
                               check=False)
            elif raw.get("_proc") and raw["_proc"].poll() is None:
                try:
                    os.killpg(raw["_proc"].pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    # ---- the volume: copy out, sync back ------------------------------------------

    @staticmethod
    def _gcs_volume(tmpl, c):
        """(bucket, prefix, mountPath) of the job's gcs volume, or None."""
        vols = {v.get("name"): v for v in tmpl.get("volumes") or []}
        for vm in c.get("volumeMounts") or []:
            v = vols.get(vm.get("name"))
            if v and v.get("gcs"):
                prefix = ""
                for o in v["gcs"].get("mountOptions") or []:
                    if o.startswith("only-dir="):
                        prefix = o[len("only-dir="):].strip("/") + "/"
                return v["gcs"]["bucket"], prefix, vm.get("mountPath") or "/mnt"
        return None

    def _copy_out(self, bucket, prefix, d):
        seen = {}
        for n in self.store.names(bucket):
            if not n.startswith(prefix) or n == prefix:
                continue
            rel = n[len(prefix):]
            try:
                data = self.store.data(bucket, n)
                meta = self.store.resource(bucket, n).get("metadata", {})
            except GcsError:
                continue
            p = os.path.join(d, rel)
            if rel.endswith("/"):
                os.makedirs(p, exist_ok=True)
                try:
                    os.chmod(p, int(meta.get(MODE_KEY, "755"), 8) & 0o7777)
                except ValueError:
                    pass
                seen[rel] = (0, 0, os.stat(p).st_mode, None)
                continue
            os.makedirs(os.path.dirname(p), exist_ok=True)
            if meta.get(LINK_KEY):
                os.symlink(meta[LINK_KEY], p)
                seen[rel] = (0, 0, 0, "link:" + meta[LINK_KEY])
                continue
            with open(p, "wb") as f:
                f.write(data)
            try:
                os.chmod(p, int(meta.get(MODE_KEY, "644"), 8) & 0o7777)
                mt = int(meta.get(MTIME_KEY, "0"))
                if mt:
                    os.utime(p, (mt, mt))
            except ValueError:
                pass
            st = os.stat(p)
            seen[rel] = (st.st_size, st.st_mtime_ns, st.st_mode, data)
        return seen

    def _sync_back(self, bucket, prefix, d, seen):
        now = set()
        for top, dirs, files in os.walk(d):
            relt = os.path.relpath(top, d)
            relt = "" if relt == "." else relt + "/"
            for dn in [x for x in dirs if os.path.islink(os.path.join(top, x))]:
                dirs.remove(dn)  # a symlink to a directory is a link, not a directory
                files.append(dn)
            for dn in dirs:
                rel = relt + dn + "/"
                now.add(rel)
                st = os.stat(os.path.join(top, dn))
                old = seen.get(rel)
                if old and old[2] != st.st_mode:  # a chmod of a directory in the run
                    self.store.put(bucket, prefix + rel, b"", {"metadata": {
                        MODE_KEY: "%o" % (st.st_mode & 0o7777), MTIME_KEY: str(int(st.st_mtime))}})
            for fn in files:
                p = os.path.join(top, fn)
                rel = relt + fn
                if os.path.islink(p):
                    now.add(rel)
                    target = os.readlink(p)
                    if seen.get(rel, (0, 0, 0, None))[3] != "link:" + target:
                        self.store.put(bucket, prefix + rel, b"", {"metadata": {
                            MODE_KEY: "777", LINK_KEY: target}})
                    continue
                if not os.path.isfile(p):
                    continue
                now.add(rel)
                st = os.stat(p)
                with open(p, "rb") as f:
                    data = f.read()
                old = seen.get(rel)
                if old and old[0] == st.st_size and old[2] == st.st_mode and old[3] == data:
                    continue
                self.store.put(bucket, prefix + rel, data, {"metadata": {
                    MODE_KEY: "%o" % (st.st_mode & 0o7777), MTIME_KEY: str(int(st.st_mtime))}})
        existing = set(n[len(prefix):] for n in self.store.names(bucket) if n.startswith(prefix))
        for rel in sorted(now):
            if rel.endswith("/") and rel not in existing and \
                    not any(e.startswith(rel) for e in existing):
                mode = os.stat(os.path.join(d, rel)).st_mode & 0o7777
                self.store.put(bucket, prefix + rel, b"", {"metadata": {MODE_KEY: "%o" % mode}})
        for rel in seen:
            if rel not in now:
                try:
                    self.store.delete(bucket, prefix + rel)
                except GcsError:
                    pass

    # ---- one execution --------------------------------------------------------------

    def _log(self, ex, job, stream, line):
        project, _, location = job["name"].split("/")[1:4]
        with LOCK:
            self.seq += 1
            t = time.time()
            self.entries.append({
                "logName": "projects/%s/logs/run.googleapis.com%%2F%s" % (project, stream),
                "resource": {"type": "cloud_run_job",
                             "labels": {"project_id": project, "job_name": ex["job"],
                                        "location": location}},
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) +
                ".%09dZ" % int((t % 1) * 1e9),
                "receiveTimestamp": rfc3339(t), "severity": "DEFAULT",
                "insertId": "%012x" % self.seq,
                "labels": {"run.googleapis.com/execution_name": ex["name"].rsplit("/", 1)[-1],
                           "run.googleapis.com/task_index": "0",
                           "run.googleapis.com/task_attempt": "0"},
                "textPayload": line})

    def _pump(self, ex, job, stream, f):
        for raw in iter(f.readline, b""):
            self._log(ex, job, stream, raw.decode("utf-8", "replace").rstrip("\n"))
        f.close()

    def _execute(self, job, ex, c, env, tmpl):
        ex_id = ex["name"].rsplit("/", 1)[-1]
        rundir = os.path.join(self.root, "runs", ex_id)
        wsdir = os.path.join(rundir, "workspace")
        home = os.path.join(rundir, "home")
        os.makedirs(wsdir, exist_ok=True)
        os.makedirs(home, exist_ok=True)
        vol = self._gcs_volume(tmpl, c)
        seen = {}
        code, sig = 0, 0
        try:
            if vol:
                seen = self._copy_out(vol[0], vol[1], wsdir)
            argv = list(c.get("command") or []) + list(c.get("args") or [])
            if not argv:
                raise RunError(400, "no command")
            wd = c.get("workingDir") or (vol[2] if vol else "/")
            full_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
                        "CLOUD_RUN_JOB": ex["job"], "CLOUD_RUN_EXECUTION": ex_id,
                        "CLOUD_RUN_TASK_INDEX": "0", "CLOUD_RUN_TASK_ATTEMPT": "0",
                        "CLOUD_RUN_TASK_COUNT": "1"}
            full_env.update(env)
            if self.docker:
                cname = "sfs-gcp-emu-" + ex["uid"]
                # the label lets a test's teardown find exactly its own containers
                cmd = ["docker", "run", "--rm", "--name", cname, "--network", "none",
                       "--label", "sfs.gcp-emu.root=" + os.path.realpath(self.root),
                       "-w", wd, "-e", "HOME=/tmp"]
                for k, v in full_env.items():
                    if k not in ("PATH", "HOME"):
                        cmd += ["-e", "%s=%s" % (k, v)]
                if vol:
                    cmd += ["-v", "%s:%s" % (wsdir, vol[2])]
                cmd += ["--entrypoint", argv[0], c.get("image")]
                cmd += argv[1:]
                ex["_container"] = cname
            elif BWRAP and vol:
                # a local process that sees the synced directory at the
                # volume's mount path, as the container would
                cmd = [BWRAP, "--dev-bind", "/", "/", "--bind", wsdir, vol[2], "--chdir", wd,
                       "--die-with-parent", "--"] + argv
                cwd = home
            else:
                # no bwrap: the process runs in the synced directory itself
                cwd = wsdir if vol and (wd == vol[2] or wd.startswith(vol[2].rstrip("/") + "/")) \
                    else home
                if vol and wd.startswith(vol[2].rstrip("/") + "/"):
                    cwd = os.path.join(wsdir, wd[len(vol[2].rstrip("/")) + 1:])
                cmd = argv
            p = subprocess.Popen(cmd, cwd=None if self.docker else cwd, env=full_env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, start_new_session=True)
            with LOCK:
                ex["_proc"] = p
            ts = [threading.Thread(target=self._pump, args=(ex, job, s, f), daemon=True)
                  for s, f in (("stdout", p.stdout), ("stderr", p.stderr))]
            for t in ts:
                t.start()
            rc = p.wait()
            for t in ts:
                t.join(5)
            if rc < 0:
                code, sig = 128 - rc, -rc
            elif self.docker and rc >= 128 and ex.get("_cancel"):
                code, sig = rc, rc - 128
            else:
                code = rc
            if vol:
                self._sync_back(vol[0], vol[1], wsdir, seen)
        except (OSError, GcsError, RunError) as e:
            self._log(ex, job, "stderr", "emulator: %s" % e)
            code = 127
        finally:
            shutil.rmtree(rundir, ignore_errors=True)
        now = time.time()
        with LOCK:
            cancelled = ex.get("_cancel")
            ex["_exit"], ex["_signal"] = code, sig
            ex["completionTime"] = rfc3339(now)
            ex["runningCount"] = 0
            if cancelled:
                ex["cancelledCount"] = 1
                cond = {"type": "Completed", "state": "CONDITION_FAILED",
                        "executionReason": "CANCELLED", "message": "The execution was cancelled."}
            elif code == 0:
                ex["succeededCount"] = 1
                cond = {"type": "Completed", "state": "CONDITION_SUCCEEDED"}
            else:
                ex["failedCount"] = 1
                cond = {"type": "Completed", "state": "CONDITION_FAILED",
                        "executionReason": "NON_ZERO_EXIT_CODE",
                        "message": "Task %s-task0 failed with message: exit %d." % (ex_id, code)}
            cond["lastTransitionTime"] = rfc3339(now)
            ex["conditions"] = [cond]
            op = self.operations.get(ex.get("_op"))
            if op is not None:
                op["done"] = True
                op["response"] = dict({k: v for k, v in ex.items() if not k.startswith("_")},
                                      **{"@type": "type.googleapis.com/google.cloud.run.v2.Execution"})
            ex.pop("_proc", None)
        self.log("execution %s ended: exit %d signal %d%s" % (ex_id, code, sig,
                                                               " (cancelled)" if cancelled else ""))

    # ---- Cloud Logging entries:list ------------------------------------------------

    COND = re.compile(r'(labels\."[^"]+"|[A-Za-z_][\w.]*)\s*(>=|<=|!=|=|>|<)\s*"((?:[^"\\]|\\.)*)"')

    @classmethod
    def parse_filter(cls, flt):
        """[[cond, ...], ...]: a list of OR-groups that are ANDed together.
        Parenthesised groups are ORs of conditions; the rest are single ANDed conditions."""
        groups = []
        for m in re.finditer(r"\(([^()]*)\)", flt):
            conds = [c.groups() for c in cls.COND.finditer(m.group(1))]
            if conds:
                groups.append(conds)
        rest = re.sub(r"\([^()]*\)", " ", flt)
        for c in cls.COND.finditer(rest):
            groups.append([c.groups()])
        if not groups and flt.strip():
            raise RunError(400, "Unparseable filter: " + flt[:200])
        return groups

    @staticmethod
    def _field(e, key):
        if key.startswith('labels."'):
            return (e.get("labels") or {}).get(key[8:-1])
        v = e
        for part in key.split("."):
            if not isinstance(v, dict):
                return None
            v = v.get(part)
        return v

    @classmethod
    def _match(cls, e, groups):
        for g in groups:
            ok = False
            for key, op, val in g:
                val = val.replace('\\"', '"')
                have = cls._field(e, key)
                if have is None:
                    continue
                have = str(have)
                if key == "timestamp":  # RFC 3339 in UTC compares as text once normalised
                    have, val = norm_ts(have), norm_ts(val)
                ok = {"=": have == val, "!=": have != val, ">=": have >= val, ">": have > val,
                      "<=": have <= val, "<": have < val}[op]
                if ok:
                    break
            if not ok:
                return False
        return True

    def list_entries(self, body):
        names = body.get("resourceNames") or []
        if not names:
            raise RunError(400, "resourceNames: at least one is required")
        groups = self.parse_filter(body.get("filter") or "")
        size = int(body.get("pageSize") or 50)
        if size < 1 or size > 1000:
            raise RunError(400, "pageSize must be 1..1000")
        start = int(body.get("pageToken") or 0)
        projects = set(n.split("/")[1] for n in names if n.startswith("projects/"))
        with LOCK:
            match = [e for e in self.entries
                     if e["resource"]["labels"]["project_id"] in projects and self._match(e, groups)]
        if body.get("orderBy") == "timestamp desc":
            match.reverse()
        page = match[start:start + size]
        out = {}
        if page:
            out["entries"] = page
        if start + size < len(match):
            out["nextPageToken"] = str(start + size)
        return out
