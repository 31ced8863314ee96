import { describe, expect, it } from "vitest";
import { RepairControl, type RunSpecInput } from "../../shared/contracts/run-spec.js";
import type { CriticVerdict } from "../../shared/contracts/rubric.js";
import {
  controlStep,
  INITIAL_CONTROLLER,
  repairError,
  strategyFor,
  strongest,
  type ControllerState,
} from "../../shared/loop/repair-controller.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { EffectPerformer } from "../../shared/loop/performer.js";
import type { LoopState } from "../../shared/loop/state.js";
import { ManualClock } from "../../shared/runtime/clock.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { kinds, registry, runner, spec, START } from "../helpers/fixtures.js";

const gains = RepairControl.parse({});

/** Feeds errors to a fresh controller, one repair cycle each. */
function run(errors: number[], g = gains): ReturnType<typeof controlStep>[] {
  let state: ControllerState = INITIAL_CONTROLLER;
  return errors.map((e) => {
    const step = controlStep(g, state, e);
    state = step.state;
    return step;
  });
}

describe("the PID repair controller (pure)", () => {
  it("intensity follows Kp·e + Ki·Σe + Kd·Δe, clamped to [0, 1]", () => {
    const g = { ...gains, kp: 1, ki: 0.5, kd: 2 };
    const [first, second] = run([0.2, 0.3], g);
    expect(first?.intensity).toBeCloseTo(1 * 0.2 + 0.5 * 0.2 + 0);
    expect(second?.derivative).toBeCloseTo(0.1);
    expect(second?.intensity).toBeCloseTo(Math.min(1, 0.3 + 0.5 * 0.5 + 2 * 0.1));
    expect(run([5])[0]?.intensity).toBe(1);
    expect(run([0])[0]?.intensity).toBe(0);
  });

  it("a large gap asks for a new answer, a small one for an edit; improving lowers the intensity", () => {
    expect(run([0.5])[0]?.strategy).toBe("fullRegeneration");
    expect(run([0.1])[0]?.strategy).toBe("minimalEdit");
    const [, improving] = run([0.3, 0.15]);
    const [, flat] = run([0.3, 0.3]);
    expect(improving?.intensity).toBeLessThan(flat?.intensity ?? 0);
  });

  it("strategy bands split [0, 1] in thirds; combining keeps the stronger of two strategies", () => {
    expect([0, 0.3, 0.34, 0.66, 0.67, 1].map(strategyFor)).toEqual([
      "minimalEdit",
      "minimalEdit",
      "sectionRewrite",
      "sectionRewrite",
      "fullRegeneration",
      "fullRegeneration",
    ]);
    expect(strongest("sectionRewrite", "minimalEdit")).toBe("sectionRewrite");
    expect(strongest("minimalEdit", "fullRegeneration")).toBe("fullRegeneration");
  });

  it("a stall is stallWindow cycles without an improvement beyond the noise floor, counted against the best error", () => {
    expect(run([0.4, 0.39, 0.385]).map((s) => s.stalled)).toEqual([false, false, true]);
    expect(run([0.4, 0.3, 0.2, 0.1]).some((s) => s.stalled)).toBe(false);
    // Getting worse then back to the best is no improvement either.
    expect(run([0.3, 0.5, 0.3]).map((s) => s.state.flat)).toEqual([0, 1, 2]);
    expect(run([0.4, 0.4, 0.4, 0.4], { ...gains, stallWindow: 3 }).map((s) => s.stalled)).toEqual([
      false,
      false,
      false,
      true,
    ]);
  });

  it("the error is the weighted score's distance to the threshold, or the largest dimension deficit", () => {
    const verifiers = { passed: 1, total: 1 };
    expect(repairError({ threshold: 0.8, weighted: 0.5, maxDeficit: 0, verifiers })).toBeCloseTo(0.3);
    expect(repairError({ threshold: 0.8, weighted: 0.9, maxDeficit: 0.2, verifiers })).toBeCloseTo(0.2);
    expect(repairError({ threshold: 0.8, weighted: 0.9, maxDeficit: 0, verifiers })).toBe(0);
    // Stopped by the verifiers before the critic: the failed share of the setpoint.
    const half = { passed: 1, total: 2 };
    expect(
      repairError({ threshold: 0.8, weighted: undefined, maxDeficit: undefined, verifiers: half }),
    ).toBeCloseTo(0.4);
    expect(
      repairError({ threshold: undefined, weighted: undefined, maxDeficit: undefined, verifiers: half }),
    ).toBe(0.5);
    // Nothing measured (the critic failed): no reading.
    expect(
      repairError({ threshold: 0.8, weighted: undefined, maxDeficit: undefined, verifiers }),
    ).toBeUndefined();
  });
});

const RUBRIC = { dimensions: [{ name: "correctness", weight: 1, min: 0 }], threshold: 0.8 };
const verdict = (score: number): string =>
  JSON.stringify({
    scores: { correctness: score },
    defects: [{ severity: "low", rootCause: "incompleteness", description: `scored ${score}` }],
    repairHints: [],
    passed: score >= 0.8,
  } satisfies CriticVerdict);
const answers = ["alpha one", "bravo two three", "charlie four five six", "delta seven", "echo eight nine"];

function controlled(scores: number[], extra: Partial<RunSpecInput["agent"]> = {}): RunSpecInput {
  const s = spec({
    script: answers.map((text) => ({ text })),
    critic: {
      rubric: RUBRIC,
      model: { provider: "scripted", script: scores.map((v) => ({ text: verdict(v) })) },
    },
    resources: { maxRepairs: 4, repair: {} },
  });
  return { ...s, agent: { ...s.agent, ...extra } };
}

describe("the repair controller in the loop", () => {
  it("improving scores are repaired until the gate passes; each repair records the controller's reading", async () => {
    const result = await runner().run(controlled([0.3, 0.5, 0.7, 0.9]));
    expect(result.state.status).toBe("committed");
    const repairs = result.audit.filter((e) => e.kind === "repair.started");
    expect(repairs.map((e) => (e.data?.control as { error: number }).error)).toEqual([
      expect.closeTo(0.5),
      expect.closeTo(0.3),
      expect.closeTo(0.1),
    ]);
    expect(repairs[0]?.data?.strategy).toBe("fullRegeneration");
    expect(kinds(result)).not.toContain("repair.stalled");
  });

  it("flat scores stall after stallWindow repairs and FAIL repairStalled, with repairs left in the budget", async () => {
    const result = await runner().run(controlled([0.5, 0.5, 0.51, 0.9]));
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("repairStalled");
    expect(kinds(result).filter((k) => k === "repair.started")).toHaveLength(2);
    expect(result.audit.find((e) => e.kind === "repair.stalled")?.data).toMatchObject({
      cycles: 2,
      stallWindow: 2,
    });
  });

  it("a stall with no repair left ends as the budget says: maxRepairs, not an escalation", async () => {
    const s = controlled([0.5, 0.5, 0.5, 0.9]);
    const result = await runner().run({
      ...s,
      agent: { ...s.agent, resources: { maxRepairs: 2, repair: {} } },
    });
    expect(result.state.terminal?.reason).toBe("maxRepairs");
    expect(kinds(result)).not.toContain("repair.stalled");
  });

  it("a stall switches to the escalation model, which answers from then on", async () => {
    const escalationModel = { provider: "scripted" as const, script: [{ text: "the stronger answer" }] };
    const result = await runner().run(controlled([0.5, 0.5, 0.5, 0.9], { escalationModel }));
    expect(result.state.status).toBe("committed");
    expect(result.state.output).toBe("the stronger answer");
    expect(result.state.escalatedAtStep).toBe(3);
    expect(result.audit.find((e) => e.kind === "repair.escalated")?.data).toMatchObject({
      to: "model",
      model: "scripted",
      atStep: 3,
    });
  });

  it("a stuck model repeating itself is switched on a stall, not failed as a semantic loop before the switch answers", async () => {
    const escalationModel = { provider: "scripted" as const, script: [{ text: "the stronger answer" }] };
    const stuck = controlled([0.5, 0.5, 0.5, 0.9], { escalationModel });
    const repeating = { provider: "scripted" as const, script: [{ text: "weak draft" }], loop: true };
    const result = await runner().run({ ...stuck, agent: { ...stuck.agent, model: repeating } });
    expect(kinds(result)).toContain("repair.escalated");
    expect(result.state.terminal?.reason).not.toBe("semanticLoop");
    expect(result.state.status).toBe("committed");
    expect(result.state.output).toBe("the stronger answer");
  });

  it("an escalation model alone turns the controller on with its defaults; without either, repairs run to maxRepairs", async () => {
    const off = spec({
      script: answers.map((text) => ({ text })),
      critic: {
        rubric: RUBRIC,
        model: { provider: "scripted", script: [{ text: verdict(0.5) }], loop: true },
      },
      resources: { maxRepairs: 3 },
    });
    const result = await runner().run(off);
    expect(result.state.terminal?.reason).toBe("maxRepairs");
    expect(kinds(result)).not.toContain("repair.stalled");
    const escalationModel = { provider: "scripted" as const, script: [{ text: "the stronger answer" }] };
    const on = await runner().run({ ...off, agent: { ...off.agent, escalationModel } });
    expect(kinds(on)).toContain("repair.escalated");
  });

  it("a candidate repaired for low confidence is measured by its shortfall to the review band", async () => {
    const s = controlled([0.6, 0.6, 0.6]);
    const lenient = { ...RUBRIC, threshold: 0.5 };
    const result = await runner().run({
      ...s,
      task: { ...s.task, exit: { autoCommitAt: 0.9, reviewAt: 0.7 } },
      critic: { ...s.critic, rubric: lenient },
    });
    const repairs = result.audit.filter((e) => e.kind === "repair.started");
    expect(repairs.map((e) => (e.data?.control as { error: number }).error)).toEqual([
      expect.closeTo(0.1),
      expect.closeTo(0.1),
    ]);
    // The review band doubles as the human to escalate to.
    expect(result.state.status).toBe("awaiting_approval");
    expect(result.audit.find((e) => e.kind === "repair.escalated")?.data).toMatchObject({ to: "human" });
  });

  it("a stall in a run with a human in the loop asks for a review carrying scores, risk and a recommendation", async () => {
    const s = controlled([0.5, 0.5, 0.5]);
    const result = await runner().run({ ...s, task: { ...s.task, requiresApproval: true } });
    expect(result.state.status).toBe("awaiting_approval");
    expect(result.audit.find((e) => e.kind === "repair.escalated")?.data).toMatchObject({ to: "human" });
    expect(result.audit.findLast((e) => e.kind === "approval.requested")?.data).toMatchObject({
      on: "commit",
      trigger: "repairStalled",
      scores: { correctness: 0.5 },
      risk: { level: "medium" },
      recommendation: "modify",
    });
  });
});

describe("the escalation model on another worker", () => {
  it("a worker taking over an escalated run asks the escalation model, from where its script stands", async () => {
    const base = spec({ script: [{ text: "weak" }] });
    const parsed = RunSpec.parse({
      ...base,
      agent: {
        ...base.agent,
        escalationModel: { provider: "scripted", script: [{ text: "strong 1" }, { text: "strong 2" }] },
      },
    });
    const performer = new EffectPerformer({
      registry: registry(),
      clock: new ManualClock(START),
      random: seededRandom(1),
    });
    const ask = async (state: Partial<LoopState>): Promise<unknown> => {
      const event = await performer.perform(
        { type: "callModel", requestId: "model-1", request: { messages: [], tools: [] } },
        { runId: `r-${String(state.step)}`, spec: parsed, ...state } as LoopState,
      );
      return event?.type === "modelResponded" ? event.response.text : event;
    };
    // Three responses so far, the last from the escalation model (switched at step 2): its second answer next.
    expect(await ask({ step: 3, escalatedAtStep: 2 })).toBe("strong 2");
    expect(await ask({ step: 0 })).toBe("weak");
  });
});
