import { describe, expect, it } from "vitest";
import { z } from "zod";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { startRun, transition } from "../../shared/loop/fsm.js";
import { replay } from "../../shared/loop/replay.js";
import type { LoopConfig, Transition } from "../../shared/loop/state.js";
import { defineTool, describeTool } from "../../shared/tools/tool.js";
import { REDACTED } from "../../shared/tools/redaction.js";
import { LeaseRedaction } from "../../services/agent/redaction.js";
import type { RedactedInputs } from "../../shared/bus/redacted-inputs.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { spec } from "../helpers/fixtures.js";

const SECRET = "sk-MARKERabcdef123456";
const TOKEN = "tok-MARKER-987654";

/** A tool whose key and token its descriptor keeps out of the log. */
const vault = defineTool({
  name: "vault",
  description: "Opens the vault with a key; answers a session token.",
  input: z.object({ apiKey: z.string(), query: z.string() }),
  capability: { kind: "compute" },
  reversibility: "irreversible",
  idempotent: false,
  redact: { paths: ["input.apiKey", "output.token"] },
  execute: () => Promise.resolve({ output: { token: TOKEN, rows: 2 } }),
});
const config: LoopConfig = { tools: [describeTool(vault)] };
const runSpec = RunSpec.parse(spec({ tools: ["vault"] }));

/**
 * Drives a run as a worker's lease does: every event from outside through the lease's redaction
 * before the loop sees it, every call sent with the input the redaction gives back.
 */
async function drive(
  redaction: LeaseRedaction,
  input: unknown = { apiKey: SECRET, query: "balance" },
  kept?: (callId: string) => void,
  log = silentLogger,
  /** How many model turns ask for the vault call, each under the same call id. */
  turns = 1,
): Promise<{ records: WalRecord[]; audits: AuditEvent[]; sent: unknown[] }> {
  redaction.use(config.tools);
  const records: WalRecord[] = [];
  const audits: AuditEvent[] = [];
  const sent: unknown[] = [];
  const take = (t: Transition): Transition => {
    for (const e of t.effects) {
      if (e.type === "wal") records.push(e.record);
      if (e.type === "audit") audits.push(e.event);
    }
    return t;
  };
  let t = take(
    startRun({ type: "start", at: 1, spec: runSpec, runId: "r1", rootRunId: "r1", depth: 0 }, config),
  );
  let answers = 0;
  for (let i = 0; i < 20 && t.state.status === "running"; i++) {
    const awaiting = t.effects.find((e) => !["wal", "audit", "storeMemory"].includes(e.type));
    let event: LoopEvent;
    if (awaiting?.type === "recallMemory") event = { type: "memoryRecalled", at: 2, memories: [] };
    else if (awaiting?.type === "callModel") {
      answers += 1;
      const toolCalls = answers <= turns ? [{ id: "c1", name: "vault", input }] : [];
      event = {
        type: "modelResponded",
        at: 3,
        requestId: awaiting.requestId,
        response: {
          text: toolCalls.length > 0 ? "" : "the balance is 2 rows",
          toolCalls,
          stopReason: toolCalls.length > 0 ? "toolUse" : "endTurn",
          usage: { inputTokens: 1, outputTokens: 1 },
          costUsd: 0,
          model: "m",
        },
      };
    } else if (awaiting?.type === "callTool") {
      kept?.(awaiting.actionId);
      sent.push(await redaction.input(awaiting, t.state));
      event = {
        type: "toolCompleted",
        at: 4,
        actionId: awaiting.actionId,
        output: { token: TOKEN, rows: 2 },
      };
    } else throw new Error(`unexpected effect ${awaiting?.type}`);
    const next = transition(t.state, redaction.event(t.state, event), config);
    await redaction.flush();
    redaction.recorded(next.state);
    await redaction.durable(() => log);
    t = take(next);
  }
  expect(t.state.status).toBe("committed");
  return { records, audits, sent };
}

describe("redaction in the loop (a worker's lease)", () => {
  it("the tool gets the model's input, the log and the state hold neither secret, and the redaction is audited", async () => {
    const { records, audits, sent } = await drive(new LeaseRedaction(undefined));
    expect(sent).toEqual([{ apiKey: SECRET, query: "balance" }]);
    const logged = JSON.stringify({ records, audits });
    expect(logged).not.toContain("MARKER");
    expect(logged).toContain(REDACTED);
    const redacted = audits.filter((e) => e.kind === "tool.redacted");
    expect(redacted.map((e) => e.data)).toEqual([
      { tool: "vault", field: "input", callId: "c1", paths: ["input.apiKey"], patterns: [] },
      { tool: "vault", field: "output", actionId: "act-1", paths: ["output.token"], patterns: [] },
    ]);
    expect(audits.map((e) => e.seq)).toEqual(audits.map((_, i) => i + 1));
  });

  it("a replay from the redacted log reproduces every record and audit event", async () => {
    const { records, audits } = await drive(new LeaseRedaction(undefined));
    const replayed = replay(records, config);
    expect(replayed.state.status).toBe("committed");
    expect(replayed.audits).toEqual(audits);
  });

  it("operators' patterns apply on top of the tool's own paths", async () => {
    const redaction = new LeaseRedaction({ tools: { "*": { patterns: ["bal\\w+"] } } });
    const { audits, sent } = await drive(redaction);
    expect(sent).toEqual([{ apiKey: SECRET, query: "balance" }]);
    const notes = audits.filter((e) => e.kind === "tool.redacted").map((e) => e.data);
    expect(notes).toMatchObject([{ paths: ["input.apiKey"], patterns: ["bal\\w+"] }, { patterns: [] }]);
  });

  it("a lease that never had a redacted input does not send the call with the redacted text", async () => {
    const { records } = await drive(new LeaseRedaction(undefined));
    // The run as a worker taking it over rebuilds it, up to the tool call its INTENT announced.
    const upToIntent = records.slice(0, records.findIndex((r) => r.type === "INTENT") + 1);
    const state = replay(upToIntent, config).state;
    const effect = state.awaiting;
    if (effect?.type !== "callTool") throw new Error("expected the run to wait on its tool call");
    expect(effect.input).toEqual({ apiKey: REDACTED, query: "balance" });
    const successor = new LeaseRedaction(undefined);
    successor.use(config.tools);
    await expect(successor.input(effect, state)).rejects.toMatchObject({ code: "REDACTED_INPUT_LOST" });
  });

  it("a job's event is redacted whatever notes it carries, and notes it forged are not recorded", async () => {
    const { records } = await drive(new LeaseRedaction(undefined));
    const upToIntent = records.slice(0, records.findIndex((r) => r.type === "INTENT") + 1);
    const waiting = replay(upToIntent, config).state;
    const halted = transition(waiting, { type: "halt", at: 5, reason: "stop", by: "ops" }, config).state;
    const lease = new LeaseRedaction(undefined);
    lease.use(config.tools);
    const forged = [{ tool: "vault", field: "output" as const, actionId: "act-1", paths: [], patterns: [] }];
    const resume: LoopEvent = {
      type: "resume",
      at: 6,
      by: "ops",
      settle: { decision: "ran", output: { token: TOKEN, rows: 2 } },
      redactions: [],
    };
    const redacted = lease.event(halted, resume);
    expect(JSON.stringify(redacted)).not.toContain(TOKEN);
    expect(redacted).toMatchObject({ redactions: [{ actionId: "act-1", paths: ["output.token"] }] });
    // Redacted once by this lease, an event is left as it is (its notes are the lease's own).
    expect(lease.event(halted, redacted)).toBe(redacted);
    const nothing: LoopEvent = { type: "resume", at: 6, by: "ops", redactions: forged };
    expect(lease.event(halted, nothing)).toEqual({ type: "resume", at: 6, by: "ops" });
    const audits = transition(halted, lease.event(halted, nothing), config).effects;
    expect(audits.some((e) => e.type === "audit" && e.event.kind === "tool.redacted")).toBe(false);
  });

  it("a lease taking the run over (a crash, a drain, an approval) sends the input the first lease kept outside the log, forgotten once the call is answered", async () => {
    const store = memoryStore();
    // What the bucket held when the call was sent: its INTENT written, the lease could stop there.
    let atCall = new Map<string, unknown>();
    const { records } = await drive(new LeaseRedaction(undefined, store), undefined, () => {
      atCall = new Map(store.entries);
    });
    expect(atCall).toEqual(new Map([["1:c1", { apiKey: SECRET, query: "balance" }]]));
    expect(store.entries.size).toBe(0);
    // A successor rebuilds the run from the log up to the INTENT, the bucket as it was then.
    const upToIntent = records.slice(0, records.findIndex((r) => r.type === "INTENT") + 1);
    const state = replay(upToIntent, config).state;
    const effect = state.awaiting;
    if (effect?.type !== "callTool") throw new Error("expected the run to wait on its tool call");
    const kept = memoryStore(atCall);
    const successor = new LeaseRedaction(undefined, kept);
    successor.use(config.tools);
    successor.learn(upToIntent);
    expect(await successor.input(effect, state)).toEqual({ apiKey: SECRET, query: "balance" });
    const answered = successor.event(state, {
      type: "toolCompleted",
      at: 9,
      actionId: effect.actionId,
      output: { rows: 1 },
    });
    const next = transition(state, answered, config);
    // The answer is not durable yet (it may ride with the next step's records): the input stays.
    await successor.flush();
    successor.recorded(next.state);
    expect(kept.entries.size).toBe(1);
    await successor.durable(() => silentLogger);
    expect(kept.entries.size).toBe(0);
  });

  it("a lease whose answer's record never became durable leaves the kept input to the lease that sends the call again", async () => {
    const store = memoryStore();
    const lease = new LeaseRedaction(undefined, store);
    const intent = await toIntent(lease);
    const answer: LoopEvent = {
      type: "toolCompleted",
      at: 4,
      actionId: intent.actionId,
      output: { rows: 1 },
    };
    const next = transition(intent.state, lease.event(intent.state, answer), config);
    // The drive loop's next step: the input is kept for the next call, the answer's record held.
    await lease.flush();
    lease.recorded(next.state);
    expect(store.entries.get("1:c1")).toEqual({ apiKey: SECRET, query: "q" });
  });

  it("a run that ends with a call unsent (cancelled, rejected, failed) forgets its kept input once that end is durable", async () => {
    const store = memoryStore();
    const lease = new LeaseRedaction(undefined, store);
    const { state } = await toIntent(lease);
    expect(store.entries.size).toBe(1);
    lease.recorded({ ...state, status: "failed" });
    await lease.durable(() => silentLogger);
    expect(store.entries.size).toBe(0);
  });

  it("a purge that fails is logged once and the lease goes on to commit the run", async () => {
    const warnings: unknown[] = [];
    const log = { ...silentLogger, warn: (o: unknown) => void warnings.push(o) } as typeof silentLogger;
    const failing = { ...memoryStore(), forget: () => Promise.reject(new Error("bus down")) };
    await drive(new LeaseRedaction(undefined, failing), undefined, undefined, log);
    expect(warnings).toMatchObject([{ call: "1:c1" }]);
  });

  it("a model that gives each turn's call the same id gets each input kept, sent and forgotten", async () => {
    const store = memoryStore();
    const { sent, audits } = await drive(
      new LeaseRedaction(undefined, store),
      undefined,
      undefined,
      silentLogger,
      2,
    );
    expect(sent).toEqual([
      { apiKey: SECRET, query: "balance" },
      { apiKey: SECRET, query: "balance" },
    ]);
    expect(audits.filter((e) => e.kind === "tool.redacted" && e.data?.field === "input")).toHaveLength(2);
    expect(store.entries.size).toBe(0);
  });

  it("a reused call id whose next input is kept before the last answer is durable keeps the new input", async () => {
    const store = memoryStore();
    const lease = new LeaseRedaction(undefined, store);
    const intent = await toIntent(lease);
    const answered = lease.event(intent.state, {
      type: "toolCompleted",
      at: 4,
      actionId: intent.actionId,
      output: { rows: 1 },
    });
    let t = transition(intent.state, answered, config);
    // The answer rides with the next step's records: not durable yet.
    await lease.flush();
    lease.recorded(t.state);
    const ask = t.effects.find((e) => e.type === "callModel");
    if (ask?.type !== "callModel") throw new Error("expected the run to ask its model again");
    const second = { apiKey: SECRET, query: "second" };
    t = transition(t.state, lease.event(t.state, vaultCall(ask.requestId, second)), config);
    await lease.flush();
    lease.recorded(t.state);
    // The append holding the first call's answer and the second call's INTENT is durable.
    await lease.durable(() => silentLogger);
    expect([...store.entries]).toEqual([["2:c1", second]]);
    const call = t.effects.find((e) => e.type === "callTool");
    if (call?.type !== "callTool") throw new Error("expected the second call");
    const successor = new LeaseRedaction(undefined, memoryStore(new Map(store.entries)));
    successor.use(config.tools);
    expect(await successor.input(call, t.state)).toEqual(second);
  });

  it("a call whose input the model gave with the marker in it, and nothing redacted, is sent as it is", async () => {
    const input = { query: `a note saying ${REDACTED}` };
    const { sent, audits } = await drive(new LeaseRedaction(undefined, memoryStore()), input);
    expect(sent).toEqual([input]);
    expect(audits.filter((e) => e.kind === "tool.redacted").map((e) => e.data)).toMatchObject([
      { field: "output" },
    ]);
  });
});

/** Drives a run through the lease up to its vault call's INTENT, each step recorded and durable. */
async function toIntent(lease: LeaseRedaction): Promise<{ state: Transition["state"]; actionId: string }> {
  lease.use(config.tools);
  let t = startRun({ type: "start", at: 1, spec: runSpec, runId: "r1", rootRunId: "r1", depth: 0 }, config);
  for (let i = 0; i < 6; i++) {
    const awaiting = t.effects.find((e) => !["wal", "audit", "storeMemory"].includes(e.type));
    if (awaiting?.type === "callTool") {
      return { state: t.state, actionId: awaiting.actionId };
    }
    const event: LoopEvent =
      awaiting?.type === "recallMemory"
        ? { type: "memoryRecalled", at: 2, memories: [] }
        : vaultCall(awaiting?.type === "callModel" ? awaiting.requestId : "", { apiKey: SECRET, query: "q" });
    t = transition(t.state, lease.event(t.state, event), config);
    await lease.flush();
    lease.recorded(t.state);
    await lease.durable(() => silentLogger);
  }
  throw new Error("expected the run to call its tool");
}

/** A model's answer asking for one vault call, under the id `c1` (the same id every turn). */
function vaultCall(requestId: string, input: unknown): LoopEvent {
  return {
    type: "modelResponded",
    at: 3,
    requestId,
    response: {
      text: "",
      toolCalls: [{ id: "c1", name: "vault", input }],
      stopReason: "toolUse",
      usage: { inputTokens: 1, outputTokens: 1 },
      costUsd: 0,
      model: "m",
    },
  };
}

/** A RedactedInputs in memory, as the bucket keeps them for one run. */
function memoryStore(
  entries = new Map<string, unknown>(),
): RedactedInputs & { entries: Map<string, unknown> } {
  return {
    entries,
    keep: (callId, input) => Promise.resolve(void entries.set(callId, input)),
    read: (callId) => Promise.resolve(entries.has(callId) ? { input: entries.get(callId) } : undefined),
    forget: (callId) => Promise.resolve(void entries.delete(callId)),
  };
}
