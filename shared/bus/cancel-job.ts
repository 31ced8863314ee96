import { isFinished, takesNoChildResults, type RunStatus } from "../contracts/run-status.js";
import type { ActorBus } from "./actor.js";
import { continuationJob, publishJob } from "./jobs.js";

/** A cancel's reason is at most this long (CancelRequest): a deep tree's reasons nest. */
export const MAX_CANCEL_REASON = 1_000;

/**
 * The reason a child is cancelled with because its parent fails: the parent, whether it is still
 * undoing its calls (`failing`) or has failed, and why, within MAX_CANCEL_REASON.
 */
export function orphanCancelReason(parentRunId: string, failing: boolean, why?: string): string {
  return `its parent ${parentRunId} ${failing ? "is failing" : "failed"}${why ? `: ${why}` : ""}`.slice(
    0,
    MAX_CANCEL_REASON,
  );
}

/**
 * Why a run's parent can no longer take its result, as a cancel's reason: it finished, or it is
 * undoing its calls before it fails, or its status is gone (it finished long ago). Undefined for a
 * root run, or a parent that still can.
 */
export function parentTakesNoResult(status: RunStatus, parent: RunStatus | undefined): string | undefined {
  const parentRunId = status.parentRunId;
  if (parentRunId === undefined || (parent && !takesNoChildResults(parent))) return undefined;
  if (!parent) return `its parent ${parentRunId} has finished and its status is gone`;
  if (parent.status === "committed") return `its parent ${parentRunId} committed`;
  return orphanCancelReason(parentRunId, !isFinished(parent), parent.terminal?.reason);
}

/** Why a run cannot be cancelled; undefined when it can. */
export function whyNotCancellable(status: RunStatus): string | undefined {
  if (isFinished(status)) return `it is ${status.status}`;
  if (status.phase === "FAIL") return "it is undoing its completed tool calls before it fails";
  return undefined;
}

/**
 * Whether a failing parent's child is cancelled with it: it can be, and no operator halted it.
 * Such a child may still commit; one halted, undoing its calls or finished cannot (unless a human
 * resumes it).
 */
export function orphanedChild(status: RunStatus): boolean {
  return whyNotCancellable(status) === undefined && status.status !== "halted";
}

/**
 * Queues a cancel of the run as it is now (`revision`: its status's); false when one was queued
 * for that state already. One cancel per state of the run: a repeated request, or the supervisor
 * and a parent's worker cancelling the same child, queue it once.
 */
export async function queueCancel(
  bus: ActorBus,
  status: RunStatus,
  revision: number,
  request: { by: string; reason: string },
): Promise<boolean> {
  const { by, reason } = request;
  const { duplicate } = await publishJob(
    bus,
    continuationJob(status, { type: "cancel", at: bus.clock.now(), reason, by }),
    `${status.runId}:cancel:${revision}`,
  );
  if (!duplicate)
    bus.logger.warn({ runId: status.runId, by, reason, was: status.status }, "run cancel queued");
  return !duplicate;
}
