import type { CancelEvent, WaitedOnCall } from "../../shared/contracts/loop-event.js";
import type { AbandonReply } from "../../shared/contracts/tool-abandon.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { abandonCall } from "../../shared/bus/tool-abandon.js";
import type { LoopConfig, LoopState } from "../../shared/loop/state.js";
import { AgentError } from "../../shared/runtime/errors.js";
import type { Logger } from "../../shared/runtime/logger.js";
import { SPAWN_TOOL } from "./fanout.js";

export interface CancelCallDeps {
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
}

/**
 * A cancel, with what the call its run halted waiting on did (see WaitedOnCall), asked of the call's
 * tool service, which also makes sure that a call that never ran never will (see serveAbandon). A
 * call still running is waited on up to the tool's timeout. The cancel is returned unchanged when
 * there is no such call, when it has no side effect, or when the service cannot tell (none answers,
 * one of an earlier build, a call running past its timeout): the failure report then lists the call
 * for a human, as it did before.
 */
export async function settleWaitedOn(
  state: LoopState,
  event: CancelEvent,
  deps: CancelCallDeps,
): Promise<CancelEvent> {
  const pending = state.phase === "HALT" ? state.haltedFrom?.pending : undefined;
  const effect = state.awaiting;
  if (pending?.kind !== "tool" || effect?.type !== "callTool" || effect.actionId !== pending.actionId)
    return event;
  const tool = deps.config.tools.find((t) => t.name === effect.tool);
  if (!tool || tool.reversibility === "pure" || tool.name === SPAWN_TOOL) return event;
  const { nc, subjects, clock } = deps.bus;
  const log = deps.logger.child({ runId: state.runId, tool: tool.name, actionId: effect.actionId });
  const request = {
    schemaVersion: 1 as const,
    runId: state.runId,
    actionId: effect.actionId,
    idempotencyKey: effect.idempotencyKey,
    by: event.by,
    reason: event.reason,
  };
  for (;;) {
    let reply: AbandonReply;
    try {
      reply = await abandonCall(nc, subjects, tool.name, request, deps.requestTimeoutMs ?? 5_000);
    } catch (err) {
      log.warn(
        { err },
        "the call the run halted on could not be settled with its tool service: a human is asked",
      );
      return event;
    }
    if (reply.outcome === "refused") {
      log.warn(
        { error: reply.error },
        "the tool service refused to settle the call the run halted on: a human is asked",
      );
      return event;
    }
    if (reply.outcome !== "running") return { ...event, waitedOn: learned(effect.actionId, reply) };
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

function learned(
  actionId: string,
  reply: Exclude<AbandonReply, { outcome: "running" | "refused" }>,
): WaitedOnCall {
  if (reply.outcome === "abandoned") return { actionId, outcome: "notRun" };
  return reply.reply.ok
    ? { actionId, outcome: "completed", output: reply.reply.output }
    : { actionId, outcome: "failed", error: reply.reply.error };
}
