// The bridge's routing, auth and shapes against a mock sandbox (no account needed).
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  type ExecOptionsLike,
  type ExecResultLike,
  type SandboxLike,
  fromBase64,
  handle,
  resolveWorkspacePath,
  shellQuote,
} from "../src/bridge.js";

const KEY = "sk-test-key";

interface Mock extends SandboxLike {
  calls: string[];
  files: Map<string, string>;
  destroyed: boolean;
}

/** A sandbox that records calls; exec("cmd") streams per `script`. */
function mock(script?: (cmd: string, o: ExecOptionsLike) => ExecResultLike | Error): Mock {
  const m: Mock = {
    calls: [],
    files: new Map(),
    destroyed: false,
    async exec(cmd, o = {}) {
      m.calls.push(`exec ${cmd}`);
      const r = script ? script(cmd, o) : { exitCode: 0, stdout: "", stderr: "" };
      if (r instanceof Error) {
        if (o.stream) o.onError?.(r);
        throw r;
      }
      if (o.stream) {
        if (r.stdout) o.onOutput?.("stdout", r.stdout);
        if (r.stderr) o.onOutput?.("stderr", r.stderr);
        o.onComplete?.(r);
      }
      return r;
    },
    async readFileBase64(path) {
      m.calls.push(`read ${path}`);
      const v = m.files.get(path);
      if (v === undefined) throw Object.assign(new Error("nope"), { code: "FILE_NOT_FOUND" });
      return v;
    },
    async writeFileBase64(path, b64) {
      m.calls.push(`write ${path}`);
      m.files.set(path, b64);
    },
    async destroy() {
      m.destroyed = true;
    },
    async tunnel(port, name) {
      return { id: "t1", port, url: `https://x-${port}.trycloudflare.com`, hostname: "x", name: name ?? null };
    },
    async closeTunnel() {},
  };
  return m;
}

async function call(
  sb: Mock,
  method: string,
  path: string,
  opts: { body?: BodyInit; auth?: string | null; key?: string } = {},
): Promise<Response> {
  const headers: Record<string, string> = {};
  const auth = opts.auth === undefined ? `Bearer ${KEY}` : opts.auth;
  if (auth) headers.Authorization = auth;
  const req = new Request(`http://bridge.test${path}`, { method, headers, body: opts.body });
  return handle(req, { apiKey: opts.key ?? KEY, sandbox: () => sb });
}

/** The SSE events of a response, in order. */
async function events(r: Response): Promise<Array<[string, string]>> {
  const text = await r.text();
  return text
    .split("\n\n")
    .filter((b) => b.trim())
    .map((b) => {
      const lines = b.split("\n");
      const ev = lines.find((l) => l.startsWith("event: "))!.slice(7);
      const data = lines.filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
      return [ev, data] as [string, string];
    });
}

test("health needs no auth; everything else wants the bearer key", async () => {
  const sb = mock();
  assert.deepEqual(await (await call(sb, "GET", "/health", { auth: null })).json(), { ok: true });
  for (const auth of [null, "Bearer wrong", `Basic ${KEY}`, `Bearer ${KEY}x`]) {
    const r = await call(sb, "POST", "/v1/sandbox", { auth });
    assert.equal(r.status, 401);
    assert.deepEqual(await r.json(), { error: "Unauthorized", code: "unauthorized" });
  }
  assert.equal((await call(sb, "POST", "/v1/sandbox")).status, 200);
});

test("POST /v1/sandbox mints a 26-character base32 id", async () => {
  const { id } = (await (await call(mock(), "POST", "/v1/sandbox")).json()) as { id: string };
  assert.match(id, /^[a-z2-7]{26}$/);
});

test("an id that is not base32 is a 400 naming it", async () => {
  const r = await call(mock(), "GET", "/v1/sandbox/Not-Base32/running");
  assert.equal(r.status, 400);
  const b = (await r.json()) as { error: string; code: string };
  assert.equal(b.code, "invalid_request");
  assert.match(b.error, /invalid sandbox id "Not-Base32"/);
});

test("running runs true and names the workspace; DELETE destroys", async () => {
  const sb = mock();
  assert.deepEqual(await (await call(sb, "GET", "/v1/sandbox/abc/running")).json(), {
    running: true,
    workspace: "/workspace",
  });
  assert.deepEqual(sb.calls, ["exec true"]);
  const r = await call(sb, "DELETE", "/v1/sandbox/abc");
  assert.equal(r.status, 204);
  assert.ok(sb.destroyed);
  const down = mock(() => new Error("container down"));
  assert.deepEqual(await (await call(down, "GET", "/v1/sandbox/abc/running")).json(), { running: false });
});

test("exec: argv shell-quoted; SSE of base64 chunks, then exit", async () => {
  const sb = mock(() => ({ exitCode: 3, stdout: "héllo\n", stderr: "oops" }));
  const r = await call(sb, "POST", "/v1/sandbox/abc/exec", {
    body: JSON.stringify({ argv: ["sh", "-c", "echo 'x'"], timeout_ms: 5000 }),
  });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get("Content-Type"), "text/event-stream");
  const ev = await events(r);
  assert.deepEqual(ev.map((e) => e[0]), ["stdout", "stderr", "exit"]);
  assert.equal(new TextDecoder().decode(fromBase64(ev[0][1])), "héllo\n");
  assert.equal(new TextDecoder().decode(fromBase64(ev[1][1])), "oops");
  assert.deepEqual(JSON.parse(ev[2][1]), { exit_code: 3 });
  assert.equal(sb.calls[0], `exec 'sh' '-c' 'echo '\\''x'\\'''`);
});

test("exec: a failure is an error event; bad bodies and cwd outside /workspace are refused", async () => {
  const sb = mock(() => new Error("boom"));
  const ev = await events(
    await call(sb, "POST", "/v1/sandbox/abc/exec", { body: JSON.stringify({ argv: ["true"] }) }),
  );
  assert.equal(ev[ev.length - 1][0], "error");
  assert.match(JSON.parse(ev[ev.length - 1][1]).error, /boom/);
  for (const body of ["{", JSON.stringify({ argv: [] }), JSON.stringify({ argv: [1] })])
    assert.equal((await call(mock(), "POST", "/v1/sandbox/abc/exec", { body })).status, 400);
  const r = await call(mock(), "POST", "/v1/sandbox/abc/exec", {
    body: JSON.stringify({ argv: ["ls"], cwd: "/workspace/../etc" }),
  });
  assert.equal(r.status, 403);
});

test("files: bytes both ways, 404 when missing, 403 outside /workspace", async () => {
  const sb = mock();
  const bytes = new Uint8Array([0, 255, 10, 65]);
  const put = await call(sb, "PUT", "/v1/sandbox/abc/file/workspace/d/a%20b.bin", { body: bytes });
  assert.deepEqual(await put.json(), { ok: true });
  assert.deepEqual(sb.calls, ["write /workspace/d/a b.bin"]);
  const get = await call(sb, "GET", "/v1/sandbox/abc/file/workspace/d/a%20b.bin");
  assert.deepEqual(new Uint8Array(await get.arrayBuffer()), bytes);
  const missing = await call(sb, "GET", "/v1/sandbox/abc/file/workspace/none");
  assert.equal(missing.status, 404);
  assert.equal(((await missing.json()) as { code: string }).code, "workspace_read_not_found");
  for (const p of ["etc/passwd", "workspace/../etc/passwd", "workspace2/x"])
    assert.equal((await call(sb, "GET", `/v1/sandbox/abc/file/${p}`)).status, 403);
});

test("files: a body over 32 MiB is a 413", async () => {
  const r = await call(mock(), "PUT", "/v1/sandbox/abc/file/workspace/big", {
    body: new Uint8Array(32 * 1024 * 1024 + 1),
  });
  assert.equal(r.status, 413);
  assert.equal(((await r.json()) as { code: string }).code, "payload_too_large");
});

test("persist tars /workspace and returns its bytes; hydrate unpacks a body there", async () => {
  const sb = mock();
  const tar = new Uint8Array([1, 2, 3]);
  sb.exec = async (cmd: string) => {
    sb.calls.push(`exec ${cmd}`);
    const m = /^tar cf '([^']+)'/.exec(cmd);
    if (m) sb.files.set(m[1], Buffer.from(tar).toString("base64"));
    return { exitCode: 0, stdout: "", stderr: "" };
  };
  const p = await call(sb, "POST", "/v1/sandbox/abc/persist?excludes=node_modules");
  assert.deepEqual(new Uint8Array(await p.arrayBuffer()), tar);
  assert.match(sb.calls[0], /^exec tar cf '\/tmp\/sandbox-persist-\d+\.tar' --exclude '\.\/node_modules' -C '\/workspace' \.$/);
  assert.equal((await call(sb, "POST", "/v1/sandbox/abc/persist?excludes=../x")).status, 400);
  sb.calls.length = 0;
  const h = await call(sb, "POST", "/v1/sandbox/abc/hydrate", { body: tar });
  assert.deepEqual(await h.json(), { ok: true });
  assert.equal(sb.calls[0], "exec mkdir -p '/workspace'");
  assert.match(sb.calls[1], /^write \/tmp\/sandbox-hydrate-\d+\.tar$/);
  assert.match(sb.calls[2], /^exec tar xf '\/tmp\/sandbox-hydrate-\d+\.tar' -C '\/workspace'/);
  assert.equal((await call(sb, "POST", "/v1/sandbox/abc/hydrate", { body: new Uint8Array(0) })).status, 400);
});

test("tunnels: a port opens one, 3000 and non-ports are refused, DELETE closes", async () => {
  const sb = mock();
  const t = (await (await call(sb, "POST", "/v1/sandbox/abc/tunnel/8080")).json()) as { url: string; port: number };
  assert.equal(t.port, 8080);
  assert.match(t.url, /^https:\/\/.*trycloudflare\.com$/);
  for (const port of ["3000", "0", "70000", "http"])
    assert.equal((await call(sb, "POST", `/v1/sandbox/abc/tunnel/${port}`)).status, 400);
  assert.equal((await call(sb, "DELETE", "/v1/sandbox/abc/tunnel/8080")).status, 204);
});

test("unknown routes are 404; the path helpers", async () => {
  assert.equal((await call(mock(), "GET", "/v2/whatever")).status, 404);
  assert.equal((await call(mock(), "GET", "/v1/sandbox/abc/nothing")).status, 404);
  assert.equal(resolveWorkspacePath("/workspace/a/../b"), "/workspace/b");
  assert.equal(resolveWorkspacePath("a/b"), "/workspace/a/b");
  assert.equal(resolveWorkspacePath("/workspace/.."), null);
  assert.equal(shellQuote("it's"), "'it'\\''s'");
});
