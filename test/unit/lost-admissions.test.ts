import { describe, expect, it } from "vitest";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { failedAsLost, staleQueued } from "../../services/supervisor/lost-admissions.js";
import { scanInterval } from "../../services/supervisor/slot-scan.js";

const at = (ms: number): string => new Date(ms).toISOString();
const status = (runId: string, value: RunStatus["status"], updatedMs: number): RunStatus => ({
  runId,
  rootRunId: runId,
  depth: 0,
  status: value,
  phase: "ACT",
  iteration: 1,
  usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 1, toolCalls: 0 },
  updatedAt: at(updatedMs),
});

describe("the lost-admission watchdog's picks", () => {
  const now = 1_000_000;
  const staleMs = 60_000;

  it("picks queued runs unchanged for the stale period (whether a job waits is asked later)", () => {
    const runs = [
      status("lost", "queued", now - staleMs),
      status("young", "queued", now - staleMs + 1),
      status("stuck", "running", 0),
      status("parked", "awaiting_approval", 0),
    ];
    expect(staleQueued(runs, now, staleMs).map((r) => r.runId)).toEqual(["lost"]);
  });

  it("knows a run it failed as a lost admission by the code that opens its terminal reason", () => {
    const failed = (runId: string, reason: string): RunStatus => ({
      ...status(runId, "failed", 0),
      terminal: { kind: "FAIL", reason },
    });
    const runs = [
      failed("lost", "[ADMISSION_LOST] the run's admission stopped"),
      failed("refused", "[DEPTH_LIMIT] too deep, not [ADMISSION_LOST]"),
      { ...status("queued", "queued", 0), terminal: { kind: "FAIL" as const, reason: "[ADMISSION_LOST]" } },
      status("plain", "failed", 0),
    ];
    expect(failedAsLost(runs).map((r) => r.runId)).toEqual(["lost"]);
  });
});

describe("the scan of held slots", () => {
  it("scans a few times per stale period, between once a second and once a minute", () => {
    expect(scanInterval(6_000)).toBe(1_500);
    expect(scanInterval(100)).toBe(1_000);
    expect(scanInterval(600_000)).toBe(60_000);
  });
});
