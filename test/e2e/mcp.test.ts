import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { afterAll, describe, expect, it } from "vitest";
import type { CapabilityObject } from "../../shared/contracts/capability.js";
import { ToolDescriptor } from "../../shared/contracts/tool.js";
import { decode } from "../../shared/bus/codec.js";
import { settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { serveMcpOverHttp } from "../helpers/mcp-http.js";

const modulePath = (specifier: string): string => fileURLToPath(import.meta.resolve(specifier));
const FILESYSTEM_SERVER = modulePath("@modelcontextprotocol/server-filesystem/dist/index.js");
const EVERYTHING_SERVER = modulePath("@modelcontextprotocol/server-everything/dist/index.js");

// The filesystem server may touch all of `root`; runs are granted `root/granted` only, so a call
// the bridge let through to a path outside the grant would succeed: its refusal is the bridge's.
const root = await mkdtemp(join(tmpdir(), "mcp-e2e-"));
const granted = join(root, "granted");
await mkdir(granted);
await writeFile(join(root, "secret.txt"), "not for the agent");
await symlink(join(root, "secret.txt"), join(granted, "escape"));
const LONG_TIMEOUT_MS = 1_500;
// server-everything's own server, served over streamable HTTP from this process.
const everything = (await import(
  pathToFileURL(modulePath("@modelcontextprotocol/server-everything/dist/server/index.js")).href
)) as {
  createServer: () => { server: McpServer };
};
// It requires a token, which the bridge takes from its environment (headersFrom), not the file.
const WEB_TOKEN = "Bearer e2e-token-from-the-environment";
const http = await serveMcpOverHttp(everything.createServer, { name: "Authorization", value: WEB_TOKEN });

const serversFile = join(root, "mcp-servers.json");
await writeFile(
  serversFile,
  JSON.stringify({
    servers: {
      fs: {
        command: process.execPath,
        args: [FILESYSTEM_SERVER, root],
        paths: ["path", "paths", "source", "destination"],
        tools: {
          read_text_file: { idempotent: true, reversibility: "pure" },
          write_file: { idempotent: true },
        },
      },
      every: {
        command: process.execPath,
        args: [EVERYTHING_SERVER, "stdio"],
        restart: { initialDelayMs: 1_500, maxDelayMs: 3_000 },
        tools: {
          echo: { idempotent: true, reversibility: "pure" },
          "trigger-long-running-operation": {
            timeoutMs: LONG_TIMEOUT_MS,
            idempotent: true,
            reversibility: "pure",
          },
        },
      },
      web: {
        url: http.url,
        headersFrom: { Authorization: "MCP_WEB_TOKEN" },
        tools: {
          echo: { idempotent: true, reversibility: "pure", redact: { patterns: ["tok-[a-z0-9]+"] } },
        },
      },
      // The same server again, its long-running tool left as undeclared: not idempotent.
      once: {
        command: process.execPath,
        args: [EVERYTHING_SERVER, "stdio"],
        tools: { "trigger-long-running-operation": { timeoutMs: LONG_TIMEOUT_MS } },
      },
    },
  }),
);

// The operators' rules for every tool the bridge serves (MCP_REDACT_FILE).
const redactFile = join(root, "mcp-redact.yaml");
await writeFile(redactFile, 'tools:\n  "*":\n    patterns: ["sk-MCP[a-z0-9]+"]\n');

const suite = useClusterSuite("mcp", {
  actors: [
    { kind: "supervisor" },
    {
      kind: "mcp",
      env: { MCP_SERVERS_FILE: serversFile, MCP_REDACT_FILE: redactFile, MCP_WEB_TOKEN: WEB_TOKEN },
    },
    { kind: "agent", name: "agent-1" },
  ],
  env: { AGENT_RETRY_DELAY_MS: "500" },
});

afterAll(async () => {
  await http.close();
  await rm(root, { recursive: true, force: true });
});

const grant = (server: string, allowedPaths?: string[]): CapabilityObject => ({
  kind: "mcp",
  server,
  tool: "*",
  ...(allowedPaths ? { allowedPaths } : {}),
});

interface Outcome {
  tool: string;
  ok: boolean;
  output?: unknown;
  error?: { code: string; message: string };
}

/** Each tool call of a run, in the order made, with its result or error (from the run's log). */
async function outcomes(runId: string): Promise<Outcome[]> {
  const records = (await suite.wal(runId)).map((r) => r.record);
  return records.flatMap((intent): Outcome[] => {
    if (intent.type !== "INTENT") return [];
    const end = records.find(
      (r) => (r.type === "COMPLETE" || r.type === "ABORT") && r.event.actionId === intent.actionId,
    );
    if (end?.type === "COMPLETE") return [{ tool: intent.tool, ok: true, output: end.event.output }];
    if (end?.type === "ABORT") return [{ tool: intent.tool, ok: false, error: end.event.error }];
    return [{ tool: intent.tool, ok: false }];
  });
}

/** A run whose model makes `calls` in one turn, then answers "done". */
async function runCalls(
  calls: { name: string; input: unknown }[],
  capabilities: CapabilityObject[],
  timeoutMs = 30_000,
): Promise<{ runId: string; status: string; outcomes: Outcome[] }> {
  const { runId } = await suite.client.submit(
    spec({
      script: [{ toolCalls: calls }, { text: "done" }],
      tools: [...new Set(calls.map((c) => c.name))],
      capabilities,
      resources: { maxToolCalls: 50, maxIterations: 10 },
    }),
  );
  const status = await suite.waitFor(runId, settled, timeoutMs);
  return { runId, status: status.status, outcomes: await outcomes(runId) };
}

/** The tools the bridge serves for `server`, from its last "MCP tools served" line for it. */
async function servedTools(server: string): Promise<string[]> {
  const lines = (await suite.log("mcp")).split("\n").filter((l) => l.includes('"msg":"MCP tools served"'));
  const last = lines.reverse().find((l) => l.includes(`"server":"${server}"`));
  return (JSON.parse(last ?? "{}") as { tools?: string[] }).tools ?? [];
}

async function describe_(name: string): Promise<ToolDescriptor> {
  const reply = await suite.bus.nc.request(suite.bus.subjects.toolDescribe(name), "{}", { timeout: 2_000 });
  return decode(ToolDescriptor, reply.data);
}

describe("the MCP bridge on a cluster", () => {
  it("@modelcontextprotocol/server-filesystem: a run writes a file in its grant and reads it back", async () => {
    const note = join(granted, "note.txt");
    const run = await runCalls(
      [
        { name: "fs_write_file", input: { path: note, content: "written through MCP" } },
        { name: "fs_read_text_file", input: { path: note } },
        { name: "fs_list_directory", input: { path: granted } },
      ],
      [grant("fs", [granted])],
    );
    expect(run.status).toBe("committed");
    expect(run.outcomes.map((o) => [o.tool, o.ok])).toEqual([
      ["fs_write_file", true],
      ["fs_read_text_file", true],
      ["fs_list_directory", true],
    ]);
    expect(await readFile(note, "utf8")).toBe("written through MCP");
    expect(run.outcomes[1]?.output).toMatchObject({ text: "written through MCP" });
    expect(run.outcomes[2]?.output).toMatchObject({ text: expect.stringContaining("note.txt") as unknown });
    // Declared by the configuration, not by the server's hints: write_file idempotent, irreversible.
    expect(await describe_("fs_write_file")).toMatchObject({
      capability: { kind: "mcp", server: "fs", tool: "write_file" },
      idempotent: true,
      reversibility: "irreversible",
      inputSchema: { type: "object", required: ["path", "content"] },
    });
    expect(await describe_("fs_move_file")).toMatchObject({
      idempotent: false,
      reversibility: "irreversible",
    });
  }, 60_000);

  it("a path outside the run's grant is refused by the bridge before the server sees it: outside, `..`, a symlink, relative, `~`", async () => {
    const outside = join(root, "secret.txt");
    const planted = join(root, "planted.txt");
    const run = await runCalls(
      [
        { name: "fs_read_text_file", input: { path: outside } },
        { name: "fs_read_text_file", input: { path: `${granted}/../secret.txt` } },
        { name: "fs_read_text_file", input: { path: join(granted, "escape") } },
        { name: "fs_read_text_file", input: { path: "secret.txt" } },
        { name: "fs_read_text_file", input: { path: "~/secret.txt" } },
        { name: "fs_read_multiple_files", input: { paths: [join(granted, "note.txt"), outside] } },
        { name: "fs_write_file", input: { path: planted, content: "planted" } },
        { name: "fs_move_file", input: { source: join(granted, "note.txt"), destination: planted } },
      ],
      [grant("fs", [granted])],
    );
    expect(run.status).toBe("committed");
    for (const outcome of run.outcomes) {
      expect(outcome, JSON.stringify(outcome)).toMatchObject({
        ok: false,
        error: {
          code: "PATH_NOT_ALLOWED",
          message: expect.stringMatching(
            /outside the granted paths|is relative|'~' is not expanded/,
          ) as unknown,
        },
      });
    }
    expect(run.outcomes).toHaveLength(8);
    expect(existsSync(planted)).toBe(false);
    // The bridge's refusal crosses the bus with its code, and the worker audits it as the file
    // tools' are: tool.denied with the reason, not tool.aborted.
    const audit = await suite.audit(run.runId);
    const denied = audit.filter((e) => e.kind === "tool.denied");
    expect(denied.map((e) => [e.actor, e.data?.["code"]])).toEqual(
      run.outcomes.map((o) => [`tool:${o.tool}`, "PATH_NOT_ALLOWED"]),
    );
    expect(denied[2]?.reason).toMatch(/escape' leads to '.*secret\.txt', outside the granted paths/);
    expect(audit.filter((e) => e.kind === "tool.aborted")).toEqual([]);
    // The server itself would have read it: the file is within the directory it was given.
    const ungranted = await runCalls(
      [{ name: "fs_read_text_file", input: { path: outside } }],
      [grant("fs")],
    );
    expect(ungranted.outcomes[0]).toMatchObject({
      ok: false,
      error: { code: "PATH_NOT_ALLOWED", message: expect.stringContaining("needs allowedPaths") as unknown },
    });
    const anywhere = await runCalls(
      [{ name: "fs_read_text_file", input: { path: outside } }],
      [grant("fs", ["*"])],
    );
    expect(anywhere.outcomes[0], JSON.stringify(await suite.wal(anywhere.runId))).toMatchObject({
      ok: true,
      output: { text: "not for the agent" },
    });
  }, 60_000);

  it("@modelcontextprotocol/server-everything: every tool it lists is callable with arguments made from its schema", async () => {
    const names = await servedTools("every");
    // Its own tools, and the ones it registers once a client is connected (served after list_changed).
    expect(names).toEqual(
      expect.arrayContaining([
        "every_echo",
        "every_get-sum",
        "every_get-env",
        "every_simulate-research-query",
      ]),
    );
    const calls = await Promise.all(
      names.map(async (name) => {
        const { inputSchema } = await describe_(name);
        return { name, input: { ...sampleArguments(inputSchema), ...EVERYTHING_ARGUMENTS[name] } };
      }),
    );
    const run = await runCalls(calls, [grant("every")], 60_000);
    expect(run.status).toBe("committed");
    expect(run.outcomes.map((o) => o.tool)).toEqual(names);
    for (const outcome of run.outcomes) expect(outcome, JSON.stringify(outcome)).toMatchObject({ ok: true });
    const output = (tool: string): string =>
      JSON.stringify(run.outcomes.find((o) => o.tool === tool)?.output);
    expect(output("every_get-sum")).toContain("The sum of 2 and 2 is 4");
    expect(output("every_simulate-research-query")).toContain("Research Report");
    // Images are described, their bytes left out of the run's log.
    expect(output("every_get-tiny-image")).toMatch(/"type":"image","mimeType":"image\/png","bytes":\d+/);
    // A stdio server gets the environment its configuration gives, never the bridge's own.
    expect(output("every_get-env")).toContain("PATH");
    expect(output("every_get-env")).not.toContain("AGENTS_PREFIX");
    expect(output("every_get-env")).not.toContain("NATS_URL");
  }, 90_000);

  it("a streamable HTTP server: its tools are served and called like a stdio server's, with a token from the environment", async () => {
    const run = await runCalls(
      [
        { name: "web_echo", input: { message: "over HTTP" } },
        { name: "web_get-sum", input: { a: 40, b: 2 } },
      ],
      [grant("web")],
    );
    expect(run.status).toBe("committed");
    expect(run.outcomes).toMatchObject([
      { ok: true, output: { text: "Echo: over HTTP" } },
      { ok: true, output: { text: expect.stringContaining("is 42") as unknown } },
    ]);
    expect(http.sessions()).toBe(1);
    expect(http.refused()).toBe(0);
    expect(await readFile(serversFile, "utf8")).not.toContain(WEB_TOKEN);
    // The grant names the server: another server's grant does not reach it.
    const other = await runCalls([{ name: "web_echo", input: { message: "x" } }], [grant("every")]);
    expect(other.outcomes).toEqual([]);
    expect((await suite.audit(other.runId)).find((e) => e.kind === "tool.denied")).toMatchObject({
      data: { code: "CAPABILITY_DENIED" },
    });
  }, 60_000);

  it("redaction: a tool's `redact` from the servers file is its descriptor's, and what the bridge answers is redacted by it and by MCP_REDACT_FILE", async () => {
    expect((await describe_("web_echo")).redact).toEqual({ patterns: ["tok-[a-z0-9]+"] });
    const run = await runCalls(
      [{ name: "web_echo", input: { message: "tok-abc123 sk-MCPxyz9" } }],
      [grant("web")],
    );
    expect(run.status).toBe("committed");
    expect(run.outcomes).toEqual([
      { tool: "web_echo", ok: true, output: { text: "Echo: [REDACTED] [REDACTED]" } },
    ]);
    // The worker knows the descriptor's rule, so the input the log keeps is redacted by it too.
    const notes = (await suite.audit(run.runId)).filter((e) => e.kind === "tool.redacted").map((e) => e.data);
    expect(notes).toEqual([
      expect.objectContaining({ tool: "web_echo", field: "input", patterns: ["tok-[a-z0-9]+"] }),
    ]);
  }, 60_000);

  it("a long-running tool honours its timeout: an idempotent one fails TOOL_TIMEOUT and the run goes on; one that is not halts its run for reconciliation", async () => {
    const started = Date.now();
    const run = await runCalls(
      [{ name: "every_trigger-long-running-operation", input: { duration: 30, steps: 30 } }],
      [grant("every")],
    );
    expect(run.status).toBe("committed");
    expect(run.outcomes[0]).toMatchObject({ ok: false, error: { code: "TOOL_TIMEOUT" } });
    // Three attempts (the worker's retries) of LONG_TIMEOUT_MS each, not one of 30 s.
    expect(Date.now() - started).toBeLessThan(20_000);

    const { runId } = await suite.client.submit(
      spec({
        script: [
          {
            toolCalls: [{ name: "once_trigger-long-running-operation", input: { duration: 30, steps: 30 } }],
          },
          { text: "done" },
        ],
        tools: ["once_trigger-long-running-operation"],
        capabilities: [grant("once")],
      }),
    );
    expect(await suite.waitFor(runId, settled, 30_000)).toMatchObject({
      status: "halted",
      terminal: {
        reason: expect.stringMatching(
          /^RECONCILIATION_REQUIRED: .*once_trigger-long-running-operation/,
        ) as unknown,
      },
    });
  }, 60_000);

  it("a server killed with SIGKILL is restarted with backoff, and a call made meanwhile waits for it and succeeds", async () => {
    const pid = await serverPid("every");
    process.kill(pid, "SIGKILL");
    const run = await runCalls(
      [{ name: "every_echo", input: { message: "after the crash" } }],
      [grant("every")],
    );
    expect(run.status).toBe("committed");
    expect(run.outcomes[0]).toMatchObject({ ok: true, output: { text: "Echo: after the crash" } });
    expect(await serverPid("every")).not.toBe(pid);
    expect(await suite.log("mcp")).toMatch(/"server":"every".*"msg":"MCP server is down: restarting it"/);
  }, 60_000);
  it("a servers file with a wrong field stops the bridge at its start with INVALID_INPUT naming the field", async () => {
    const bad = join(root, "bad.yaml");
    await writeFile(bad, "servers:\n  fs:\n    command: node\n    timeoutMs: soon\n");
    await expect(suite.cluster.start("mcp", "mcp-refused", { MCP_SERVERS_FILE: bad })).rejects.toThrow(
      /exited with code 1 before it was ready:[\s\S]*"code":"INVALID_INPUT"[\s\S]*MCP_SERVERS_FILE [^ ]*bad\.yaml: servers\.fs\.timeoutMs: /,
    );
  }, 30_000);
});

/** Arguments for `every_*` tools whose sample values would not do: no network, no long wait. */
const EVERYTHING_ARGUMENTS: Record<string, Record<string, unknown>> = {
  "every_get-sum": { a: 2, b: 2 },
  "every_gzip-file-as-resource": { data: "data:text/plain;base64,aGVsbG8=", outputType: "resource" },
  "every_trigger-long-running-operation": { duration: 0.2, steps: 2 },
};

/** Arguments valid against a tool's JSON Schema: each required property with a value of its type. */
function sampleArguments(schema: Record<string, unknown>): Record<string, unknown> {
  const properties = (schema.properties ?? {}) as Record<string, { type?: string; enum?: unknown[] }>;
  const required = (schema.required ?? []) as string[];
  const sample = (p: { type?: string; enum?: unknown[] }): unknown => {
    if (p.enum) return p.enum[0];
    return { string: "hello", number: 1, integer: 1, boolean: false, array: [], object: {} }[
      p.type ?? "string"
    ];
  };
  return Object.fromEntries(required.map((name) => [name, sample(properties[name] ?? {})]));
}

/** The process id of a stdio server, from the bridge's last "MCP server connected" line for it. */
async function serverPid(server: string): Promise<number> {
  const lines = (await suite.log("mcp"))
    .split("\n")
    .filter((l) => l.includes('"msg":"MCP server connected"'));
  const last = lines.reverse().find((l) => l.includes(`"server":"${server}"`));
  return (JSON.parse(last ?? "{}") as { pid: number }).pid;
}
