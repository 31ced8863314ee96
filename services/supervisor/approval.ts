import { ApprovalRequest, type ControlReply } from "../../shared/contracts/cluster.js";
import { DecidedBy } from "../../shared/contracts/control.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { lastAuditEvent } from "../../shared/bus/audit.js";
import { decode } from "../../shared/bus/codec.js";
import { continuationJob, publishJob, queuedJobs } from "../../shared/bus/jobs.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { checkAsRead } from "./as-read.js";

/**
 * Approvals: a run waiting for a human holds no worker; the decision becomes a job on the work
 * queue, and whichever worker takes it continues the run from its WAL. One decision per waiting
 * state (its status revision names the job), so a copy of a decision is queued once; another
 * decision on the same request, from someone else deciding at the same moment, is refused with the
 * one that came first, rather than told "recorded" and dropped as that one's copy.
 */
export async function decideApproval(
  bus: ActorBus,
  subject: string,
  data: Uint8Array,
): Promise<ControlReply> {
  const runId = bus.subjects.runIdOfApproval(subject);
  const { revision, ...approval } = decode(ApprovalRequest, data);
  const read = await new RunStatusStore(bus.buckets.runs).read(runId);
  if (!read) throw new AgentError("NOT_FOUND", `no run '${runId}'`);
  checkAsRead(read, revision, "deciding");
  const current = read.status;
  if (current.status !== "awaiting_approval") {
    throw new AgentError(
      "INVALID_INPUT",
      `run '${runId}' is not awaiting approval (it is ${current.status})`,
    );
  }
  const { duplicate } = await publishJob(
    bus,
    continuationJob(current, { type: "approvalDecided", at: bus.clock.now(), ...approval }),
    `${runId}:approval:${read.revision}`,
  );
  const first = duplicate ? await firstDecision(bus, runId) : undefined;
  if (first && !sameDecision(first, approval)) {
    throw new AgentError(
      "RUN_CHANGED",
      `run '${runId}': ${first.decision} by ${first.by} was decided first on this request; your ${approval.decision} was not recorded`,
    );
  }
  const also = first && first.by !== approval.by ? ` (decided first by ${first.by})` : "";
  bus.logger.info({ runId, decision: approval.decision, by: approval.by }, "approval decided");
  return {
    schemaVersion: 1,
    ok: true,
    message: `run ${runId}: ${approval.decision} recorded${also}`,
    data: { runId },
  };
}

/**
 * The decision queued for the run's request before this one: its job while it waits or a worker
 * holds it (a job leaves the queue once its worker is done), else what the run's trail recorded.
 */
async function firstDecision(bus: ActorBus, runId: string): Promise<DecidedBy | undefined> {
  const queued = (await queuedJobs(bus, runId)).findLast((job) => job?.event?.type === "approvalDecided");
  if (queued) return DecidedBy.safeParse(queued.event).data;
  const decided = await lastAuditEvent(bus, runId, "approval.decided");
  return DecidedBy.safeParse(decided?.event.data).data;
}

/** Whether `asked` is what `first` decided: the same decision (a modify's feedback is its decider's own). */
function sameDecision(first: DecidedBy, asked: DecidedBy): boolean {
  return first.decision === asked.decision && (first.by === asked.by || asked.decision !== "modify");
}
