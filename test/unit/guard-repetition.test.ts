import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { guardLimits as limits } from "../helpers/fixtures.js";
import {
  CALL_WINDOW,
  callCount,
  checkToolCall,
  initialGuardState,
  toolCallHash,
} from "../../shared/loop/guard.js";
import { storedCounts } from "../../shared/loop/call-counts.js";

describe("LoopGuard: repeated and alternating tool calls (INV-004)", () => {
  it("INV-004 third identical tool call is blocked [test_pingpong_detection]", () => {
    let s = initialGuardState(0);
    const kinds = [];
    for (let i = 0; i < 3; i++) {
      const r = checkToolCall(s, limits(), "search", { q: "same", page: 1 });
      s = r.state;
      kinds.push(r.verdict);
    }
    expect(kinds[0]?.kind).toBe("allow");
    expect(kinds[1]?.kind).toBe("allow");
    expect(kinds[2]).toMatchObject({ kind: "block", reason: "pingPong" });
  });

  it("INV-004 identical input is recognised whatever the key order", () => {
    let s = initialGuardState(0);
    s = checkToolCall(s, limits(), "search", { a: 1, b: 2 }).state;
    s = checkToolCall(s, limits(), "search", { b: 2, a: 1 }).state;
    expect(checkToolCall(s, limits(), "search", { a: 1, b: 2 }).verdict.kind).toBe("block");
  });

  it("INV-004 different inputs are never blocked as ping-pong [test_different_inputs_no_pingpong]", () => {
    let s = initialGuardState(0);
    const l = limits({ maxToolCalls: 1_000 });
    for (let i = 0; i < 500; i++) {
      const r = checkToolCall(s, l, "search", { q: `query ${i}`, n: i });
      expect(r.verdict.kind).toBe("allow");
      s = r.state;
    }
    const stored = storedCounts(s.callCounts, s.recentCalls);
    const counted = Object.values(stored).flatMap((bucket) => Object.values(bucket));
    expect(counted).toEqual(Array.from({ length: CALL_WINDOW }, () => 1));
    expect(callCount(s, toolCallHash("search", { q: "query 497", n: 497 }))).toBe(1);
    expect(callCount(s, toolCallHash("search", { q: "query 497", n: 498 }))).toBe(0);
  });

  it("INV-004 100,000 distinct inputs produce 100,000 distinct 64-bit hashes", () => {
    const seen = new Set<string>();
    for (let i = 0; i < 100_000; i++) seen.add(toolCallHash("search", { q: `query ${i}`, page: i % 7 }));
    expect(seen.size).toBe(100_000);
  });

  it("INV-004 an A→B→A→B alternation is blocked on its 5th call, independently of the repeat count", () => {
    let s = initialGuardState(0);
    const l = limits({ pingPongThreshold: 100 });
    const seq = ["a", "b", "a", "b", "a"].map((t) => [t, { x: t }] as const);
    const kinds = seq.map(([name, input]) => {
      const r = checkToolCall(s, l, name, input);
      s = r.state;
      return r.verdict;
    });
    expect(kinds.slice(0, 4).map((k) => k.kind)).toEqual(["allow", "allow", "allow", "allow"]);
    expect(kinds[4]).toMatchObject({ kind: "block", reason: "pingPongCycle" });
  });

  it("INV-004 a repeated single call is not mistaken for a two-cycle", () => {
    let s = initialGuardState(0);
    const l = limits({ pingPongThreshold: 100 });
    for (let i = 0; i < 6; i++) {
      const r = checkToolCall(s, l, "a", {});
      s = r.state;
      expect(r.verdict.kind).toBe("allow");
    }
  });

  it("INV-004 tool-call hashing is deterministic [test_fx_hash_deterministic]", () => {
    const a = toolCallHash("search", { q: "x", n: [1, 2] });
    expect(a).toMatch(/^[0-9a-f]{16}$/);
    expect(toolCallHash("search", { n: [1, 2], q: "x" })).toBe(a);
    expect(toolCallHash("search", { q: "x", n: [2, 1] })).not.toBe(a);
  });

  it("INV-004 the same input to different tools hashes differently [test_fx_hash_different_tools]", () => {
    expect(toolCallHash("read", { path: "a" })).not.toBe(toolCallHash("write", { path: "a" }));
    // The separator keeps name and input apart: "ab"+"c" is not "a"+"bc".
    expect(toolCallHash("ab", "c")).not.toBe(toolCallHash("a", "bc"));
  });

  it("INV-004 alternation is judged on the last five calls only", () => {
    let s = initialGuardState(0);
    const l = limits({ pingPongThreshold: 100 });
    const calls = ["c", "d", "a", "b", "a", "b", "a"];
    const kinds = calls.map((name) => {
      const r = checkToolCall(s, l, name, {});
      s = r.state;
      return r.verdict.kind;
    });
    expect(kinds).toEqual(["allow", "allow", "allow", "allow", "allow", "allow", "block"]);
    expect(s.recentCalls).toHaveLength(calls.length);
  });

  it("repetition is counted over the last CALL_WINDOW calls: the guard's state stays bounded", () => {
    let s = initialGuardState(0);
    const l = limits({ maxToolCalls: 100_000 });
    const call = (i: number) => {
      const r = checkToolCall(s, l, "t", { i });
      s = r.state;
      return r.verdict.kind;
    };
    expect([call(0), call(0)]).toEqual(["allow", "allow"]);
    for (let i = 1; i <= CALL_WINDOW * 3; i++) call(i);
    expect(s.recentCalls).toHaveLength(CALL_WINDOW);
    const stored = storedCounts(s.callCounts, s.recentCalls);
    const counted = Object.values(stored).flatMap((bucket) => Object.values(bucket));
    expect(counted.reduce((a, b) => a + b, 0)).toBe(CALL_WINDOW);
    // The running state keeps no map of counts: it reads them from the window.
    expect(s.callCounts).toEqual({});
    // The two early calls have left the window; three in a row inside it are still blocked.
    expect([call(0), call(0), call(0)]).toEqual(["allow", "allow", "block"]);
  });

  it("property: the counts are exactly the occurrences among the calls in the window", () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 40 }), {
          minLength: CALL_WINDOW - 50,
          maxLength: CALL_WINDOW * 2 + 50,
          size: "max",
        }),
        (inputs) => {
          let s = initialGuardState(0);
          const l = limits({ maxToolCalls: 100_000, pingPongThreshold: 100_000 });
          for (const i of inputs) s = checkToolCall(s, l, "t", { i }).state;
          const window = inputs.slice(-CALL_WINDOW);
          for (const i of new Set(inputs)) {
            const hash = toolCallHash("t", { i });
            expect(callCount(s, hash)).toBe(window.filter((j) => j === i).length);
          }
          // A checkpoint stores them as every version since buckets came in reads them.
          const stored = storedCounts(s.callCounts, s.recentCalls);
          expect(Object.values(stored).every((bucket) => Object.keys(bucket).length > 0)).toBe(true);
          for (const [key, bucket] of Object.entries(stored)) {
            for (const [hash, n] of Object.entries(bucket)) {
              expect(hash.slice(0, 2)).toBe(key);
              expect(n).toBe(callCount(s, hash));
            }
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
