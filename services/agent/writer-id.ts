import type { ActorBus } from "../../shared/bus/actor.js";
import { MSG_ID_HEADER } from "../../shared/bus/ack-publisher.js";
import { writerOfMessageId } from "../../shared/bus/run-log.js";

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

/** The worker id a lease's writer id names; undefined for an older build's writer ids. */
export function workerOfWriter(writerId: string): string | undefined {
  return /^(.+)-\d+-.{8}\.j\d+$/.exec(writerId)?.[1];
}

/** The writer id of the run's last log message; undefined when there is none (or it cannot be read now). */
export async function lastWriterOf(
  bus: Pick<ActorBus, "jsm" | "subjects" | "logger">,
  runId: string,
): Promise<string | undefined> {
  try {
    const head = await bus.jsm.streams.getMessage(bus.subjects.streams().log, {
      last_by_subj: bus.subjects.logAll(runId),
    });
    return writerOfMessageId(head?.header.get(MSG_ID_HEADER));
  } catch (err) {
    bus.logger.warn({ err, runId }, "the log's last writer could not be read");
    return undefined;
  }
}
