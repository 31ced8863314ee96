import type { ActorBus } from "../../shared/bus/actor.js";
import { orphanCancelReason, orphanedChild, queueCancel } from "../../shared/bus/cancel-job.js";
import { childOf } from "../../shared/bus/fanout.js";
import { queuedJobKinds } from "../../shared/bus/jobs.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";

/** How long one lease waits for the children it cancelled to end before it hands the run back. */
export const IN_LEASE_WAIT_MS = 3_000;
/**
 * How long a failing parent waits in all for its children still going to end, by default
 * (AGENT_CHILDREN_END_WAIT_MS); past it, it fails without them, each named for a human (what one
 * commits later stands).
 */
export const CHILDREN_END_WAIT_MS = 10 * 60_000;
/** Who cancels a failing parent's children, in their reason and trail. */
const CANCELLED_BY = "agent";
/** Between two reads of the children's statuses: doubled from the first, up to the last. */
const POLL_MS = [25, 500] as const;

export interface ChildrenEndDeps {
  bus: ActorBus;
  /** Aborted when the worker drains: the run is handed back rather than waited on. */
  stopping?: AbortSignal;
  /** See CHILDREN_END_WAIT_MS, its default. */
  childrenEndWaitMs?: number;
}

/** The parent whose undo waits: its id, why it fails, and when its undo was first asked for. */
export interface FailingParent {
  runId: string;
  reason: string;
  since: number;
}

/**
 * Before a failing parent reads which of its children committed, each one still going (queued,
 * running, waiting on a human) is cancelled, and the undo waits for them to end: a child read as
 * going and left to be cancelled once its parent has failed could commit in between, and what it
 * did would stand, undone by nobody. A cancelled child either fails, undoing its own calls, or
 * commits first, and is then undone with the rest. A child halted by an operator, or undoing its
 * own calls, cannot commit and is not waited on, unless an operator's resume of it is queued: it is
 * then cancelled as well (the cancel's job follows the resume's), and waited on.
 *
 * Waits here for a few seconds (IN_LEASE_WAIT_MS); children still going then hand the run back
 * (CHILDREN_GOING, retryable), so a parent holds no worker slot while a child's cancel waits for
 * one. Returns the children still going CHILDREN_END_WAIT_MS after `since`: left to a human.
 */
export async function awaitChildrenEnd(
  children: readonly string[],
  parent: FailingParent,
  deps: ChildrenEndDeps,
): Promise<string[]> {
  const { bus } = deps;
  const store = new RunStatusStore(bus.buckets.runs, bus);
  let going = await goingOf(bus, store, children, parent.runId);
  const reason = orphanCancelReason(parent.runId, true, parent.reason);
  for (const { status, revision } of going)
    await queueCancel(bus, status, revision, { by: CANCELLED_BY, reason });
  const start = bus.clock.now();
  let pause: number = POLL_MS[0];
  while (going.length > 0 && bus.clock.now() - start < IN_LEASE_WAIT_MS && !deps.stopping?.aborted) {
    await bus.clock.sleep(pause);
    pause = Math.min(POLL_MS[1], pause * 2);
    going = await goingOf(
      bus,
      store,
      going.map((g) => g.status.runId),
      parent.runId,
    );
  }
  const ids = going.map((g) => g.status.runId);
  if (ids.length === 0 || bus.clock.now() - parent.since >= childrenEndWait(deps)) return ids;
  throw new AgentError(
    "CHILDREN_GOING",
    `run '${parent.runId}' undoes its committed children once those it cancelled have ended; still going: ${ids.join(", ")}`,
    { details: { children: ids } },
  );
}

/**
 * The children, of those named, that could still commit, with their statuses' revisions: those
 * going, and those halted with a resume on the work queue (an operator's, which no worker has
 * applied yet: the child runs again once one does). A child id naming another's run (see childOf)
 * is neither cancelled nor waited on.
 */
async function goingOf(
  bus: ActorBus,
  store: RunStatusStore,
  children: readonly string[],
  parentRunId: string,
): Promise<{ status: RunStatus; revision: number }[]> {
  const reads = await Promise.all(
    children.map(async (id) => {
      const read = await store.read(id);
      if (read && !childOf(read.status, parentRunId)) return undefined;
      if (!read || orphanedChild(read.status)) return read;
      return read.status.status === "halted" && (await resumeQueued(bus, id)) ? read : undefined;
    }),
  );
  return reads.filter((r) => r !== undefined);
}

/** Whether a job on the run's work queue may resume it (a job this build cannot read may). */
async function resumeQueued(bus: ActorBus, runId: string): Promise<boolean> {
  const kinds = await queuedJobKinds(bus, runId);
  return kinds.some((k) => k === "resume" || k === "unreadable");
}

/** How long a failing parent waits in all for its children (see CHILDREN_END_WAIT_MS). */
export function childrenEndWait(deps: Pick<ChildrenEndDeps, "childrenEndWaitMs">): number {
  return deps.childrenEndWaitMs ?? CHILDREN_END_WAIT_MS;
}
