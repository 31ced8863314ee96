import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { afterAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { idempotencyBucketKey } from "../../shared/bus/idempotency-record.js";
import { describeRemoteTool, remoteTool } from "../../shared/bus/remote-tool.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { ToolInvoker } from "../../shared/tools/invoke.js";
import { McpBridge } from "../../services/mcp/bridge.js";
import { parseServersFile } from "../../services/mcp/config.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { toolCtx } from "../helpers/fixtures.js";
import { REDACTED } from "../../shared/tools/redaction.js";
import { until } from "../helpers/until.js";

const suite = useBusSuite("mcpbridge");

/** The MCP server of the bridge's one connection, whose tools the tests change. */
let server: McpServer | undefined;
let bridge: McpBridge | undefined;
let redacting: McpBridge | undefined;

afterAll(async () => {
  await bridge?.stop();
  await redacting?.stop();
});

/** The tool's descriptor; undefined when nobody serves it (no responder, or no answer). */
const describeTool = (name: string) =>
  describeRemoteTool(name, {
    nc: suite.nc,
    subjects: suite.subjects,
    logger: silentLogger,
    timeoutMs: 500,
  }).catch(() => undefined);

describe("the MCP bridge's tool services follow the server's list", () => {
  it("serves new tools, serves a changed one anew and stops serving a removed one, on list_changed", async () => {
    bridge = new McpBridge(parseServersFile("servers:\n  dyn:\n    command: unused\n", "inline"), {
      service: {
        nc: suite.nc,
        subjects: suite.subjects,
        idempotency: suite.buckets.idempotency,
        invoker: new ToolInvoker({ clock: systemClock, random: systemRandom, policy: { retries: 0 } }),
        clock: systemClock,
        random: systemRandom,
        logger: silentLogger,
      },
      env: {},
      maxOutputBytes: 1_000,
      transport: () => {
        const [client, end] = InMemoryTransport.createLinkedPair();
        server = new McpServer(
          { name: "dyn", version: "1" },
          { capabilities: { tools: { listChanged: true } } },
        );
        server.registerTool(
          "echo",
          { description: "first", inputSchema: { text: z.string() } },
          ({ text }) => ({
            content: [{ type: "text", text }],
          }),
        );
        void server.connect(end);
        return client;
      },
    });
    await bridge.start();
    const echo = await describeTool("dyn_echo");
    expect(echo).toMatchObject({
      description: "first",
      capability: { kind: "mcp", server: "dyn", tool: "echo" },
    });
    const called = await remoteTool(echo!, {
      nc: suite.nc,
      subjects: suite.subjects,
      clock: systemClock,
    }).execute({ text: "hi" }, toolCtx({ kind: "mcp", server: "dyn", tool: "*" }));
    expect(called.output).toEqual({ text: "hi" });

    const added = server?.registerTool("added", { description: "new" }, () => ({ content: [] }));
    await until(async () => (await describeTool("dyn_added")) !== undefined, 5_000, {
      what: "dyn_added served",
    });

    const [registered] = [server?.registerTool("later", {}, () => ({ content: [] }))];
    registered?.update({ description: "changed" });
    await until(async () => (await describeTool("dyn_later"))?.description === "changed", 5_000, {
      what: "dyn_later served anew",
    });

    added?.remove();
    await until(async () => (await describeTool("dyn_added")) === undefined, 5_000, {
      what: "dyn_added no longer served",
    });
    expect(bridge.tools()).toEqual({ dyn: ["dyn_echo", "dyn_later"] });
  }, 30_000);
});

describe("the MCP bridge's redaction", () => {
  it("a tool's `redact` in the servers file is its descriptor's; its answer and its record are redacted by it and by MCP_REDACT_FILE's rules", async () => {
    const file = [
      "servers:",
      "  vault:",
      "    command: unused",
      "    tools:",
      "      open:",
      "        redact: { patterns: ['tok-[a-z0-9]+'] }",
      "",
    ].join("\n");
    redacting = new McpBridge(parseServersFile(file, "inline"), {
      service: {
        nc: suite.nc,
        subjects: suite.subjects,
        idempotency: suite.buckets.idempotency,
        invoker: new ToolInvoker({ clock: systemClock, random: systemRandom, policy: { retries: 0 } }),
        clock: systemClock,
        random: systemRandom,
        logger: silentLogger,
        // What MCP_REDACT_FILE holds.
        redaction: { tools: { "*": { patterns: ["sk-[a-z0-9]+"] } } },
      },
      env: {},
      maxOutputBytes: 1_000,
      transport: () => {
        const [client, end] = InMemoryTransport.createLinkedPair();
        const vault = new McpServer({ name: "vault", version: "1" }, { capabilities: { tools: {} } });
        vault.registerTool("open", { inputSchema: { key: z.string() } }, ({ key }) => ({
          content: [{ type: "text", text: `token tok-abc123 for ${key}` }],
        }));
        void vault.connect(end);
        return client;
      },
    });
    await redacting.start();
    const open = await describeTool("vault_open");
    expect(open?.redact).toEqual({ patterns: ["tok-[a-z0-9]+"] });
    const ctx = toolCtx({ kind: "mcp", server: "vault", tool: "*" });
    const called = await remoteTool(open!, {
      nc: suite.nc,
      subjects: suite.subjects,
      clock: systemClock,
    }).execute({ key: "sk-secret9" }, ctx);
    expect(called.output).toEqual({ text: `token ${REDACTED} for ${REDACTED}` });
    const record = await suite.buckets.idempotency.get(
      idempotencyBucketKey("vault_open", ctx.idempotencyKey),
    );
    const text = new TextDecoder().decode(record?.value);
    expect(text).toContain(REDACTED);
    expect(text).not.toMatch(/tok-abc123|sk-secret9/);
  }, 30_000);
});
