import { describe, expect, it } from "vitest";
import { findStalled, scanSlots, slotsByStatus } from "../../services/supervisor/stalls.js";
import { fanOutKey, writeFanOut } from "../../shared/bus/fanout.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("stall");
const STALE_MS = 60_000;
const NOW = Date.parse("2026-11-24T12:00:00Z");

const status = (runId: string, value: RunStatus["status"], ageMs: number): RunStatus => ({
  runId,
  status: value,
  phase: value === "running" ? "ACT" : "COMMIT",
  iteration: 3,
  usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 3, toolCalls: 2 },
  updatedAt: new Date(NOW - ageMs).toISOString(),
});

describe("the stall scan reads what can be running: the runs holding a pool slot", () => {
  it("finds the stalled run among active ones, whether it reads them one by one or the whole bucket", async () => {
    const store = new RunStatusStore(suite.buckets.runs);
    const ledger = PoolLedger.of(suite);
    const stale = STALE_MS + 1_000;
    // Finished runs: a running status left behind by a run that no longer holds a slot is not watched.
    for (let i = 0; i < 60; i += 1) await store.put(status(`done-${i}`, "committed", stale));
    await store.put(status("slotless", "running", stale));
    const active = [
      status("stuck", "running", stale),
      status("moving", "running", 1_000),
      status("parked", "awaiting_approval", stale),
      status("parent", "running", stale),
      status("went-on", "running", stale),
      status("garbled", "running", stale),
    ];
    for (const s of active) {
      await ledger.acquire(s.runId, 100);
      await store.put(s);
    }
    // A parent waiting for a child still going is parked; one whose children have all ended should
    // have moved (its fan-in, or what it did after) and is stalled like any run.
    const fanOut = (parentRunId: string, children: string[]) =>
      writeFanOut(suite.buckets.runs, {
        parentRunId,
        rootRunId: parentRunId,
        depth: 0,
        actionId: "a1",
        children,
      });
    await fanOut("parent", ["kid-going", "kid-done"]);
    await fanOut("went-on", ["kid-done"]);
    await store.put({ ...status("kid-going", "running", 1_000), parentRunId: "parent" });
    await store.put({ ...status("kid-done", "committed", stale), parentRunId: "went-on" });
    // A record that cannot be read leaves its run taken for parked, as every such run was before.
    await suite.buckets.runs.put(fanOutKey("garbled"), new TextEncoder().encode("{}"));
    // A slot taken by an admission that has not recorded its run (yet, or ever).
    await ledger.acquire("half-admitted", 100);

    // 6 active of 70 recorded: their statuses are read one by one.
    expect((await findStalled(suite, NOW, STALE_MS)).map((r) => r.runId).sort()).toEqual([
      "stuck",
      "went-on",
    ]);
    expect((await scanSlots(suite)).unrecorded).toEqual(["half-admitted"]);
    // What agents_runs_holding_slot says: the finished and slotless runs are not among them.
    expect(Object.fromEntries(slotsByStatus(await scanSlots(suite)))).toEqual({
      queued: 0,
      running: 5,
      awaiting_approval: 1,
      committed: 0,
      failed: 0,
      halted: 0,
      unrecorded: 1,
    });

    // Most of the bucket active: one read of the whole bucket, and the same answer.
    for (let i = 0; i < 300; i += 1) {
      await ledger.acquire(`busy-${i}`, 1_000);
      await store.put(status(`busy-${i}`, "running", 0));
    }
    expect((await findStalled(suite, NOW, STALE_MS)).map((r) => r.runId).sort()).toEqual([
      "stuck",
      "went-on",
    ]);
    const whole = await scanSlots(suite);
    expect(whole.keys).toBeDefined();
    expect(whole.unrecorded).toEqual(["half-admitted"]);
    expect(whole.statuses).toHaveLength(306);
  });
});
