import { toRfc3339 } from "../runtime/clock.js";
import { contentHash } from "../runtime/hash.js";
import type { CancelEvent, WaitedOnCall } from "../contracts/loop-event.js";
import { descriptorOf, startAction } from "./action.js";
import type { Draft } from "./draft.js";
import {
  completedAction,
  planCompensation,
  SPAWN_AGENT_TOOL,
  spawnInFlight,
  type CompensationPlan,
} from "./saga.js";
import type {
  CommitArtifact,
  FailureReport,
  LoopConfig,
  LoopState,
  Pending,
  Provenance,
  Terminal,
} from "./state.js";

type ToolPending = Extract<Pending, { kind: "tool" }>;

export function buildProvenance(s: LoopState, at: number): Provenance {
  const omitted = s.usage.toolCalls - s.invocations.length;
  return {
    runId: s.runId,
    task: s.spec.task.prompt,
    planHash: s.planHash,
    toolInvocations: s.invocations,
    ...(omitted > 0 ? { toolInvocationsOmitted: omitted } : {}),
    repairHistory: s.repairHistory.map(({ strategy, diagnosis, loopDetected }) => ({
      strategy,
      diagnosis,
      loopDetected,
    })),
    scores: s.verdict?.scores ?? null,
    verification: s.verification ?? [],
    ...(s.agreement === undefined ? {} : { agreement: s.agreement }),
    modelId: s.modelId,
    startedAt: toRfc3339(s.startedAt),
    committedAt: toRfc3339(at),
  };
}

/** Records the outcome in the state and, artifact in full, in the WAL: it survives the process. */
function seal(d: Draft, terminal: Terminal): void {
  d.state.terminal = terminal;
  const { kind: outcome, reason, artifactHash, artifact } = terminal;
  d.wal({ type: "TERMINAL", outcome, reason, artifactHash, artifact });
}

/**
 * COMMIT: the result with its provenance and a sha256 over both; the Q/A pair goes to memory.
 * `policy` names the convergence policy that decided (absent when a human approved).
 */
export function commit(d: Draft, reason: string, policy?: string): void {
  const s = d.state;
  d.settle();
  s.queue = [];
  delete s.batched;
  delete s.sampling;
  d.enter("COMMIT", reason);
  const provenance = buildProvenance(s, d.at);
  const artifact: CommitArtifact = {
    kind: "commit",
    output: s.output,
    provenance,
    contentHash: contentHash({ output: s.output, provenance }),
  };
  s.status = "committed";
  seal(d, { kind: "COMMIT", reason, output: s.output, artifact, artifactHash: artifact.contentHash });
  d.audit("run.committed", "passed", {
    reason,
    artifacts: [artifact.contentHash],
    data: { output: s.output, ...(policy ? { policy } : {}) },
  });
  d.emit(commitMemory(s));
}

/** The memory a committed run leaves its agent: its question and answer. */
export function commitMemory(s: LoopState): { type: "storeMemory"; namespace: string; text: string } {
  return {
    type: "storeMemory",
    namespace: s.spec.agent.name,
    text: `Q: ${s.spec.task.prompt}\nA: ${s.output}`,
  };
}

/**
 * FAIL: first undo what can be undone (most recent first), then write the failure report with
 * the partial output, the last checkpoint and whatever needs a human (`unsettled`: calls whose
 * outcome the run never learned, first).
 */
export function fail(
  d: Draft,
  config: LoopConfig,
  reason: string,
  diagnosis: string,
  unsettled: CompensationPlan["manual"] = [],
): void {
  const s = d.state;
  d.settle();
  s.queue = [];
  // Calls of a batch not yet taken have nothing to undo (see act-batch.ts): they are dropped.
  delete s.batched;
  s.failing = { reason, diagnosis };
  d.enter("FAIL", reason);
  const plan = planCompensation(s.completed);
  s.compensation = { ...plan, manual: [...unsettled, ...plan.manual], results: [] };
  continueCompensation(d, config);
}

export function continueCompensation(d: Draft, config: LoopConfig): void {
  const s = d.state;
  const comp = s.compensation;
  if (!comp) return;
  const next = comp.steps[0];
  if (!next) {
    finalizeFailure(d);
    return;
  }
  s.compensation = { ...comp, steps: comp.steps.slice(1) };
  startAction(d, config, {
    actionId: `comp-${next.actionId}`,
    tool: next.tool,
    input: next.input,
    purpose: "compensate",
    audit: { kind: "compensation.started", data: { actionId: next.actionId, compensatingTool: next.tool } },
    link: { compensates: next.actionId },
  });
}

export function recordCompensation(d: Draft, config: LoopConfig, ok: boolean, detail?: string): void {
  const s = d.state;
  const pending = s.pending;
  if (pending?.kind !== "tool" || !s.compensation) return;
  const original = pending.compensates ?? pending.actionId;
  s.compensation = {
    ...s.compensation,
    results: [
      ...s.compensation.results,
      { actionId: original, tool: pending.tool, ok, ...(detail ? { detail } : {}) },
    ],
    manual: ok
      ? s.compensation.manual
      : [
          ...s.compensation.manual,
          { actionId: original, tool: pending.tool, reason: `compensation failed: ${detail ?? "unknown"}` },
        ],
  };
  d.audit("compensation.completed", ok ? "passed" : "failed", {
    actor: `tool:${pending.tool}`,
    data: { actionId: original },
    ...(detail ? { reason: detail } : {}),
  });
  d.settle();
  continueCompensation(d, config);
}

function finalizeFailure(d: Draft): void {
  const s = d.state;
  const failing = s.failing ?? { reason: "failed", diagnosis: "" };
  const report: FailureReport = {
    kind: "failure",
    reason: failing.reason,
    diagnosis: failing.diagnosis,
    partialOutput: s.output,
    lastCheckpoint: s.lastCheckpoint,
    compensations: s.compensation?.results ?? [],
    manualIntervention: s.compensation?.manual ?? [],
  };
  const hash = contentHash(report);
  s.status = "failed";
  seal(d, { kind: "FAIL", reason: failing.reason, output: s.output, artifact: report, artifactHash: hash });
  d.audit("run.failed", "failed", {
    reason: failing.reason,
    artifacts: [hash],
    data: { diagnosis: failing.diagnosis, manualIntervention: report.manualIntervention.length },
  });
}

/**
 * An operator ends a halted run for good: from HALT to FAIL, where what can be undone is (the
 * compensations of its completed tool calls, most recent first), and the run fails with
 * RUN_CANCELLED, the code its parent's fan-in reads off the reason.
 */
export function cancel(d: Draft, config: LoopConfig, event: CancelEvent): void {
  const s = d.state;
  const waitedOn = s.haltedFrom?.pending;
  s.terminal = null;
  s.haltedFrom = null;
  s.status = "running";
  const call = waitedOn?.kind === "tool" ? waitedOn : undefined;
  const learned = call && event.waitedOn?.actionId === call.actionId ? event.waitedOn : undefined;
  if (call && learned) settleWaitedOn(d, config, call, learned);
  // Waiting on its children: those that committed already are undone with its own calls.
  const spawn = call?.tool === SPAWN_AGENT_TOOL && s.undoChildren ? spawnInFlight(call, s.runId) : undefined;
  if (spawn) s.completed = [...s.completed, spawn];
  // A call the run was waiting on when it halted may have happened (sent before the halt, or its
  // outcome unknown): when its tool service could not say, a human is asked to look.
  const tool = call ? descriptorOf(config, call.tool) : undefined;
  const unsettled =
    call && !learned && tool?.reversibility !== "pure"
      ? [
          {
            actionId: call.actionId,
            tool: call.tool,
            reason: "the run halted waiting on this call: it may have happened (see agents-idempotency)",
          },
        ]
      : [];
  fail(
    d,
    config,
    `[RUN_CANCELLED] cancelled by ${event.by}: ${event.reason}`,
    `cancelled by ${event.by} while halted: ${event.reason}`,
    unsettled,
  );
}

/**
 * The call a cancelled run halted waiting on, as its tool service told the cancel's worker: one
 * that completed joins the calls to undo (an ACT call with a side effect); one that failed or never
 * ran has nothing to undo. Either way the trail gets the call's outcome.
 */
function settleWaitedOn(d: Draft, config: LoopConfig, call: ToolPending, learned: WaitedOnCall): void {
  const actor = `tool:${call.tool}`;
  const data = { actionId: call.actionId, settledBy: "cancel" };
  if (learned.outcome === "completed") {
    d.audit("tool.completed", "passed", { actor, data });
    const done =
      call.purpose === "act"
        ? completedAction(descriptorOf(config, call.tool), call, learned.output)
        : undefined;
    if (done) d.state.completed = [...d.state.completed, done];
    return;
  }
  const reason =
    learned.outcome === "failed"
      ? `[${learned.error.code}] ${learned.error.message}`
      : "[RUN_CANCELLED] it never ran: the cancel reached its tool service first";
  d.audit("tool.aborted", "failed", { actor, reason, data });
}

/** HALT: an operator or the kill switch stopped the run; it keeps its place and may resume. */
export function halt(d: Draft, reason: string, by: string): void {
  const s = d.state;
  s.haltedFrom = { phase: s.phase, status: s.status, pending: s.pending };
  // Answers still in flight are not accepted while halted; `awaiting` is kept to re-issue on resume.
  s.pending = null;
  d.enter("HALT", reason);
  s.status = "halted";
  const artifact = {
    kind: "halt" as const,
    reason,
    by,
    phase: s.haltedFrom.phase,
    lastCheckpoint: s.lastCheckpoint,
  };
  const hash = contentHash(artifact);
  seal(d, { kind: "HALT", reason, artifact, artifactHash: hash });
  d.audit("run.halted", "skipped", {
    reason,
    actor: by === "system" ? "agent" : "human",
    artifacts: [hash],
    data: { by },
  });
}
