import { describe, expect, it } from "vitest";
import { scanSlots, slotsByStatus } from "../../services/supervisor/slot-scan.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { useBusSuite } from "../helpers/bus-suite.js";

const suite = useBusSuite("slot-scan");
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

describe("the slot scan reads what can be running: the runs holding a pool slot", () => {
  it("finds the runs holding a slot and the slots with no run, whether it reads them one by one or the whole bucket", async () => {
    const store = new RunStatusStore(suite.buckets.runs);
    const ledger = PoolLedger.of(suite);
    const stale = STALE_MS + 1_000;
    // Finished runs: a running status left behind by a run that no longer holds a slot is not counted.
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
    // A slot taken by an admission that has not recorded its run (yet, or ever).
    await ledger.acquire("half-admitted", 100);

    // 6 active of 67 recorded: their statuses are read one by one.
    expect((await scanSlots(suite)).statuses.map((r) => r.runId).sort()).toEqual(
      active.map((r) => r.runId).sort(),
    );
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
    const whole = await scanSlots(suite);
    expect(whole.unrecorded).toEqual(["half-admitted"]);
    expect(whole.statuses).toHaveLength(306);
  });
});
