import type { ModelRef } from "../contracts/model.js";
import { RepairControl, type RunSpec } from "../contracts/run-spec.js";
import { confidenceInputs, estimateConfidence, reviewData, type Assessment } from "./confidence.js";
import type { Draft } from "./draft.js";
import { requestApproval } from "./human-review.js";
import { decidingRubric, evaluateGates } from "./policy.js";
import { afterEscalation, controlStep, INITIAL_CONTROLLER, repairError } from "./repair-controller.js";
import type { LoopConfig, LoopState } from "./state.js";
import { fail } from "./terminal.js";

/**
 * The controller's gains for a run that has one: `agent.resources.repair`, or its defaults when the
 * spec only names an `escalationModel` (escalating needs stall detection). Absent: no controller.
 */
export function repairControlOf(spec: RunSpec): RepairControl | undefined {
  return spec.agent.resources.repair ?? (spec.agent.escalationModel ? RepairControl.parse({}) : undefined);
}

/** Whether the spec has a human in the loop to escalate to: it asks for approval or has a review band. */
export function humanReviewable(spec: RunSpec): boolean {
  return spec.task.requiresApproval === true || spec.task.exit?.reviewAt !== undefined;
}

/** A model as the audit names it: provider and model, never a script or a key. */
export function modelLabel(ref: ModelRef): string {
  switch (ref.provider) {
    case "scripted":
      return "scripted";
    case "actor":
      return `actor:${ref.name}`;
    default:
      return `${ref.provider}:${ref.model}`;
  }
}

/**
 * The judged candidate's distance to the quality gate (see repairError). With `task.exit`, also
 * its confidence's distance to the band that stops repairs (reviewAt, else autoCommitAt): a
 * candidate repaired for low confidence is measured by what it lacks, the larger of the two.
 */
export function measuredError(s: LoopState, assessed?: Assessment): number | undefined {
  const gate = gateError(s);
  if (!assessed) return gate;
  const shortfall = Math.max(0, (assessed.reviewAt ?? assessed.autoCommitAt) - assessed.confidence);
  return Math.max(gate ?? 0, shortfall);
}

function gateError(s: LoopState): number | undefined {
  const rubric = decidingRubric(s.spec);
  const gates = rubric && s.verdict ? evaluateGates(rubric, s.verdict) : undefined;
  const verification = s.verification ?? [];
  return repairError({
    threshold: rubric?.threshold,
    weighted: gates?.weighted,
    maxDeficit: gates?.maxDeficit,
    verifiers: { passed: verification.filter((r) => r.passed).length, total: verification.length },
  });
}

/** What the controller made of a candidate: stop (a human or FAIL took over), or repair it. */
export type ControlOutcome =
  { stop: true } | { stop: false; control?: { error: number; derivative: number; intensity: number } };

/**
 * Feeds a judged candidate that is to be repaired to the run's controller: the repair goes ahead
 * (with the controller's reading when it measured one, on the stronger model after a switch), or
 * a stall handed the run to a human or failed it.
 */
export function controlRepair(d: Draft, config: LoopConfig, assessed?: Assessment): ControlOutcome {
  const s = d.state;
  const gains = repairControlOf(s.spec);
  const error = gains ? measuredError(s, assessed) : undefined;
  if (!gains || error === undefined) return { stop: false };
  const step = controlStep(gains, s.repairControl ?? INITIAL_CONTROLLER, error);
  s.repairControl = step.state;
  const control = { error: step.error, derivative: step.derivative, intensity: step.intensity };
  // With no repair left the budget ends the run anyway (maxRepairs, as without a controller).
  const spent = s.guard.repairs >= s.limits.maxRepairs;
  if (!step.stalled || spent) return { stop: false, control };
  const diagnosis =
    `the error to the quality gate stayed at ${step.error.toFixed(3)} (best ${step.state.best?.toFixed(3)}) ` +
    `for ${step.state.flat} repair(s), within the noise floor ${gains.noiseFloor}`;
  d.audit("repair.stalled", "failed", {
    reason: diagnosis,
    data: {
      error: step.error,
      best: step.state.best,
      cycles: step.state.flat,
      noiseFloor: gains.noiseFloor,
      stallWindow: gains.stallWindow,
    },
  });
  s.repairControl = afterEscalation(step.state);
  return escalate(d, config, diagnosis) ? { stop: false, control } : { stop: true };
}

/** The escalation ladder: the stronger model once, then a human when the spec has one, else FAIL. */
function escalate(d: Draft, config: LoopConfig, diagnosis: string): boolean {
  const s = d.state;
  const model = s.spec.agent.escalationModel;
  if (model && s.escalatedAtStep === undefined) {
    s.escalatedAtStep = s.step;
    d.audit("repair.escalated", "started", {
      reason: `repairs stalled: switching to ${modelLabel(model)}`,
      data: { to: "model", from: modelLabel(s.spec.agent.model), model: modelLabel(model), atStep: s.step },
    });
    return true;
  }
  if (humanReviewable(s.spec)) {
    d.audit("repair.escalated", "started", {
      reason: "repairs stalled: a human reviews",
      data: { to: "human" },
    });
    const confidence = estimateConfidence(confidenceInputs(s));
    requestApproval(d, "commit", `repairs stalled: ${diagnosis}`, reviewData(s, confidence, "repairStalled"));
    return false;
  }
  fail(d, config, "repairStalled", diagnosis);
  return false;
}
