import { describe, expect, it } from "vitest";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { childRunId, fanInResults, readFanOut, writeFanOut } from "../../shared/bus/fanout.js";
import { KillSwitchView, readKillSwitch, writeKillSwitch } from "../../shared/bus/kill-switch.js";
import { KvMemory, memoryReads } from "../../shared/bus/kv-memory.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import { MAX_TRACKED_RUNS, TreeBudget, TreeUsage, treeBudgetKey } from "../../shared/bus/tree-budget.js";
import { decode } from "../../shared/bus/codec.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { START } from "../helpers/fixtures.js";
import { bucketStream } from "../../shared/bus/subjects.js";

/** A tree's key, as its root's first lease leaves it once given back: what every other run of it finds. */
async function opened(budget: TreeBudget, root: string): Promise<void> {
  await budget.lease(root, root, 1, 1_000_000);
  expect(await budget.giveBack(root, root, 1, 0)).toEqual({ used: 0, returned: 1 });
}

/** The cluster's shared state on KV buckets (memory, run statuses, kill switch, fan-outs, tree budgets), on a real server. */
const suite = useBusSuite("cs");

describe("cluster state in KV", () => {
  it("memory on KV: per-namespace recall by relevance, forget", async () => {
    const store = new KvMemory(suite.buckets.memory, systemClock, memoryReads(suite));
    const a = await store.remember("agent/a", "postgres runs on port 5432");
    await store.remember("agent/a", "redis runs on port 6379");
    await store.remember("agent/b", "postgres is managed by team b");
    const hits = await store.recall("agent/a", "which port does postgres use", 5);
    expect(hits.map((h) => h.text)).toEqual(["postgres runs on port 5432", "redis runs on port 6379"]);
    expect(await store.forget("agent/a", a.id)).toBe(true);
    expect(await store.forget("agent/a", a.id)).toBe(false);
    expect((await store.recall("agent/a", "postgres", 5)).map((h) => h.text)).toEqual([]);
    // The same text again is the entry already there: the bucket holds it once.
    const first = await store.remember("agent/c", "the cache is flushed nightly");
    await new Promise((r) => setTimeout(r, 5));
    const sent = suite.nc.stats().outMsgs;
    const again = await store.remember("agent/c", "the cache is flushed nightly");
    expect(again).toEqual(first);
    // Two round trips: the put that expects no message, refused, then the read of what is there.
    expect(suite.nc.stats().outMsgs - sent).toBe(2);
    expect(await store.recall("agent/c", "cache flushed", 5)).toEqual([first]);
    // A forgotten memory can be remembered again: written over its delete marker.
    const back = await store.remember("agent/a", "postgres runs on port 5432");
    expect(back.id).toBe(a.id);
    expect((await store.recall("agent/a", "postgres", 5)).map((h) => h.text)).toEqual([
      "postgres runs on port 5432",
    ]);
    // Stored again after a crash: a forget at or after the first write's time stays; one before
    // it (the text forgotten before this write ever was) does not.
    const storedAt = Date.now();
    const kept = await store.remember("agent/d", "the ledger listens on 4222");
    await store.forget("agent/d", kept.id);
    expect(await store.restore("agent/d", "the ledger listens on 4222", storedAt)).toBe(false);
    expect(await store.recall("agent/d", "ledger", 5)).toEqual([]);
    expect(await store.restore("agent/d", "the ledger listens on 4222", Date.now() + 1_000)).toBe(true);
    expect((await store.recall("agent/d", "ledger", 5)).map((h) => h.text)).toEqual([
      "the ledger listens on 4222",
    ]);
    expect(await store.restore("agent/d", "never forgotten", storedAt)).toBe(true);
    // A recall reads with direct gets: no consumer is left on the bucket's stream.
    const jsm = suite.jsm;
    const stream = bucketStream(suite.subjects.buckets().memory);
    await expect
      .poll(async () => (await jsm.streams.info(stream)).state.consumer_count, { timeout: 5_000 })
      .toBe(0);
  });

  it("run status: put, get and a watch that sees each change", async () => {
    const store = new RunStatusStore(suite.buckets.runs);
    const base = {
      runId: "st1",
      phase: "PLAN" as const,
      iteration: 0,
      usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 0, toolCalls: 0 },
      updatedAt: new Date(START).toISOString(),
    };
    expect(await store.get("st1")).toBeUndefined();
    const seen: string[] = [];
    const stop = new AbortController();
    const watching = (async () => {
      for await (const s of store.watch("st1", stop.signal)) {
        seen.push(s.status);
        if (s.status === "committed") stop.abort();
      }
    })();
    await store.put({ ...base, status: "queued" });
    await store.put({ ...base, status: "committed", checkpointSeq: 7 });
    await watching;
    expect(seen.at(-1)).toBe("committed");
    expect(await store.get("st1")).toMatchObject({ status: "committed", checkpointSeq: 7 });
    // The stall scan's read: every status at its latest, the other live keys, deleted ones left out.
    await suite.buckets.runs.put("fanout.st1", "{}");
    await suite.buckets.runs.put("fanout.st2", "{}");
    await suite.buckets.runs.delete("fanout.st1");
    const held = await readRunsBucket(suite);
    expect(held.statuses.filter((s) => s.runId === "st1")).toEqual([
      expect.objectContaining({ status: "committed", checkpointSeq: 7 }),
    ]);
    expect([...held.keys].filter((k) => k.includes("st"))).toEqual(["fanout.st2"]);
    // A write that must not land over a newer one (a run left waiting on a breaker): at its revision only.
    const read = await store.read("st1");
    expect(read?.status.status).toBe("committed");
    await store.put({ ...base, status: "running" });
    expect(await store.update({ ...base, status: "queued" }, read?.revision ?? 0)).toBe(false);
    expect(await store.get("st1")).toMatchObject({ status: "running" });
    const latest = await store.read("st1");
    expect(await store.update({ ...base, status: "halted" }, latest?.revision ?? 0)).toBe(
      (latest?.revision ?? 0) + 1,
    );
    expect(await store.get("st1")).toMatchObject({ status: "halted" });
  });

  it("the kill switch view follows every write", async () => {
    const view = new KillSwitchView();
    await view.start(suite.buckets.pool, silentLogger);
    expect(view.active).toBeUndefined();
    await writeKillSwitch(suite.buckets.pool, { active: true, reason: "drill", by: "ops", at: START });
    for (let i = 0; i < 100 && !view.active; i++) await systemClock.sleep(10);
    expect(view.active).toMatchObject({ reason: "drill" });
    await writeKillSwitch(suite.buckets.pool, { active: false, reason: "over", by: "ops", at: START });
    for (let i = 0; i < 100 && view.active; i++) await systemClock.sleep(10);
    expect(view.active).toBeUndefined();
    expect(await readKillSwitch(suite.buckets.pool)).toMatchObject({ active: false });
    view.stop();
  });

  it("a fan-out completes once every child has committed or failed (a halted one has not ended), one result per child in order, refusals with their code", async () => {
    const store = new RunStatusStore(suite.buckets.runs);
    const status = (runId: string, value: "running" | "halted" | "committed" | "failed", terminal?: object) =>
      store.put({
        runId,
        parentRunId: "fp",
        status: value,
        phase: "COMMIT",
        iteration: 1,
        usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 1, toolCalls: 0 },
        ...(terminal ? { terminal } : {}),
        updatedAt: new Date(START).toISOString(),
      } as RunStatus);
    const children = [0, 1, 2].map((i) => childRunId("fp", "act-1", i));
    const fanOut = { parentRunId: "fp", rootRunId: "fp", depth: 0, actionId: "act-1", children };
    expect(await readFanOut(suite.buckets.runs, "fp")).toBeUndefined();
    await writeFanOut(suite.buckets.runs, fanOut);
    expect(await readFanOut(suite.buckets.runs, "fp")).toEqual(fanOut);
    await status(children[0] as string, "committed", { kind: "COMMIT", reason: "ok", output: "one" });
    await status(children[1] as string, "running");
    await status(children[2] as string, "halted", { kind: "HALT", reason: "stopped by an operator" });
    expect(await fanInResults(suite.buckets.runs, fanOut)).toBeUndefined();
    await status(children[1] as string, "failed", { kind: "FAIL", reason: "guard" });
    // Halted, the last child keeps its parent waiting for how it ends once resumed.
    expect(await fanInResults(suite.buckets.runs, fanOut)).toBeUndefined();
    await status(children[2] as string, "failed", {
      kind: "FAIL",
      reason: "[DEPTH_LIMIT] depth limit: too deep",
    });
    expect(await fanInResults(suite.buckets.runs, fanOut)).toEqual({
      results: [
        { runId: children[0], status: "committed", output: "one" },
        { runId: children[1], status: "failed", error: { code: "FAILED", message: "guard" } },
        {
          runId: children[2],
          status: "failed",
          error: { code: "DEPTH_LIMIT", message: "depth limit: too deep" },
        },
      ],
    });
  });

  it("a tree's iteration budget is never overspent by concurrent leases", async () => {
    const budget = new TreeBudget({ kv: suite.buckets.pool, clock: systemClock, random: seededRandom(9) });
    await opened(budget, "tree1");
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => budget.lease("tree1", `run-${i % 3}`, 1, 10)),
    );
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(10);
    expect(
      results.filter((r) => r.status === "rejected").map((r) => (r.reason as { code: string }).code),
    ).toEqual(Array.from({ length: 10 }, () => "GLOBAL_CAP"));
    expect(await budget.used("tree1")).toBe(10);
    await opened(budget, "tree2");
    expect(await budget.lease("tree2", "run-a", 5, 3)).toEqual({ granted: 3, used: 3, returned: 0 });
  });

  it("a run gives back at most its last two grants, once; concurrent give-backs of two runs both land", async () => {
    const budget = new TreeBudget({ kv: suite.buckets.pool, clock: systemClock, random: seededRandom(10) });
    await opened(budget, "tree3");
    expect(await budget.lease("tree3", "run-a", 1, 9)).toEqual({ granted: 1, used: 1, returned: 0 });
    expect(await budget.lease("tree3", "run-a", 2, 9)).toEqual({ granted: 2, used: 3, returned: 0 });
    expect(await budget.lease("tree3", "run-a", 4, 9)).toEqual({ granted: 4, used: 7, returned: 0 });
    expect(await budget.lease("tree3", "run-b", 4, 9)).toEqual({ granted: 2, used: 9, returned: 0 });
    await expect(budget.lease("tree3", "run-a", 1, 9)).rejects.toMatchObject({ code: "GLOBAL_CAP" });
    // A run that never leased, and a run offering more than its last two grants (2 + 4).
    expect(await budget.giveBack("tree3", "run-z", 5)).toEqual({ used: 9, returned: 0 });
    expect(await budget.giveBack("tree3", "run-a", 50)).toEqual({ used: 3, returned: 6 });
    // The same give-back again (a worker at fault, or anyone who may publish lease requests).
    expect(await budget.giveBack("tree3", "run-a", 50)).toEqual({ used: 3, returned: 0 });
    expect(await budget.lease("tree3", "run-a", 5, 9)).toEqual({ granted: 5, used: 8, returned: 0 });
    const both = await Promise.all([
      budget.giveBack("tree3", "run-a", 1),
      budget.giveBack("tree3", "run-b", 2),
    ]);
    expect(both.map((b) => b.returned)).toEqual([1, 2]);
    expect(await budget.used("tree3")).toBe(5);
  });

  it("a run's next worker takes back what a killed worker was paid and did not spend; a worker behind it takes back nothing", async () => {
    const budget = new TreeBudget({ kv: suite.buckets.pool, clock: systemClock, random: seededRandom(12) });
    await Promise.all(["tree5", "tree6"].map((tree) => opened(budget, tree)));
    // Worker A: its first ask before it read the run, then each ask ahead saying what the run spent.
    expect(await budget.lease("tree5", "run", 1, 100)).toEqual({ granted: 1, used: 1, returned: 0 });
    expect(await budget.lease("tree5", "run", 2, 100, 1)).toEqual({ granted: 2, used: 3, returned: 0 });
    expect(await budget.lease("tree5", "run", 4, 100, 3)).toEqual({ granted: 4, used: 7, returned: 0 });
    // A made 4 calls and was killed holding 3. Worker B asks before it reads the run, then, its
    // first call (the run's 5th) made, asks ahead saying 5: the 3 A held come back.
    expect(await budget.lease("tree5", "run", 1, 100)).toEqual({ granted: 1, used: 8, returned: 0 });
    expect(await budget.lease("tree5", "run", 2, 100, 5)).toEqual({ granted: 2, used: 7, returned: 3 });
    // A, alive after all and fenced, gives back what it held, with its count from before B's.
    expect(await budget.giveBack("tree5", "run", 3, 4)).toEqual({ used: 7, returned: 0, stale: true });
    // A copy of the job that never read the run gives back the one iteration it asked for.
    expect(await budget.lease("tree5", "run", 1, 100)).toEqual({ granted: 1, used: 8, returned: 0 });
    expect(await budget.giveBack("tree5", "run", 1)).toEqual({ used: 7, returned: 1 });
    // B lets the run go with 6 calls answered: the tree counts exactly those, and the run is settled.
    expect(await budget.giveBack("tree5", "run", 1, 6)).toEqual({ used: 6, returned: 1 });
    expect(await budget.giveBack("tree5", "run", 1, 6)).toEqual({ used: 6, returned: 0 });
    // A count can take back no more than was granted since the last one told.
    await budget.lease("tree5", "other", 4, 100, 0);
    expect(await budget.lease("tree5", "other", 4, 100, 0)).toMatchObject({ returned: 4, used: 10 });
    expect(await budget.giveBack("tree5", "other", 0, 1_000)).toEqual({ used: 10, returned: 0 });
    // A tree whose cap was lowered below its count keeps what comes back, and grants nothing.
    await budget.lease("tree6", "run", 4, 100, 0);
    await expect(budget.lease("tree6", "run", 1, 2, 3)).rejects.toMatchObject({ code: "GLOBAL_CAP" });
    expect(await budget.used("tree6")).toBe(3);
  });

  it("a run let go without ending stays told: a lease its next worker asked before reading it, whose answer was lost, comes back with that worker's count; an ended run is forgotten", async () => {
    const budget = new TreeBudget({ kv: suite.buckets.pool, clock: systemClock, random: seededRandom(15) });
    await opened(budget, "tree8");
    const told = async (): Promise<string[]> => {
      const entry = await suite.buckets.pool.get(treeBudgetKey("tree8"));
      return Object.keys(decode(TreeUsage, entry?.value ?? new Uint8Array()).paid ?? {}).sort();
    };
    // A run parks (or is handed back) after 1 answered call: its worker settles it at 1.
    expect(await budget.lease("tree8", "parked", 2, 100, 0)).toEqual({ granted: 2, used: 2, returned: 0 });
    expect(await budget.giveBack("tree8", "parked", 1, 1)).toEqual({ used: 1, returned: 1 });
    // Its job comes back: the next worker asks before it reads the run, and the answer is lost…
    expect(await budget.lease("tree8", "parked", 1, 100)).toEqual({ granted: 1, used: 2, returned: 0 });
    // …so the job is handed back and asked again; this worker's answer arrives.
    expect(await budget.lease("tree8", "parked", 1, 100)).toEqual({ granted: 1, used: 3, returned: 0 });
    // It makes the run's 2nd call with that one and asks ahead saying 2: the lost one comes back.
    expect(await budget.lease("tree8", "parked", 1, 100, 2)).toEqual({ granted: 1, used: 3, returned: 1 });
    // A worker behind the settled count takes nothing back.
    expect(await budget.giveBack("tree8", "parked", 1, 1)).toEqual({ used: 3, returned: 0, stale: true });
    // It commits after 2 calls, and another run after 1: each is settled, then forgotten.
    expect(await budget.lease("tree8", "done", 1, 100, 0)).toMatchObject({ used: 4 });
    expect(await told()).toEqual(["done", "parked", "tree8"]);
    expect(await budget.giveBack("tree8", "parked", 1, 2, true)).toEqual({ used: 3, returned: 1 });
    expect(await budget.giveBack("tree8", "done", 0, 1, true)).toEqual({ used: 3, returned: 0 });
    expect(await told()).toEqual(["tree8"]);
    // The tree counts exactly the calls answered: 2 and 1.
    expect(await budget.used("tree8")).toBe(3);
  });

  it("a tree whose key was removed (its root retired) leases nothing more to a run of it, even from a process that wrote it last; its root starts it afresh", async () => {
    const deps = { kv: suite.buckets.pool, clock: systemClock };
    const writer = new TreeBudget({ ...deps, random: seededRandom(13) });
    const other = new TreeBudget({ ...deps, random: seededRandom(14) });
    expect(await writer.lease("tree7", "tree7", 2, 100)).toMatchObject({ granted: 2 });
    expect(await writer.lease("tree7", "child", 3, 100)).toMatchObject({ granted: 3, used: 5 });
    // A child submitted naming a parent that never leased finds no tree either.
    await expect(other.lease("never-ran", "child", 1, 100)).rejects.toMatchObject({
      code: "GLOBAL_CAP",
      details: { retired: true },
    });
    const entry = await suite.buckets.pool.get(treeBudgetKey("tree7"));
    await suite.jsm.streams.deleteMessage(
      bucketStream(suite.subjects.buckets().pool),
      entry?.revision ?? 0,
      false,
    );
    expect(await other.used("tree7")).toBeUndefined();
    // The writer's next lease would be one write against the revision it remembers: refused, read, refused.
    for (const budget of [writer, other]) {
      await expect(budget.lease("tree7", "child", 1, 100, 3)).rejects.toMatchObject({
        code: "GLOBAL_CAP",
        message: expect.stringMatching(
          /no iteration budget: its root run finished and was removed/,
        ) as string,
      });
    }
    expect(await writer.giveBack("tree7", "child", 3, 3)).toEqual({ used: 0, returned: 0 });
    expect(await suite.buckets.pool.get(treeBudgetKey("tree7"))).toBeNull();
    expect(await writer.lease("tree7", "tree7", 1, 100)).toEqual({ granted: 1, used: 1, returned: 0 });
  });

  it("past MAX_TRACKED_RUNS runs of a tree, the one that leased longest ago can give nothing back", async () => {
    const budget = new TreeBudget({ kv: suite.buckets.pool, clock: systemClock, random: seededRandom(11) });
    await opened(budget, "tree4");
    const runs = Array.from({ length: MAX_TRACKED_RUNS + 1 }, (_, i) => `run-${i}`);
    for (const run of runs) await budget.lease("tree4", run, 1, 10_000);
    // The 257th run pushed run-0 out; run-1 leasing again moves it last, so run-extra pushes run-2 out.
    await budget.lease("tree4", "run-1", 1, 10_000);
    await budget.lease("tree4", "run-extra", 1, 10_000);
    expect((await budget.giveBack("tree4", "run-0", 1)).returned).toBe(0);
    expect((await budget.giveBack("tree4", "run-2", 1)).returned).toBe(0);
    expect((await budget.giveBack("tree4", "run-1", 9)).returned).toBe(2);
    expect((await budget.giveBack("tree4", "run-extra", 1)).returned).toBe(1);
  });
});
