import { HaltRequest, type ControlReply } from "../../shared/contracts/cluster.js";
import { isFinished } from "../../shared/contracts/run-status.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode } from "../../shared/bus/codec.js";
import { continuationJob, publishJob } from "../../shared/bus/jobs.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { runTree } from "../../shared/bus/run-tree.js";
import { alreadyQueued, firstStopBy } from "./first-stop.js";

/**
 * An operator's stop of one run (the kill switch stops them all, at their next step): a job
 * carrying the halt goes to the work queue, and whichever worker takes it writes the halt into the
 * run's log, where the run is. A run a worker is driving is taken over for it, as after a stall:
 * that worker is fenced at its next append, and a call it has in flight is settled, on resume, from
 * the tool's idempotency record. A run waiting for a human, its children or a model provider is
 * halted where it waits. Either way `run.halted` frees its pool slot, and `resume` continues it.
 *
 * A run still queued has no log to write the halt into yet (its first job, which carries its spec,
 * may be taken after the halt's): the halt's job is handed back until a worker has started the run
 * (see RunLease), then halts it like any other. A finished or halted run is refused, and so is one
 * undoing its calls before it fails. With `tree`, every run of the tree under it that can be halted
 * is, the run first; the ones not started yet are named in the reply.
 */
export async function haltRun(bus: ActorBus, data: Uint8Array): Promise<ControlReply> {
  const request = decode(HaltRequest, data);
  const { runId } = request;
  if (!request.tree) {
    const { state, also } = await haltOne(bus, runId, request);
    const queued = state === "queued";
    const later = queued ? " (it has not started yet: it halts once a worker starts it)" : "";
    return {
      schemaVersion: 1,
      ok: true,
      message: `run ${runId}: halt queued${later}${also}`,
      data: { runId, runIds: [runId], notStarted: queued ? [runId] : [] },
    };
  }
  const tree = runTree(runId, (await readRunsBucket(bus)).statuses);
  if (tree.length === 0) throw new AgentError("NOT_FOUND", `no run '${runId}'`);
  const halted: string[] = [];
  const notStarted: string[] = [];
  for (const { runId: id } of tree) {
    const outcome = await haltOne(bus, id, request).then(
      (one) => one.state,
      (err: unknown) => {
        // Finished or halted since the tree was read, or never to be: nothing to stop.
        if (err instanceof AgentError && (err.code === "INVALID_INPUT" || err.code === "NOT_FOUND"))
          return "skipped";
        throw err;
      },
    );
    if (outcome !== "skipped") halted.push(id);
    if (outcome === "queued") notStarted.push(id);
  }
  const later =
    notStarted.length > 0
      ? `; not started yet, so halted once a worker starts them: ${notStarted.join(", ")}`
      : "";
  if (halted.length === 0) {
    throw new AgentError("INVALID_INPUT", `no run of tree '${runId}' can be halted now`);
  }
  return {
    schemaVersion: 1,
    ok: true,
    message: `tree ${runId}: halt queued for ${halted.length} run(s): ${halted.join(", ")}${later}`,
    data: { runId, runIds: halted, notStarted },
  };
}

/**
 * Queues the halt of one run, refused as haltRun says; "queued" when no worker has started it yet.
 * `also`: what the reply adds when another's halt was queued first (see alreadyQueued).
 */
async function haltOne(
  bus: ActorBus,
  runId: string,
  request: HaltRequest,
): Promise<{ state: "started" | "queued"; also: string }> {
  const read = await new RunStatusStore(bus.buckets.runs).read(runId);
  if (!read) throw new AgentError("NOT_FOUND", `no run '${runId}'`);
  const current = read.status;
  if (isFinished(current) || current.status === "halted") {
    throw new AgentError("INVALID_INPUT", `run '${runId}' cannot be halted: it is ${current.status}`);
  }
  if (current.phase === "FAIL") {
    throw new AgentError(
      "INVALID_INPUT",
      `run '${runId}' cannot be halted: it is undoing its completed tool calls before it fails`,
    );
  }
  const { duplicate } = await publishJob(
    bus,
    continuationJob(current, { type: "halt", at: bus.clock.now(), reason: request.reason, by: request.by }),
    // One halt per state of the run: a repeated request is a duplicate.
    `${runId}:halt:${read.revision}`,
  );
  const state = current.status === "queued" ? "queued" : "started";
  if (!duplicate) {
    bus.logger.warn({ runId, by: request.by, reason: request.reason }, "run halt queued");
    return { state, also: "" };
  }
  const first = await firstStopBy(bus, runId, "halt");
  bus.logger.info({ runId, by: request.by, reason: request.reason, first }, "run halt asked again");
  return { state, also: alreadyQueued("halt", first, request.by) };
}
