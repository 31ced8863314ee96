import { beforeAll, describe, expect, it, vi } from "vitest";
import { encode } from "../../shared/bus/codec.js";
import { writeFanOut } from "../../shared/bus/fanout.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { openTree } from "../../shared/bus/tree-iterations.js";
import { SubmitRequest } from "../../shared/contracts/cluster.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { Admission } from "../../services/supervisor/admission.js";
import { cancelOrphans } from "../../services/supervisor/cancel.js";
import { spec, treeStatus } from "../helpers/fixtures.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { queuedJobs, queuedJobKinds } from "../../shared/bus/jobs.js";

const suite = useActorBus("lc", { random: seededRandom(11) });
let store: RunStatusStore;

beforeAll(() => {
  store = new RunStatusStore(suite.bus.buckets.runs);
});

/** The tree's cap, as its root's admission writes it. */
async function openTreeBudget(rootRunId: string): Promise<void> {
  await openTree(suite.bus.buckets.pool, rootRunId, 100);
}

/**
 * A parent with a fan-out of one child, and the tree's cap as its root's admission writes it.
 * `failsWhile`: the parent fails while the child's admission is between reading it and writing the
 * child's status (the pool's acquire, which comes in between), and the supervisor's pass over its
 * children runs then, as its `run.failed` would make it.
 */
async function admitChild(parentRunId: string, failsWhile: boolean | "failing") {
  const childRunId = `${parentRunId}-child`;
  await store.put(treeStatus(parentRunId, "running"));
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
        await store.put(treeStatus(parentRunId, "failing"));
      } else {
        await store.put(treeStatus(parentRunId, "failed", { reason }));
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
  const jobs = await queuedJobs(suite.bus, childRunId);
  expect(jobs.map((j) => j?.event?.type ?? "start")).toEqual(["start", "cancel"]);
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
    expect(await queuedJobs(suite.bus, childRunId)).toHaveLength(2);
  }, 30_000);

  it("is cancelled by its own admission when its parent began to undo its calls (FAIL) after the first read: the parent's undo read its children before this one had a status", async () => {
    const { childRunId, reply, counted } = await admitChild("run-failing-parent", "failing");
    await expectAdmittedThenCancelled(reply, childRunId, "its parent run-failing-parent is failing");
    expect(counted).toBe(1);
  }, 30_000);

  it("a child of a parent already undoing its calls is refused (PARENT_FINISHED): nobody would take its result", async () => {
    await store.put(treeStatus("run-undoing-parent", "failing"));
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
    expect(await queuedJobs(suite.bus, "run-undoing-parent-child")).toEqual([]);
  }, 30_000);

  it("a child of a parent still going is admitted and left to run: one job, no cancel", async () => {
    const { childRunId, reply, counted } = await admitChild("run-going-parent", false);
    expect(reply).toMatchObject({ ok: true, runId: childRunId, status: "admitted" });
    expect(await queuedJobKinds(suite.bus, childRunId)).toEqual(["start"]);
    expect(counted).toBe(0);
  }, 30_000);
});
