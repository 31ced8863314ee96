import { describe, expect, it } from "vitest";
import { IterationLeases } from "../../services/agent/leases.js";
import {
  addIterations,
  openTree,
  readIterations,
  readTreeCap,
  treeCapKey,
} from "../../shared/bus/tree-iterations.js";
import { bucketStream } from "../../shared/bus/subjects.js";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import { useActorBus } from "../helpers/actor-bus.js";

/** Run trees' iteration budgets on a real nats-server: caps in the pool bucket, totals on JetStream counters. */
const suite = useActorBus("ti");

const answered = (): Promise<LoopEvent> =>
  Promise.resolve({ type: "modelResponded", at: 0, requestId: "r" } as unknown as LoopEvent);
const failed = (): Promise<LoopEvent> =>
  Promise.resolve({ type: "modelFailed", at: 0, requestId: "r" } as unknown as LoopEvent);
const counted = (root: string): Promise<number> => readIterations(suite.bus, root);
/** Lets an add sent without waiting (a reservation made ahead, a give-back) land. */
const settle = async (): Promise<void> => {
  await suite.bus.nc.flush();
  await new Promise((r) => setTimeout(r, 50));
};

/** Reserves `chunk` at a time until refused; resolves with how many were granted in all. */
async function reserveAll(leases: IterationLeases, runId: string, rootRunId: string, chunk: number) {
  let granted = 0;
  for (;;) {
    const got = await leases.reserve({ runId, rootRunId }, chunk).catch((err: { code?: string }) => {
      if (err.code === "GLOBAL_CAP") return 0;
      throw err;
    });
    expect(got).toBeLessThanOrEqual(chunk);
    if (got === 0) return granted;
    granted += got;
  }
}

describe("run trees' iteration budgets on JetStream counters", () => {
  it("30 runs reserving at once from a tree capped at 50 are granted exactly 50 in all, never more; the counter ends at 50 once the overshoots are back", async () => {
    await openTree(suite.bus.buckets.pool, "busy", 50);
    // Each run its own worker: caps read on their own, adds racing on one counter.
    const granted = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        reserveAll(new IterationLeases(suite.bus, 4), `busy-${i}`, "busy", 1 + (i % 4)),
      ),
    );
    expect(granted.reduce((a, b) => a + b, 0)).toBe(50);
    expect(granted.filter((n) => n > 0).length).toBeGreaterThan(1);
    expect(await counted("busy")).toBe(50);
  });

  it("what a lease reserved and did not spend, and a call it paid for that failed, go back when it ends, for another run of the tree", async () => {
    await openTree(suite.bus.buckets.pool, "shared", 6);
    const leases = new IterationLeases(suite.bus, 4);
    const a = leases.forRun({ runId: "run-a", rootRunId: "shared" });
    // 1, then 2 asked ahead as the first is spent: the second call spends one of those two.
    expect(await a.call(answered)).toMatchObject({ type: "modelResponded" });
    expect(await a.call(failed)).toMatchObject({ type: "modelFailed" });
    await expect.poll(() => counted("shared")).toBe(3);
    expect(await leases.reserve({ runId: "run-b", rootRunId: "shared" }, 4)).toBe(3);
    await expect(leases.reserve({ runId: "run-c", rootRunId: "shared" }, 1)).rejects.toMatchObject({
      code: "GLOBAL_CAP",
      message: "run tree shared used its global budget of 6 iterations",
    });
    // A model call finds the tree spent: the loop's globalCapReached, which circuit-breaks the run.
    const c = leases.forRun({ runId: "run-c", rootRunId: "shared" });
    expect(await c.call(answered)).toMatchObject({ type: "globalCapReached" });
    a.release();
    a.release();
    // The one A held and the failed call's: B's 3 and A's answered one stay.
    await expect.poll(() => counted("shared")).toBe(4);
    expect(await c.call(answered)).toMatchObject({ type: "modelResponded" });
    c.release();
    await expect.poll(() => counted("shared")).toBe(5);
  });

  it("reserves 1, 2, 4… up to the chunk, the next as the last reserved iteration is spent; prefetch reserves once", async () => {
    await openTree(suite.bus.buckets.pool, "long", 1_000);
    const run = new IterationLeases(suite.bus, 4).forRun({ runId: "long", rootRunId: "long" });
    run.prefetch();
    run.prefetch();
    await expect.poll(() => counted("long")).toBe(1);
    const seen: number[] = [];
    for (let i = 0; i < 11; i++) {
      await run.call(answered);
      await settle();
      seen.push(await counted("long"));
    }
    // Reserved: 1 (prefetched), 2 as it is spent, then 4 as each reservation's last is spent.
    expect(seen).toEqual([3, 3, 7, 7, 7, 7, 11, 11, 11, 11, 15]);
    run.release();
    await expect.poll(() => counted("long")).toBe(11);
  });

  it("a tree keeps the cap its root was admitted with; a run of a tree with no cap, or retired while a worker kept its cap, is granted nothing", async () => {
    const { pool } = suite.bus.buckets;
    await openTree(pool, "kept", 7);
    await openTree(pool, "kept", 9);
    expect(await readTreeCap(pool, "kept")).toBe(7);
    const leases = new IterationLeases(suite.bus, 4);
    await expect(leases.reserve({ runId: "child", rootRunId: "never-ran" }, 2)).rejects.toMatchObject({
      code: "GLOBAL_CAP",
      details: { retired: true },
    });
    expect(await counted("never-ran")).toBe(0);
    // The worker reads the cap of "kept" once; the tree is then retired: cap removed, counter purged.
    expect(await leases.reserve({ runId: "kept", rootRunId: "kept" }, 2)).toBe(2);
    const entry = await pool.get(treeCapKey("kept"));
    await suite.bus.jsm.streams.deleteMessage(
      bucketStream(suite.bus.subjects.buckets().pool),
      entry?.revision ?? 0,
    );
    await suite.bus.jsm.streams.purge(suite.bus.subjects.streams().counters, {
      filter: suite.bus.subjects.treeCounter("kept", "iterations"),
    });
    await expect(leases.reserve({ runId: "kept-child", rootRunId: "kept" }, 2)).rejects.toMatchObject({
      code: "GLOBAL_CAP",
      message: expect.stringMatching(/no iteration budget/) as string,
    });
    expect(await counted("kept")).toBe(0);
  });

  it("a counter's add answers its new total; the stream refuses a body", async () => {
    expect(await addIterations(suite.bus, "raw", 5)).toBe(5);
    expect(await addIterations(suite.bus, "raw", -3)).toBe(2);
    await expect(
      suite.bus.js.publish(suite.bus.subjects.treeCounter("raw", "iterations"), "{}"),
    ).rejects.toThrow(/counter/);
    expect(await counted("raw")).toBe(2);
  });
});
