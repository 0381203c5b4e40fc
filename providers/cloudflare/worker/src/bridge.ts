/**
 * The sandbox bridge: the HTTP routes sandboxfs's cloudflare provider speaks
 * (provider-apis.md §4, the shapes of @cloudflare/sandbox's own bridge), over
 * any SandboxLike.  index.ts binds it to @cloudflare/sandbox's Durable
 * Object; test/bridge.test.ts to a mock, so routing, auth and shapes are
 * tested without an account.  Only web-standard APIs are used here.
 *
 * One addition to the upstream bridge: GET .../running also names the
 * workspace ({"running": true, "workspace": "/workspace"}).
 */

export const WORKSPACE = "/workspace";
export const BODY_MAX = 32 * 1024 * 1024;
const ID_RE = /^[a-z2-7]{1,128}$/;
const B32 = "abcdefghijklmnopqrstuvwxyz234567";

export interface ExecResultLike {
  exitCode: number;
  stdout: string;
  stderr: string;
}

export interface ExecOptionsLike {
  timeout?: number;
  cwd?: string;
  stream?: boolean;
  onOutput?: (stream: "stdout" | "stderr", data: string) => void;
  onComplete?: (result: ExecResultLike) => void;
  onError?: (error: Error) => void;
}

/** What the bridge needs of a sandbox (a subset of @cloudflare/sandbox's ISandbox). */
export interface SandboxLike {
  exec(command: string, options?: ExecOptionsLike): Promise<ExecResultLike>;
  /** The file's bytes as base64. Throws an error with code FILE_NOT_FOUND when missing. */
  readFileBase64(path: string): Promise<string>;
  writeFileBase64(path: string, base64: string): Promise<void>;
  destroy(): Promise<void>;
  tunnel(port: number, name?: string): Promise<unknown>;
  closeTunnel(port: number): Promise<void>;
}

export interface BridgeDeps {
  /** SANDBOX_API_KEY: every route but /health needs "Authorization: Bearer KEY". */
  apiKey?: string;
  sandbox(id: string): SandboxLike;
  /** Random bytes (crypto.getRandomValues by default). */
  random?(n: number): Uint8Array;
}

export function errorJson(error: string, code: string, status: number): Response {
  return new Response(JSON.stringify({ error, code }), {
    status,
    headers: { "Content-Type": "application/json" },
  });
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), {
    status,
    headers: { "Content-Type": "application/json" },
  });
}

/** A string in single quotes for sh. */
export function shellQuote(s: string): string {
  return "'" + s.replace(/'/g, "'\\''") + "'";
}

/** An absolute path inside /workspace (".." resolved), or null. */
export function resolveWorkspacePath(p: string): string | null {
  const abs = p.startsWith("/") ? p : `${WORKSPACE}/${p}`;
  const out: string[] = [];
  for (const part of abs.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") out.pop();
    else out.push(part);
  }
  const resolved = "/" + out.join("/");
  return resolved === WORKSPACE || resolved.startsWith(WORKSPACE + "/") ? resolved : null;
}

export function toBase64(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i += 6144)
    s += String.fromCharCode(...bytes.subarray(i, i + 6144));
  return btoa(s);
}

export function fromBase64(b64: string): Uint8Array<ArrayBuffer> {
  const s = atob(b64);
  const out = new Uint8Array(new ArrayBuffer(s.length));
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** Equal strings in a time that does not depend on where they differ. */
function sameSecret(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++)
    diff |= (a.charCodeAt(i) || 0) ^ (b.charCodeAt(i) || 0);
  return diff === 0;
}

function newId(deps: BridgeDeps): string {
  const bytes = deps.random ? deps.random(26) : crypto.getRandomValues(new Uint8Array(26));
  let id = "";
  for (const b of bytes) id += B32[b % 32];
  return id;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** POST .../exec: SSE of base64 stdout/stderr chunks, then exit or error. */
async function exec(req: Request, sb: SandboxLike): Promise<Response> {
  let body: { argv?: unknown; timeout_ms?: unknown; cwd?: unknown };
  try {
    body = (await req.json()) as typeof body;
  } catch {
    return errorJson("Invalid JSON body", "invalid_request", 400);
  }
  const argv = body.argv;
  if (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string"))
    return errorJson("argv must be a non-empty array of strings", "invalid_request", 400);
  const opts: ExecOptionsLike = {};
  if (typeof body.timeout_ms === "number") opts.timeout = body.timeout_ms;
  if (typeof body.cwd === "string") {
    const cwd = resolveWorkspacePath(body.cwd);
    if (!cwd)
      return errorJson("cwd must resolve to a location within /workspace", "invalid_request", 403);
    opts.cwd = cwd;
  }
  const command = (argv as string[]).map(shellQuote).join(" ");
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  const writer = writable.getWriter();
  const enc = new TextEncoder();
  let closed = false;
  let last: Promise<void> = Promise.resolve();
  const send = (event: string, data: string) => {
    if (closed) return;
    const lines = data
      .split("\n")
      .map((l) => `data: ${l}`)
      .join("\n");
    last = last.then(() => writer.write(enc.encode(`event: ${event}\n${lines}\n\n`)));
  };
  const close = () => {
    if (closed) return;
    closed = true;
    last.then(() => writer.close()).catch(() => {});
  };
  sb.exec(command, {
    ...opts,
    stream: true,
    onOutput(stream, data) {
      send(stream, toBase64(enc.encode(data)));
    },
    onComplete(result) {
      send("exit", JSON.stringify({ exit_code: result.exitCode }));
      close();
    },
    onError(err) {
      send("error", JSON.stringify({ error: err.message, code: "exec_error" }));
      close();
    },
  }).catch((err) => {
    send("error", JSON.stringify({ error: `exec failed: ${message(err)}`, code: "exec_transport_error" }));
    close();
  });
  return new Response(readable, {
    status: 200,
    headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" },
  });
}

async function readBody(req: Request): Promise<Uint8Array | Response> {
  const len = Number(req.headers.get("Content-Length") || "0");
  if (len > BODY_MAX)
    return errorJson(`payload too large: ${len} bytes exceeds the ${BODY_MAX}-byte limit`, "payload_too_large", 413);
  const bytes = new Uint8Array(await req.arrayBuffer());
  if (bytes.byteLength > BODY_MAX)
    return errorJson(
      `payload too large: ${bytes.byteLength} bytes exceeds the ${BODY_MAX}-byte limit`,
      "payload_too_large",
      413,
    );
  return bytes;
}

async function file(req: Request, sb: SandboxLike, rel: string): Promise<Response> {
  if (!rel) return errorJson("file path must not be empty", "invalid_request", 400);
  const path = resolveWorkspacePath("/" + decodeURIComponent(rel));
  if (!path) return errorJson("path must resolve to a location within /workspace", "invalid_request", 403);
  if (req.method === "GET") {
    try {
      const bytes = fromBase64(await sb.readFileBase64(path));
      return new Response(bytes, { headers: { "Content-Type": "application/octet-stream" } });
    } catch (err) {
      if ((err as { code?: string }).code === "FILE_NOT_FOUND")
        return errorJson(`File not found: ${path}`, "workspace_read_not_found", 404);
      return errorJson(`read failed: ${message(err)}`, "exec_transport_error", 502);
    }
  }
  const body = await readBody(req);
  if (body instanceof Response) return body;
  try {
    await sb.writeFileBase64(path, toBase64(body));
    return json({ ok: true });
  } catch (err) {
    return errorJson(`write failed: ${message(err)}`, "workspace_archive_write_error", 502);
  }
}

async function persist(url: URL, sb: SandboxLike): Promise<Response> {
  const excludes = (url.searchParams.get("excludes") || "").split(",").filter((s) => s);
  if (excludes.some((e) => e.includes("..")))
    return errorJson('exclude paths must not contain ".."', "invalid_request", 400);
  const tmp = `/tmp/sandbox-persist-${Date.now()}.tar`;
  const ex = excludes.map((e) => `--exclude ${shellQuote("./" + e.replace(/^\.\//, ""))}`).join(" ");
  try {
    const r = await sb.exec(`tar cf ${shellQuote(tmp)} ${ex} -C ${shellQuote(WORKSPACE)} .`);
    if (r.exitCode !== 0)
      return errorJson(`tar failed (exit ${r.exitCode}): ${r.stderr}`, "workspace_archive_read_error", 502);
    const bytes = fromBase64(await sb.readFileBase64(tmp));
    await sb.exec(`rm -f ${shellQuote(tmp)}`).catch(() => undefined);
    return new Response(bytes, { headers: { "Content-Type": "application/octet-stream" } });
  } catch (err) {
    return errorJson(`persist failed: ${message(err)}`, "workspace_archive_read_error", 502);
  }
}

/** Unpacks on top of what the workspace holds (sandboxfs empties it first for a restore). */
async function hydrate(req: Request, sb: SandboxLike): Promise<Response> {
  const body = await readBody(req);
  if (body instanceof Response) return body;
  if (body.byteLength === 0) return errorJson("Empty tar payload", "invalid_request", 400);
  const tmp = `/tmp/sandbox-hydrate-${Date.now()}.tar`;
  try {
    await sb.exec(`mkdir -p ${shellQuote(WORKSPACE)}`);
    await sb.writeFileBase64(tmp, toBase64(body));
    const r = await sb.exec(`tar xf ${shellQuote(tmp)} -C ${shellQuote(WORKSPACE)} && rm -f ${shellQuote(tmp)}`);
    if (r.exitCode !== 0)
      return errorJson(`tar extract failed (exit ${r.exitCode}): ${r.stderr}`, "workspace_archive_write_error", 502);
    return json({ ok: true });
  } catch (err) {
    return errorJson(`hydrate failed: ${message(err)}`, "workspace_archive_write_error", 502);
  }
}

async function tunnel(req: Request, sb: SandboxLike, portText: string): Promise<Response> {
  const port = Number(portText);
  if (!Number.isInteger(port) || port < 1 || port > 65535 || port === 3000)
    return errorJson("Invalid port", "invalid_request", 400);
  try {
    if (req.method === "DELETE") {
      await sb.closeTunnel(port);
      return new Response(null, { status: 204 });
    }
    const text = await req.text();
    let name: string | undefined;
    if (text) {
      try {
        const o = JSON.parse(text) as { name?: unknown };
        if (o.name !== undefined && typeof o.name !== "string")
          return errorJson("name must be a string", "invalid_request", 400);
        name = o.name as string | undefined;
      } catch {
        return errorJson("Invalid JSON body", "invalid_request", 400);
      }
    }
    return json(await sb.tunnel(port, name));
  } catch (err) {
    return errorJson(`tunnel failed: ${message(err)}`, "tunnel_error", 502);
  }
}

/** The bridge: one request in, one response out. */
export async function handle(req: Request, deps: BridgeDeps): Promise<Response> {
  const url = new URL(req.url);
  const parts = url.pathname.split("/").filter((p) => p);
  const m = req.method;
  if (m === "GET" && parts.length === 1 && parts[0] === "health") return json({ ok: true });
  if (deps.apiKey) {
    const auth = req.headers.get("Authorization") || "";
    if (!auth.startsWith("Bearer ") || !sameSecret(auth.slice(7), deps.apiKey))
      return errorJson("Unauthorized", "unauthorized", 401);
  }
  if (parts[0] !== "v1" || parts[1] !== "sandbox") return errorJson("Not found", "not_found", 404);
  if (parts.length === 2) {
    if (m !== "POST") return errorJson("Not found", "not_found", 404);
    return json({ id: newId(deps) });
  }
  const id = decodeURIComponent(parts[2]);
  if (!ID_RE.test(id))
    return errorJson(`invalid sandbox id "${id}": ids match ^[a-z2-7]{1,128}$`, "invalid_request", 400);
  const sb = deps.sandbox(id);
  const what = parts[3];
  try {
    if (parts.length === 3 && m === "DELETE") {
      await sb.destroy();
      return new Response(null, { status: 204 });
    }
    if (what === "running" && m === "GET" && parts.length === 4) {
      try {
        await sb.exec("true");
        return json({ running: true, workspace: WORKSPACE });
      } catch {
        return json({ running: false });
      }
    }
    if (what === "exec" && m === "POST" && parts.length === 4) return await exec(req, sb);
    if (what === "file" && (m === "GET" || m === "PUT")) return await file(req, sb, parts.slice(4).join("/"));
    if (what === "persist" && m === "POST" && parts.length === 4) return await persist(url, sb);
    if (what === "hydrate" && m === "POST" && parts.length === 4) return await hydrate(req, sb);
    if (what === "tunnel" && (m === "POST" || m === "DELETE") && parts.length === 5)
      return await tunnel(req, sb, parts[4]);
  } catch (err) {
    const msg = message(err);
    if (msg.includes("instance limit reached")) return errorJson(msg, "capacity_exceeded", 503);
    return errorJson(msg, "exec_transport_error", 502);
  }
  return errorJson("Not found", "not_found", 404);
}
