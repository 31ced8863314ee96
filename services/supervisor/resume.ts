import { ResumeRequest, type ControlReply } from "../../shared/contracts/cluster.js";
import type { CallSettlement } from "../../shared/contracts/loop-event.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { lastAuditEvent } from "../../shared/bus/audit.js";
import { decode } from "../../shared/bus/codec.js";
import { continuationJob, publishJob } from "../../shared/bus/jobs.js";
import { readKillSwitch } from "../../shared/bus/kill-switch.js";
import type { PoolLedger } from "../../shared/bus/pool.js";
import { AgentError, toAgentError } from "../../shared/runtime/errors.js";
import { queueCancel } from "../../shared/bus/cancel-job.js";
import { ORPHANS_BY } from "./cancel.js";
import {
  checkParentTakesResult,
  haltedInTree,
  haltedRun,
  leftHaltedText,
  parentNowTakesNoResult,
  type HaltedRun,
  type HaltedTree,
} from "./halted.js";

/** How long a resume waits for its run's halt to free the slot it held (see takeSlotAfterHalt). */
const HALT_RELEASE_WAIT_MS = 5_000;
const HALT_RELEASE_POLL_MS = 50;

/**
 * Resumes a halted run: it takes a pool slot again (POOL_FULL when none is free), and a job
 * carrying the resume goes to the work queue. Refused while the kill switch is on. With `tree`,
 * every halted run of the tree under it, the deepest first and the run itself last, so a resumed
 * parent finds its children running again rather than parking on halted ones (it would wait for
 * them either way: a halted child has not ended, see fanInResults). A child whose parent can no
 * longer take its result stays halted (PARENT_FINISHED; a tree's resume leaves it and says so).
 */
export async function resumeRun(
  bus: ActorBus,
  pool: PoolLedger,
  capacity: number,
  data: Uint8Array,
): Promise<ControlReply> {
  const request = decode(ResumeRequest, data);
  const { runId, by, settle } = request;
  // A single run is checked before the kill switch is read; its status is not read twice.
  const single = request.tree ? undefined : await haltedRun(bus, runId, request.revision);
  if (settle) settlesReconciliation(request, single);
  if (single) await checkParentTakesResult(bus, single.status);
  const tree: HaltedTree = single ? { runIds: [runId], leftHalted: [] } : await haltedInTree(bus, runId);
  const ids = tree.runIds;
  const killSwitch = await readKillSwitch(bus.buckets.pool);
  if (killSwitch?.active) {
    throw new AgentError(
      "KILL_SWITCH_ACTIVE",
      `kill switch is on (${killSwitch.reason}): runs cannot resume`,
    );
  }
  const resumed: string[] = [];
  for (const id of ids) {
    try {
      await resumeOne(bus, pool, capacity, id, { by, ...(settle ? { settle } : {}) }, single);
      resumed.push(id);
    } catch (err) {
      if (!request.tree) throw err;
      // Resumed again, the tree's resume skips what this one resumed: those are no longer halted.
      const error = toAgentError(err);
      throw new AgentError(
        error.code,
        `tree ${runId}: resumed ${resumed.length} of ${ids.length} halted runs (${resumed.join(", ") || "none"}); ${id}: ${error.message}`,
        { cause: err },
      );
    }
  }
  const left = tree.leftHalted;
  const message = request.tree
    ? `tree ${runId}: resume queued for ${ids.length} run(s): ${ids.join(", ")}${left.length > 0 ? `; left halted, their parents can take no result (cancel them instead): ${leftHaltedText(left)}` : ""}`
    : `run ${runId}: resume queued${settle ? `, its call settled as ${settle.decision === "ran" ? "ran" : "not run"}` : ""}`;
  const details = { runId, runIds: resumed, ...(left.length > 0 ? { leftHalted: left } : {}) };
  return { schemaVersion: 1, ok: true, message, data: details };
}

/**
 * A settlement is for one run, halted for a reconciliation: what a human found of the call whose
 * outcome the worker could not learn. Any other halt has no such call to settle.
 */
function settlesReconciliation(request: ResumeRequest, run: HaltedRun | undefined): void {
  if (!run)
    throw new AgentError("INVALID_INPUT", "a settlement is for one run: resume a tree without --settle");
  const reason = run.status.terminal?.reason ?? "";
  if (!reason.startsWith("RECONCILIATION_REQUIRED")) {
    throw new AgentError(
      "INVALID_INPUT",
      `run '${request.runId}' did not halt for a reconciliation (${reason || "no reason"}): resume it without --settle`,
    );
  }
}

async function resumeOne(
  bus: ActorBus,
  pool: PoolLedger,
  capacity: number,
  runId: string,
  resume: { by: string; settle?: CallSettlement },
  read?: HaltedRun,
): Promise<void> {
  const { status, revision } = read ?? (await haltedRun(bus, runId));
  await takeSlotAfterHalt(bus, pool, runId, capacity);
  await publishJob(
    bus,
    continuationJob(status, { type: "resume", at: bus.clock.now(), ...resume }),
    `${runId}:resume:${revision}`,
  );
  bus.logger.info({ runId, by: resume.by, settled: resume.settle?.decision }, "run resumed");
  await cancelIfOrphaned(bus, { status, revision });
}

/**
 * A parent can begin to fail after the resume read it: the read again, now that the resume is
 * queued, cancels the child if it did (the cancel's job follows the resume's, and the child, resumed
 * or not yet, stops, undoes its calls and fails). The parent's undo, which writes its FAIL status
 * before it reads its children, takes a halted child with a resume queued for one still going
 * (see awaitChildrenEnd): one of the two reads finds the other.
 */
async function cancelIfOrphaned(bus: ActorBus, { status, revision }: HaltedRun): Promise<void> {
  const reason = await parentNowTakesNoResult(bus, status);
  if (reason) await queueCancel(bus, status, revision, { by: ORPHANS_BY, reason });
}

/**
 * A halted run's slot is freed when the release loop reads its `run.halted`, which may come after
 * an operator has seen the run halted and resumed it. A resume that kept the slot it found
 * ("existing") would then lose it to that late release, and the pool would count one run too few
 * for as long as the resumed run lives. So the resume waits for the halt's release, then takes a
 * slot of its own, marked as following that halt (see lastHaltSeq); HALT_PENDING (retryable) when
 * the release has not come within HALT_RELEASE_WAIT_MS (the supervisors are down or far behind).
 *
 * A slot already marked as following this very halt was taken by a resume of it: one that stopped
 * before its job was queued (its supervisor killed, JetStream out of reach), or one whose job is
 * queued and not yet taken. It is the run's: this resume goes on with it (a job queued already is
 * not queued twice). Taken for the halt's own, it was waited for until HALT_PENDING, every time,
 * and the run could not be resumed while the slot stayed held by nobody.
 */
async function takeSlotAfterHalt(
  bus: ActorBus,
  pool: PoolLedger,
  runId: string,
  capacity: number,
): Promise<void> {
  const haltSeq = await lastHaltSeq(bus, runId);
  const deadline = bus.clock.now() + HALT_RELEASE_WAIT_MS;
  for (;;) {
    const slot = await pool.slotOf(runId);
    if (!slot) break;
    if (haltSeq > 0 && slot.after === haltSeq) return;
    if (bus.clock.now() >= deadline) {
      throw new AgentError(
        "HALT_PENDING",
        `run '${runId}' still holds the pool slot it had when it halted (its halt has not been processed yet): resume it again shortly`,
      );
    }
    await bus.clock.sleep(HALT_RELEASE_POLL_MS);
  }
  await pool.acquire(runId, capacity, { after: haltSeq });
}

/**
 * The run log sequence of the message holding the run's latest `run.halted`: the halt whose release the resume
 * waited for. Its event may be delivered to the release loop again (its ack lost, or NAK'd after
 * the release); the slot the resume takes follows it, so that delivery must not free it.
 */
async function lastHaltSeq(bus: ActorBus, runId: string): Promise<number> {
  return (await lastAuditEvent(bus, runId, "run.halted"))?.streamSeq ?? 0;
}
