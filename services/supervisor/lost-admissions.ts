import type { Counter } from "prom-client";
import type { ActorBus } from "../../shared/bus/actor.js";
import { appendEvent, lastAuditEvent, logHead } from "../../shared/bus/audit.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { hasQueuedJob } from "../../shared/bus/jobs.js";
import type { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatus } from "../../shared/contracts/run-status.js";
import { toRfc3339 } from "../../shared/runtime/clock.js";
import { AgentError, type ErrorCode } from "../../shared/runtime/errors.js";
import type { SlotScan } from "./slot-scan.js";

/** The code a run failed as a lost admission carries, first in its terminal reason and in its `run.failed`. */
export const ADMISSION_LOST = "ADMISSION_LOST" satisfies ErrorCode;

/** Queued runs unchanged for `staleMs`: a job waiting that long is normal, none at all is not. Pure. */
export function staleQueued(statuses: readonly RunStatus[], now: number, staleMs: number): RunStatus[] {
  return statuses.filter((s) => s.status === "queued" && now - Date.parse(s.updatedAt) >= staleMs);
}

/** Runs failed here as lost admissions that still hold their slot (their release may be pending). Pure. */
export function failedAsLost(statuses: readonly RunStatus[]): RunStatus[] {
  return statuses.filter(
    (s) => s.status === "failed" && s.terminal?.reason.startsWith(`[${ADMISSION_LOST}]`) === true,
  );
}

/**
 * Settles admissions a supervisor stopped midway (killed, say) that nobody finished: a submit
 * retried after a lost reply finishes one (Admission.finishAdmission), but a client that never
 * retries would leave the run queued, holding its pool slot, for ever.
 *
 * - A run queued for `staleMs` with no job on the work queue is failed (`ADMISSION_LOST`): its
 *   RunSpec travelled only in the job that was never queued, so nothing can start it. The status
 *   is written first, by compare-and-set (a worker or a retried submit that moved the run wins),
 *   then `run.failed`, which frees the slot and settles a parent waiting on the run.
 * - A slot held by a run with no status for `staleMs` (the admission stopped before recording the
 *   run: nobody saw it) is freed; a submit of that run later is a fresh admission.
 */
export class LostAdmissions {
  /** When this process first saw each slot held with no status, to tell an admission in progress from a lost one. */
  private readonly unrecordedSince = new Map<string, number>();

  constructor(
    private readonly bus: ActorBus,
    private readonly pool: PoolLedger,
    private readonly staleMs: number,
    private readonly settled?: Counter<"outcome">,
  ) {}

  /** Acts on what one scan of the held slots found. */
  async settle(scan: SlotScan, now: number): Promise<void> {
    for (const run of staleQueued(scan.statuses, now, this.staleMs)) await this.failQueued(run);
    // A supervisor that stopped between the status and the event left the slot held: announce it.
    for (const run of failedAsLost(scan.statuses)) await this.announce(run);
    await this.releaseUnrecorded(scan.unrecorded, now);
  }

  private async failQueued(run: RunStatus): Promise<void> {
    if (await hasQueuedJob(this.bus, run.runId)) return;
    const entry = await this.bus.buckets.runs.get(run.runId);
    if (entry?.operation !== "PUT") return;
    const current = decode(RunStatus, entry.value);
    if (current.status !== "queued" || current.updatedAt !== run.updatedAt) return;
    const error = new AgentError(
      ADMISSION_LOST,
      `the run's admission stopped before its job was queued (a supervisor stopped midway) and no ` +
        `submit finished it within ${this.staleMs} ms; its spec was not recorded: submit it again ` +
        `under a new run id`,
    );
    const reason = `[${error.code}] ${error.message}`;
    const failed: RunStatus = {
      ...current,
      status: "failed",
      terminal: { kind: "FAIL", reason },
      updatedAt: toRfc3339(this.bus.clock.now()),
    };
    try {
      await this.bus.buckets.runs.update(run.runId, encode(RunStatus, failed), entry.revision);
    } catch (err) {
      // Someone wrote the status since it was read (a worker took the run, a retried submit): theirs stands.
      this.bus.logger.info({ runId: run.runId, err }, "a queued run without a job moved on meanwhile");
      return;
    }
    this.bus.logger.warn(
      { runId: run.runId, queuedAt: current.updatedAt },
      "a run stayed queued with no job (its admission stopped midway): failed as ADMISSION_LOST",
    );
    this.settled?.inc({ outcome: "failed" });
    await this.publishFailed(failed);
  }

  /** Publishes the lost admission's `run.failed` unless it already is (the release loop then frees the slot). */
  private async announce(run: RunStatus): Promise<void> {
    if (!(await lastAuditEvent(this.bus, run.runId, "run.failed"))) await this.publishFailed(run);
  }

  /**
   * Appends the run's `run.failed` to its log, fenced at the log's head: a run whose worker wrote
   * meanwhile (it was not lost after all) is left to it.
   */
  private async publishFailed(run: RunStatus): Promise<void> {
    const head = await logHead(this.bus, run.runId);
    const seq = head.events + 1;
    await appendEvent(
      this.bus,
      {
        schemaVersion: 1,
        auditId: `${run.runId}:${seq}`,
        runId: run.runId,
        rootRunId: run.rootRunId ?? run.runId,
        ...(run.parentRunId ? { parentRunId: run.parentRunId } : {}),
        seq,
        iteration: run.iteration,
        phase: run.phase,
        kind: "run.failed",
        actor: "supervisor",
        status: "failed",
        ...(run.terminal ? { reason: run.terminal.reason } : {}),
        artifacts: [],
        data: { code: ADMISSION_LOST },
        timestamp: toRfc3339(this.bus.clock.now()),
      },
      head.seq,
      "lost-admission",
    );
  }

  private async releaseUnrecorded(unrecorded: readonly string[], now: number): Promise<void> {
    const held = new Set(unrecorded);
    for (const runId of this.unrecordedSince.keys()) if (!held.has(runId)) this.unrecordedSince.delete(runId);
    for (const runId of unrecorded) {
      const since = this.unrecordedSince.get(runId);
      if (since === undefined) {
        this.unrecordedSince.set(runId, now);
        continue;
      }
      if (now - since < this.staleMs) continue;
      // Read again: the admission may have recorded the run since the scan read the bucket.
      if ((await this.bus.buckets.runs.get(runId))?.operation === "PUT") continue;
      const released = await this.pool.release(runId);
      this.unrecordedSince.delete(runId);
      if (released !== "released") continue;
      this.bus.logger.warn(
        { runId, heldMs: now - since },
        "a pool slot was held with no run recorded (its admission stopped midway): slot freed",
      );
      this.settled?.inc({ outcome: "slot_released" });
    }
  }
}
