import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { guardLimits as limits } from "../helpers/fixtures.js";
import {
  checkDeadline,
  checkIteration,
  checkRepair,
  checkToolCall,
  initialGuardState,
  recordCost,
  recordStopReason,
  recordUsage,
  worst,
  type GuardLimits,
  type GuardState,
} from "../../shared/loop/guard.js";
import type { StopReason } from "../../shared/contracts/model.js";

function iterate(state: GuardState, l: GuardLimits, times: number) {
  let s = state;
  const verdicts = [];
  for (let i = 0; i < times; i++) {
    const r = checkIteration(s, l);
    s = r.state;
    verdicts.push(r.verdict);
  }
  return { state: s, verdicts };
}

describe("LoopGuard", () => {
  it("INV-001 iteration past maxIterations circuit-breaks [test_iteration_limit]", () => {
    const { verdicts } = iterate(initialGuardState(0), limits({ maxIterations: 5 }), 6);
    expect(verdicts.slice(0, 5).every((v) => v.kind !== "circuitBreak")).toBe(true);
    expect(verdicts[5]).toMatchObject({ kind: "circuitBreak", reason: "maxIterations" });
  });

  it("INV-001 warns at 80% of maxIterations [test_warn_at_80_percent]", () => {
    const { verdicts } = iterate(initialGuardState(0), limits({ maxIterations: 10 }), 10);
    expect(verdicts.slice(0, 7).map((v) => v.kind)).toEqual(Array(7).fill("allow"));
    expect(verdicts[7]).toMatchObject({ kind: "warn", reason: "iterationsNearLimit" });
    expect(verdicts[9]?.kind).toBe("warn");
  });

  it("guard circuit-breaks past maxToolCalls [test_tool_call_limit]", () => {
    let s = initialGuardState(0);
    const l = limits({ maxToolCalls: 3 });
    const kinds = [];
    for (let i = 0; i < 4; i++) {
      const r = checkToolCall(s, l, "echo", { i });
      s = r.state;
      kinds.push(r.verdict.kind);
    }
    expect(kinds).toEqual(["allow", "allow", "allow", "circuitBreak"]);
    expect(s.toolCalls).toBe(4);
  });

  it("INV-006 five consecutive maxTokens responses circuit-break [test_consecutive_max_tokens]", () => {
    let s = initialGuardState(0);
    const kinds = [];
    for (let i = 0; i < 5; i++) {
      const r = recordStopReason(s, "maxTokens");
      s = r.state;
      kinds.push(r.verdict.kind);
    }
    expect(kinds).toEqual(["allow", "allow", "allow", "allow", "circuitBreak"]);
  });

  it("INV-006 any other stop reason resets the truncation count [test_max_tokens_reset]", () => {
    for (const reset of ["endTurn", "toolUse", "stopSequence"] as StopReason[]) {
      let s = initialGuardState(0);
      for (let i = 0; i < 4; i++) s = recordStopReason(s, "maxTokens").state;
      s = recordStopReason(s, reset).state;
      expect(s.consecutiveMaxTokens).toBe(0);
      for (let i = 0; i < 4; i++) {
        const r = recordStopReason(s, "maxTokens");
        s = r.state;
        expect(r.verdict.kind).toBe("allow");
      }
    }
  });

  it("INV-005 crossing maxCostUsd circuit-breaks [test_cost_budget]", () => {
    const l = limits({ maxCostUsd: 1 });
    let s = initialGuardState(0);
    const a = recordCost(s, l, 0.5);
    expect(a.verdict.kind).toBe("allow");
    s = a.state;
    const b = recordCost(s, l, 0.4);
    expect(b.verdict).toMatchObject({ kind: "warn", reason: "costNearBudget" });
    const c = recordCost(b.state, l, 0.2);
    expect(c.verdict).toMatchObject({ kind: "circuitBreak", reason: "costBudget" });
    expect(c.state.costUsd).toBeCloseTo(1.1);
  });

  it("INV-005 exactly at the cost budget is not over it", () => {
    const r = recordCost(initialGuardState(0), limits({ maxCostUsd: 1 }), 1);
    expect(r.verdict.kind).toBe("warn");
  });

  it("INV-005 maxCostUsd 0 means unlimited [test_zero_cost_budget_unlimited]", () => {
    let s = initialGuardState(0);
    for (let i = 0; i < 100; i++) {
      const r = recordCost(s, limits({ maxCostUsd: 0 }), 1_000);
      s = r.state;
      expect(r.verdict.kind).toBe("allow");
    }
    expect(s.costUsd).toBe(100_000);
  });

  it("guard accumulates input and output tokens [test_usage_tracking]", () => {
    let s = initialGuardState(0);
    s = recordUsage(s, limits(), { inputTokens: 100, outputTokens: 20 }).state;
    s = recordUsage(s, limits(), { inputTokens: 50, outputTokens: 5 }).state;
    expect(s.inputTokens).toBe(150);
    expect(s.outputTokens).toBe(25);
  });

  it("INV-002 each iteration check moves the counter by exactly one [test_counters]", () => {
    let s = initialGuardState(0);
    for (let n = 0; n < 30; n++) {
      const r = checkIteration(s, limits({ maxIterations: 10 }));
      expect(r.state.iteration).toBe(s.iteration + 1);
      s = r.state;
    }
    expect(s.iteration).toBe(30);
  });

  it("INV-016 no token budget means unlimited [test_token_budget_unlimited]", () => {
    const r = recordUsage(initialGuardState(0), limits(), {
      inputTokens: 10_000_000,
      outputTokens: 10_000_000,
    });
    expect(r.verdict.kind).toBe("allow");
  });

  it("INV-016 below 80% of the token budget is allowed [test_token_budget_allow]", () => {
    const r = recordUsage(initialGuardState(0), limits({ maxTokensBudget: 1000 }), {
      inputTokens: 700,
      outputTokens: 99,
    });
    expect(r.verdict.kind).toBe("allow");
  });

  it("INV-016 at 80% of the token budget warns [test_token_budget_warn]", () => {
    const at = recordUsage(initialGuardState(0), limits({ maxTokensBudget: 1000 }), {
      inputTokens: 700,
      outputTokens: 100,
    });
    expect(at.verdict).toMatchObject({ kind: "warn", reason: "tokensNearBudget" });
    const full = recordUsage(initialGuardState(0), limits({ maxTokensBudget: 1000 }), {
      inputTokens: 1000,
      outputTokens: 0,
    });
    expect(full.verdict.kind).toBe("warn");
  });

  it("INV-016 over the token budget circuit-breaks [test_token_budget_exhausted]", () => {
    const r = recordUsage(initialGuardState(0), limits({ maxTokensBudget: 1000 }), {
      inputTokens: 900,
      outputTokens: 101,
    });
    expect(r.verdict).toMatchObject({ kind: "circuitBreak", reason: "tokenBudget" });
  });

  it("the wall-clock deadline circuit-breaks once passed", () => {
    const s = initialGuardState(1_000);
    const l = limits({ deadlineMs: 500 });
    expect(checkDeadline(s, l, 1_500).kind).toBe("allow");
    expect(checkDeadline(s, l, 1_501)).toMatchObject({ kind: "circuitBreak", reason: "deadline" });
    expect(checkDeadline(s, limits(), 10_000_000).kind).toBe("allow");
  });

  it("repairs past maxRepairs circuit-break", () => {
    let s = initialGuardState(0);
    const kinds = [];
    for (let i = 0; i < 3; i++) {
      const r = checkRepair(s, limits({ maxRepairs: 2 }));
      s = r.state;
      kinds.push(r.verdict.kind);
    }
    expect(kinds).toEqual(["allow", "allow", "circuitBreak"]);
  });

  it("INV-005 the cost warning starts exactly at 80% of the budget", () => {
    const l = limits({ maxCostUsd: 10 });
    expect(recordCost(initialGuardState(0), l, 7.99).verdict.kind).toBe("allow");
    expect(recordCost(initialGuardState(0), l, 8).verdict.kind).toBe("warn");
  });

  it("every non-allow verdict explains itself with the numbers that tripped it", () => {
    const s = initialGuardState(0);
    const msg = (v: { kind: string; message?: string }) => ("message" in v ? v.message : "");
    expect(msg(checkIteration({ ...s, iteration: 5 }, limits({ maxIterations: 5 })).verdict)).toBe(
      "iteration 6 exceeds maxIterations 5",
    );
    expect(msg(checkIteration({ ...s, iteration: 7 }, limits({ maxIterations: 10 })).verdict)).toBe(
      "iteration 8 of 10 (>= 80%)",
    );
    expect(msg(checkToolCall({ ...s, toolCalls: 2 }, limits({ maxToolCalls: 2 }), "t", {}).verdict)).toBe(
      "tool call 3 exceeds maxToolCalls 2",
    );
    let p = s;
    for (let i = 0; i < 2; i++) p = checkToolCall(p, limits(), "t", { a: 1 }).state;
    expect(msg(checkToolCall(p, limits(), "t", { a: 1 }).verdict)).toBe(
      "'t' called 3 times with the same input",
    );
    let c = s;
    for (const n of ["x", "y", "x", "y"])
      c = checkToolCall(c, limits({ pingPongThreshold: 99 }), n, {}).state;
    expect(msg(checkToolCall(c, limits({ pingPongThreshold: 99 }), "x", {}).verdict)).toContain(
      "alternating calls detected ending in 'x'",
    );
    expect(msg(recordStopReason({ ...s, consecutiveMaxTokens: 4 }, "maxTokens").verdict)).toBe(
      "5 consecutive responses hit maxTokens",
    );
    expect(msg(recordCost(s, limits({ maxCostUsd: 1 }), 2).verdict)).toBe("cost $2.000000 exceeds budget $1");
    expect(msg(recordCost(s, limits({ maxCostUsd: 1 }), 0.9).verdict)).toBe("cost $0.900000 is >= 80% of $1");
    expect(
      msg(recordUsage(s, limits({ maxTokensBudget: 10 }), { inputTokens: 11, outputTokens: 0 }).verdict),
    ).toBe("11 tokens exceed budget 10");
    expect(
      msg(recordUsage(s, limits({ maxTokensBudget: 10 }), { inputTokens: 9, outputTokens: 0 }).verdict),
    ).toBe("9 tokens are >= 80% of budget 10");
    expect(msg(checkDeadline(s, limits({ deadlineMs: 10 }), 11))).toBe(
      "wall clock 11 ms exceeds deadline 10 ms",
    );
    expect(checkRepair({ ...s, repairs: 1 }, limits({ maxRepairs: 1 })).verdict).toEqual({
      kind: "circuitBreak",
      reason: "maxRepairs",
      message: "repair 2 exceeds maxRepairs 1",
    });
    expect(checkToolCall({ ...s, toolCalls: 2 }, limits({ maxToolCalls: 2 }), "t", {}).verdict).toMatchObject(
      { reason: "maxToolCalls" },
    );
  });

  it("worst() picks the most severe verdict", () => {
    const warn = { kind: "warn", reason: "costNearBudget", message: "w" } as const;
    const brk = { kind: "circuitBreak", reason: "costBudget", message: "b" } as const;
    expect(worst({ kind: "allow" }, warn, brk, warn)).toBe(brk);
    expect(worst()).toEqual({ kind: "allow" });
  });

  it("INV-001/INV-002 property: for any event sequence, model calls <= max+1 and the counter is monotonic", () => {
    const event = fc.oneof(
      fc.constant({ t: "iter" as const }),
      fc.record({
        t: fc.constant("tool" as const),
        name: fc.constantFrom("a", "b", "c"),
        n: fc.integer({ min: 0, max: 3 }),
      }),
      fc.record({
        t: fc.constant("stop" as const),
        r: fc.constantFrom<StopReason>("endTurn", "toolUse", "maxTokens", "stopSequence"),
      }),
      fc.record({ t: fc.constant("cost" as const), c: fc.double({ min: 0, max: 1, noNaN: true }) }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), fc.array(event, { maxLength: 200 }), (max, events) => {
        const l = limits({ maxIterations: max, maxToolCalls: 1_000, maxCostUsd: 5 });
        let s = initialGuardState(0);
        let calls = 0;
        let broken = false;
        for (const e of events) {
          if (broken) break;
          const before = s.iteration;
          if (e.t === "iter") {
            const r = checkIteration(s, l);
            expect(r.state.iteration).toBe(before + 1);
            s = r.state;
            if (r.verdict.kind === "circuitBreak") broken = true;
            else calls++;
          } else if (e.t === "tool") {
            s = checkToolCall(s, l, e.name, { n: e.n }).state;
          } else if (e.t === "stop") {
            s = recordStopReason(s, e.r).state;
          } else {
            s = recordCost(s, l, e.c).state;
          }
          expect(s.iteration).toBeGreaterThanOrEqual(before);
        }
        expect(calls).toBeLessThanOrEqual(max + 1);
      }),
      { numRuns: 300 },
    );
  });
});
