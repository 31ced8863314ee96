import { DEFAULT_MAX_TOKENS, type ModelRef, type ModelRequest, type ToolSpec } from "../contracts/model.js";
import { checkDeadline, checkIteration } from "./guard.js";
import type { Draft } from "./draft.js";
import type { ConvergencePolicy, PolicyView } from "./policy.js";
import { policyFromSpec } from "./policy.js";
import { FINISH_TOOL, type LoopConfig, type LoopState } from "./state.js";
import { settleDecision } from "./disposition.js";
import { fail } from "./terminal.js";
import { windowTranscript } from "./transcript.js";

const FINISH_SPEC: ToolSpec = {
  name: FINISH_TOOL,
  description: "Propose your final answer. The runtime verifies it before the run can complete.",
  inputSchema: {
    type: "object",
    properties: { answer: { type: "string", description: "The final answer." } },
    required: ["answer"],
  },
};

export function policyOf(state: LoopState, config: LoopConfig): ConvergencePolicy {
  return config.policy ?? policyFromSpec(state.spec, config.policies);
}

export function viewOf(s: LoopState): PolicyView {
  return {
    phase: s.phase,
    step: s.step,
    toolCalls: s.guard.toolCalls,
    output: s.output,
    signals: s.signals,
    ...(s.verification ? { verification: s.verification } : {}),
    ...(s.verdict ? { verdict: s.verdict } : {}),
  };
}

/**
 * Consults the policy; a convergence goes where it goes from VERIFY (see settleDecision): true when the
 * run committed or waits for a human, and the caller must stop.
 */
export function convergedNow(d: Draft, config: LoopConfig): boolean {
  const policy = policyOf(d.state, config);
  const decision = policy.evaluate(viewOf(d.state));
  if (!decision.converged) return false;
  return settleDecision(d, decision, policy.name).settled;
}

export function visibleTools(state: LoopState, config: LoopConfig): ToolSpec[] {
  const names = new Set(state.spec.agent.tools);
  return config.tools
    .filter((t) => names.has(t.name))
    .map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
}

/** How many times the model is asked for each answer it proposes (task.samples). */
export function sampleCount(state: LoopState): number {
  return state.spec.task.samples ?? 1;
}

/**
 * The sampling parameters of a call: the ref's, a reply length always (a model with no limit may
 * run until its context is full), and for sample k of a round the seed + k - 1, so that seeded
 * samples differ from each other and each is reproducible.
 */
export function samplingParams(
  ref: ModelRef,
  sample: number,
): Pick<ModelRequest, "maxTokens" | "temperature" | "seed"> {
  const given: { maxTokens?: number; temperature?: number; seed?: number } =
    ref.provider === "scripted" ? {} : ref;
  const seed = given.seed === undefined ? {} : { seed: given.seed + sample - 1 };
  return {
    maxTokens: given.maxTokens ?? DEFAULT_MAX_TOKENS,
    ...(given.temperature === undefined ? {} : { temperature: given.temperature }),
    ...seed,
  };
}

/** The model the run asks now: its escalation model once its repairs stalled (see performer's driverFor). */
export function activeModel(s: LoopState): ModelRef {
  const escalation = s.spec.agent.escalationModel;
  return escalation && s.escalatedAtStep !== undefined ? escalation : s.spec.agent.model;
}

/** The guard's word before any model call: the deadline and the iteration bound; false when the run failed. */
export function modelCallAllowed(d: Draft, config: LoopConfig): boolean {
  const s = d.state;
  const deadline = checkDeadline(s.guard, s.limits, d.at);
  d.guard(deadline);
  if (deadline.kind === "circuitBreak") {
    fail(d, config, deadline.reason, deadline.message);
    return false;
  }
  const { state, verdict } = checkIteration(s.guard, s.limits);
  s.guard = state;
  d.guard(verdict);
  if (verdict.kind !== "circuitBreak") return true;
  fail(d, config, verdict.reason, verdict.message);
  return false;
}

/**
 * The next model call of the ACT loop, after the policy (a converged run stops here) and the
 * guard (deadline and iteration bound) have had their say.
 */
export function requestModel(d: Draft, config: LoopConfig): void {
  // Within a round of samples the candidate is not chosen yet: the policy speaks once it is.
  if (!d.state.sampling && convergedNow(d, config)) return;
  if (!modelCallAllowed(d, config)) return;
  const s = d.state;
  windowTranscript(s);
  // A sample after the first of a round is asked the same request, its own seed aside.
  const sample = (s.sampling?.length ?? 0) + 1;
  const params = samplingParams(activeModel(s), sample);
  const request: ModelRequest = {
    system: s.system,
    messages: s.messages,
    tools: [...visibleTools(s, config), FINISH_SPEC],
    ...params,
  };
  const requestId = `model-${s.guard.iteration}`;
  const elided = s.elided ? { elided: s.elided } : {};
  const round = sample > 1 ? { sample: { index: sample, of: sampleCount(s) } } : {};
  d.audit("model.called", "started", {
    data: { requestId, messages: s.messages.length, ...elided, ...params, ...round },
  });
  d.await({ type: "callModel", requestId, request }, { kind: "model", requestId });
}
