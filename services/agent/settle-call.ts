import type {
  CallSettlement,
  CancelEvent,
  LoopEvent,
  WaitedOnCall,
} from "../../shared/contracts/loop-event.js";
import type { SettleReply, SettleRequest } from "../../shared/contracts/tool-settle.js";
import type { ToolDescriptor } from "../../shared/contracts/tool.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import type { ServiceWait } from "../../shared/bus/request.js";
import { settleCall } from "../../shared/bus/tool-settle.js";
import type { AwaitingEffect, LoopConfig, LoopState } from "../../shared/loop/state.js";
import { AgentError } from "../../shared/runtime/errors.js";
import type { Logger } from "../../shared/runtime/logger.js";
import { SPAWN_TOOL } from "./fanout.js";

type ToolCall = Extract<AwaitingEffect, { type: "callTool" }>;

export interface SettleCallDeps {
  bus: Pick<ActorBus, "nc" | "subjects" | "clock">;
  config: LoopConfig;
  logger: Logger;
  /** Aborted when the worker drains: a call still running is waited on by another worker. */
  stopping: AbortSignal;
  /** How often to ask again while the call is still running. */
  pollMs?: number;
  /** Extra time past the tool's own timeout before a running call is left to a human. */
  graceMs?: number;
  /** How long the tool service has to answer. */
  requestTimeoutMs?: number;
  /** How long to wait for a tool's service when none serves it yet (one restarting). */
  serviceWait?: (tool: string) => ServiceWait | undefined;
  /** When the event was queued: a cancel whose call's service does not answer waits from then. */
  queuedAt?: number;
  /** See CANCEL_SETTLE_WAIT_MS, its default. */
  cancelSettleWaitMs?: number;
  /** Whether the worker runs a tool in-process (AGENT_LOCAL_TOOLS): no service has its calls. */
  localTool?: (name: string) => boolean;
}

/**
 * How long a cancel waits, from when it was queued, for the service of the call its run waits on to
 * answer, handed back and asked again, before the call is left to a human, by default
 * (AGENT_CANCEL_SETTLE_WAIT_MS).
 */
export const CANCEL_SETTLE_WAIT_MS = 5 * 60_000;

/**
 * An operator's event for a halted run (or a cancel of one still going), once the call the run
 * waits on is settled with its tool service (see tool-settle.ts): a cancel learns what the call did
 * (see settleWaitedOn); a resume that carries a human's settlement has it recorded first. Any other
 * event is returned as it is, and so is one for a run not waiting on a call with a side effect.
 */
export async function settleHaltedCall(
  state: LoopState,
  event: LoopEvent,
  deps: SettleCallDeps,
): Promise<LoopEvent> {
  const settling = event.type === "cancel" || (event.type === "resume" && event.settle);
  // A cancel fits a run still going too (it stops it first); a resume only a halted one.
  if (!settling || (event.type === "resume" && state.phase !== "HALT")) return event;
  const waited = waitedCall(state, deps.config, deps.localTool);
  if (!waited) return event;
  if (event.type === "cancel") return settleWaitedOn(state, event, waited, deps);
  return event.settle ? settleByHand(state, { ...event, settle: event.settle }, waited, deps) : event;
}

/**
 * The call the run waits on (or waited on when it halted), when it has a side effect (and is not a
 * fan-out). A tool this worker runs in-process is not asked of a service, which never saw its
 * calls and would say they never ran: the cancel leaves such a call to a human (see cancel).
 */
function waitedCall(
  state: LoopState,
  config: LoopConfig,
  localTool: ((name: string) => boolean) | undefined,
): { effect: ToolCall; tool: ToolDescriptor } | undefined {
  const pending = state.phase === "HALT" ? state.haltedFrom?.pending : state.pending;
  const effect = state.awaiting;
  if (pending?.kind !== "tool" || effect?.type !== "callTool" || effect.actionId !== pending.actionId)
    return undefined;
  const tool = config.tools.find((t) => t.name === effect.tool);
  if (!tool || tool.reversibility === "pure" || tool.name === SPAWN_TOOL || localTool?.(tool.name))
    return undefined;
  return { effect, tool };
}

function request(
  state: LoopState,
  effect: ToolCall,
  by: string,
  reason: string,
  settle: Pick<SettleRequest, "decision" | "output">,
): SettleRequest {
  return {
    schemaVersion: 1,
    runId: state.runId,
    actionId: effect.actionId,
    idempotencyKey: effect.idempotencyKey,
    by,
    reason,
    ...settle,
  };
}

/**
 * A cancel, with what the call its run halted waiting on did (see WaitedOnCall), asked of the
 * call's tool service, which also makes sure that a call that never ran never will. A call still
 * running is waited on up to the tool's timeout. A service that does not answer (restarting, down)
 * hands the cancel back (TOOL_UNAVAILABLE, retried; the run stays halted) until CANCEL_SETTLE_WAIT_MS
 * after the cancel was queued. The cancel is returned unchanged when the service cannot tell (none
 * answered in that time, one of an earlier build, a call running past its timeout): the failure
 * report then lists the call for a human.
 */
async function settleWaitedOn(
  state: LoopState,
  event: CancelEvent,
  { effect, tool }: { effect: ToolCall; tool: ToolDescriptor },
  deps: SettleCallDeps,
): Promise<CancelEvent> {
  const { nc, subjects, clock } = deps.bus;
  const log = deps.logger.child({ runId: state.runId, tool: tool.name, actionId: effect.actionId });
  const asked = request(state, effect, event.by, event.reason, { decision: "abandon" });
  for (;;) {
    let reply: SettleReply;
    try {
      reply = await settleCall(
        nc,
        subjects,
        tool.name,
        asked,
        deps.requestTimeoutMs ?? 5_000,
        deps.serviceWait?.(tool.name),
      );
    } catch (err) {
      const waitedMs = deps.queuedAt === undefined ? undefined : clock.now() - deps.queuedAt;
      if (waitedMs !== undefined && waitedMs < (deps.cancelSettleWaitMs ?? CANCEL_SETTLE_WAIT_MS)) {
        throw new AgentError(
          "TOOL_UNAVAILABLE",
          `the call '${effect.actionId}' the run halted on could not be settled with the service of '${tool.name}': the cancel waits for it (${Math.round(waitedMs / 1_000)} s so far)`,
          { cause: err, details: { handedBack: "cancel", waitedMs } },
        );
      }
      log.warn(
        { err, waitedMs },
        "the call the run halted on could not be settled with its tool service: a human is asked",
      );
      return event;
    }
    if (reply.outcome === "abandoned")
      return { ...event, waitedOn: { actionId: effect.actionId, outcome: "notRun" } };
    if (reply.outcome === "done") return { ...event, waitedOn: learned(effect.actionId, reply.reply) };
    if (reply.outcome !== "running") {
      log.warn({ reply }, "the tool service refused to settle the call the run halted on: a human is asked");
      return event;
    }
    if (clock.now() > reply.since + tool.timeoutMs + (deps.graceMs ?? 5_000)) {
      log.warn(
        { since: reply.since },
        "the call the run halted on is still running past its timeout: a human is asked",
      );
      return event;
    }
    if (deps.stopping.aborted) {
      throw new AgentError(
        "TOOL_IN_PROGRESS",
        `the call '${effect.actionId}' the run halted on is still running: the cancel waits for it on another worker`,
      );
    }
    await clock.sleep(deps.pollMs ?? 250, deps.stopping).catch(() => undefined);
  }
}

function learned(actionId: string, reply: Extract<SettleReply, { outcome: "done" }>["reply"]): WaitedOnCall {
  return reply.ok
    ? { actionId, outcome: "completed", output: reply.output }
    : { actionId, outcome: "failed", error: reply.error };
}

/**
 * A resume carrying what a human found of the call the run halted on for a reconciliation: the
 * call's tool service records it (the output as its result, or its claim freed) before the run goes
 * on, so the call made again is answered from that record, or runs. A service that cannot be
 * reached hands the resume back (TOOL_UNAVAILABLE, retried), since without the record the run would
 * halt again; one that refuses, or had recorded the call's outcome itself, leaves the run to go on
 * with its record, and the resume's audit event says so by carrying no settlement.
 */
async function settleByHand(
  state: LoopState,
  event: Extract<LoopEvent, { type: "resume" }> & { settle: CallSettlement },
  { effect, tool }: { effect: ToolCall; tool: ToolDescriptor },
  deps: SettleCallDeps,
): Promise<LoopEvent> {
  const log = deps.logger.child({ runId: state.runId, tool: tool.name, actionId: effect.actionId });
  const asked = request(state, effect, event.by, `resumed by ${event.by}`, event.settle);
  let reply: SettleReply;
  try {
    reply = await settleCall(
      deps.bus.nc,
      deps.bus.subjects,
      tool.name,
      asked,
      deps.requestTimeoutMs ?? 5_000,
      deps.serviceWait?.(tool.name),
    );
  } catch (err) {
    throw new AgentError(
      "TOOL_UNAVAILABLE",
      `the call '${effect.actionId}' could not be settled with the service of '${tool.name}': the resume waits for it`,
      { cause: err },
    );
  }
  if (reply.outcome === "recorded" || reply.outcome === "freed") return event;
  const { settle: _given, ...plain } = event;
  // The outcome only: a recorded reply holds the tool's output, which has no place in the log.
  log.warn(
    { outcome: reply.outcome, ...(reply.outcome === "refused" ? { error: reply.error } : {}) },
    reply.outcome === "done"
      ? "the call's tool service had recorded its outcome: the run goes on with that, not the settlement given"
      : "the call's tool service did not take the settlement: the run goes on as if resumed without it",
  );
  return plain;
}
