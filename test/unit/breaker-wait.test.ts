import { describe, expect, it } from "vitest";
import {
  BREAKER_RETURN_SPREAD_MS,
  deferral,
  leftWaiting,
  leftWaitingOn,
  waitingOn,
} from "../../services/agent/breaker-wait.js";
import { giveUpAt, modelFailure } from "../../services/agent/model-outage.js";
import { retryDelay } from "../../services/agent/lease-failure.js";
import { waitingRuns } from "../../services/cli/inspect.js";
import { breakerLine, statusLine } from "../../services/cli/render.js";
import type { ModelBreaker } from "../../shared/contracts/model-breaker.js";
import type { RunStatus, RunWaiting } from "../../shared/contracts/run-status.js";
import { refusal } from "../../shared/models/breaker-policy.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { seededRandom } from "../../shared/runtime/random.js";

const now = Date.parse("2026-11-27T10:00:00.000Z");
const iso = (ms: number): string => new Date(ms).toISOString();
const breaker = (over: Partial<ModelBreaker> = {}): ModelBreaker => ({
  provider: "openai:m@http://127.0.0.1:1/v1",
  state: "open",
  until: now + 8_000,
  openedAt: now - 30_000,
  cooldownMs: 8_000,
  reason: "MODEL_RATE_LIMITED: slow down",
  by: "agent-1",
  failedProbes: 2,
  ...over,
});
const waiting = (over: Partial<RunWaiting> = {}): RunWaiting => ({
  for: "model turn",
  provider: "openai:m@http://127.0.0.1:1/v1",
  until: iso(now + 2_000),
  giveUpAt: iso(now + 60_000),
  reason: "MODEL_RATE_LIMITED: slow down",
  ...over,
});

/** A running run's status that says it waits on the breaker (see waiting). */
const runStatus = (runId: string, over: Partial<RunStatus> = {}): RunStatus => ({
  runId,
  status: "running",
  phase: "ACT",
  iteration: 3,
  usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 2, toolCalls: 2 },
  waiting: waiting(),
  updatedAt: iso(now),
  ...over,
});

describe("a run waiting on its provider's open breaker", () => {
  it("is told in its status by the refusal that handed it back, until the breaker's next try", () => {
    const refused = refusal(breaker(), now).toBody();
    expect(waitingOn(refused, "review", now + 8_000, now + 60_000)).toEqual({
      for: "review",
      provider: "openai:m@http://127.0.0.1:1/v1",
      until: iso(now + 8_000),
      giveUpAt: iso(now + 60_000),
      reason: "MODEL_RATE_LIMITED: slow down",
    });
    // An outage no breaker was open for (or breakers off) says nothing: the run is taken over as before.
    const plain = new AgentError("MODEL_RATE_LIMITED", "slow down").toBody();
    expect(waitingOn(plain, "model turn", now + 8_000, now + 60_000)).toBeUndefined();
    expect(waitingOn(refused, "model turn", undefined, now + 60_000)).toBeUndefined();
    expect(waitingOn(refused, "model turn", now + 8_000, Infinity)).toBeUndefined();
    // As the lease hands the run back: the refused turn's wait, ending with the run's deadline.
    const state = { guard: { iteration: 2, startedAt: now - 10_000 }, limits: { deadlineMs: 15_000 } };
    const turn = { type: "modelFailed" as const, at: now, requestId: "model-2", error: refused };
    expect(modelFailure(turn, state as never, now - 1_000, 60_000, now)).toMatchObject({
      waiting: { for: "model turn", until: iso(now + 5_000), giveUpAt: iso(now + 5_000) },
    });
    const plainTurn = { ...turn, error: plain };
    expect(modelFailure(plainTurn, state as never, now - 1_000, 60_000, now)).not.toHaveProperty("waiting");
  });

  it("stops waiting at AGENT_MODEL_OUTAGE_MS after its turn was first asked, or at its deadline if sooner", () => {
    const run = (deadlineMs?: number) => ({ guard: { startedAt: now - 5_000 }, limits: { deadlineMs } });
    expect(giveUpAt(now, 60_000, run())).toBe(now + 60_000);
    expect(giveUpAt(now, 60_000, run(20_000))).toBe(now + 15_000);
    expect(giveUpAt(now, 60_000, run(600_000))).toBe(now + 60_000);
  });

  it("is left queued while the breaker stays open, until its next try or the end of the run's wait", () => {
    expect(deferral(waiting(), breaker(), now)).toBe(now + 8_000);
    expect(deferral(waiting({ giveUpAt: iso(now + 3_000) }), breaker(), now)).toBe(now + 3_000);
    // While another worker's call tries the provider: back after the retry delay.
    expect(deferral(waiting(), breaker({ state: "probing" }), now)).toBe(now);
  });

  it("is taken over once the breaker closed, lets a call try, is another provider's, or the run waited long enough", () => {
    expect(deferral(waiting(), undefined, now)).toBeUndefined();
    expect(deferral(waiting(), breaker({ until: now }), now)).toBeUndefined();
    expect(deferral(waiting(), breaker({ provider: "anthropic:m" }), now)).toBeUndefined();
    expect(deferral(waiting({ giveUpAt: iso(now) }), breaker(), now)).toBeUndefined();
    expect(deferral(undefined, breaker(), now)).toBeUndefined();
  });

  it("goes back without counting as a failed lease, at the time the deferral named", () => {
    const left = leftWaiting(waiting(), now + 8_000);
    expect(leftWaitingOn(left)).toBe("openai:m@http://127.0.0.1:1/v1");
    expect(leftWaitingOn(new AgentError("MODEL_UNAVAILABLE", "x"))).toBeUndefined();
    expect(retryDelay(left, 7, 500, now)).toBe(8_000);
  });

  it("comes back spread over a second with the breaker's other runs, not all at its next try", () => {
    const random = seededRandom(7);
    const delays = Array.from({ length: 200 }, () =>
      retryDelay(leftWaiting(waiting(), now + 8_000), 3, 500, now, random),
    );
    expect(Math.min(...delays)).toBeGreaterThanOrEqual(8_000);
    expect(Math.max(...delays)).toBeLessThan(8_000 + BREAKER_RETURN_SPREAD_MS);
    expect(new Set(delays).size).toBeGreaterThan(100);
    // While a try is under way it comes back after the retry delay, unspread.
    expect(retryDelay(leftWaiting(waiting(), now), 3, 500, now, random)).toBe(500);
  });

  it("shows in `agentctl watch`", () => {
    const status = runStatus("r1");
    expect(statusLine(status)).toMatch(
      /waiting: model turn for openai:m@http:\/\/127\.0\.0\.1:1\/v1, next try after 2026-11-27T10:00:02\.000Z, until 2026-11-27T10:01:00\.000Z$/,
    );
    expect(statusLine({ ...status, waiting: undefined })).not.toContain("waiting");
  });

  it("is counted against its breaker by `agentctl breakers`, while unfinished", () => {
    const counts = waitingRuns([
      runStatus("r1"),
      runStatus("r2", { waiting: waiting({ for: "review" }) }),
      runStatus("r3", { waiting: waiting({ provider: "anthropic:c@http://127.0.0.1:2" }) }),
      runStatus("r4", { waiting: undefined }),
      // A finished run's status can still carry the wait it was handed back with last.
      runStatus("r5", { status: "failed" }),
    ]);
    expect([...counts]).toEqual([
      ["openai:m@http://127.0.0.1:1/v1", 2],
      ["anthropic:c@http://127.0.0.1:2", 1],
    ]);
    const line = (n: number): string => breakerLine({ ...breaker(), waitingRuns: n }, now);
    expect(line(2)).toBe(
      "openai:m@http://127.0.0.1:1/v1  open 30 s, 2 failed tries; next try after 2026-11-27T10:00:08.000Z; 2 runs waiting  (MODEL_RATE_LIMITED: slow down)",
    );
    expect(line(1)).toContain("; 1 run waiting  (");
  });
});
