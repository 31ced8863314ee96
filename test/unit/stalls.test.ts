import { describe, expect, it } from "vitest";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { failedAsLost, staleQueued } from "../../services/supervisor/lost-admissions.js";
import { scanInterval, stalledRuns } from "../../services/supervisor/stalls.js";

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

describe("the stalled-run watchdog", () => {
  const now = 1_000_000;
  const staleMs = 60_000;

  it("picks running runs unchanged for the stale period, and only those", () => {
    const runs = [
      status("stuck", "running", now - staleMs),
      status("moving", "running", now - staleMs + 1),
      status("parked", "awaiting_approval", 0),
      status("queued", "queued", 0),
      status("done", "committed", 0),
      status("halted", "halted", 0),
    ];
    expect(stalledRuns(runs, new Set(), now, staleMs).map((r) => r.runId)).toEqual(["stuck"]);
  });

  it("leaves a parent parked on its children alone: it holds no job on purpose", () => {
    const runs = [status("parent", "running", 0), status("lonely", "running", 0)];
    const keys = new Set(["parent", "lonely", "fanout.parent"]);
    expect(stalledRuns(runs, keys, now, staleMs).map((r) => r.runId)).toEqual(["lonely"]);
  });

  it("counts a run waiting on its provider's open breaker as stalled only from the breaker's next try", () => {
    const waiting = (until: number): RunStatus => ({
      ...status("waiting", "running", 0),
      waiting: {
        for: "model turn",
        provider: "actor:p",
        until: at(until),
        giveUpAt: at(until + 10 * staleMs),
        reason: "MODEL_RATE_LIMITED: slow down",
      },
    });
    expect(stalledRuns([waiting(now - staleMs + 1)], new Set(), now, staleMs)).toEqual([]);
    expect(stalledRuns([waiting(now - staleMs)], new Set(), now, staleMs).map((r) => r.runId)).toEqual([
      "waiting",
    ]);
  });

  it("counts a run retrying an outage as stalled only from its next try", () => {
    const retrying = (nextTry: number): RunStatus => ({
      ...status("retrying", "running", 0),
      retrying: {
        for: "model turn",
        code: "MODEL_UNAVAILABLE",
        reason: "provider error (503)",
        since: at(0),
        nextTry: at(nextTry),
        giveUpAt: at(nextTry + 10 * staleMs),
      },
    });
    expect(stalledRuns([retrying(now - staleMs + 1)], new Set(), now, staleMs)).toEqual([]);
    expect(stalledRuns([retrying(now - staleMs)], new Set(), now, staleMs).map((r) => r.runId)).toEqual([
      "retrying",
    ]);
  });

  it("scans a few times per stale period, between once a second and once a minute", () => {
    expect(scanInterval(6_000)).toBe(1_500);
    expect(scanInterval(100)).toBe(1_000);
    expect(scanInterval(600_000)).toBe(60_000);
  });
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
