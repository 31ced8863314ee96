import { JetStreamApiError, type JetStreamManager, type StoredMsg } from "@nats-io/jetstream";
import { headers, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
import type { AuditEvent } from "../contracts/audit.js";
import {
  CHECKPOINT_HEADER,
  EVENTS_HEADER,
  headlineOf,
  type LogEntry,
  type RunProgress,
} from "../contracts/log.js";
import type { WalRecord } from "../contracts/wal.js";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { AckPublisher, MSG_ID_HEADER } from "./ack-publisher.js";
import { decodeLogEntry, decodeLogEvents, encodeLogEntry } from "./log-codec.js";
import { readRange, type RangeQuery } from "./read-range.js";
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
   * records of one transition share it.
   */
  seq: number;
  record: WalRecord;
}

export interface LogDeps {
  /** Appends are published on it (AckPublisher); its server's `max_payload` decides when a message is split. */
  nc: NatsConnection;
  jsm: JetStreamManager;
  subjects: Subjects;
  clock: Clock;
  random: Random;
}

/**
 * On the second and later parts of a split message: the stream sequence of its first part, where
 * a reader that got its last part alone (a consumer filtering by headline) reads it whole from.
 */
export const PART_OF_HEADER = "Agents-Part-Of";

/** What reading a log takes: no connection of its own (direct gets go through the manager). */
export type LogReadDeps = Omit<LogDeps, "nc">;

/**
 * Appends to one run's log. Each append is one transition: its records and its audit events in
 * one message on `<prefix>.log.<runId>.<headline>`, fenced with the sequence of the last message
 * under `<prefix>.log.<runId>.>`: if anyone else appended in between, the append fails with FENCED
 * and this writer must let the run go. The message id, `runId:index:writerId`, names the writer:
 * the server checks the fence before message-id dedupe, so a retry after a lost ack is refused as
 * "wrong last sequence" too, and only a head carrying this writer's own id proves it landed.
 */
export class LogWriter {
  constructor(
    private readonly deps: LogDeps,
    readonly runId: string,
    /** Unique per writer: a worker's lease (a worker id plus a random suffix), or an admission. */
    readonly writerId: string,
    private lastSeq: number,
    private count: number,
    /** The sequence of the run's latest checkpoint (see CHECKPOINT_HEADER). */
    private checkpointSeq?: number,
  ) {}

  get position(): { lastSeq: number; count: number } {
    return { lastSeq: this.lastSeq, count: this.count };
  }

  /**
   * Appends one transition; returns the stream sequence of its (first) message. The runtime's own
   * records and events are not validated again here: they are built by the loop from validated
   * inputs, and this is every step's path. A message larger than the server's `max_payload` is
   * written as consecutive parts (see wal-parts.ts), each fenced and deduplicated like a whole one.
   */
  async append(
    records: readonly WalRecord[],
    events: readonly AuditEvent[] = [],
    progress?: RunProgress,
  ): Promise<number> {
    if (records.length === 0 && events.length === 0)
      throw new AgentError("INTERNAL", `an empty log append for run ${this.runId}`);
    const entry: LogEntry = { records: [...records], events: [...events], ...(progress ? { progress } : {}) };
    const data = encodeLogEntry(this.runId, entry);
    const subject = this.deps.subjects.log(this.runId, headlineOf(events));
    // Each kind once: the header stays small however many events a transition holds.
    const kinds = [...new Set(events.map((e) => e.kind))].join(",");
    const messages = recordMessages(data, this.deps.nc.info?.max_payload);
    let first = 0;
    for (const [i, message] of messages.entries()) {
      const seq = await this.publish(subject, message.data, message.part, kinds, i === 0 ? undefined : first);
      if (i === 0) first = seq;
    }
    if (records.some((r) => r.type === "CHECKPOINT")) this.checkpointSeq = first;
    return first;
  }

  private async publish(
    subject: string,
    data: Uint8Array,
    part: string | undefined,
    kinds: string,
    partOf: number | undefined,
  ): Promise<number> {
    const msgID = `${this.runId}:${this.count + 1}:${this.writerId}`;
    const fence = this.deps.subjects.logAll(this.runId);
    const options = {
      msgID,
      expectLastSubjectSequence: this.lastSeq,
      expectLastSubjectSequenceSubject: fence,
    };
    const publisher = AckPublisher.of(this.deps.nc);
    const ack = await withBusRetry(
      `log append for run ${this.runId}`,
      this.deps,
      async () => {
        // A fresh header set per attempt: the publisher adds the message id to the one it is given.
        const h = headers();
        if (part !== undefined) h.set(PART_HEADER, part);
        if (partOf !== undefined) h.set(PART_OF_HEADER, String(partOf));
        if (kinds !== "") h.set(EVENTS_HEADER, kinds);
        if (this.checkpointSeq !== undefined) h.set(CHECKPOINT_HEADER, String(this.checkpointSeq));
        try {
          return await publisher.publish(subject, data, { ...options, headers: h });
        } catch (err) {
          const landed = isWrongLastSequence(err) ? await this.landedEarlier(msgID) : undefined;
          if (!landed) throw err;
          return landed;
        }
      },
      (err) =>
        isWrongLastSequence(err)
          ? new AgentError(
              "FENCED",
              `another writer appended to the log of run ${this.runId}; letting it go`,
              {
                cause: err,
              },
            )
          : undefined,
    );
    this.lastSeq = ack.seq;
    this.count += 1;
    return ack.seq;
  }

  /** This writer's message `msgID` when it is the run's last message: an earlier try that landed. */
  private async landedEarlier(msgID: string): Promise<{ seq: number } | undefined> {
    const head = await this.deps.jsm.streams.getMessage(this.deps.subjects.streams().log, {
      last_by_subj: this.deps.subjects.logAll(this.runId),
    });
    return head?.header.get(MSG_ID_HEADER) === msgID ? { seq: head.seq } : undefined;
  }
}

export interface LogRead {
  records: StoredRecord[];
  /** The audit events of the messages read, in order. */
  events: AuditEvent[];
  /** The stream sequence of the run's last message (0 when it has none). */
  lastSeq: number;
  /** Messages read (a split message counts each of its parts). */
  messages: number;
  /** The writer id the last message read names in its message id (see LogWriter). */
  lastWriter?: string;
  /** The stream sequence of the last checkpoint read. */
  checkpointSeq?: number;
  /** Where the read started: 1, or the checkpoint the run's last message named. */
  fromSeq: number;
}

/** The writer id in a log message id, `runId:index:writerId`; undefined for any other shape. */
export function writerOfMessageId(msgId: string | undefined): string | undefined {
  const match = /^[^:]+:\d+:(.+)$/.exec(msgId ?? "");
  return match?.[1];
}

/** One whole message of a run's log as read: where it is, and what it holds. */
export interface StoredEntry {
  /** The stream sequence of its (first) message. */
  seq: number;
  subject: string;
  entry: LogEntry;
  /** The writer its message id names (see LogWriter), when it names one. */
  writer?: string;
}

/**
 * Reads a run's log in order, up to the last message the stream's leader holds for the run (a new
 * run's is answered at once): from `from`, a stream sequence, or from the latest checkpoint before
 * the run's last message, which that message names, for a resume whose cost stays flat.
 */
export async function readLog(
  deps: LogReadDeps,
  runId: string,
  from: number | "checkpoint" = 1,
): Promise<LogRead> {
  const filter = deps.subjects.logAll(runId);
  const head = await lastLogMessage(deps, filter);
  const last = head?.seq ?? 0;
  const fromSeq = from === "checkpoint" ? Number(head?.header.get(CHECKPOINT_HEADER) || 1) : from;
  const read: LogRead = { records: [], events: [], lastSeq: last, messages: 0, fromSeq };
  if (last < fromSeq) return read;
  const range = { stream: deps.subjects.streams().log, filter, fromSeq, untilSeq: last };
  for await (const stored of entries(deps, range, () => (read.messages += 1))) {
    for (const record of stored.entry.records) {
      read.records.push({ seq: stored.seq, record });
      if (record.type === "CHECKPOINT") read.checkpointSeq = stored.seq;
    }
    read.events.push(...stored.entry.events);
    if (stored.writer === undefined) delete read.lastWriter;
    else read.lastWriter = stored.writer;
  }
  return read;
}

/**
 * A run's whole log (or every run's, without `runId`), message by message as it is read, up to
 * what the stream held when asked: a long log is never held whole.
 */
export async function* scanLog(deps: LogReadDeps, runId?: string, fromSeq = 1): AsyncGenerator<StoredEntry> {
  const filter = deps.subjects.logAll(runId);
  const last = (await lastLogMessage(deps, filter))?.seq ?? 0;
  if (last === 0 || last < fromSeq) return;
  yield* entries(deps, { stream: deps.subjects.streams().log, filter, fromSeq, untilSeq: last });
}

/** A run's records, one by one (see scanLog). */
export async function* scanWal(deps: LogReadDeps, runId: string): AsyncGenerator<WalRecord> {
  for await (const stored of scanLog(deps, runId)) yield* stored.entry.records;
}

/** The last message of the run log under `filter`, asked of the stream's leader; null when none. */
export async function lastLogMessage(deps: LogReadDeps, filter: string): Promise<StoredMsg | null> {
  // Only "no message" means an empty log; a timeout must not pass for one (the run would restart).
  return withBusRetry(`reading the end of ${filter}`, deps, () =>
    deps.jsm.streams.getMessage(deps.subjects.streams().log, { last_by_subj: filter }),
  );
}

async function* entries(
  deps: LogReadDeps,
  range: RangeQuery,
  counted?: () => void,
): AsyncGenerator<StoredEntry> {
  // One assembler per subject: runs' messages interleave in the stream, a message's parts share one.
  const assemblers = new Map<string, PartAssembler>();
  for await (const msg of readRange(deps, range)) {
    counted?.();
    let parts = assemblers.get(msg.subject);
    if (!parts) assemblers.set(msg.subject, (parts = new PartAssembler()));
    const whole = parts.push(msg.seq, msg.data, msg.headers?.get(PART_HEADER));
    if (!whole) continue;
    const writer = writerOfMessageId(msg.headers?.get(MSG_ID_HEADER));
    const entry = decodeLogEntry(whole.data);
    yield { seq: whole.seq, subject: msg.subject, entry, ...(writer === undefined ? {} : { writer }) };
  }
}

/**
 * The entry a message a consumer got holds: itself, or for the last part of a split message the
 * whole message, read again from its first part; undefined for an earlier part.
 */
export async function entryOfMessage(deps: LogReadDeps, msg: LogMessage): Promise<LogEntry | undefined> {
  const whole = await wholeMessage(deps, msg);
  return whole && decodeLogEntry(whole);
}

/**
 * The events of a message a consumer got (see entryOfMessage), its records left unread: a reader of
 * events does not depend on the record types of the build that wrote them.
 */
export async function eventsOfMessage(deps: LogReadDeps, msg: LogMessage): Promise<AuditEvent[] | undefined> {
  const whole = await wholeMessage(deps, msg);
  return whole && decodeLogEvents(whole);
}

/** A stored message (a direct get's) as the readers of log messages take it. */
export function storedAsLog(msg: StoredMsg): LogMessage {
  return { subject: msg.subject, seq: msg.seq, data: msg.data, headers: msg.header };
}

/** A message of the run log as a consumer or a direct get hands it over. */
export interface LogMessage {
  subject: string;
  seq: number;
  data: Uint8Array;
  headers?: MsgHdrs | undefined;
}

/** A message's bytes whole: itself, or read from its first part at its last; undefined for an earlier part. */
export async function wholeMessage(deps: LogReadDeps, msg: LogMessage): Promise<Uint8Array | undefined> {
  const part = msg.headers?.get(PART_HEADER);
  if (!part) return msg.data;
  const [at, of] = part.split("/");
  if (at !== of) return undefined;
  const fromSeq = Number(msg.headers?.get(PART_OF_HEADER));
  const range = { stream: deps.subjects.streams().log, filter: msg.subject, fromSeq, untilSeq: msg.seq };
  const parts = new PartAssembler();
  let whole: Uint8Array | undefined;
  for await (const m of readRange(deps, range))
    whole = parts.push(m.seq, m.data, m.headers?.get(PART_HEADER))?.data ?? whole;
  return whole;
}

/** A writer positioned after what `readLog` returned: the next append must follow the last message. */
export function writerAfter(
  deps: LogDeps,
  runId: string,
  writerId: string,
  read: Pick<LogRead, "lastSeq" | "messages" | "checkpointSeq">,
): LogWriter {
  const { lastSeq, messages, checkpointSeq } = read;
  return new LogWriter(deps, runId, writerId, lastSeq, messages, checkpointSeq);
}
