import type { JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { AuditEvent } from "../contracts/audit.js";
import type { Clock } from "../runtime/clock.js";
import type { Random } from "../runtime/random.js";
import { AckPublisher } from "./ack-publisher.js";
import { decode, encode } from "./codec.js";
import { readRange } from "./read-range.js";
import { withBusRetry } from "./retry.js";
import type { Subjects } from "./subjects.js";

export interface AuditDeps {
  /** Events are published on it (AckPublisher). */
  nc: NatsConnection;
  subjects: Subjects;
  clock: Clock;
  random: Random;
}

/** What a question about a run's events needs: the stream's manager, and retries through a leader election. */
export interface AuditQueries {
  jsm: JetStreamManager;
  subjects: Subjects;
  clock: Clock;
  random: Random;
}

/**
 * Publishes one audit event on `<prefix>.audit.<runId>.<kind>`. The message id is the event's
 * `auditId` (`runId:seq`), so a retry, or a resumed worker re-emitting an event it cannot know
 * was published, never stores it twice.
 */
export async function publishAudit(
  deps: AuditDeps,
  event: AuditEvent,
): Promise<{ seq: number; duplicate: boolean }> {
  const data = encode(AuditEvent, event);
  const subject = deps.subjects.audit(event.runId, event.kind);
  const publisher = AckPublisher.of(deps.nc);
  const ack = await withBusRetry(`audit publish of ${event.auditId}`, deps, () =>
    publisher.publish(subject, data, { msgID: event.auditId }),
  );
  return { seq: ack.seq, duplicate: ack.duplicate };
}

/**
 * Reads what the audit stream holds when called, in stream order (one run's events, or all), from
 * the beginning; at most `limit` events. It rides out a leader election like a publish does.
 */
export async function* readAudit(
  deps: AuditQueries,
  options: { runId?: string; limit?: number } = {},
): AsyncGenerator<AuditEvent> {
  const stream = deps.subjects.streams().audit;
  const filter = deps.subjects.auditAll(options.runId);
  const held = await heldBy(deps, filter);
  const count = Math.min(held, options.limit ?? held);
  if (count === 0) return;
  for await (const msg of readRange(deps, { stream, filter, count })) {
    yield decode(AuditEvent, msg.data);
  }
}

/**
 * The run's latest audit event of one kind, with its audit stream sequence; undefined when it has
 * none. One `last_by_subj` read: each kind has a subject of its own.
 */
export async function lastAuditEvent(
  deps: AuditQueries,
  runId: string,
  kind: AuditEvent["kind"],
): Promise<{ streamSeq: number; event: AuditEvent } | undefined> {
  const subject = deps.subjects.audit(runId, kind);
  const last = await withBusRetry(`reading the last ${subject}`, deps, () =>
    deps.jsm.streams.getMessage(deps.subjects.streams().audit, { last_by_subj: subject }),
  );
  return last ? { streamSeq: last.seq, event: decode(AuditEvent, last.data) } : undefined;
}

/** How many audit events the stream holds for one run: the next event's `seq` is this plus one. */
export async function auditCount(deps: AuditQueries, runId: string): Promise<number> {
  return heldBy(deps, deps.subjects.auditAll(runId));
}

/**
 * One run's audit events as the stream holds them, in the one request auditCount makes: how many,
 * and whether one says the run finished (`run.committed` or `run.failed`).
 */
export async function auditTally(
  deps: AuditQueries,
  runId: string,
): Promise<{ events: number; finished: boolean }> {
  const bySubject = await subjectsHeld(deps, deps.subjects.auditAll(runId));
  const finals = new Set(["run.committed", "run.failed"].map((kind) => deps.subjects.audit(runId, kind)));
  return {
    events: Object.values(bySubject).reduce((sum, n) => sum + n, 0),
    finished: Object.keys(bySubject).some((subject) => finals.has(subject)),
  };
}

async function heldBy(deps: AuditQueries, filter: string): Promise<number> {
  return Object.values(await subjectsHeld(deps, filter)).reduce((sum, n) => sum + n, 0);
}

async function subjectsHeld(deps: AuditQueries, filter: string): Promise<Record<string, number>> {
  const info = await withBusRetry(`counting ${filter}`, deps, () =>
    deps.jsm.streams.info(deps.subjects.streams().audit, { subjects_filter: filter }),
  );
  return info.state.subjects ?? {};
}
