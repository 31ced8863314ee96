import { beforeAll, describe, expect, it, vi } from "vitest";
import { decode, encode } from "../../shared/bus/codec.js";
import { writeFanOut } from "../../shared/bus/fanout.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { TreeBudget } from "../../shared/bus/tree-budget.js";
import { RunJob, SubmitRequest } from "../../shared/contracts/cluster.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { Admission } from "../../services/supervisor/admission.js";
import { cancelOrphans } from "../../services/supervisor/cancel.js";
import { spec } from "../helpers/fixtures.js";
import { useActorBus } from "../helpers/actor-bus.js";

const suite = useActorBus("lc", { random: seededRandom(11) });
let store: RunStatusStore;

beforeAll(() => {
  store = new RunStatusStore(suite.bus.buckets.runs);
});

/** A parent's status; "failing": running, undoing its calls before it fails (phase FAIL). */
function parentStatus(runId: string, status: RunStatus["status"] | "failing", reason?: string): RunStatus {
  return {
    runId,
    rootRunId: runId,
    depth: 0,
    status: status === "failing" ? "running" : status,
    phase: status === "failed" || status === "failing" ? "FAIL" : "ACT",
    iteration: 1,
    usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 1, toolCalls: 1 },
    ...(reason ? { terminal: { kind: "FAIL" as const, reason } } : {}),
    updatedAt: new Date().toISOString(),
  };
}

/** The jobs of the run on the work queue (nobody consumes them here, and it holds a few), oldest first. */
async function jobsOf(runId: string): Promise<RunJob[]> {
  const stream = suite.bus.subjects.streams().runs;
  const subject = suite.bus.subjects.runQueue(runId);
  const { state } = await suite.bus.jsm.streams.info(stream);
  const jobs: RunJob[] = [];
  for (let seq = state.first_seq; seq <= state.last_seq; seq++) {
    const msg = await suite.bus.jsm.streams.getMessage(stream, { seq }).catch(() => null);
    if (msg?.subject === subject) jobs.push(decode(RunJob, msg.data));
  }
  return jobs;
}

/** The tree's budget, opened as its root's first lease would. */
async function openTreeBudget(rootRunId: string): Promise<void> {
  await new TreeBudget({
    kv: suite.bus.buckets.pool,
    clock: suite.bus.clock,
    random: suite.bus.random,
  }).lease(rootRunId, rootRunId, 5, 100);
}

/**
 * A parent with a fan-out of one child, and the tree's budget opened as its root's first lease
 * would. `failsWhile`: the parent fails while the child's admission is between reading it and
 * writing the child's status (the pool's acquire, which comes in between), and the supervisor's
 * pass over its children runs then, as its `run.failed` would make it.
 */
async function admitChild(parentRunId: string, failsWhile: boolean | "failing") {
  const childRunId = `${parentRunId}-child`;
  await store.put(parentStatus(parentRunId, "running"));
  await openTreeBudget(parentRunId);
  await writeFanOut(suite.bus.buckets.runs, {
    parentRunId,
    rootRunId: parentRunId,
    depth: 0,
    actionId: "spawn-1",
    children: [childRunId],
  });
  const pool = PoolLedger.of(suite.bus);
  const metrics = new ActorMetrics("supervisor");
  const reason = "[RUN_CANCELLED] cancelled by oncall: wrong trip";
  const passed: string[][] = [];
  if (failsWhile) {
    const acquire = pool.acquire.bind(pool);
    vi.spyOn(pool, "acquire").mockImplementation(async (...args) => {
      if (failsWhile === "failing") {
        // Its undo reads its children (none has a status yet) and cancels none.
        await store.put(parentStatus(parentRunId, "failing"));
      } else {
        await store.put(parentStatus(parentRunId, "failed", reason));
        passed.push(await cancelOrphans(suite.bus, parentRunId, reason));
      }
      return acquire(...args);
    });
  }
  const admission = new Admission(
    suite.bus,
    pool,
    { poolCapacity: 100, maxDepth: 3, treeIterationCap: 1_000 },
    uuidIds,
    metrics,
  );
  const request = {
    ...SubmitRequest.parse(spec()),
    runId: childRunId,
    parent: { runId: parentRunId, rootRunId: parentRunId, depth: 0 },
  };
  const reply = await admission.submit(encode(SubmitRequest, request));
  const counted = (await metrics.orphansCancelled.get()).values[0]?.value ?? 0;
  return { childRunId, reply, passed, counted, reason };
}

/** The child was admitted and, after its start job, cancelled by the supervisor for `reason`. */
async function expectAdmittedThenCancelled(reply: unknown, childRunId: string, reason: string) {
  expect(reply).toMatchObject({ ok: true, runId: childRunId, status: "admitted" });
  const jobs = await jobsOf(childRunId);
  expect(jobs.map((j) => j.event?.type ?? "start")).toEqual(["start", "cancel"]);
  expect(jobs[1]?.event).toMatchObject({ type: "cancel", by: "supervisor", reason });
}

describe("a child admitted as its parent fails", () => {
  it("is cancelled by its own admission when the supervisor's pass over the parent's children came before its status", async () => {
    const { childRunId, reply, passed, counted, reason } = await admitChild("run-late-parent", true);
    // The pass read the fan-out before the child had a status: it cancelled nothing.
    expect(passed).toEqual([[]]);
    await expectAdmittedThenCancelled(reply, childRunId, `its parent run-late-parent failed: ${reason}`);
    expect(counted).toBe(1);
    // The pass, read again (its run.failed redelivered), queues nothing more.
    expect(await cancelOrphans(suite.bus, "run-late-parent", reason)).toEqual([]);
    expect(await jobsOf(childRunId)).toHaveLength(2);
  }, 30_000);

  it("is cancelled by its own admission when its parent began to undo its calls (FAIL) after the first read: the parent's undo read its children before this one had a status", async () => {
    const { childRunId, reply, counted } = await admitChild("run-failing-parent", "failing");
    await expectAdmittedThenCancelled(reply, childRunId, "its parent run-failing-parent is failing");
    expect(counted).toBe(1);
  }, 30_000);

  it("a child of a parent already undoing its calls is refused (PARENT_FINISHED): nobody would take its result", async () => {
    await store.put(parentStatus("run-undoing-parent", "failing"));
    await openTreeBudget("run-undoing-parent");
    const admission = new Admission(
      suite.bus,
      PoolLedger.of(suite.bus),
      { poolCapacity: 100, maxDepth: 3, treeIterationCap: 1_000 },
      uuidIds,
    );
    const request = {
      ...SubmitRequest.parse(spec()),
      runId: "run-undoing-parent-child",
      parent: { runId: "run-undoing-parent", rootRunId: "run-undoing-parent", depth: 0 },
    };
    const reply = await admission.submit(encode(SubmitRequest, request));
    expect(reply).toMatchObject({
      ok: false,
      error: {
        code: "PARENT_FINISHED",
        message:
          "parent run run-undoing-parent is undoing its calls before it fails: a child would have nobody to take its result",
      },
    });
    expect(await jobsOf("run-undoing-parent-child")).toEqual([]);
  }, 30_000);

  it("a child of a parent still going is admitted and left to run: one job, no cancel", async () => {
    const { childRunId, reply, counted } = await admitChild("run-going-parent", false);
    expect(reply).toMatchObject({ ok: true, runId: childRunId, status: "admitted" });
    expect((await jobsOf(childRunId)).map((j) => j.event?.type ?? "start")).toEqual(["start"]);
    expect(counted).toBe(0);
  }, 30_000);
});
