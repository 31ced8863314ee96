import { CancelRequest, type ControlReply } from "../../shared/contracts/cluster.js";
import { isFinished, type RunStatus } from "../../shared/contracts/run-status.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { readFanOut } from "../../shared/bus/fanout.js";
import { continuationJob, publishJob } from "../../shared/bus/jobs.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import { runTree } from "../../shared/bus/run-tree.js";
import { AgentError } from "../../shared/runtime/errors.js";

/**
 * An operator's end of a run, for good: a job carrying the cancel goes to the work queue, and the
 * worker that takes it stops the run where it is (as a halt does: a run another worker drives is
 * taken over, that worker fenced at its next append; a halted run is where it stopped), settles the
 * call the run waits on with its tool service, runs the compensations of its completed tool calls
 * (most recent first), and fails the run with RUN_CANCELLED, which a parent waiting for it gets as
 * the child's result. A run no worker has started yet is cancelled once one does. A finished run is
 * refused, and so is one already undoing its calls before it fails. With `tree`, every run of the
 * tree under it that can be cancelled, the deepest first.
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
    const refused = whyNot(read.status);
    if (refused) throw new AgentError("INVALID_INPUT", `run '${runId}' cannot be cancelled: ${refused}`);
    await cancelOne(bus, read.status, read.revision, request);
    const later = read.status.status === "queued" ? " once a worker starts it (it has not started yet)" : "";
    const going = await childrenGoing(bus, runId);
    const children =
      going.length > 0 ? `; its children go on (cancel --tree ends them too): ${going.join(", ")}` : "";
    return {
      schemaVersion: 1,
      ok: true,
      message: `run ${runId}: cancel queued: it stops${later}, undoes what it can, then fails${children}`,
      data: { runId, runIds: [runId], going },
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
    if (!read || whyNot(read.status)) continue;
    await cancelOne(bus, read.status, read.revision, request);
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
 * The children of the run's last fan-out that have not finished: a run cancelled alone leaves them
 * going, and the operator is told so. One read of the fan-out, one per child, rather than the tree.
 */
async function childrenGoing(bus: ActorBus, runId: string): Promise<string[]> {
  const fanOut = await readFanOut(bus.buckets.runs, runId).catch(() => undefined);
  if (!fanOut) return [];
  const store = new RunStatusStore(bus.buckets.runs);
  const statuses = await Promise.all(fanOut.children.map((child) => store.get(child)));
  return statuses.flatMap((s) => (s && !isFinished(s) ? [s.runId] : []));
}

/** Why a run cannot be cancelled; undefined when it can. */
function whyNot(status: RunStatus): string | undefined {
  if (isFinished(status)) return `it is ${status.status}`;
  if (status.phase === "FAIL") return "it is undoing its completed tool calls before it fails";
  return undefined;
}

async function cancelOne(
  bus: ActorBus,
  status: RunStatus,
  revision: number,
  request: CancelRequest,
): Promise<void> {
  const { by, reason } = request;
  await publishJob(
    bus,
    continuationJob(status, { type: "cancel", at: bus.clock.now(), reason, by }),
    // One cancel per state of the run: a repeated request is a duplicate.
    `${status.runId}:cancel:${revision}`,
  );
  bus.logger.warn({ runId: status.runId, by, reason, was: status.status }, "run cancel queued");
}
