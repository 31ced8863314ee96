import type { TaskExit } from "../contracts/run-spec.js";
import { decidingRubric, evaluateGates } from "./policy.js";
import type { LoopState } from "./state.js";

/** The signals a candidate's confidence is made of; a signal the run does not have is absent. */
export interface ConfidenceInputs {
  /** The critic's weighted score (the rubric's weights), when the critic judged this candidate. */
  critic?: number;
  /** The verifiers that passed, of those run on this candidate. */
  verifiers?: { passed: number; total: number };
  /** Share of the answer samples that agree with the chosen one (self-consistency). */
  agreement?: number;
}

export type Disposition = "commit" | "review" | "repair";

export interface Assessment {
  confidence: number;
  inputs: ConfidenceInputs;
  disposition: Disposition;
  autoCommitAt: number;
  reviewAt?: number;
}

/**
 * Confidence in [0, 1]: the product of the signals present (critic score, verifier pass rate,
 * agreement), each in [0, 1]. A product, so a candidate is only as sure as every signal together
 * allows: one weak signal is enough to send it to a human or back to repair.
 */
export function estimateConfidence(inputs: ConfidenceInputs): number {
  const signals = [
    inputs.critic,
    inputs.verifiers && inputs.verifiers.total > 0
      ? inputs.verifiers.passed / inputs.verifiers.total
      : undefined,
    inputs.agreement,
  ].filter((v): v is number => v !== undefined);
  const product = signals.reduce((p, v) => p * Math.min(1, Math.max(0, v)), 1);
  return Math.round(product * 1e6) / 1e6;
}

/** The band a confidence falls in; a candidate the policy rejected is repaired whatever its confidence. */
export function dispose(confidence: number, exit: TaskExit, converged: boolean): Disposition {
  if (!converged) return "repair";
  if (confidence >= exit.autoCommitAt) return "commit";
  if (exit.reviewAt !== undefined && confidence >= exit.reviewAt) return "review";
  return "repair";
}

export function confidenceInputs(s: LoopState): ConfidenceInputs {
  const rubric = decidingRubric(s.spec);
  const verification = s.verification ?? [];
  return {
    ...(rubric && s.verdict ? { critic: evaluateGates(rubric, s.verdict).weighted } : {}),
    ...(verification.length > 0
      ? { verifiers: { passed: verification.filter((r) => r.passed).length, total: verification.length } }
      : {}),
    ...(s.agreement !== undefined ? { agreement: s.agreement } : {}),
  };
}

/** The candidate's confidence and its disposition, for a run whose spec sets `task.exit`; else undefined. */
export function assessConfidence(s: LoopState, converged: boolean): Assessment | undefined {
  const exit = s.spec.task.exit;
  if (!exit) return undefined;
  const inputs = confidenceInputs(s);
  const confidence = estimateConfidence(inputs);
  return {
    confidence,
    inputs,
    disposition: dispose(confidence, exit, converged),
    autoCommitAt: exit.autoCommitAt,
    ...(exit.reviewAt !== undefined ? { reviewAt: exit.reviewAt } : {}),
  };
}

export interface Risk {
  level: "low" | "medium" | "high";
  factors: string[];
}

/**
 * What a reviewer should weigh: the critic's remaining defects, doubt among the samples, and the
 * side effects already done that a rejection would have to undo.
 */
export function riskOf(s: LoopState, confidence: number): Risk {
  const defects = s.verdict?.defects ?? [];
  const autoCommitAt = s.spec.task.exit?.autoCommitAt;
  const factors = [
    ...(autoCommitAt !== undefined && confidence < autoCommitAt
      ? [`confidence ${confidence} is below autoCommitAt ${autoCommitAt}`]
      : []),
    ...defects.map((d) => `${d.severity} ${d.rootCause}: ${d.description}`),
    ...(s.agreement !== undefined && s.agreement < 1 ? [`samples agree at ${s.agreement}`] : []),
    ...(s.completed.length > 0 ? [`${s.completed.length} completed tool call(s) with side effects`] : []),
  ];
  const severe = defects.some((d) => d.severity === "high" || d.severity === "critical");
  const level = severe || s.completed.length > 0 ? "high" : factors.length > 0 ? "medium" : "low";
  return { level, factors };
}

/** What the runtime recommends to the reviewer: changes when the critic still names defects or hints. */
export function recommendation(s: LoopState): "approve" | "modify" {
  const v = s.verdict;
  return v && (v.defects.length > 0 || v.repairHints.length > 0) ? "modify" : "approve";
}

/** The review a human is asked for: scores, confidence, risk and the recommended action. */
export function reviewData(s: LoopState, confidence: number, trigger: string): Record<string, unknown> {
  return {
    trigger,
    scores: s.verdict?.scores ?? null,
    confidence,
    risk: riskOf(s, confidence),
    recommendation: recommendation(s),
    output: s.output,
  };
}
