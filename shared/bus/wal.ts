import { JetStreamApiError, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { WalRecord } from "../contracts/wal.js";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { decode, encode } from "./codec.js";
import { readRange } from "./read-range.js";
import { withBusRetry } from "./retry.js";
import type { Subjects } from "./subjects.js";

/** JetStream's answer when the expected last subject sequence does not match: someone else wrote. */
export const WRONG_LAST_SEQUENCE = 10071;

export interface StoredRecord {
  seq: number;
  record: WalRecord;
}

export interface WalDeps {
  js: JetStreamClient;
  reads: JetStreamClient;
  jsm: JetStreamManager;
  subjects: Subjects;
  clock: Clock;
  random: Random;
}

/**
 * Appends one run's WAL records. Each append carries the expected last sequence of the run's
 * subject, a fencing token: if another worker appended in between, the append fails with FENCED
 * and this worker must let the run go. The message id, `runId:index:writerId`, makes this
 * writer's retry after a lost ack a duplicate rather than a second record. It must name the
 * writer: JetStream checks duplicates before the expected sequence, so two writers sharing ids
 * would see the loser's different record acknowledged as the winner's.
 */
export class WalWriter {
  constructor(
    private readonly deps: WalDeps,
    readonly runId: string,
    /** Unique per worker and run lease (a worker id plus a random suffix). */
    readonly writerId: string,
    private lastSeq: number,
    private count: number,
  ) {}

  get position(): { lastSeq: number; count: number } {
    return { lastSeq: this.lastSeq, count: this.count };
  }

  async append(record: WalRecord): Promise<number> {
    const subject = this.deps.subjects.wal(this.runId);
    const data = encode(WalRecord, record);
    const msgID = `${this.runId}:${this.count + 1}:${this.writerId}`;
    const ack = await withBusRetry(
      `WAL append for run ${this.runId}`,
      this.deps,
      () => this.deps.js.publish(subject, data, { msgID, expect: { lastSubjectSequence: this.lastSeq } }),
      (err) =>
        err instanceof JetStreamApiError && err.code === WRONG_LAST_SEQUENCE
          ? new AgentError(
              "FENCED",
              `another writer appended to the WAL of run ${this.runId}; letting it go`,
              { cause: err },
            )
          : undefined,
    );
    this.lastSeq = ack.seq;
    this.count += 1;
    return ack.seq;
  }

  async appendAll(records: readonly WalRecord[]): Promise<number> {
    let seq = this.lastSeq;
    for (const record of records) seq = await this.append(record);
    return seq;
  }
}

/** Reads a run's WAL in order from `fromSeq` (a checkpoint's sequence, for a flat resume cost). */
export async function readWal(
  deps: WalDeps,
  runId: string,
  fromSeq = 1,
): Promise<{ records: StoredRecord[]; lastSeq: number }> {
  const subject = deps.subjects.wal(runId);
  const stream = deps.subjects.streams().wal;
  // Only "no message" means an empty WAL; a timeout must not pass for one (the run would restart).
  const last = await withBusRetry(`reading the end of ${subject}`, deps, () =>
    deps.jsm.streams.getMessage(stream, { last_by_subj: subject }),
  );
  if (!last || last.seq < fromSeq) return { records: [], lastSeq: last?.seq ?? 0 };
  const records: StoredRecord[] = [];
  const range = { stream, filter: subject, fromSeq, end: { untilSeq: last.seq } };
  for await (const msg of readRange(deps, range)) {
    records.push({ seq: msg.seq, record: decode(WalRecord, msg.data) });
  }
  return { records, lastSeq: last.seq };
}

/** A writer positioned after what `readWal` returned: the next append must follow the last record. */
export function writerAfter(
  deps: WalDeps,
  runId: string,
  writerId: string,
  read: { records: StoredRecord[]; lastSeq: number },
  countBefore = 0,
): WalWriter {
  return new WalWriter(deps, runId, writerId, read.lastSeq, countBefore + read.records.length);
}
