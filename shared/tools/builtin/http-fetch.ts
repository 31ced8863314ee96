import { z } from "zod";
import { AgentError } from "../../runtime/errors.js";
import { assertHostAllowed } from "../capabilities.js";
import { defineTool, type ToolContext } from "../tool.js";

export const HttpFetchInput = z.object({
  url: z.url(),
  method: z.enum(["GET", "HEAD"]).default("GET"),
  headers: z.record(z.string(), z.string()).optional(),
});
export type HttpFetchInput = z.infer<typeof HttpFetchInput>;

export interface HttpFetchOutput {
  status: number;
  url: string;
  contentType: string | null;
  body: string;
}

export const MAX_REDIRECTS = 5;
export const MAX_BODY_BYTES = 256 * 1024;

function allowedHostsOf(ctx: ToolContext): readonly string[] {
  return ctx.granted.kind === "network" ? ctx.granted.allowedHosts : [];
}

/**
 * GET or HEAD a URL. Redirects are followed by hand so that every hop's host is checked against
 * the agent's `allowedHosts`: a permitted host cannot bounce the request somewhere that is not.
 */
export const httpFetchTool = defineTool({
  name: "http_fetch",
  description:
    "Fetches a URL over HTTP(S) (GET or HEAD) from an allowed host and returns status and body text.",
  input: HttpFetchInput,
  capability: { kind: "network" },
  reversibility: "pure",
  idempotent: true,
  execute: async (input, ctx) => {
    const allowed = allowedHostsOf(ctx);
    let url = new URL(input.url);
    for (let hop = 0; hop <= MAX_REDIRECTS; hop++) {
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        throw new AgentError("INVALID_INPUT", `unsupported URL scheme '${url.protocol}'`);
      }
      assertHostAllowed(allowed, url);
      const response = await fetch(url, {
        method: input.method,
        redirect: "manual",
        signal: ctx.signal,
        ...(input.headers ? { headers: input.headers } : {}),
      });
      const location = response.headers.get("location");
      if (response.status >= 300 && response.status < 400 && location) {
        await response.body?.cancel();
        url = new URL(location, url);
        continue;
      }
      const body = input.method === "HEAD" ? "" : await readCapped(response);
      return {
        output: {
          status: response.status,
          url: url.toString(),
          contentType: response.headers.get("content-type"),
          body,
        },
      };
    }
    throw new AgentError("TOOL_FAILED", `more than ${MAX_REDIRECTS} redirects`);
  },
});

/** Reads at most MAX_BODY_BYTES and drops the rest unread, so a huge response cannot exhaust memory. */
async function readCapped(response: Response): Promise<string> {
  if (!response.body) return "";
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  while (size < MAX_BODY_BYTES) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.byteLength;
  }
  await reader.cancel();
  return Buffer.concat(chunks).subarray(0, MAX_BODY_BYTES).toString("utf8");
}
