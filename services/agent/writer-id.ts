import type { ActorBus } from "../../shared/bus/actor.js";
import { MSG_ID_HEADER } from "../../shared/bus/ack-publisher.js";
import { writerOfMessageId } from "../../shared/bus/wal.js";

/**
 * A lease's WAL writer id: `<workerId>-<lease>-<suffix>.j<jobSeq>`. Unique per lease (see
 * LeaseDeps.writerId), and naming the job message the run was driven with (its stream sequence
 * on the work queue): a lease can tell a delivery of its own job from another job of the run.
 */
export function leaseWriterId(workerId: string, lease: number, suffix: string, jobSeq: number): string {
  return `${workerId}-${lease}-${suffix}.j${jobSeq}`;
}

/** The job's stream sequence a writer id names; undefined for an older build's writer ids. */
export function jobOfWriter(writerId: string | undefined): number | undefined {
  const match = /\.j(\d+)$/.exec(writerId ?? "");
  const seq = match ? Number(match[1]) : NaN;
  return Number.isSafeInteger(seq) && seq > 0 ? seq : undefined;
}

/**
 * The job message the run's last WAL write was driven with, read from the WAL's head; undefined
 * when its writer names none (or the head cannot be read now).
 */
export async function drivingJob(
  bus: Pick<ActorBus, "jsm" | "subjects" | "logger">,
  runId: string,
): Promise<number | undefined> {
  try {
    const head = await bus.jsm.streams.getMessage(bus.subjects.streams().wal, {
      last_by_subj: bus.subjects.wal(runId),
    });
    return jobOfWriter(writerOfMessageId(head?.header.get(MSG_ID_HEADER)));
  } catch (err) {
    bus.logger.warn({ err, runId }, "the WAL's last writer could not be read");
    return undefined;
  }
}
