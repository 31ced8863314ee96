import type { Phase } from "../contracts/audit.js";
import type { CriticVerdict, Rubric } from "../contracts/rubric.js";
import type { RunSpec } from "../contracts/run-spec.js";
import { DEFAULT_RUBRIC } from "../contracts/rubric.js";
import { AgentError } from "../runtime/errors.js";
import type { VerifierResult } from "./verifiers.js";

/** A progress signal a tool emitted: recorded with where it came from, never interpreted. */
export interface Signal {
  step: number;
  tool: string;
  name: string;
}

/** What a convergence policy may look at. */
export interface PolicyView {
  phase: Phase;
  /** Model responses so far. */
  step: number;
  toolCalls: number;
  output: string;
  signals: readonly Signal[];
  /** Present once VERIFY has run on the current output. */
  verification?: readonly VerifierResult[];
  /** Present once the critic has judged the current output. */
  verdict?: CriticVerdict;
}

export interface PolicyDecision {
  converged: boolean;
  reason: string;
}

/**
 * The authority on COMMIT. It is consulted before each model call, after each model response
 * (before any tool runs) and after verification; the model's own "I'm done" is only a proposal.
 * A policy must be a pure function of the view: a run is replayed from its log through it.
 */
export interface ConvergencePolicy {
  readonly name: string;
  evaluate(view: PolicyView): PolicyDecision;
}

/** The policies every worker knows, by the name a RunSpec's `policy` gives them. */
export const BUILTIN_POLICIES = ["gates", "verifiers", "neverConverges"] as const;
export type BuiltinPolicy = (typeof BUILTIN_POLICIES)[number];

export function isBuiltinPolicy(name: string): name is BuiltinPolicy {
  return (BUILTIN_POLICIES as readonly string[]).includes(name);
}

/** Policies an operator registered in a worker, by name (see registerPolicies). */
export type RegisteredPolicies = ReadonlyMap<string, ConvergencePolicy>;

/** Nothing converges by accident: a run under it ends only through its bounds. */
export const neverConverges: ConvergencePolicy = {
  name: "neverConverges",
  evaluate: () => ({ converged: false, reason: "this policy never converges" }),
};

export interface GateResult {
  passed: boolean;
  weighted: number;
  /** min − score per dimension (positive = short of its minimum); a missing score counts as 0. */
  deficits: Record<string, number>;
  /** The L∞ norm of the positive deficits: 0 when every dimension meets its minimum. */
  maxDeficit: number;
  failing: string[];
}

/**
 * Quality gates: every dimension must reach its minimum (the L∞ deficit is zero) and the weighted
 * score must reach the threshold. The critic's own `passed` flag is advice and is not read here.
 */
export function evaluateGates(rubric: Rubric, verdict: CriticVerdict): GateResult {
  const totalWeight = rubric.dimensions.reduce((sum, d) => sum + d.weight, 0);
  const deficits: Record<string, number> = {};
  const failing: string[] = [];
  let weightedSum = 0;
  for (const dimension of rubric.dimensions) {
    const score = verdict.scores[dimension.name] ?? 0;
    weightedSum += dimension.weight * score;
    deficits[dimension.name] = dimension.min - score;
    if (score < dimension.min) failing.push(dimension.name);
  }
  const weighted = totalWeight > 0 ? weightedSum / totalWeight : 0;
  const maxDeficit = Math.max(0, ...Object.values(deficits));
  return {
    passed: failing.length === 0 && weighted >= rubric.threshold,
    weighted,
    deficits,
    maxDeficit,
    failing,
  };
}

/**
 * Converges when every verifier passed and, with a rubric (a critic), every quality gate did too.
 * Without a rubric it is the `verifiers` policy: a critic's verdict, if any, is not read.
 */
export function gatePolicy(rubric: Rubric | undefined, name = "gates"): ConvergencePolicy {
  return {
    name,
    evaluate(view) {
      if (!view.verification) return { converged: false, reason: "not verified yet" };
      const failed = view.verification.filter((r) => !r.passed);
      if (failed.length > 0) return { converged: false, reason: `${failed.length} verifier(s) failed` };
      if (!rubric) return { converged: true, reason: "all verifiers passed" };
      if (!view.verdict) return { converged: false, reason: "awaiting critic" };
      const gates = evaluateGates(rubric, view.verdict);
      return gates.passed
        ? { converged: true, reason: `quality gates passed (weighted ${gates.weighted.toFixed(3)})` }
        : {
            converged: false,
            reason: `quality gates failed: ${gates.failing.join(", ") || "weighted score below threshold"}`,
          };
    },
  };
}

export function criticRubric(spec: RunSpec): Rubric | undefined {
  if (!spec.critic) return undefined;
  return spec.critic.rubric ?? spec.task.rubric ?? DEFAULT_RUBRIC;
}

/**
 * The rubric whose scores count toward confidence and the repair controller: the critic's, unless
 * the run's policy is `verifiers`, under which the critic reviews but never decides.
 */
export function decidingRubric(spec: RunSpec): Rubric | undefined {
  return spec.policy === "verifiers" ? undefined : criticRubric(spec);
}

/**
 * The policy a RunSpec names, built in or registered; undefined for a name this worker does not
 * register. No name is `gates`, which for a spec without verifiers or critic never converges.
 */
export function namedPolicy(
  spec: RunSpec,
  registered: RegisteredPolicies = new Map(),
): ConvergencePolicy | undefined {
  const name = spec.policy ?? "gates";
  switch (name) {
    case "gates": {
      const hasVerifiers = (spec.task.verifiers?.length ?? 0) > 0;
      return !hasVerifiers && !spec.critic ? neverConverges : gatePolicy(criticRubric(spec));
    }
    case "verifiers":
      return gatePolicy(undefined, "verifiers");
    case "neverConverges":
      return neverConverges;
    default:
      return registered.get(name);
  }
}

/**
 * The policy a RunSpec asks for. A run whose worker does not register it fails at its start (see
 * fsm.ts); one under way (a take-over, a resume) is handed back for a worker that does.
 */
export function policyFromSpec(spec: RunSpec, registered?: RegisteredPolicies): ConvergencePolicy {
  const policy = namedPolicy(spec, registered);
  if (policy) return policy;
  throw new AgentError(
    "POLICY_UNAVAILABLE",
    `policy '${spec.policy ?? ""}' is not registered in this worker: register it (AGENT_POLICY_MODULES, or startAgentWorker({ policies })) on every worker`,
  );
}
