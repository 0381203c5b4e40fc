/**
 * The Worker: the bridge (bridge.ts) bound to @cloudflare/sandbox's Durable
 * Object.  Deploy with wrangler (docs/cloudflare.md); set the bearer key
 * with `wrangler secret put SANDBOX_API_KEY`.
 */
import { getSandbox, Sandbox } from "@cloudflare/sandbox";

import { handle, type SandboxLike } from "./bridge.js";

export { Sandbox };

interface Env {
  Sandbox: DurableObjectNamespace<Sandbox>;
  SANDBOX_API_KEY?: string;
  /** How long an idle sandbox stays up, e.g. "10m" (the SDK's sleepAfter). */
  SLEEP_AFTER?: string;
}

function bind(env: Env, id: string): SandboxLike {
  const sb = getSandbox(env.Sandbox, id, env.SLEEP_AFTER ? { sleepAfter: env.SLEEP_AFTER } : {});
  return {
    exec: (command, options) => sb.exec(command, options),
    async readFileBase64(path) {
      return (await sb.readFile(path, { encoding: "base64" })).content;
    },
    async writeFileBase64(path, base64) {
      await sb.writeFile(path, base64, { encoding: "base64" });
    },
    destroy: () => sb.destroy(),
    tunnel: (port, name) => sb.tunnels.get(port, name ? { name } : undefined),
    closeTunnel: (port) => sb.tunnels.destroy(port),
  };
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    return handle(request, { apiKey: env.SANDBOX_API_KEY, sandbox: (id) => bind(env, id) });
  },
} satisfies ExportedHandler<Env>;
