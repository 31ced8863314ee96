import type { GuardReason } from "../contracts/guard.js";
import type { LoopEvent, StartEvent } from "../contracts/loop-event.js";
import { TERMINAL_PHASES } from "../contracts/audit.js";
import type { ToolAuditNote } from "../contracts/tool.js";
import { AgentError } from "../runtime/errors.js";
import { xxh64 } from "../runtime/hash.js";
import { TOOL_REFUSALS } from "../tools/capabilities.js";
import { onModelResponse, recordActResult } from "./act.js";
import { Draft } from "./draft.js";
import { initialGuardState, type GuardLimits } from "./guard.js";
import { requestModel } from "./model-step.js";
import { namedPolicy } from "./policy.js";
import { onPlanRound, startPlan } from "./dag.js";
import { decompose } from "./decompose.js";
import { onPlanProposed, requestPlan } from "./plan-proposal.js";
import { isPlanRound } from "./dag-progress.js";
import { planHash, planOfSpec, singleTaskPlan, validatePlan } from "./plan.js";
import { DEFAULT_CHECKPOINT_EVERY, type LoopConfig, type LoopState, type Transition } from "./state.js";
import { cancel, fail, halt, recordCompensation } from "./terminal.js";
import { onApproval, onCriticVerdict, recordToolVerifier, repair } from "./verify.js";
import { chargeReview, usageOfFailure } from "./review-usage.js";
import { onToolApproval, requestToolApproval } from "./tool-approval.js";

/**
 * The loop as a pure function: `transition(state, event) → { state, effects }`. The shell (the
 * in-process runner, or an agent worker on NATS) performs the effects and feeds their answers
 * back as events. Same events in, same states and effects out.
 */
export function startRun(event: StartEvent, config: LoopConfig): Transition {
  const spec = event.spec;
  const resources = spec.agent.resources;
  const limits: GuardLimits = {
    maxIterations: resources.maxIterations,
    maxToolCalls: resources.maxToolCalls,
    maxCostUsd: resources.maxCostUsd,
    maxTokensBudget: resources.maxTokensBudget,
    maxRepairs: resources.maxRepairs,
    deadlineMs: resources.deadlineMs,
    ...(resources.maxContextMessages ? { maxContextMessages: resources.maxContextMessages } : {}),
  };
  const initial: LoopState = {
    runId: event.runId,
    rootRunId: event.rootRunId,
    ...(event.parentRunId ? { parentRunId: event.parentRunId } : {}),
    depth: event.depth,
    spec,
    phase: "PLAN",
    status: "running",
    guard: initialGuardState(event.at),
    limits,
    system: spec.agent.systemPrompt ?? "",
    messages: [{ role: "user", content: userPrompt(spec.task.prompt, spec.task.context) }],
    plan: null,
    planHash: null,
    output: "",
    step: 0,
    queue: [],
    verifyQueue: [],
    pending: null,
    awaiting: null,
    actionCount: 0,
    invocations: [],
    completed: [],
    ...(event.undoChildren ? { undoChildren: true } : {}),
    evidence: [],
    signals: [],
    verification: null,
    verdict: null,
    defects: [],
    repairHistory: [],
    compensation: null,
    failing: null,
    haltedFrom: null,
    usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 0, toolCalls: 0 },
    modelId: null,
    auditSeq: event.auditSeq ?? 0,
    critiques: 0,
    transitions: 0,
    transitionHash: xxh64(event.runId),
    lastCheckpoint: null,
    startedAt: event.at,
    updatedAt: event.at,
    terminal: null,
  };
  const d = new Draft(initial, event.at);
  d.wal({ type: "EVENT", event });
  const given = spec.task.plan;
  if (given?.propose) {
    // The model proposes the plan: PLAN waits on it, and DECOMPOSE follows its adoption.
    d.enter("PLAN", "run started", { planProposed: true });
    if (policyKnown(d, config)) requestPlan(d, config);
    return d.finish(event);
  }
  const plan = given?.nodes
    ? planOfSpec({ nodes: given.nodes }, spec.agent.tools)
    : singleTaskPlan(spec.task.prompt, spec.agent.tools, limits.maxIterations);
  const hash = planHash(plan);
  d.state.plan = plan;
  d.state.planHash = hash;
  d.enter("PLAN", "run started", { planHash: hash });
  const validation = validatePlan(
    plan,
    config.tools.map((t) => t.name),
    limits,
  );
  if (!validation.ok) {
    fail(d, config, "planInvalid", validation.errors.join("; "));
    return d.finish(event);
  }
  if (policyKnown(d, config)) decompose(d, config);
  return d.finish(event);
}

/**
 * The supervisor admits a registered policy only when the live workers register it; a worker
 * started since without it fails the run here, before anything is done, rather than guess.
 */
function policyKnown(d: Draft, config: LoopConfig): boolean {
  const spec = d.state.spec;
  if (config.policy || namedPolicy(spec, config.policies)) return true;
  fail(d, config, "unknownPolicy", `policy '${spec.policy ?? ""}' is not registered in this worker`);
  return false;
}

function userPrompt(prompt: string, context: Record<string, unknown> | undefined): string {
  return context ? `${prompt}\n\nContext:\n${JSON.stringify(context, null, 2)}` : prompt;
}

function invalid(state: LoopState, event: LoopEvent): AgentError {
  return new AgentError(
    "INVALID_TRANSITION",
    `event '${event.type}' does not fit run ${state.runId} in phase ${state.phase} (waiting for ${state.pending?.kind ?? "nothing"})`,
  );
}

export function transition(state: LoopState, event: LoopEvent, config: LoopConfig): Transition {
  if (event.type === "start") throw invalid(state, event);
  const terminal = TERMINAL_PHASES.includes(state.phase) && state.phase !== "HALT" && state.pending === null;
  if (terminal) throw invalid(state, event);
  const d = new Draft(state, event.at);
  // Inputs from outside the loop are logged first: a resumed run replays them instead of redoing them.
  if (event.type === "modelResponded") d.wal({ type: "MODEL", event });
  else if (event.type === "toolCompleted") d.wal({ type: "COMPLETE", event });
  else if (event.type === "toolAborted") d.wal({ type: "ABORT", event });
  else d.wal({ type: "EVENT", event });
  auditRedactions(d, event);
  apply(d, state, event, config);
  const every = config.checkpointEvery ?? DEFAULT_CHECKPOINT_EVERY;
  const due =
    every > 0 && d.state.step !== state.step && d.state.step % every === 0 && d.state.pending !== null;
  return d.finish(event, due);
}

/** What the worker redacted from an event before it was recorded: which rules fired, never the values. */
function auditRedactions(d: Draft, event: LoopEvent): void {
  const notes = "redactions" in event ? (event.redactions ?? []) : [];
  for (const note of notes) d.audit("tool.redacted", "passed", { data: { ...note } });
}

function apply(d: Draft, state: LoopState, event: Exclude<LoopEvent, StartEvent>, config: LoopConfig): void {
  const pending = state.pending;
  switch (event.type) {
    case "memoryRecalled":
      if (pending?.kind !== "memory") throw invalid(state, event);
      return onMemories(d, config, event.memories);
    case "modelResponded":
      if (pending?.kind !== "model" || pending.requestId !== event.requestId) throw invalid(state, event);
      if (state.phase === "PLAN") return onPlanProposed(d, config, event.response);
      return onModelResponse(d, config, event.response);
    case "modelFailed":
      if (pending?.kind !== "model" || pending.requestId !== event.requestId) throw invalid(state, event);
      d.audit("model.responded", "failed", { reason: event.error.message, data: { code: event.error.code } });
      return fail(d, config, "modelError", `[${event.error.code}] ${event.error.message}`);
    case "toolCompleted":
    case "toolAborted":
      if (pending?.kind !== "tool" || pending.actionId !== event.actionId) throw invalid(state, event);
      return onToolOutcome(d, config, event);
    case "criticReviewed":
      if (pending?.kind !== "critic") throw invalid(state, event);
      return onCriticVerdict(d, config, event.verdict, event.usage);
    case "criticFailed":
      if (pending?.kind !== "critic") throw invalid(state, event);
      return onCriticFailed(d, config, event.error);
    case "approvalDecided":
      return decided(d, config, state, event);
    case "halt":
    case "resume":
    case "cancel":
    case "recovered":
    case "globalCapReached":
      return control(d, config, state, event);
  }
}

/** The critic could not review: its spend still counts, and the run repairs (there is no score to measure). */
function onCriticFailed(
  d: Draft,
  config: LoopConfig,
  error: Extract<LoopEvent, { type: "criticFailed" }>["error"],
): void {
  d.audit("critic.verdict", "failed", { actor: "critic", reason: error.message });
  d.settle();
  if (!chargeReview(d, config, usageOfFailure(error))) return;
  const defect = {
    severity: "medium",
    rootCause: "toolFailure",
    description: `critic unavailable: ${error.message}`,
  } as const;
  repair(d, config, [defect], []);
}

/** A human's decision on what the run holds for them: its commit (or failure), or one tool call. */
function decided(
  d: Draft,
  config: LoopConfig,
  state: LoopState,
  event: Extract<LoopEvent, { type: "approvalDecided" }>,
): void {
  const pending = state.pending;
  if (pending?.kind !== "approval") throw invalid(state, event);
  if (pending.on === "tool") return onToolApproval(d, config, pending.call, event);
  return onApproval(d, config, event.decision, event.by, event.feedback ?? event.reason);
}

/**
 * Events from outside the loop's own work: an operator's halt, resume or cancel, a worker's
 * take-over, the tree's cap.
 */
function control(
  d: Draft,
  config: LoopConfig,
  state: LoopState,
  event: Extract<LoopEvent, { type: "halt" | "resume" | "cancel" | "recovered" | "globalCapReached" }>,
): void {
  if (event.type === "resume") return resume(d, state, event);
  if (event.type === "cancel") {
    if (state.phase === "FAIL" || state.phase === "COMMIT") throw invalid(state, event);
    // A run still going stops where it is first, as a halt stops it: the cancel goes on from there.
    if (state.phase !== "HALT") halt(d, event.reason, event.by);
    return cancel(d, config, event);
  }
  if (event.type === "globalCapReached") {
    if (state.pending?.kind !== "model") throw invalid(state, event);
    const reason = TREE_BUDGET_REASON[event.budget ?? "iterations"];
    const verdict = { kind: "circuitBreak", reason, message: event.message } as const;
    d.guard(verdict);
    return fail(d, config, verdict.reason, `[GLOBAL_CAP] ${verdict.message}`);
  }
  if (event.type === "recovered") return recovered(d, state, event);
  if (state.phase === "HALT" || state.phase === "FAIL") throw invalid(state, event);
  halt(d, event.reason, event.by);
}

/** The guard reason of each of a run tree's budgets, spent. */
const TREE_BUDGET_REASON = {
  iterations: "globalCap",
  cost: "treeCostBudget",
  tokens: "treeTokenBudget",
} as const satisfies Record<string, GuardReason>;

function onMemories(d: Draft, config: LoopConfig, memories: string[]): void {
  const s = d.state;
  d.settle();
  if (memories.length > 0) {
    const block = `Relevant memories:\n${memories.map((m) => `- ${m}`).join("\n")}`;
    s.system = s.system ? `${s.system}\n\n${block}` : block;
  }
  d.audit("memory.recalled", "passed", { data: { count: memories.length } });
  d.enter("ACT");
  if (s.spec.task.plan) startPlan(d, config);
  else requestModel(d, config);
}

function onToolOutcome(
  d: Draft,
  config: LoopConfig,
  event: Extract<LoopEvent, { type: "toolCompleted" | "toolAborted" }>,
): void {
  const s = d.state;
  const pending = s.pending;
  if (pending?.kind !== "tool") return;
  const ok = event.type === "toolCompleted";
  const detail = ok ? undefined : `[${event.error.code}] ${event.error.message}`;
  if (pending.purpose !== "compensate") {
    auditToolOutcome(d, pending, event, detail);
    if (ok) reportToolNotes(d, pending, event.audit ?? []);
    else if (requestToolApproval(d, pending, event.error)) return;
  }
  if (pending.purpose === "compensate") return recordCompensation(d, config, ok, detail);
  if (pending.purpose === "verify")
    return recordToolVerifier(d, config, ok, ok ? event.output : undefined, detail ?? "");
  if (isPlanRound(s, pending.actionId))
    return onPlanRound(d, config, ok, ok ? event.output : undefined, detail ?? "");
  if (ok) return recordActResult(d, config, true, event.output, event.signals ?? []);
  return recordActResult(d, config, false, `error ${detail ?? ""}`, [], event.error.code);
}

/**
 * A call's outcome in the audit trail: `tool.completed`, or `tool.aborted`, or `tool.denied` when
 * the tool refused it under its grant (see TOOL_REFUSALS).
 */
function auditToolOutcome(
  d: Draft,
  pending: { tool: string; actionId: string },
  event: Extract<LoopEvent, { type: "toolCompleted" | "toolAborted" }>,
  detail: string | undefined,
): void {
  const ok = event.type === "toolCompleted";
  const refused = event.type === "toolAborted" && TOOL_REFUSALS.has(event.error.code);
  d.audit(ok ? "tool.completed" : refused ? "tool.denied" : "tool.aborted", ok ? "passed" : "failed", {
    actor: `tool:${pending.tool}`,
    ...(detail ? { reason: detail } : {}),
    data: {
      actionId: pending.actionId,
      ...(refused ? { code: event.error.code } : {}),
      ...(ok && event.signals ? { signals: event.signals } : {}),
    },
  });
}

/** A tool's own audit notes join the run's trail as `tool.reported` events, after its `tool.completed`. */
function reportToolNotes(
  d: Draft,
  pending: { tool: string; actionId: string },
  notes: readonly ToolAuditNote[],
): void {
  for (const note of notes) {
    d.audit("tool.reported", note.status, {
      actor: `tool:${pending.tool}`,
      ...(note.reason === undefined ? {} : { reason: note.reason }),
      ...(note.artifacts ? { artifacts: note.artifacts } : {}),
      data: { ...note.data, actionId: pending.actionId },
    });
  }
}

/** Back from HALT: the phase it left, and the effect it was waiting on is issued again. */
function resume(d: Draft, state: LoopState, event: Extract<LoopEvent, { type: "resume" }>): void {
  const from = state.haltedFrom;
  if (state.phase !== "HALT" || !from || state.pending?.kind === "approval") throw invalid(state, event);
  const s = d.state;
  s.terminal = null;
  s.haltedFrom = null;
  s.status = from.status === "halted" ? "running" : from.status;
  d.enter(from.phase, `resumed by ${event.by}`);
  // The human's word on the call the run halted on is recorded, not the output it gave.
  const settled = event.settle && from.pending?.kind === "tool" ? { settled: event.settle.decision } : {};
  d.audit("run.resumed", "started", { actor: "human", data: { by: event.by, ...settled } });
  if (state.awaiting && from.pending) d.await(state.awaiting, from.pending);
}

/**
 * A new worker picks up a run mid-step: the take-over is logged, and the effect the run was
 * waiting on is issued again (the shell reconciles tool intents before re-running anything).
 */
function recovered(d: Draft, state: LoopState, event: Extract<LoopEvent, { type: "recovered" }>): void {
  if (!state.awaiting || !state.pending || state.phase === "HALT") throw invalid(state, event);
  d.audit("run.resumed", "started", { data: { by: event.by, waitingFor: state.pending.kind } });
  d.await(state.awaiting, state.pending);
}
