import { beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { remoteTool } from "../../shared/bus/remote-tool.js";
import { serveToolsOf } from "../../shared/bus/tool-service.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { WalWriter } from "../../shared/bus/wal.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { EffectPerformer } from "../../shared/loop/performer.js";
import type { AwaitingEffect } from "../../shared/loop/state.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { ToolRegistry } from "../../shared/tools/registry.js";
import { defineTool, describeTool, type AnyTool } from "../../shared/tools/tool.js";
import { undoChildren, type UndoDeps } from "../../services/agent/undo-children.js";
import { bookingTools } from "../helpers/bookings.js";
import { createSpawnTool, fanOutSpawnTool } from "../../shared/tools/builtin/spawn.js";
import { registry, runner, spec } from "../helpers/fixtures.js";
import { useActorBus } from "../helpers/actor-bus.js";

const suite = useActorBus("uc", { random: seededRandom(3) });

const { tools: bookings, unbooked } = bookingTools();
const charge = defineTool({
  name: "charge",
  description: "Charges an amount.",
  input: z.object({ cents: z.number() }),
  capability: { kind: "compute" },
  reversibility: "irreversible",
  idempotent: false,
  execute: () => Promise.resolve({ output: { charged: true } }),
});
const TOOLS: AnyTool[] = [...bookings, charge];
/** The spawn a worker has: an undo only reads it described. */
const SPAWN = fanOutSpawnTool();

beforeAll(async () => {
  serveToolsOf(TOOLS, suite.bus, { logger: silentLogger });
  await suite.bus.nc.flush();
});

/** The items `unbook` was asked to cancel, in order. */
const unbookedItems = (): string[] =>
  unbooked.map((u) => (u as { original: { item: string } }).original.item);

/**
 * A child run, committed in this process with the tools run locally, its log written to the bus.
 * `spawned`: the run spawns once (first), and its fan-in says these children committed.
 */
async function committedChild(
  runId: string,
  script: { name: string; input: object }[],
  spawned: string[] = [],
): Promise<void> {
  const results = spawned.map((id) => ({ runId: id, status: "committed" }));
  const spawn = createSpawnTool(() => Promise.resolve({ results }));
  const calls = spawned.length > 0 ? [{ name: "spawn_agent", input: { runs: [spec()] } }, ...script] : script;
  const result = await runner({ registry: registry(...TOOLS, spawn) }).run(
    spec({
      script: [...calls.map((call) => ({ toolCalls: [call] })), { text: "done" }],
      tools: ["book", "unbook", "charge", "spawn_agent"],
      capabilities: ["compute", { kind: "spawn", maxDepth: 2 }],
    }),
    { runId, undoChildren: true },
  );
  expect(result.state.status).toBe("committed");
  await new WalWriter(suite.bus, runId, "w1", 0, 0).appendBatch(result.wal);
  await statusOf(runId, "committed");
}

/** The run's status record, as its worker (or a refused admission) leaves it. */
async function statusOf(runId: string, status: RunStatus["status"]): Promise<void> {
  await new RunStatusStore(suite.bus.buckets.runs).put({
    runId,
    status,
    phase: status === "committed" ? "COMMIT" : "FAIL",
    iteration: 1,
    usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 1, toolCalls: 1 },
    updatedAt: new Date().toISOString(),
  });
}

/** What a parent's worker lease gives the undo: its own registry and performer, as a lease has. */
function lease(): UndoDeps {
  const tools = new ToolRegistry([]);
  return {
    bus: suite.bus,
    // As a worker's: the served tools, and spawn_agent, the worker's own.
    discover: (names) => {
      for (const t of TOOLS.filter((t) => names.includes(t.name)))
        if (!tools.get(t.name)) tools.register(remoteTool(describeTool(t), suite.bus));
      if (names.includes("spawn_agent") && !tools.get("spawn_agent")) tools.register(SPAWN);
      return Promise.resolve(tools.descriptors());
    },
    performer: new EffectPerformer({
      registry: tools,
      clock: systemClock,
      random: seededRandom(9),
      invokePolicy: { retries: 0 },
    }),
    checkpointEvery: 10,
  };
}

const undo = (committed: string[]): Extract<AwaitingEffect, { type: "callTool" }> => ({
  type: "callTool",
  actionId: "comp-act-1",
  tool: "undo_children",
  input: { original: null, output: { committed } },
  idempotencyKey: "parent:comp-act-1",
  purpose: "compensate",
  timeoutMs: 10_000,
});

describe("undo_children: a failing parent undoes what its committed children did", () => {
  it("runs each committed child's compensations, the latest child first; made again by another lease, it sends nothing twice", async () => {
    await committedChild("p1-act-1-1", [{ name: "book", input: { item: "seat 1" } }]);
    await committedChild("p1-act-1-2", [
      { name: "book", input: { item: "seat 2" } },
      { name: "book", input: { item: "seat 3" } },
    ]);
    unbooked.length = 0;
    const first = await undoChildren(undo(["p1-act-1-1", "p1-act-1-2"]), lease());
    expect(first).toMatchObject({
      type: "toolCompleted",
      output: {
        undone: [
          { runId: "p1-act-1-2", tool: "unbook", ok: true },
          { runId: "p1-act-1-2", tool: "unbook", ok: true },
          { runId: "p1-act-1-1", tool: "unbook", ok: true },
        ],
        manual: [],
      },
    });
    expect(unbookedItems()).toEqual(["seat 3", "seat 2", "seat 1"]);
    // The parent's worker died in the undo; the next one makes it again: answered from the records.
    const again = await undoChildren(undo(["p1-act-1-1", "p1-act-1-2"]), lease());
    expect(again).toMatchObject({ type: "toolCompleted" });
    expect(unbooked).toHaveLength(3);
  });

  it("a child's own committed children are undone where its spawn stands in its calls, deeper down", async () => {
    await committedChild("p3-act-1-1-act-1-1", [{ name: "book", input: { item: "seat 5" } }]);
    await committedChild("p3-act-1-1", [{ name: "book", input: { item: "seat 6" } }], ["p3-act-1-1-act-1-1"]);
    unbooked.length = 0;
    const event = await undoChildren(undo(["p3-act-1-1"]), lease());
    expect(event).toMatchObject({
      type: "toolCompleted",
      output: {
        undone: [
          { runId: "p3-act-1-1", tool: "unbook", ok: true },
          { runId: "p3-act-1-1-act-1-1", tool: "unbook", ok: true },
        ],
      },
    });
    // The child booked after its spawn: its own booking first, then its child's.
    expect(unbookedItems()).toEqual(["seat 6", "seat 5"]);
  });

  it("of a spawn's children the parent was cancelled waiting on, only those that committed are undone: not one that failed (it undid its own), is still going, or never started", async () => {
    await committedChild("p4-act-1-1", [{ name: "book", input: { item: "seat 7" } }]);
    await committedChild("p4-act-1-2", [{ name: "book", input: { item: "seat 8" } }]);
    await statusOf("p4-act-1-2", "failed");
    await committedChild("p4-act-1-3", [{ name: "book", input: { item: "seat 9" } }]);
    await statusOf("p4-act-1-3", "running");
    unbooked.length = 0;
    const event = await undoChildren(undo(["p4-act-1-1", "p4-act-1-2", "p4-act-1-3", "p4-act-1-4"]), lease());
    expect(event).toMatchObject({
      type: "toolCompleted",
      output: { undone: [{ runId: "p4-act-1-1", tool: "unbook", ok: true }], manual: [] },
    });
    expect(unbooked).toHaveLength(1);
  });

  it("what cannot be undone (an irreversible call, a child whose log is gone) fails the compensation with what a human must look at; the rest is undone", async () => {
    await committedChild("p2-act-1-1", [
      { name: "book", input: { item: "seat 4" } },
      { name: "charge", input: { cents: 5 } },
    ]);
    // Its status says it committed; its log is gone.
    await statusOf("p2-gone", "committed");
    unbooked.length = 0;
    const event = await undoChildren(undo(["p2-act-1-1", "p2-gone"]), lease());
    expect(event.type).toBe("toolAborted");
    const message = event.type === "toolAborted" ? event.error.message : "";
    expect(message).toMatch(/^what committed children did could not all be undone: /);
    expect(message).toContain("p2-gone: its log is gone");
    expect(message).toContain("(charge): irreversible: needs manual intervention");
    expect(unbooked).toHaveLength(1);
  });
});
