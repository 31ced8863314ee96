import { describe, expect, it } from "vitest";
import { findStalled, scanSlots } from "../../services/supervisor/stalls.js";
import { fanOutKey } from "../../shared/bus/fanout.js";
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
    ];
    for (const s of active) {
      await ledger.acquire(s.runId, 100);
      await store.put(s);
    }
    await suite.buckets.runs.put(fanOutKey("parent"), new TextEncoder().encode("{}"));
    // A slot taken by an admission that has not recorded its run (yet, or ever).
    await ledger.acquire("half-admitted", 100);

    // 4 active of 66 recorded: their statuses are read one by one.
    expect((await findStalled(suite, NOW, STALE_MS)).map((r) => r.runId)).toEqual(["stuck"]);
    expect((await scanSlots(suite)).unrecorded).toEqual(["half-admitted"]);

    // Most of the bucket active: one read of the whole bucket, and the same answer.
    for (let i = 0; i < 300; i += 1) {
      await ledger.acquire(`busy-${i}`, 1_000);
      await store.put(status(`busy-${i}`, "running", 0));
    }
    expect((await findStalled(suite, NOW, STALE_MS)).map((r) => r.runId)).toEqual(["stuck"]);
    const whole = await scanSlots(suite);
    expect(whole.keys).toBeDefined();
    expect(whole.unrecorded).toEqual(["half-admitted"]);
    expect(whole.statuses).toHaveLength(304);
  });
});
