import { describe, expect, it } from "vitest";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { childRunId, fanInResults, readFanOut, writeFanOut } from "../../shared/bus/fanout.js";
import { KillSwitchView, readKillSwitch, writeKillSwitch } from "../../shared/bus/kill-switch.js";
import { KvMemory, memoryReads } from "../../shared/bus/kv-memory.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { useBusSuite } from "../helpers/bus-suite.js";
import { START } from "../helpers/fixtures.js";
import { bucketStream } from "../../shared/bus/subjects.js";

/** The cluster's shared state on KV buckets (memory, run statuses, kill switch, fan-outs), on a real server. */
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
    await store.put({ ...base, status: "committed", iteration: 7 });
    await watching;
    expect(seen.at(-1)).toBe("committed");
    expect(await store.get("st1")).toMatchObject({ status: "committed", iteration: 7 });
    // The stall scan's read: every status at its latest, the other live keys, deleted ones left out.
    await suite.buckets.runs.put("fanout.st1", "{}");
    await suite.buckets.runs.put("fanout.st2", "{}");
    await suite.buckets.runs.delete("fanout.st1");
    const held = await readRunsBucket(suite);
    expect(held.statuses.filter((s) => s.runId === "st1")).toEqual([
      expect.objectContaining({ status: "committed", iteration: 7 }),
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
});
