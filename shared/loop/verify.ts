import type { CriticVerdict, Defect, ReviewUsage } from "../contracts/rubric.js";
import { checkRepair } from "./guard.js";
import { startAction } from "./action.js";
import type { Draft } from "./draft.js";
import { policyOf, requestModel, viewOf } from "./model-step.js";
import { criticRubric, evaluateGates } from "./policy.js";
import { settleDecision } from "./disposition.js";
import { requestApproval } from "./human-review.js";
import { planRepair, repairPrompt } from "./repair.js";
import { strategyFor, strongest } from "./repair-controller.js";
import { controlRepair } from "./repair-escalation.js";
import { chargeReview } from "./review-usage.js";
import type { LoopConfig } from "./state.js";
import { commit, fail, halt } from "./terminal.js";
import {
  evaluatePureVerifier,
  toolVerifierPassed,
  verifierDefects,
  type VerifierResult,
} from "./verifiers.js";

const EVIDENCE_LIMIT = 20;

/** VERIFY: the model proposed an answer; the runtime checks it. */
export function enterVerify(d: Draft, config: LoopConfig, reason: string): void {
  const s = d.state;
  s.queue = [];
  d.enter("VERIFY", reason);
  const verifiers = s.spec.task.verifiers ?? [];
  const results: VerifierResult[] = [];
  const toolIndexes: number[] = [];
  verifiers.forEach((verifier, index) => {
    const result = evaluatePureVerifier(verifier, index, s.output);
    if (result) results.push(result);
    else toolIndexes.push(index);
  });
  s.verification = results;
  s.verdict = null;
  s.verifyQueue = toolIndexes;
  continueVerify(d, config);
}

function continueVerify(d: Draft, config: LoopConfig): void {
  const s = d.state;
  const [index, ...rest] = s.verifyQueue;
  if (index === undefined) {
    verificationDone(d, config);
    return;
  }
  s.verifyQueue = rest;
  const verifier = s.spec.task.verifiers?.[index];
  if (verifier?.kind !== "tool") return;
  s.actionCount += 1;
  const actionId = `verify-${s.actionCount}`;
  startAction(d, config, {
    actionId,
    tool: verifier.tool,
    input: verifier.input,
    purpose: "verify",
    audit: { kind: "tool.intent", data: { actionId, purpose: "verify" } },
    link: { verifierIndex: index },
  });
}

/** A tool verifier answered (ok with output, or an error). */
export function recordToolVerifier(
  d: Draft,
  config: LoopConfig,
  ok: boolean,
  output: unknown,
  detail: string,
): void {
  const s = d.state;
  const pending = s.pending;
  if (pending?.kind !== "tool" || pending.verifierIndex === undefined) return;
  const verifier = s.spec.task.verifiers?.[pending.verifierIndex];
  const passed = ok && verifier?.kind === "tool" && toolVerifierPassed(verifier, output);
  const message = ok
    ? passed
      ? `tool '${pending.tool}' passed`
      : `tool '${pending.tool}' output differs from expect`
    : detail;
  s.verification = [
    ...(s.verification ?? []),
    { index: pending.verifierIndex, kind: "tool", passed, message },
  ];
  d.settle();
  continueVerify(d, config);
}

function verificationDone(d: Draft, config: LoopConfig): void {
  const s = d.state;
  const results = s.verification ?? [];
  const failed = results.filter((r) => !r.passed);
  if (failed.length > 0 || !s.spec.critic) {
    decide(d, config, verifierDefects(results), []);
    return;
  }
  const rubric = criticRubric(s.spec);
  if (!rubric) return;
  d.enter("CRITIQUE", "verifiers passed", { verification: results });
  d.audit("critic.requested", "started", { actor: "critic" });
  s.critiques += 1;
  d.await(
    {
      type: "critique",
      request: {
        schemaVersion: 1,
        runId: s.runId,
        task: s.spec.task.prompt,
        output: s.output,
        evidence: s.evidence.slice(-EVIDENCE_LIMIT),
        rubric,
      },
    },
    { kind: "critic" },
  );
}

export function onCriticVerdict(
  d: Draft,
  config: LoopConfig,
  verdict: CriticVerdict,
  usage?: ReviewUsage,
): void {
  const s = d.state;
  s.verdict = verdict;
  const rubric = criticRubric(s.spec);
  const gates = rubric ? evaluateGates(rubric, verdict) : null;
  d.audit("critic.verdict", gates?.passed ? "passed" : "failed", {
    actor: "critic",
    data: { scores: verdict.scores, gates, defects: verdict.defects.length, ...(usage ? { usage } : {}) },
  });
  d.settle();
  if (!chargeReview(d, config, usage)) return;
  const gateDefects: Defect[] = (gates?.failing ?? []).map((dimension) => ({
    dimension,
    severity: "medium",
    rootCause:
      dimension === "safety"
        ? "safetyViolation"
        : dimension === "coherence"
          ? "incoherence"
          : "incompleteness",
    description: `${dimension} scored ${verdict.scores[dimension] ?? 0}, below its minimum`,
  }));
  const defects = verdict.defects.length > 0 ? verdict.defects : gateDefects;
  decide(d, config, defects, verdict.repairHints);
}

/**
 * The runtime's verdict on a proposal: the policy converges, or the run goes to REPAIR. With
 * `task.exit`, a converged candidate's confidence picks its disposition: commit, a human's review,
 * or another repair.
 */
function decide(d: Draft, config: LoopConfig, defects: Defect[], hints: string[]): void {
  const s = d.state;
  const policy = policyOf(s, config);
  const decision = policy.evaluate(viewOf(s));
  const outcome = settleDecision(d, decision, policy.name);
  if (outcome.settled) return;
  const assessed = outcome.assessed;
  const why =
    decision.converged && assessed
      ? `confidence ${assessed.confidence} is below ${assessed.reviewAt !== undefined ? "reviewAt" : "autoCommitAt"}`
      : decision.reason;
  const found =
    defects.length > 0
      ? defects
      : [{ severity: "medium" as const, rootCause: "incompleteness" as const, description: why }];
  const controlled = controlRepair(d, config, assessed);
  if (controlled.stop) return;
  repair(d, config, found, hints, undefined, controlled.control);
}

/**
 * REPAIR: bounded by maxRepairs; the strategy follows the defects, raised to the repair
 * controller's intensity when it measured this candidate; then back to ACT.
 */
export function repair(
  d: Draft,
  config: LoopConfig,
  defects: Defect[],
  hints: string[],
  feedback?: string,
  control?: { error: number; derivative: number; intensity: number },
): void {
  const s = d.state;
  d.enter("REPAIR", `${defects.length} defect(s)`);
  s.defects = defects;
  const planned = planRepair(defects, hints, s.output, s.repairHistory);
  const plan = control
    ? { ...planned, strategy: strongest(planned.strategy, strategyFor(control.intensity)) }
    : planned;
  if (feedback === undefined) {
    const { state, verdict } = checkRepair(s.guard, s.limits);
    s.guard = state;
    d.guard(verdict);
    if (verdict.kind === "circuitBreak") {
      giveUp(d, config, "maxRepairs", plan.diagnosis);
      return;
    }
    // A model switched in by this very stall has not answered yet: the old one's repeats are not its own.
    const switched = s.escalatedAtStep === s.step;
    if (plan.giveUp && !switched) {
      giveUp(d, config, "semanticLoop", `the same output and diagnosis keep coming back\n${plan.diagnosis}`);
      return;
    }
  }
  s.repairHistory = [
    ...s.repairHistory,
    { output: s.output, diagnosis: plan.diagnosis, strategy: plan.strategy, loopDetected: plan.loopDetected },
  ];
  d.audit("repair.started", "started", {
    data: {
      strategy: plan.strategy,
      loopDetected: plan.loopDetected,
      defects: defects.length,
      ...(control ? { control } : {}),
    },
  });
  s.messages = [
    ...s.messages,
    { role: "user", content: repairPrompt(plan.strategy, plan.diagnosis, feedback) },
  ];
  s.verification = null;
  s.verdict = null;
  d.enter("ACT", `repair: ${plan.strategy}`);
  requestModel(d, config);
}

/** Repairs are exhausted: FAIL, or HALT for a human when the task asks for approval. */
function giveUp(d: Draft, config: LoopConfig, reason: string, diagnosis: string): void {
  if (!d.state.spec.task.requiresApproval) {
    fail(d, config, reason, diagnosis);
    return;
  }
  halt(d, `${reason}: awaiting a human decision`, "system");
  d.state.status = "awaiting_approval";
  requestApproval(d, "failure", diagnosis);
}

/**
 * A human decided on the run's commit (or failure). Their words are the decision's `feedback`, or
 * its `reason` (what `agentctl reject --reason` sends): recorded with the decision, in a
 * rejection's failure report, and given to the model when they ask for changes ("modify").
 */
export function onApproval(
  d: Draft,
  config: LoopConfig,
  decision: "approve" | "reject" | "modify",
  by: string,
  words: string | undefined,
): void {
  const s = d.state;
  d.audit("approval.decided", decision === "reject" ? "failed" : "passed", {
    actor: "human",
    ...(words ? { reason: words } : {}),
    data: { decision, by },
  });
  d.settle();
  s.terminal = null;
  s.haltedFrom = null;
  s.status = "running";
  if (decision === "approve") commit(d, `approved by ${by}`);
  else if (decision === "reject")
    fail(d, config, "rejected", `rejected by ${by}${words ? `: ${words}` : ""}`);
  else repair(d, config, s.defects, [], words ?? "modify requested");
}
