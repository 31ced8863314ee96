import { CancelRequest, type ControlReply } from "../../shared/contracts/cluster.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { continuationJob, publishJob } from "../../shared/bus/jobs.js";
import { haltedInTree, haltedRun, type HaltedRun } from "./halted.js";

/**
 * An operator's end of a halted run, for good: a job carrying the cancel goes to the work queue,
 * and the worker that takes it leaves HALT for FAIL, runs the compensations of the run's completed
 * tool calls (most recent first), and fails the run with RUN_CANCELLED. A parent waiting for the
 * run gets that as the child's result. Only a halted run can be cancelled: one still going would
 * race its own next step (`halt` it first). With `tree`, every halted run of the tree under it, the
 * deepest first; the runs of the tree still going are named in the reply.
 *
 * Allowed under the kill switch: undoing what a run did is what an incident may call for. The run
 * holds no pool slot for its compensations (its halt freed it).
 */
export async function cancelRun(bus: ActorBus, data: Uint8Array): Promise<ControlReply> {
  const request = decode(CancelRequest, data);
  const { runId } = request;
  if (!request.tree) {
    await cancelOne(bus, runId, request, await haltedRun(bus, runId));
    return {
      schemaVersion: 1,
      ok: true,
      message: `run ${runId}: cancel queued: it undoes what it can, then fails`,
      data: { runId, runIds: [runId] },
    };
  }
  const { halted, going } = await haltedInTree(bus, runId);
  for (const id of halted) await cancelOne(bus, id, request);
  const left = going.length > 0 ? `; not halted, so still going (halt them first): ${going.join(", ")}` : "";
  return {
    schemaVersion: 1,
    ok: true,
    message: `tree ${runId}: cancel queued for ${halted.length} run(s): ${halted.join(", ")}${left}`,
    data: { runId, runIds: halted, going },
  };
}

async function cancelOne(
  bus: ActorBus,
  runId: string,
  request: CancelRequest,
  read?: HaltedRun,
): Promise<void> {
  const { status, revision } = read ?? (await haltedRun(bus, runId));
  const { by, reason } = request;
  await publishJob(
    bus,
    continuationJob(status, { type: "cancel", at: bus.clock.now(), reason, by }),
    // One cancel per state of the run: a repeated request is a duplicate.
    `${runId}:cancel:${revision}`,
  );
  bus.logger.warn({ runId, by, reason }, "run cancel queued");
}
