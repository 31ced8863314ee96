import { JetStreamApiError, type JetStreamManager } from "@nats-io/jetstream";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import { WalBatch, WalRecord } from "../contracts/wal.js";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { AckPublisher, MSG_ID_HEADER } from "./ack-publisher.js";
import { decode, encode } from "./codec.js";
import { readRange, type RangeMessage, type RangeQuery } from "./read-range.js";
import { withBusRetry } from "./retry.js";
import { PART_HEADER, PartAssembler, recordMessages } from "./wal-parts.js";
import type { Subjects } from "./subjects.js";

/** JetStream's answer when the expected last subject sequence does not match: someone else wrote. */
export const WRONG_LAST_SEQUENCE = 10071;

/** A write refused for its expected last sequence (a KV update's revision included): someone else wrote. */
export function isWrongLastSequence(err: unknown): boolean {
  return err instanceof JetStreamApiError && err.code === WRONG_LAST_SEQUENCE;
}

/** For a compare-and-set's rejection: refused (false); any other error is thrown on, for a retry. */
export function refusedOnly(err: unknown): false {
  if (isWrongLastSequence(err)) return false;
  throw err;
}

export interface StoredRecord {
  /**
   * The stream sequence of the message holding the record (the first part of a split one); the
   * records of one transition's batch share it.
   */
  seq: number;
  record: WalRecord;
}

export interface WalDeps {
  /** Appends are published on it (AckPublisher); its server's `max_payload` decides when a record is split. */
  nc: NatsConnection;
  jsm: JetStreamManager;
  subjects: Subjects;
  clock: Clock;
  random: Random;
}

/**
 * Appends one run's WAL records. Each append carries the expected last sequence of the run's
 * subject, a fencing token: if another worker appended in between, the append fails with FENCED
 * and this worker must let the run go. The message id, `runId:index:writerId`, names the writer:
 * the server checks the fence before message-id dedupe, so a retry after a lost ack is refused
 * as "wrong last sequence" too, and only a head carrying this writer's own id proves it landed.
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

  /**
   * Appends one record; returns the stream sequence of its first message. A record larger than
   * the server's `max_payload` is written as consecutive parts (see wal-parts.ts), each fenced
   * and deduplicated like a whole record.
   */
  async append(record: WalRecord): Promise<number> {
    return this.appendBatch([record]);
  }

  /**
   * Appends the records of one transition as one message (one round trip, durable together);
   * returns its stream sequence, which every record in it shares. Split like a large record.
   */
  async appendBatch(records: readonly WalRecord[]): Promise<number> {
    const [only] = records;
    if (!only) throw new AgentError("INTERNAL", `an empty WAL append for run ${this.runId}`);
    const data = records.length === 1 ? encode(WalRecord, only) : encode(WalBatch, [...records]);
    const messages = recordMessages(data, this.deps.nc.info?.max_payload);
    let first = 0;
    for (const [i, message] of messages.entries()) {
      const seq = await this.publish(message.data, message.part);
      if (i === 0) first = seq;
    }
    return first;
  }

  private async publish(data: Uint8Array, part: string | undefined): Promise<number> {
    const subject = this.deps.subjects.wal(this.runId);
    const msgID = `${this.runId}:${this.count + 1}:${this.writerId}`;
    const options = { msgID, expectLastSubjectSequence: this.lastSeq };
    const publisher = AckPublisher.of(this.deps.nc);
    const ack = await withBusRetry(
      `WAL append for run ${this.runId}`,
      this.deps,
      async () => {
        // A fresh header set per attempt: the publisher adds the message id to the one it is given.
        const h = headers();
        if (part !== undefined) h.set(PART_HEADER, part);
        try {
          return await publisher.publish(subject, data, { ...options, headers: h });
        } catch (err) {
          const landed = isWrongLastSequence(err) ? await this.landedEarlier(subject, msgID) : undefined;
          if (!landed) throw err;
          return landed;
        }
      },
      (err) =>
        isWrongLastSequence(err)
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

  /** This writer's message `msgID` when it is the subject's head: an earlier try that landed. */
  private async landedEarlier(subject: string, msgID: string): Promise<{ seq: number } | undefined> {
    const head = await this.deps.jsm.streams.getMessage(this.deps.subjects.streams().wal, {
      last_by_subj: subject,
    });
    return head?.header.get(MSG_ID_HEADER) === msgID ? { seq: head.seq } : undefined;
  }

  /** Appends records in order; returns the stream sequence of the last message written. */
  async appendAll(records: readonly WalRecord[]): Promise<number> {
    for (const record of records) await this.append(record);
    return this.lastSeq;
  }
}

export interface WalRead {
  records: StoredRecord[];
  /** The stream sequence of the WAL's last message (0 when it is empty). */
  lastSeq: number;
  /** Messages read (a split record counts each of its parts). */
  messages: number;
  /** The writer id the last message read names in its message id (see WalWriter). */
  lastWriter?: string;
}

/** The writer id in a WAL message id, `runId:index:writerId`; undefined for any other shape. */
export function writerOfMessageId(msgId: string | undefined): string | undefined {
  const match = /^[^:]+:\d+:(.+)$/.exec(msgId ?? "");
  return match?.[1];
}

/**
 * Reads a run's WAL in order from `fromSeq` (a checkpoint's sequence, for a flat resume cost), up
 * to the last message the stream's leader holds for the run: a new run's is answered at once.
 */
export async function readWal(deps: WalDeps, runId: string, fromSeq = 1): Promise<WalRead> {
  const subject = deps.subjects.wal(runId);
  const last = await lastWalSeq(deps, subject);
  if (last < fromSeq) return { records: [], lastSeq: last, messages: 0 };
  return collect(deps, { stream: deps.subjects.streams().wal, filter: subject, fromSeq, untilSeq: last });
}

/**
 * A run's whole WAL, record by record as it is read, for a reader that needs only some of it: a
 * long WAL is never held whole.
 */
export async function* scanWal(deps: WalDeps, runId: string): AsyncGenerator<WalRecord> {
  const subject = deps.subjects.wal(runId);
  const last = await lastWalSeq(deps, subject);
  if (last === 0) return;
  const range: RangeQuery = { stream: deps.subjects.streams().wal, filter: subject, untilSeq: last };
  const parts = new PartAssembler();
  for await (const msg of readRange(deps, range))
    for (const { record } of recordsOf(parts, msg)) yield record;
}

/** The stream sequence of a WAL subject's last message, asked of the stream's leader; 0 when it has none. */
async function lastWalSeq(deps: WalDeps, subject: string): Promise<number> {
  // Only "no message" means an empty WAL; a timeout must not pass for one (the run would restart).
  const last = await withBusRetry(`reading the end of ${subject}`, deps, () =>
    deps.jsm.streams.getMessage(deps.subjects.streams().wal, { last_by_subj: subject }),
  );
  return last?.seq ?? 0;
}

/** The whole records in a range of a WAL subject, and the sequence of the range's last message. */
async function collect(deps: WalDeps, range: RangeQuery): Promise<WalRead> {
  const records: StoredRecord[] = [];
  const parts = new PartAssembler();
  let messages = 0;
  let lastSeq = 0;
  let lastWriter: string | undefined;
  for await (const msg of readRange(deps, range)) {
    messages += 1;
    lastSeq = msg.seq;
    lastWriter = writerOfMessageId(msg.headers?.get(MSG_ID_HEADER));
    for (const record of recordsOf(parts, msg)) records.push(record);
  }
  return { records, lastSeq, messages, ...(lastWriter === undefined ? {} : { lastWriter }) };
}

/** The records of a WAL message once whole (a split record's last part brings them all); none before. */
function recordsOf(parts: PartAssembler, msg: RangeMessage): StoredRecord[] {
  const whole = parts.push(msg.seq, msg.data, msg.headers?.get(PART_HEADER));
  return whole ? decodeWalMessage(whole.data).map((record) => ({ seq: whole.seq, record })) : [];
}

/** A writer positioned after what `readWal` returned: the next append must follow the last record. */
export function writerAfter(
  deps: WalDeps,
  runId: string,
  writerId: string,
  read: WalRead,
  countBefore = 0,
): WalWriter {
  return new WalWriter(deps, runId, writerId, read.lastSeq, countBefore + read.messages);
}

const OPEN_BRACKET = 0x5b;

/** The records of one whole WAL message: a transition's batch (a JSON array) or a single record. */
export function decodeWalMessage(data: Uint8Array): WalRecord[] {
  return data[0] === OPEN_BRACKET ? decode(WalBatch, data) : [decode(WalRecord, data)];
}
