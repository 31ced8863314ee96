import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import { DEFAULT_TOOL_TIMEOUT_MS, type ToolDescriptor } from "../../shared/contracts/tool.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { childOf } from "../../shared/bus/fanout.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { readLog } from "../../shared/bus/run-log.js";
import { idempotencyKeyFor } from "../../shared/loop/action.js";
import type { EffectPerformer } from "../../shared/loop/performer.js";
import type { RegisteredPolicies } from "../../shared/loop/policy.js";
import { replay } from "../../shared/loop/replay.js";
import { planCompensation, UNDO_CHILDREN_TOOL, UndoChildrenInput } from "../../shared/loop/saga.js";
import type { AwaitingEffect, LoopState } from "../../shared/loop/state.js";
import type { RunUndone } from "../../shared/contracts/run-status.js";
import { toRfc3339 } from "../../shared/runtime/clock.js";
import { AgentError, toAgentError } from "../../shared/runtime/errors.js";
import {
  awaitChildrenEnd,
  childrenEndWait,
  type ChildrenEndDeps,
  type FailingParent,
} from "./children-end.js";
import { specOf } from "./spec-of.js";

type ToolCall = Extract<AwaitingEffect, { type: "callTool" }>;

export interface UndoDeps extends ChildrenEndDeps {
  bus: ActorBus;
  /** The named tools' descriptors; their services become callable through `performer`. */
  discover: (names: readonly string[], fresh: boolean) => Promise<ToolDescriptor[]>;
  performer: EffectPerformer;
  checkpointEvery: number;
  /** A child run naming a registered policy replays through it (absent: none registered). */
  policies?: RegisteredPolicies;
}

/** What was undone of the children, and what a human must look at. */
export interface ChildrenUndone {
  undone: { runId: string; actionId: string; tool: string; ok: boolean; detail?: string }[];
  manual: { runId: string; actionId?: string; tool?: string; reason: string }[];
}

/**
 * The compensation of a spawn whose children committed, for a parent that fails: each child that
 * committed, the latest first, has its completed calls undone as its own FAIL would have undone them
 * (its compensations, most recent first; its own committed children the same way, deeper down),
 * read from its log. A child's trail stays as it ended; the parent's records the undo (this call's
 * INTENT, then its outcome, which lists every compensation), and the child's status says it was
 * undone (RunStatus.undone). Each compensation is sent under a key of the child's run and action,
 * so the undo made again (the parent's worker died in it) sends nothing twice. Children still going are cancelled and waited for first (see awaitChildrenEnd).
 * Completed when all went through; aborted, with what needs a human, otherwise.
 */
export async function undoChildren(
  effect: ToolCall,
  parent: FailingParent,
  deps: UndoDeps,
): Promise<LoopEvent> {
  const at = (): number => deps.bus.clock.now();
  const input = UndoChildrenInput.safeParse(effect.input);
  if (!input.success) {
    const error = new AgentError("INVALID_INPUT", `${UNDO_CHILDREN_TOOL} input: ${input.error.message}`);
    return { type: "toolAborted", at: at(), actionId: effect.actionId, error: error.toBody() };
  }
  const children = input.data.output.committed;
  const going = await awaitChildrenEnd(children, parent, deps);
  const outcome: ChildrenUndone = { undone: [], manual: [] };
  const waited = `still going ${waitedText(childrenEndWait(deps))} after its cancel was queued`;
  for (const runId of [...children].reverse()) {
    if (going.includes(runId)) {
      outcome.manual.push({ runId, reason: `${waited}: what it did, if it commits, stands` });
      continue;
    }
    await undoRun(runId, parent.runId, parent.runId, deps, outcome);
  }
  const failed = outcome.undone.filter((u) => !u.ok);
  if (outcome.manual.length === 0 && failed.length === 0) {
    return { type: "toolCompleted", at: at(), actionId: effect.actionId, output: outcome };
  }
  const lines = [
    ...failed.map((u) => `${u.runId} ${u.actionId} (${u.tool}): ${u.detail ?? "failed"}`),
    ...outcome.manual.map((m) => `${m.runId}${m.actionId ? ` ${m.actionId} (${m.tool})` : ""}: ${m.reason}`),
  ];
  const error = new AgentError(
    "TOOL_FAILED",
    `what committed children did could not all be undone: ${lines.join("; ")}`,
    { details: outcome },
  );
  return { type: "toolAborted", at: at(), actionId: effect.actionId, error: error.toBody() };
}

/**
 * Undoes what the committed run, a child of `parentRunId`, did, for the failing run `by`, and says so
 * in the run's status.
 */
async function undoRun(
  runId: string,
  parentRunId: string,
  by: string,
  deps: UndoDeps,
  outcome: ChildrenUndone,
): Promise<void> {
  const child = await finalState(runId, parentRunId, deps, outcome);
  if (!child) return;
  const { state, tools } = child;
  const plan = planCompensation(state.completed);
  for (const m of plan.manual) outcome.manual.push({ runId, ...m });
  const calls: RunUndone["calls"] = [];
  for (const step of plan.steps) {
    if (step.tool === UNDO_CHILDREN_TOOL) {
      const nested = UndoChildrenInput.safeParse(step.input);
      const committed = nested.success ? nested.data.output.committed : [];
      for (const child of [...committed].reverse()) await undoRun(child, runId, by, deps, outcome);
      continue;
    }
    const actionId = `undo-${step.actionId}`;
    // A compensation its spec does not name (its own FAIL would not have found it) is asked for.
    const described = tools.some((t) => t.name === step.tool)
      ? tools
      : await deps.discover([step.tool], false);
    const event = await deps.performer.perform(
      {
        type: "callTool",
        actionId,
        tool: step.tool,
        input: step.input,
        idempotencyKey: idempotencyKeyFor(runId, actionId),
        purpose: "compensate",
        timeoutMs: described.find((t) => t.name === step.tool)?.timeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS,
      },
      state,
    );
    const ok = event?.type === "toolCompleted";
    const detail = event?.type === "toolAborted" ? event.error.message : undefined;
    calls.push({ actionId: step.actionId, compensation: step.tool, ok });
    outcome.undone.push({
      runId,
      actionId: step.actionId,
      tool: step.tool,
      ok,
      ...(detail ? { detail } : {}),
    });
  }
  const manual = plan.manual.map((m) => `${m.actionId} (${m.tool}): ${m.reason}`);
  if (calls.length === 0 && manual.length === 0) return;
  const at = toRfc3339(deps.bus.clock.now());
  await markUndone(runId, { by, at, calls, ...(manual.length > 0 ? { manual } : {}) }, deps);
}

/**
 * Writes what was undone into the committed run's status, over the status it read (a write that
 * came first is read again; an undo made again writes it again). A run with no status (retention
 * removed it) has nowhere to say it: the failing run's records do.
 */
async function markUndone(runId: string, undone: RunUndone, deps: UndoDeps): Promise<void> {
  const store = new RunStatusStore(deps.bus.buckets.runs, deps.bus);
  for (let attempt = 0; attempt < 3; attempt++) {
    const read = await store.read(runId);
    if (read?.status.status !== "committed") return;
    if (await store.update({ ...read.status, undone }, read.revision)) return;
  }
  deps.bus.logger.warn({ runId, by: undone.by }, "could not record in the run's status that it was undone");
}

/**
 * The committed child's state at its end, rebuilt from its log as a worker taking it over would,
 * with its tools' descriptors; undefined for a child that did not commit (it failed and undid its
 * own calls, it is being cancelled with its parent, it never started), and for a run that is not
 * `parentRunId`'s child (a spawn named another's run, see childOf). A read or a describe that fails
 * fails the lease, to be tried again, as the lease's own do; a committed child's log that is gone,
 * or that this build cannot replay, is told to a human (`outcome.manual`).
 */
async function finalState(
  runId: string,
  parentRunId: string,
  deps: UndoDeps,
  outcome: ChildrenUndone,
): Promise<{ state: LoopState; tools: ToolDescriptor[] } | undefined> {
  const status = await new RunStatusStore(deps.bus.buckets.runs, deps.bus).get(runId);
  if (status && (status.status !== "committed" || !childOf(status, parentRunId))) return undefined;
  const records = (await readLog(deps.bus, runId)).records.map((r) => r.record);
  const spec = specOf(records);
  if (!spec) {
    const reason =
      "its log is gone (a finished run's log expires with the run log's max_age, SUPERVISOR_LOG_MAX_AGE_MS)";
    // No status and no log: a child that never started (or one retention removed entirely).
    if (status) outcome.manual.push({ runId, reason });
    return undefined;
  }
  const config = {
    tools: await deps.discover(spec.agent.tools, false),
    checkpointEvery: deps.checkpointEvery,
    policies: deps.policies,
  };
  try {
    const { state } = replay(records, config, { fromCheckpoint: true, snapshots: "skip" });
    // Its status gone, its log says whose child it is.
    const ours = state.parentRunId === parentRunId;
    return state.status === "committed" && ours ? { state, tools: config.tools } : undefined;
  } catch (err) {
    outcome.manual.push({ runId, reason: `its log could not be replayed: ${toAgentError(err).message}` });
    return undefined;
  }
}

/** A wait for a failure report: whole minutes from a minute up, seconds below. */
function waitedText(ms: number): string {
  return ms >= 60_000 ? `${Math.round(ms / 60_000)} min` : `${Math.round(ms / 1_000)} s`;
}
