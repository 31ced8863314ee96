import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { RunSpecInput } from "../../shared/contracts/run-spec.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { REDACTED } from "../../shared/tools/redaction.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { defineTool } from "../../shared/tools/tool.js";
import { specOf } from "../../services/agent/spec-of.js";
import { spec } from "../helpers/fixtures.js";
import { json, startServer, type RecordedRequest } from "../helpers/http-server.js";
import { agentctlOf, settled, useClusterSuite } from "../helpers/cluster-suite.js";

/** The secrets: an API key the model puts in two tools' inputs, a token the vault answers. */
const SECRET = `sk-MARKER${Math.random().toString(36).slice(2)}Zq`;
const TOKEN = `tok-${Math.random().toString(36).slice(2)}-MARKER`;

/** The operators' rules: every tool's strings that look like such a key. */
const rulesDir = mkdtempSync(join(tmpdir(), "redaction-"));
const REDACT_FILE = join(rulesDir, "redact.yaml");
writeFileSync(REDACT_FILE, 'tools:\n  "*":\n    patterns: ["sk-MARKER[A-Za-z0-9]+"]\n');

const suite = useClusterSuite("redaction", {
  actors: [{ kind: "supervisor" }, { kind: "agent", name: "agent-1" }, { kind: "agent", name: "agent-2" }],
  env: { OPENAI_API_KEY: "", AGENT_REDACT_FILE: REDACT_FILE, AGENT_RETRY_DELAY_MS: "500" },
});

/**
 * A non-idempotent tool served here whose own descriptor redacts its key and its token; it takes
 * `delayMs`, long enough to kill the worker that called it. It records the keys it was given.
 */
function serveVault(delayMs: number) {
  const received: string[] = [];
  let onStart: () => void = () => undefined;
  const started = new Promise<void>((resolve) => (onStart = resolve));
  suite.serveTool(
    defineTool({
      name: "vault",
      description: "Opens the vault with an API key; answers a session token.",
      input: z.object({ apiKey: z.string(), query: z.string() }),
      capability: { kind: "compute" },
      reversibility: "irreversible",
      idempotent: false,
      redact: { paths: ["input.apiKey", "output.token"] },
      execute: async (input) => {
        received.push(input.apiKey);
        onStart();
        await systemClock.sleep(delayMs);
        return { output: { token: TOKEN, rows: 2 } };
      },
    }),
  );
  return { received, started };
}

interface Chat {
  messages: { role: string; content?: string | null }[];
}

/**
 * An OpenAI-compatible model: first it calls the vault and echo with the key, then it answers
 * with what it was shown of their results.
 */
async function serveModel() {
  return startServer((req: RecordedRequest, res) => {
    const chat = JSON.parse(req.body) as Chat;
    const reply = (message: Record<string, unknown>, finish: string) =>
      json(res, 200, {
        id: `chatcmpl-${chat.messages.length}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: "local",
        choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish }],
        usage: { prompt_tokens: 50, completion_tokens: 10, total_tokens: 60 },
      });
    const results = chat.messages.filter((m) => m.role === "tool").map((m) => m.content ?? "");
    if (results.length > 0) {
      reply({ content: `done: ${results.join(" | ")}` }, "stop");
      return;
    }
    const call = (id: string, name: string, input: unknown) => ({
      id,
      index: 0,
      type: "function",
      function: { name, arguments: JSON.stringify(input) },
    });
    reply(
      {
        content: "",
        tool_calls: [
          call("call_vault", "vault", { apiKey: SECRET, query: "balance" }),
          call("call_echo", "echo", { text: `the key is ${SECRET}` }),
        ],
      },
      "tool_calls",
    );
  });
}

function runSpec(baseUrl: string): RunSpecInput {
  return {
    schemaVersion: 1,
    task: { prompt: "Open the vault, then echo the key.", verifiers: [{ kind: "nonEmpty" }] },
    agent: {
      name: "redaction",
      model: { provider: "openai", model: "local", baseUrl: `${baseUrl}/v1` },
      tools: ["vault", "echo"],
      capabilities: ["compute"],
      resources: { maxIterations: 6, maxToolCalls: 6 },
    },
  };
}

/** Every message of every stream the cluster has (the run log, the work queue, every bucket), as text. */
async function everyStoredMessage(): Promise<{ stream: string; seq: number; text: string }[]> {
  const { jsm, subjects } = suite.bus;
  const found: { stream: string; seq: number; text: string }[] = [];
  for (const { name } of subjects.stores()) {
    const info = await jsm.streams.info(name).catch(() => undefined);
    if (!info || info.state.messages === 0) continue;
    for (let seq = info.state.first_seq; seq <= info.state.last_seq; seq++) {
      const msg = await jsm.streams.getMessage(name, { seq }).catch(() => undefined);
      if (!msg) continue;
      const headers = [...(msg.header?.keys() ?? [])].map((k) => `${k}: ${msg.header?.get(k)}`).join("\n");
      found.push({
        stream: name,
        seq,
        text: `${msg.subject}\n${headers}\n${new TextDecoder().decode(msg.data)}`,
      });
    }
  }
  return found;
}

describe("redaction: secrets a tool handles stay out of the run log", () => {
  it("a run whose tool input and output carry a secret commits, across a kill -9 mid-call, replays identically, and no stored message holds it", async () => {
    await using model = await serveModel();
    const vault = serveVault(1_500);
    const { runId } = await suite.client.submit(runSpec(model.url));

    // The worker that sent the vault its call dies while the call runs: the other takes the run
    // over from the log, where the key and the token are redacted.
    await vault.started;
    const holder = await suite.lastWriter(runId);
    expect(holder).toMatch(/^agent-\d$/);
    suite.cluster.signal(holder as string, "SIGKILL");

    const status = await suite.waitFor(runId, settled, 30_000);
    expect(status.status).toBe("committed");
    // The vault ran once, with the key the model gave; its answer came from its record.
    expect(vault.received).toEqual([SECRET]);
    expect(status.terminal?.output).toContain(`"token":"${REDACTED}"`);

    const events = await suite.audit(runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(1);
    // Audited: which rules fired on which call, never the values.
    const redactions = events.filter((e) => e.kind === "tool.redacted").map((e) => e.data);
    expect(redactions).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          tool: "vault",
          field: "input",
          callId: "call_vault",
          paths: ["input.apiKey"],
        }),
        expect.objectContaining({ tool: "echo", field: "input", patterns: ["sk-MARKER[A-Za-z0-9]+"] }),
        expect.objectContaining({ tool: "vault", field: "output", paths: ["output.token"] }),
      ]),
    );
    // The echo call's key, kept outside the log by the killed worker, was sent by its successor.
    expect(events.filter((e) => e.kind === "tool.aborted")).toEqual([]);
    expect(events.filter((e) => e.kind === "tool.completed").map((e) => e.actor)).toEqual(
      expect.arrayContaining(["tool:vault", "tool:echo"]),
    );

    // The model was never shown the token, nor (after the takeover) the key.
    const bodies = model.requests.map((r) => r.body);
    expect(bodies.length).toBeGreaterThanOrEqual(2);
    for (const body of bodies.slice(1)) {
      expect(body).not.toContain(TOKEN);
      expect(body).not.toContain(SECRET);
    }

    // Every message the server stores: the run's log read whole, the status, every bucket (the
    // redacted inputs' too: each call answered, its input is gone).
    const stored = await everyStoredMessage();
    const log = stored.filter((m) => m.stream === suite.bus.subjects.streams().log);
    expect(log.filter((m) => m.text.includes(runId)).length).toBeGreaterThan(3);
    expect(stored.some((m) => m.text.includes(REDACTED) && m.stream.includes("idempotency"))).toBe(true);
    const leaks = stored.filter((m) => m.text.includes(SECRET) || m.text.includes(TOKEN));
    expect(leaks.map((m) => `${m.stream}#${m.seq}`)).toEqual([]);

    // The log replays as it ran, with nothing but the redacted values.
    expect((await agentctlOf(suite).run("replay", runId)).stdout).toMatch(
      /transitions reproduced identically/,
    );

    await suite.cluster.start("agent", `${holder}b`);
  }, 60_000);

  it("a spawned child starts with the prompt the parent's model gave, not the one its log keeps redacted", async () => {
    const key = `sk-MARKER${Math.random().toString(36).slice(2)}Sp`;
    const child = `child-${Date.now().toString(36)}`;
    const childSpec = {
      ...spec({ name: "child", prompt: `use ${key}`, script: [{ text: "child done" }] }),
      runId: child,
    };
    const { runId } = await suite.client.submit(
      spec({
        name: "spawner",
        script: [
          { toolCalls: [{ name: "spawn_agent", input: { runs: [childSpec] } }] },
          { text: "parent done" },
        ],
        tools: ["spawn_agent", "echo"],
        capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
      }),
    );
    expect((await suite.waitFor(runId, settled, 30_000)).status).toBe("committed");
    expect(specOf((await suite.wal(child)).map((r) => r.record))?.task.prompt).toBe(`use ${key}`);
    const notes = (await suite.audit(runId)).filter((e) => e.kind === "tool.redacted").map((e) => e.data);
    expect(notes).toEqual([expect.objectContaining({ tool: "spawn_agent", field: "input" })]);
  }, 60_000);

  it("a call held for approval whose input was redacted runs, once approved, with the model's input", async () => {
    const card = `4111-${Math.random().toString(36).slice(2)}`;
    const { charged, served } = servePay();
    const { runId } = await suite.client.submit(
      spec({
        name: "payer",
        script: [{ toolCalls: [{ name: "pay", input: { card, amount: 5 } }] }, { text: "paid" }],
        tools: ["pay"],
      }),
    );
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval", 20_000);
    await suite.client.decide(runId, { decision: "approve", by: "alice" });
    expect((await suite.waitFor(runId, settled, 30_000)).status).toBe("committed");
    expect(charged).toEqual([card]);
    const events = await suite.audit(runId);
    expect(events.find((e) => e.kind === "tool.completed" && e.actor === "tool:pay")).toBeDefined();
    expect(events.filter((e) => e.kind === "tool.aborted").map((e) => e.reason)).toEqual([
      expect.stringMatching(/APPROVAL_REQUIRED/),
    ]);
    served.stop();
  }, 60_000);

  it("a call held for approval whose input was redacted, rejected, leaves no kept input once the run ends", async () => {
    const card = `4111-${Math.random().toString(36).slice(2)}`;
    const { charged, served } = servePay();
    const { runId } = await suite.client.submit(
      spec({
        name: "refused-payer",
        script: [{ toolCalls: [{ name: "pay", input: { card, amount: 7 } }] }, { text: "not paid" }],
        tools: ["pay"],
      }),
    );
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval", 20_000);
    const bucket = suite.bus.buckets.redactedInputs;
    const keptKeys = async () => {
      const keys: string[] = [];
      for await (const key of await bucket.keys(`${runId}.>`)) keys.push(key);
      return keys;
    };
    // Kept while a human decides: an approval makes the call again with the model's input.
    expect(await keptKeys()).toHaveLength(1);
    await suite.client.decide(runId, { decision: "reject", by: "alice", reason: "no" });
    await suite.waitFor(runId, settled, 30_000);
    expect(charged).toEqual([]);
    expect(await keptKeys()).toEqual([]);
    served.stop();
  }, 60_000);
});

/** A tool paying with a card (kept out of the log) once a human approves the payment. */
function servePay() {
  const charged: string[] = [];
  const served = suite.serveTool(
    defineTool({
      name: "pay",
      description: "Pays with a card once a human approves it.",
      input: z.object({ card: z.string(), amount: z.number() }),
      capability: { kind: "compute" },
      reversibility: "irreversible",
      idempotent: false,
      redact: { paths: ["input.card"] },
      execute: (input, ctx) => {
        if (ctx.approval?.token !== "pay-1")
          throw new AgentError("APPROVAL_REQUIRED", "a payment needs a human", {
            details: { token: "pay-1", reason: `pay ${input.amount}` },
          });
        charged.push(input.card);
        return Promise.resolve({ output: { paid: input.amount } });
      },
    }),
  );
  return { charged, served };
}
