import { HaltRequest, type ControlReply } from "../../shared/contracts/cluster.js";
import { isFinished } from "../../shared/contracts/run-status.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { continuationJob, publishJob } from "../../shared/bus/jobs.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";

/**
 * An operator's stop of one run (the kill switch stops them all, at their next step): a job
 * carrying the halt goes to the work queue, and whichever worker takes it writes the halt into the
 * run's log, where the run is. A run a worker is driving is taken over for it, as after a stall:
 * that worker is fenced at its next append, and a call it has in flight is settled, on resume, from
 * the tool's idempotency record. A run waiting for a human, its children or a model provider is
 * halted where it waits. Either way `run.halted` frees its pool slot, and `resume` continues it.
 *
 * A run still queued has no log to write the halt into (its first job, which carries its spec, may
 * be taken after the halt's): RUN_NOT_STARTED, retryable. A finished or halted run is refused.
 */
export async function haltRun(bus: ActorBus, data: Uint8Array): Promise<ControlReply> {
  const request = decode(HaltRequest, data);
  const { runId } = request;
  const entry = await bus.buckets.runs.get(runId);
  const current = await new RunStatusStore(bus.buckets.runs).get(runId);
  if (!current || !entry) throw new AgentError("NOT_FOUND", `no run '${runId}'`);
  if (isFinished(current) || current.status === "halted") {
    throw new AgentError("INVALID_INPUT", `run '${runId}' cannot be halted: it is ${current.status}`);
  }
  if (current.status === "queued") {
    throw new AgentError(
      "RUN_NOT_STARTED",
      `run '${runId}' is queued and no worker has started it yet: halt it again once it runs`,
    );
  }
  await publishJob(
    bus,
    continuationJob(current, { type: "halt", at: bus.clock.now(), reason: request.reason, by: request.by }),
    // One halt per state of the run: a repeated request is a duplicate.
    `${runId}:halt:${entry.revision}`,
  );
  bus.logger.warn({ runId, by: request.by, reason: request.reason }, "run halt queued");
  return {
    schemaVersion: 1,
    ok: true,
    message: `run ${runId}: halt queued`,
    data: { runId },
  };
}
