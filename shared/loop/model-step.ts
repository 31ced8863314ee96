import type { ModelRequest, ToolSpec } from "../contracts/model.js";
import { checkDeadline, checkIteration } from "./guard.js";
import type { Draft } from "./draft.js";
import type { ConvergencePolicy, PolicyView } from "./policy.js";
import { policyFromSpec } from "./policy.js";
import { FINISH_TOOL, type LoopConfig, type LoopState } from "./state.js";
import { commit, fail } from "./terminal.js";
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

/** Consults the policy; on convergence the run commits and the caller must stop. */
export function convergedNow(d: Draft, config: LoopConfig): boolean {
  const policy = policyOf(d.state, config);
  const decision = policy.evaluate(viewOf(d.state));
  if (!decision.converged) return false;
  commit(d, decision.reason, policy.name);
  return true;
}

export function visibleTools(state: LoopState, config: LoopConfig): ToolSpec[] {
  const names = new Set(state.spec.agent.tools);
  return config.tools
    .filter((t) => names.has(t.name))
    .map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema }));
}

/**
 * The next model call of the ACT loop, after the policy (a converged run stops here) and the
 * guard (deadline and iteration bound) have had their say.
 */
export function requestModel(d: Draft, config: LoopConfig): void {
  if (convergedNow(d, config)) return;
  const s = d.state;
  const deadline = checkDeadline(s.guard, s.limits, d.at);
  d.guard(deadline);
  if (deadline.kind === "circuitBreak") {
    fail(d, config, deadline.reason, deadline.message);
    return;
  }
  const { state, verdict } = checkIteration(s.guard, s.limits);
  s.guard = state;
  d.guard(verdict);
  if (verdict.kind === "circuitBreak") {
    fail(d, config, verdict.reason, verdict.message);
    return;
  }
  windowTranscript(s);
  const request: ModelRequest = {
    system: s.system,
    messages: s.messages,
    tools: [...visibleTools(s, config), FINISH_SPEC],
  };
  const requestId = `model-${s.guard.iteration}`;
  const elided = s.elided ? { elided: s.elided } : {};
  d.audit("model.called", "started", { data: { requestId, messages: s.messages.length, ...elided } });
  d.await({ type: "callModel", requestId, request }, { kind: "model", requestId });
}
