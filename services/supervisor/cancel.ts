import { CancelRequest, type ControlReply } from "../../shared/contracts/cluster.js";
import { isFinished, type RunStatus } from "../../shared/contracts/run-status.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import {
  orphanCancelReason,
  orphanedChild,
  queueCancel,
  whyNotCancellable,
} from "../../shared/bus/cancel-job.js";
import { decode } from "../../shared/bus/codec.js";
import { childOf, readFanOut } from "../../shared/bus/fanout.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import { runTree } from "../../shared/bus/run-tree.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { alreadyQueued, firstStopBy } from "./first-stop.js";

/**
 * An operator's end of a run, for good: a job carrying the cancel goes to the work queue, and the
 * worker that takes it stops the run where it is (as a halt does: a run another worker drives is
 * taken over, that worker fenced at its next append; a halted run is where it stopped), settles the
 * call the run waits on with its tool service, runs the compensations of its completed tool calls
 * (most recent first), and fails the run with RUN_CANCELLED, which a parent waiting for it gets as
 * the child's result. A run no worker has started yet is cancelled once one does. A finished run is
 * refused, and so is one already undoing its calls before it fails. With `tree`, every run of the
 * tree under it that can be cancelled, the deepest first; alone, its children still going are
 * cancelled by its worker as it undoes its calls, and waited for (see awaitChildrenEnd), or, for a
 * parent an earlier build started, once it fails (see cancelOrphans).
 *
 * Allowed under the kill switch: undoing what a run did is what an incident may call for. The run
 * holds no pool slot for its compensations (its halt frees it).
 */
export async function cancelRun(bus: ActorBus, data: Uint8Array): Promise<ControlReply> {
  const request = decode(CancelRequest, data);
  const { runId } = request;
  if (!request.tree) {
    const read = await new RunStatusStore(bus.buckets.runs).read(runId);
    if (!read) throw new AgentError("NOT_FOUND", `no run '${runId}'`);
    const refused = whyNotCancellable(read.status);
    if (refused) throw new AgentError("INVALID_INPUT", `run '${runId}' cannot be cancelled: ${refused}`);
    const queued = await queueCancel(bus, read.status, read.revision, request);
    const also = queued ? "" : alreadyQueued("cancel", await firstStopBy(bus, runId, "cancel"), request.by);
    const later = read.status.status === "queued" ? " once a worker starts it (it has not started yet)" : "";
    const { going, halted, committed } = await childrenLeft(bus, runId);
    const children =
      (going.length > 0 ? `; its children still going are cancelled with it: ${going.join(", ")}` : "") +
      (halted.length > 0
        ? `; its halted children stay halted, and can no longer be resumed (cancel --tree ends them too): ${halted.join(", ")}`
        : "") +
      (committed.length > 0
        ? `; its committed children have what they did undone with its own calls: ${committed.join(", ")}`
        : "");
    return {
      schemaVersion: 1,
      ok: true,
      message: `run ${runId}: cancel queued${also}: it stops${later}, undoes what it can, then fails${children}`,
      data: { runId, runIds: [runId], going, halted, committed },
    };
  }
  const tree = runTree(runId, (await readRunsBucket(bus)).statuses);
  if (tree.length === 0) throw new AgentError("NOT_FOUND", `no run '${runId}'`);
  const store = new RunStatusStore(bus.buckets.runs);
  const cancelled: string[] = [];
  // The deepest first: a child's cancel is queued before its parent's.
  for (const { runId: id } of tree.reverse()) {
    // Read again for its revision, which names the cancel's job: a repeated request is a duplicate.
    const read = await store.read(id);
    if (!read || whyNotCancellable(read.status)) continue;
    await queueCancel(bus, read.status, read.revision, request);
    cancelled.push(id);
  }
  if (cancelled.length === 0)
    throw new AgentError("INVALID_INPUT", `no run of tree '${runId}' can be cancelled`);
  return {
    schemaVersion: 1,
    ok: true,
    message: `tree ${runId}: cancel queued for ${cancelled.length} run(s): ${cancelled.join(", ")}`,
    data: { runId, runIds: cancelled },
  };
}

/**
 * What becomes of the children of the run's last fan-out when it is cancelled alone: those still
 * going are cancelled with it (see cancelRun), the halted ones stay halted, and those that
 * committed have their calls undone by its compensations (see undoChildren); the operator is told
 * which (as far as can be read: the cancel is queued already).
 */
async function childrenLeft(
  bus: ActorBus,
  runId: string,
): Promise<{ going: string[]; halted: string[]; committed: string[] }> {
  const children = (await childrenOf(bus, runId).catch(() => [])).map((c) => c.status);
  const left = children.filter((s) => !isFinished(s));
  return {
    going: left.filter(orphanedChild).map((s) => s.runId),
    halted: left.filter((s) => s.status === "halted").map((s) => s.runId),
    committed: children.filter((s) => s.status === "committed").map((s) => s.runId),
  };
}

/**
 * A run that failed while children of its fan-out were still going leaves them with nobody to take
 * their results: each is cancelled (by "supervisor", the reason naming the parent and why it
 * failed), so it stops, undoes what it did and fails, and its own failure cancels its children in
 * turn. A parent this build started has cancelled them and waited for them before it failed (see
 * awaitChildrenEnd): this pass finds those of older builds' parents, and a child admitted while its
 * parent failed (see the admission's second read, which also calls it, with `failing`, for a parent
 * that has begun to fail). A halted child stays as an operator left it (and one halted by a cancel
 * under way is not cancelled twice). Called for every `run.failed` the supervisor reads; most runs
 * have no fan-out (one read). Returns the runs whose cancel this call queued.
 */
export async function cancelOrphans(
  bus: ActorBus,
  parentRunId: string,
  why?: string,
  failing = false,
): Promise<string[]> {
  const reason = orphanCancelReason(parentRunId, failing, why);
  const cancelled: string[] = [];
  for (const { status, revision } of await childrenOf(bus, parentRunId)) {
    if (!orphanedChild(status)) continue;
    const queued = await queueCancel(bus, status, revision, { by: ORPHANS_BY, reason });
    // Already queued (this failure read again, or an operator's cancel of the child at this state).
    if (queued) cancelled.push(status.runId);
  }
  return cancelled;
}

/**
 * The statuses, with their revisions, of the children of the run's last fan-out that have one: one
 * read of the fan-out record, then one per child, side by side, rather than the tree. An unreadable
 * record is logged and leaves none.
 */
async function childrenOf(bus: ActorBus, runId: string): Promise<{ status: RunStatus; revision: number }[]> {
  const fanOut = await readFanOut(bus.buckets.runs, runId).catch((err: unknown) => {
    if (!(err instanceof AgentError) || err.code !== "INVALID_INPUT") throw err;
    bus.logger.error({ err, runId }, "fan-out record unreadable: the run's children are left as they are");
    return undefined;
  });
  const store = new RunStatusStore(bus.buckets.runs);
  const reads = await Promise.all((fanOut?.children ?? []).map((child) => store.read(child)));
  // A child id naming another's run (see childOf) is not cancelled with this one.
  return reads.filter((r) => r !== undefined).filter((r) => childOf(r.status, runId));
}

/** Who cancels the children of a failed run, in their reason and trail. */
export const ORPHANS_BY = "supervisor";
