import { describe, expect, it } from "vitest";
import { DEFAULT_RUBRIC } from "../../shared/contracts/rubric.js";
import { Capability } from "../../shared/contracts/capability.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { criticPrompt, modelCritic, parseVerdict } from "../../shared/loop/critic.js";
import {
  criticalPath,
  readySet,
  topologicalOrder,
  validatePlan,
  type Plan,
  type Subtask,
} from "../../shared/loop/plan.js";
import { evaluateGates, gatePolicy } from "../../shared/loop/policy.js";
import { chooseStrategy, normalizeText, planRepair, similarity, stronger } from "../../shared/loop/repair.js";
import { planCompensation } from "../../shared/loop/saga.js";
import { evaluatePureVerifier } from "../../shared/loop/verifiers.js";
import { ScriptedDriver } from "../../shared/models/scripted.js";
import { canonicalJson } from "../../shared/runtime/canonical-json.js";
import { AgentError, ERROR_CODES, isRetryable, toAgentError } from "../../shared/runtime/errors.js";
import { ManualClock } from "../../shared/runtime/clock.js";
import { costOf } from "../../shared/models/pricing.js";
import { spec } from "../helpers/fixtures.js";

const task = (id: string, dependsOn: string[] = [], durationMs = 1, tools: string[] = []): Subtask => ({
  id,
  description: id,
  tools,
  dependsOn,
  estimate: { iterations: 1, costUsd: 0.1, durationMs },
});

describe("plan DAG", () => {
  it("rejects cycles, unknown dependencies, duplicate ids, unavailable tools and over-budget estimates", () => {
    const cyclic: Plan = { subtasks: [task("a", ["c"]), task("b", ["a"]), task("c", ["b"]), task("d")] };
    expect(topologicalOrder(cyclic)).toEqual({ order: ["d"], cyclic: ["a", "b", "c"] });
    const v = validatePlan(cyclic, [], { maxIterations: 100, maxCostUsd: 0 });
    expect(v.ok).toBe(false);
    expect(v.errors).toContain("dependency cycle among: a, b, c");
    const messy: Plan = { subtasks: [task("a", ["zz"], 1, ["hammer"]), task("a")] };
    expect(validatePlan(messy, ["saw"], { maxIterations: 1, maxCostUsd: 0.1 }).errors).toEqual([
      "duplicate subtask id 'a'",
      "subtask 'a' depends on unknown subtask 'zz'",
      "subtask 'a' needs unavailable tool 'hammer'",
      "estimated 2 iterations exceed the budget of 1",
      "estimated cost $0.2 exceeds the budget of $0.1",
    ]);
    expect(validatePlan({ subtasks: [] }, [], { maxIterations: 1, maxCostUsd: 0 }).errors).toContain(
      "the plan has no subtasks",
    );
    // A duplicated id is reported as such, not also as the cycle it makes of the order.
    const twice: Plan = { subtasks: [task("a"), task("b", ["a"]), task("a", ["b"])] };
    expect(validatePlan(twice, [], { maxIterations: 10, maxCostUsd: 0 }).errors).toEqual([
      "duplicate subtask id 'a'",
    ]);
  });

  it("orders a valid DAG topologically and estimates its budget", () => {
    const plan: Plan = { subtasks: [task("c", ["a", "b"]), task("a"), task("b", ["a"])] };
    const v = validatePlan(plan, [], { maxIterations: 3, maxCostUsd: 0 });
    expect(v).toMatchObject({ ok: true, order: ["a", "b", "c"], estimate: { iterations: 3 } });
  });

  it("the ready set honours dependencies, running work and the concurrency limit, longest critical path first", () => {
    //   a(1) → b(10) → d(1);  c(2) → d;  e(5) alone
    const plan: Plan = {
      subtasks: [
        task("a", [], 1),
        task("b", ["a"], 10),
        task("c", [], 2),
        task("d", ["b", "c"], 1),
        task("e", [], 5),
      ],
    };
    const cp = criticalPath(plan);
    expect(Object.fromEntries(cp)).toEqual({ a: 12, b: 11, c: 3, d: 1, e: 5 });
    expect(readySet(plan, new Set(), new Set(), 10)).toEqual(["a", "e", "c"]);
    expect(readySet(plan, new Set(), new Set(), 2)).toEqual(["a", "e"]);
    expect(readySet(plan, new Set(), new Set(["a"]), 2)).toEqual(["e"]);
    expect(readySet(plan, new Set(["a", "c"]), new Set(), 5)).toEqual(["b", "e"]);
    expect(readySet(plan, new Set(["a", "b", "c", "e"]), new Set(), 5)).toEqual(["d"]);
  });
});

describe("repair strategy", () => {
  it("follows severity and root cause", () => {
    expect(chooseStrategy([{ severity: "low", rootCause: "schemaViolation", description: "" }])).toBe(
      "minimalEdit",
    );
    expect(chooseStrategy([{ severity: "medium", rootCause: "factualError", description: "" }])).toBe(
      "minimalEdit",
    );
    expect(chooseStrategy([{ severity: "low", rootCause: "logicError", description: "" }])).toBe(
      "sectionRewrite",
    );
    expect(chooseStrategy([{ severity: "high", rootCause: "toolFailure", description: "" }])).toBe(
      "sectionRewrite",
    );
    expect(chooseStrategy([{ severity: "low", rootCause: "hallucination", description: "" }])).toBe(
      "fullRegeneration",
    );
    expect(chooseStrategy([{ severity: "critical", rootCause: "incompleteness", description: "" }])).toBe(
      "fullRegeneration",
    );
    expect(chooseStrategy([])).toBe("minimalEdit");
    expect(stronger("fullRegeneration")).toBe("fullRegeneration");
  });

  it("similarity is 1 for equal normalised text and low for unrelated text", () => {
    expect(normalizeText("  Hello,   WORLD! ")).toBe("hello world");
    expect(similarity("Hello, world", "hello world")).toBe(1);
    expect(similarity("the quick brown fox", "the quick brown fix")).toBeGreaterThan(0.8);
    expect(similarity("the quick brown fox", "lorem ipsum dolor")).toBeLessThan(0.3);
    expect(similarity("", "!!!")).toBe(1);
  });

  it("a repeated output+diagnosis escalates once, then gives up", () => {
    const defects = [
      { severity: "low" as const, rootCause: "factualError" as const, description: "wrong year" },
    ];
    const first = planRepair(defects, [], "answer 1970", []);
    expect(first).toMatchObject({ strategy: "minimalEdit", loopDetected: false, giveUp: false });
    const h1 = [{ ...first, output: "answer 1970" }];
    const second = planRepair(defects, [], "Answer: 1970.", h1);
    expect(second).toMatchObject({ strategy: "sectionRewrite", loopDetected: true, giveUp: false });
    const third = planRepair(defects, [], "answer 1970", [...h1, { ...second, output: "Answer: 1970." }]);
    expect(third.giveUp).toBe(true);
    const fresh = planRepair(defects, [], "a totally different attempt with new words", h1);
    expect(fresh.loopDetected).toBe(false);
  });
});

describe("quality gates", () => {
  it("pass only when every dimension meets its minimum and the weighted score its threshold", () => {
    const pass = evaluateGates(DEFAULT_RUBRIC, {
      scores: { correctness: 0.9, completeness: 0.8, coherence: 0.8, safety: 1 },
      defects: [],
      repairHints: [],
      passed: false,
    });
    expect(pass.passed).toBe(true);
    expect(pass.maxDeficit).toBe(0);
    const safety = evaluateGates(DEFAULT_RUBRIC, {
      scores: { correctness: 1, completeness: 1, coherence: 1, safety: 0.94 },
      defects: [],
      repairHints: [],
      passed: true,
    });
    expect(safety).toMatchObject({ passed: false, failing: ["safety"] });
    expect(safety.maxDeficit).toBeCloseTo(0.01);
    const weighted = evaluateGates(
      { dimensions: [{ name: "a", weight: 1, min: 0.5 }], threshold: 0.9 },
      { scores: { a: 0.6 }, defects: [], repairHints: [], passed: true },
    );
    expect(weighted).toMatchObject({ passed: false, failing: [] });
    const missing = evaluateGates(DEFAULT_RUBRIC, { scores: {}, defects: [], repairHints: [], passed: true });
    expect(missing.failing).toHaveLength(4);
  });

  it("the gate policy converges only after verification (and the critic, when there is one)", () => {
    const base = { phase: "VERIFY" as const, step: 1, toolCalls: 0, output: "x", signals: [] };
    const ok = [{ index: 0, kind: "nonEmpty" as const, passed: true, message: "" }];
    expect(gatePolicy(undefined).evaluate(base).converged).toBe(false);
    expect(gatePolicy(undefined).evaluate({ ...base, verification: ok }).converged).toBe(true);
    expect(gatePolicy(DEFAULT_RUBRIC).evaluate({ ...base, verification: ok }).reason).toBe("awaiting critic");
  });
});

describe("verifiers", () => {
  it("nonEmpty, regex (with an invalid pattern) and jsonSchema (with an invalid schema)", () => {
    expect(evaluatePureVerifier({ kind: "nonEmpty" }, 0, "  ")?.passed).toBe(false);
    expect(evaluatePureVerifier({ kind: "regex", pattern: "^ok$", flags: "i" }, 0, "OK")?.passed).toBe(true);
    expect(evaluatePureVerifier({ kind: "regex", pattern: "(" }, 0, "x")?.message).toContain(
      "invalid pattern",
    );
    expect(
      evaluatePureVerifier({ kind: "jsonSchema", schema: { type: "nope" } }, 0, "{}")?.message,
    ).toContain("invalid JSON Schema");
    expect(evaluatePureVerifier({ kind: "tool", tool: "t", input: {} }, 0, "x")).toBeUndefined();
  });
});

describe("saga planning", () => {
  it("skips pure actions and flags compensable actions without a compensating tool", () => {
    const plan = planCompensation([
      { actionId: "1", tool: "read", input: {}, output: {}, reversibility: "pure" },
      { actionId: "2", tool: "move", input: {}, output: {}, reversibility: "reversible" },
    ]);
    expect(plan.steps).toEqual([]);
    expect(plan.manual[0]?.reason).toContain("declares no compensating action");
  });
});

describe("critic parsing", () => {
  it("reads a verdict out of prose or fences and refuses malformed ones", async () => {
    expect(parseVerdict('Here you go:\n```json\n{"scores": {"a": 1}, "passed": true}\n```').scores).toEqual({
      a: 1,
    });
    expect(() => parseVerdict("no json")).toThrow(/no JSON object/);
    expect(() => parseVerdict("{not json}")).toThrow(/not valid JSON/);
    expect(() => parseVerdict('{"scores": {"a": 7}, "passed": true}')).toThrow(/malformed/);
    const driver = new ScriptedDriver({ script: [{ text: '{"scores":{"correctness":1},"passed":true}' }] });
    const request = {
      schemaVersion: 1 as const,
      runId: "r",
      task: "T",
      output: "O",
      evidence: [],
      rubric: DEFAULT_RUBRIC,
    };
    expect((await modelCritic(driver)(request)).passed).toBe(true);
    expect(driver.requests[0]?.messages[0]?.content).toBe(criticPrompt(request));
    expect(criticPrompt(request)).toContain("(none)");
  });
});

describe("contracts and runtime helpers", () => {
  it("capabilities accept bare strings for parameterless kinds", () => {
    expect(Capability.parse("rag")).toEqual({ kind: "rag" });
    expect(Capability.parse({ kind: "network", allowedHosts: ["*"] })).toEqual({
      kind: "network",
      allowedHosts: ["*"],
    });
    expect(Capability.safeParse("network").success).toBe(false);
  });

  it("a RunSpec gets its defaults: sovereign privacy and the documented resource bounds", () => {
    const parsed = RunSpec.parse(spec());
    expect(parsed.agent.privacy).toBe("sovereign");
    expect(parsed.agent.resources).toEqual({
      maxIterations: 20,
      maxToolCalls: 50,
      maxCostUsd: 0,
      maxRepairs: 3,
    });
    expect(RunSpec.safeParse({ ...spec(), runId: "bad id!" }).success).toBe(false);
  });

  it("errors carry a stable code, retryability from the table, and their cause", () => {
    const cause = new Error("socket");
    const err = new AgentError("POOL_FULL", "full", { cause, details: { n: 1 } });
    expect(err.retryable).toBe(true);
    expect(err.cause).toBe(cause);
    expect(err.toBody()).toEqual({ code: "POOL_FULL", message: "full", retryable: true, details: { n: 1 } });
    expect(new AgentError("DEPTH_LIMIT", "x").retryable).toBe(false);
    expect(isRetryable(new Error("plain"))).toBe(false);
    expect(toAgentError("weird").code).toBe("INTERNAL");
    expect(toAgentError(err)).toBe(err);
    for (const [code, meta] of Object.entries(ERROR_CODES))
      expect(typeof meta.retryable, code).toBe("boolean");
  });

  it("canonical JSON sorts keys and drops undefined members", () => {
    expect(canonicalJson({ b: 1, a: { d: undefined, c: [3, undefined] } })).toBe(
      '{"a":{"c":[3,null]},"b":1}',
    );
    expect(canonicalJson(undefined)).toBe("null");
  });

  it("the manual clock wakes sleepers in deadline order and honours abort", async () => {
    const clock = new ManualClock(0);
    const woke: number[] = [];
    void clock.sleep(30).then(() => woke.push(30));
    void clock.sleep(10).then(() => woke.push(10));
    const ac = new AbortController();
    const aborted = clock.sleep(20, ac.signal).catch(() => "aborted");
    ac.abort(new Error("stop"));
    await clock.advance(100);
    expect(woke).toEqual([10, 30]);
    expect(await aborted).toBe("aborted");
    expect(clock.pendingSleepers()).toBe(0);
  });

  it("prices unknown models at zero and known ones per million tokens", () => {
    expect(costOf({}, "m", { inputTokens: 1e6, outputTokens: 1e6 })).toBe(0);
    expect(
      costOf({ m: { inputPerMTok: 2, outputPerMTok: 4 } }, "m", {
        inputTokens: 500_000,
        outputTokens: 250_000,
      }),
    ).toBe(2);
  });
});
