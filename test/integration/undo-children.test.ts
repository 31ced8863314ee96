import { beforeAll, describe, expect, it } from "vitest";
import { remoteTool } from "../../shared/bus/remote-tool.js";
import { serveToolsOf } from "../../shared/bus/tool-service.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { LogWriter } from "../../shared/bus/run-log.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { EffectPerformer } from "../../shared/loop/performer.js";
import type { AwaitingEffect } from "../../shared/loop/state.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { ToolRegistry } from "../../shared/tools/registry.js";
import { describeTool, type AnyTool } from "../../shared/tools/tool.js";
import { undoChildren, type UndoDeps } from "../../services/agent/undo-children.js";
import {
  CHILDREN_END_WAIT_MS,
  IN_LEASE_WAIT_MS,
  type FailingParent,
} from "../../services/agent/children-end.js";
import { decode } from "../../shared/bus/codec.js";
import { RunJob } from "../../shared/contracts/cluster.js";
import { continuationJob, publishJob } from "../../shared/bus/jobs.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { until } from "../helpers/until.js";
import { bookingTools, irreversibleCharge as charge } from "../helpers/bookings.js";
import { createSpawnTool, fanOutSpawnTool } from "../../shared/tools/builtin/spawn.js";
import { registry, runner, spec } from "../helpers/fixtures.js";
import { useActorBus } from "../helpers/actor-bus.js";

const suite = useActorBus("uc", { random: seededRandom(3) });

const { tools: bookings, unbooked } = bookingTools();
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
    { runId, parentRunId: parentOf(runId), undoChildren: true },
  );
  expect(result.state.status).toBe("committed");
  await new LogWriter(suite.bus, runId, "w1", 0, 0).append(result.wal);
  await statusOf(runId, "committed");
}

const PHASE_OF: Partial<Record<RunStatus["status"], RunStatus["phase"]>> = {
  committed: "COMMIT",
  failed: "FAIL",
  halted: "HALT",
};

/** A child's parent, as its id names it: `p1` of `p1-act-1-2`, `p2` of `p2-gone`. */
const parentOf = (runId: string): string => runId.replace(/-(act-\d+-\d+|gone)$/, "");

/** The run's status record, as its worker (or a refused admission) leaves it. */
async function statusOf(runId: string, status: RunStatus["status"]): Promise<void> {
  await new RunStatusStore(suite.bus.buckets.runs).put({
    runId,
    parentRunId: parentOf(runId),
    status,
    phase: PHASE_OF[status] ?? "ACT",
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

/** The parent whose undo this is: cancelled by an operator, its undo asked `since`. */
const failing = (runId: string, since = Date.now()): FailingParent => ({
  runId,
  reason: "[RUN_CANCELLED] cancelled by oncall: wrong trip",
  since,
});

/** The last cancel job queued for the run (nobody consumes the work queue here). */
async function cancelJob(runId: string): Promise<RunJob | undefined> {
  const msg = await suite.bus.jsm.streams
    .getMessage(suite.bus.subjects.streams().runs, { last_by_subj: suite.bus.subjects.runQueue(runId) })
    .catch(() => null);
  const job = msg ? decode(RunJob, msg.data) : undefined;
  return job?.event?.type === "cancel" ? job : undefined;
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
    const first = await undoChildren(undo(["p1-act-1-1", "p1-act-1-2"]), failing("p1"), lease());
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
    // Each child's status stays committed and says what was undone, and by whom.
    const store = new RunStatusStore(suite.bus.buckets.runs);
    expect(await store.get("p1-act-1-2")).toMatchObject({
      status: "committed",
      undone: {
        by: "p1",
        calls: [
          { compensation: "unbook", ok: true },
          { compensation: "unbook", ok: true },
        ],
      },
    });
    expect((await store.get("p1-act-1-1"))?.undone).toMatchObject({ by: "p1", calls: [{ ok: true }] });
    // The parent's worker died in the undo; the next one makes it again: answered from the records.
    const again = await undoChildren(undo(["p1-act-1-1", "p1-act-1-2"]), failing("p1"), lease());
    expect(again).toMatchObject({ type: "toolCompleted" });
    expect(unbooked).toHaveLength(3);
  });

  it("a child's own committed children are undone where its spawn stands in its calls, deeper down", async () => {
    await committedChild("p3-act-1-1-act-1-1", [{ name: "book", input: { item: "seat 5" } }]);
    await committedChild("p3-act-1-1", [{ name: "book", input: { item: "seat 6" } }], ["p3-act-1-1-act-1-1"]);
    unbooked.length = 0;
    const event = await undoChildren(undo(["p3-act-1-1"]), failing("p3"), lease());
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
    // Undone by the failing run, however deep: the grandchild's status names p3.
    const grandchild = await new RunStatusStore(suite.bus.buckets.runs).get("p3-act-1-1-act-1-1");
    expect(grandchild?.undone).toMatchObject({ by: "p3", calls: [{ compensation: "unbook", ok: true }] });
  });

  it("of a spawn's children the parent was cancelled waiting on, only those that committed are undone: not one that failed (it undid its own), one an operator halted, or one never started", async () => {
    await committedChild("p4-act-1-1", [{ name: "book", input: { item: "seat 7" } }]);
    await committedChild("p4-act-1-2", [{ name: "book", input: { item: "seat 8" } }]);
    await statusOf("p4-act-1-2", "failed");
    await committedChild("p4-act-1-3", [{ name: "book", input: { item: "seat 9" } }]);
    await statusOf("p4-act-1-3", "halted");
    unbooked.length = 0;
    const children = ["p4-act-1-1", "p4-act-1-2", "p4-act-1-3", "p4-act-1-4"];
    const event = await undoChildren(undo(children), failing("p4"), lease());
    expect(event).toMatchObject({
      type: "toolCompleted",
      output: { undone: [{ runId: "p4-act-1-1", tool: "unbook", ok: true }], manual: [] },
    });
    expect(unbooked).toHaveLength(1);
    // None of them could commit any more: none is cancelled.
    for (const id of children) expect(await cancelJob(id)).toBeUndefined();
  });

  it("a child an operator halted and then resumed, its resume not yet taken by a worker, is cancelled and waited for; one whose only job is a cancel is not", async () => {
    await committedChild("p7-act-1-1", [{ name: "book", input: { item: "seat 13" } }]);
    const store = new RunStatusStore(suite.bus.buckets.runs);
    const queue = async (runId: string, event: NonNullable<RunJob["event"]>) => {
      await statusOf(runId, "halted");
      const read = await store.read(runId);
      if (!read) throw new Error(`no status for ${runId}`);
      await publishJob(suite.bus, continuationJob(read.status, event), `${runId}:${event.type}:test`);
    };
    const at = Date.now();
    await queue("p7-act-1-2", { type: "resume", at, by: "oncall" });
    await queue("p7-act-1-3", { type: "cancel", at, by: "oncall", reason: "not needed" });
    // A job this build cannot read (a later build's) may resume its run: it counts as one.
    await statusOf("p7-act-1-4", "halted");
    await suite.bus.js.publish(suite.bus.subjects.runQueue("p7-act-1-4"), new TextEncoder().encode("{}"));
    unbooked.length = 0;
    const children = ["p7-act-1-1", "p7-act-1-2", "p7-act-1-3", "p7-act-1-4"];
    const undone = undoChildren(undo(children), failing("p7"), lease());
    await until(async () => (await cancelJob("p7-act-1-2")) !== undefined, 5_000, { what: "its cancel" });
    expect(await cancelJob("p7-act-1-2")).toMatchObject({ event: { type: "cancel", by: "agent" } });
    expect(await cancelJob("p7-act-1-3")).toMatchObject({ event: { by: "oncall" } });
    expect(await cancelJob("p7-act-1-4")).toMatchObject({ event: { type: "cancel", by: "agent" } });
    expect(unbooked).toHaveLength(0);
    // Resumed, then cancelled: it fails, undoing its own calls; the parent goes on.
    await statusOf("p7-act-1-2", "failed");
    await statusOf("p7-act-1-4", "failed");
    expect(await undone).toMatchObject({ type: "toolCompleted", output: { manual: [] } });
    expect(unbookedItems()).toEqual(["seat 13"]);
  });

  it("a child still going is cancelled and waited for: one that commits before its cancel lands is undone with the rest", async () => {
    await committedChild("p5-act-1-1", [{ name: "book", input: { item: "seat 10" } }]);
    await committedChild("p5-act-1-2", [{ name: "book", input: { item: "seat 11" } }]);
    // Its log has its booking and its commit; its status, written after, says it is still going.
    await statusOf("p5-act-1-2", "running");
    unbooked.length = 0;
    const undone = undoChildren(undo(["p5-act-1-1", "p5-act-1-2"]), failing("p5"), lease());
    await until(async () => (await cancelJob("p5-act-1-2")) !== undefined, 5_000, { what: "its cancel" });
    expect(await cancelJob("p5-act-1-2")).toMatchObject({
      event: {
        type: "cancel",
        by: "agent",
        reason: "its parent p5 is failing: [RUN_CANCELLED] cancelled by oncall: wrong trip",
      },
    });
    expect(await cancelJob("p5-act-1-1")).toBeUndefined();
    expect(unbooked).toHaveLength(0);
    await statusOf("p5-act-1-2", "committed");
    expect(await undone).toMatchObject({ type: "toolCompleted", output: { manual: [] } });
    expect(unbookedItems()).toEqual(["seat 11", "seat 10"]);
  });

  it("a child that does not end within a few seconds hands the run back (CHILDREN_GOING); once the parent has waited long enough, it is named for a human and the rest is undone", async () => {
    await committedChild("p6-act-1-1", [{ name: "book", input: { item: "seat 12" } }]);
    await statusOf("p6-act-1-2", "running");
    unbooked.length = 0;
    const started = Date.now();
    const handedBack = await undoChildren(undo(["p6-act-1-1", "p6-act-1-2"]), failing("p6"), lease()).catch(
      (err: unknown) => err,
    );
    expect(handedBack).toBeInstanceOf(AgentError);
    expect(handedBack).toMatchObject({
      code: "CHILDREN_GOING",
      retryable: true,
      details: { children: ["p6-act-1-2"] },
    });
    expect(Date.now() - started).toBeGreaterThanOrEqual(IN_LEASE_WAIT_MS);
    expect(unbooked).toHaveLength(0);
    const late = failing("p6", Date.now() - CHILDREN_END_WAIT_MS);
    const event = await undoChildren(undo(["p6-act-1-1", "p6-act-1-2"]), late, lease());
    expect(event.type).toBe("toolAborted");
    expect(event.type === "toolAborted" ? event.error.message : "").toContain(
      "p6-act-1-2: still going 10 min after its cancel was queued",
    );
    expect(unbookedItems()).toEqual(["seat 12"]);
    // AGENT_CHILDREN_END_WAIT_MS: 30 s waited (handed back above with the default) is past 20 s.
    const shorter = failing("p6", Date.now() - 30_000);
    const settled = await undoChildren(undo(["p6-act-1-2"]), shorter, {
      ...lease(),
      childrenEndWaitMs: 20_000,
    });
    expect(settled.type === "toolAborted" ? settled.error.message : "").toContain(
      "p6-act-1-2: still going 20 s after its cancel was queued",
    );
  }, 20_000);

  it("what cannot be undone (an irreversible call, a child whose log is gone) fails the compensation with what a human must look at; the rest is undone", async () => {
    await committedChild("p2-act-1-1", [
      { name: "book", input: { item: "seat 4" } },
      { name: "charge", input: { cents: 5 } },
    ]);
    // Its status says it committed; its log is gone.
    await statusOf("p2-gone", "committed");
    unbooked.length = 0;
    const event = await undoChildren(undo(["p2-act-1-1", "p2-gone"]), failing("p2"), lease());
    expect(event.type).toBe("toolAborted");
    const message = event.type === "toolAborted" ? event.error.message : "";
    expect(message).toMatch(/^what committed children did could not all be undone: /);
    expect(message).toContain("p2-gone: its log is gone");
    expect(message).toContain("(charge): irreversible: needs manual intervention");
    // The child's status says what is left to a human; the one whose log is gone has nothing said.
    const store = new RunStatusStore(suite.bus.buckets.runs);
    expect((await store.get("p2-act-1-1"))?.undone).toMatchObject({
      by: "p2",
      calls: [{ compensation: "unbook", ok: true }],
      manual: [expect.stringMatching(/ \(charge\): irreversible: needs manual intervention$/)],
    });
    expect((await store.get("p2-gone"))?.undone).toBeUndefined();
    expect(unbooked).toHaveLength(1);
  });
});
