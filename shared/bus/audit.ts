import type { JetStreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { AuditEvent } from "../contracts/audit.js";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { AckPublisher } from "./ack-publisher.js";
import { decode, encode } from "./codec.js";
import { readHeld } from "./read-range.js";
import { eventsOfMessage, lastLogMessage, LogWriter, scanLog, storedAsLog } from "./run-log.js";
import { withBusRetry } from "./retry.js";
import type { Subjects } from "./subjects.js";

/** What a question about a run's events needs: the stream's manager, and retries through a leader election. */
export interface AuditQueries {
  jsm: JetStreamManager;
  subjects: Subjects;
  clock: Clock;
  random: Random;
}

export interface AuditDeps extends AuditQueries {
  /** Events are published on it (AckPublisher). */
  nc: NatsConnection;
}

/**
 * Appends one event of the supervisor's as a message of the run's log, fenced at `after` (the
 * sequence of the run's last message, 0 for a run with none): the admission's `run.admitted`
 * is the run's first message, so a second admission of the same run id is refused. `writer` names
 * who writes it (an admission, a lost admission's failure), in the message id a retry after a lost
 * ack finds its own message by (see LogWriter). Returns the message's sequence, or "refused" when
 * the run's log has moved on (someone else wrote first).
 */
export async function appendEvent(
  deps: AuditDeps,
  event: AuditEvent,
  after: number,
  writer: string,
): Promise<number | "refused"> {
  try {
    return await new LogWriter(deps, event.runId, writer, after, 0).append([], [event]);
  } catch (err) {
    if (err instanceof AgentError && err.code === "FENCED") return "refused";
    throw err;
  }
}

/**
 * Records a refused submit on `<prefix>.rejected.<runId>`, outside the run's log: the run id
 * names no run, and may be submitted again.
 */
export async function recordRejection(deps: AuditDeps, event: AuditEvent): Promise<void> {
  const data = encode(AuditEvent, event);
  const publisher = AckPublisher.of(deps.nc);
  await withBusRetry(`recording ${event.auditId}`, deps, () =>
    publisher.publish(deps.subjects.rejected(event.runId), data, { msgID: event.auditId }),
  );
}

/**
 * Reads the events the run log holds when called, in order (one run's, or every run's), from the
 * beginning; at most `limit` events. A run's refused submits (see recordRejection) come in their
 * place among its events. It rides out a leader election like a publish does.
 */
export async function* readAudit(
  deps: AuditQueries,
  options: { runId?: string; limit?: number } = {},
): AsyncGenerator<AuditEvent> {
  let left = options.limit ?? Number.POSITIVE_INFINITY;
  if (left <= 0) return;
  const refused = options.runId === undefined ? [] : await rejections(deps, options.runId);
  const stored = async function* (): AsyncGenerator<{ seq: number; events: AuditEvent[] }> {
    for await (const { seq, entry } of scanLog(deps, options.runId)) {
      while (refused.length > 0 && refused[0]!.seq < seq) yield refused.shift()!;
      yield { seq, events: entry.events };
    }
    yield* refused;
  };
  for await (const { events } of stored()) {
    for (const event of events) {
      yield event;
      if (--left <= 0) return;
    }
  }
}

/** A run id's refused submits, with their stream sequences. */
async function rejections(
  deps: AuditQueries,
  runId: string,
): Promise<{ seq: number; events: AuditEvent[] }[]> {
  const refused: { seq: number; events: AuditEvent[] }[] = [];
  const stream = deps.subjects.streams().log;
  const read = withBusRetry(`reading ${runId}'s refused submits`, deps, async () => {
    refused.length = 0;
    for await (const msg of readHeld(deps.jsm, stream, deps.subjects.rejected(runId)))
      refused.push({ seq: msg.seq, events: [decode(AuditEvent, msg.data)] });
  });
  await read;
  return refused;
}

/**
 * The run's latest audit event of one kind, with the stream sequence of the message holding it;
 * undefined when it has none. A message's subject names its headline (see headlineOf), so one
 * `last_by_subj` read finds the latest message headed by `kind`; the messages after it are read
 * for a later event of that kind under another headline (an approval decided and the commit it
 * led to, in one transition).
 */
export async function lastAuditEvent(
  deps: AuditQueries,
  runId: string,
  kind: AuditEvent["kind"],
): Promise<{ streamSeq: number; event: AuditEvent } | undefined> {
  const headed = await lastLogMessage(deps, deps.subjects.log(runId, kind));
  // A split message is read whole (its last part's sequence is the one consumers saw); an earlier
  // part at the head (its writer died mid-message) is passed over, and the log read through.
  const events = headed ? await eventsOfMessage(deps, storedAsLog(headed)) : undefined;
  const event = events?.findLast((e) => e.kind === kind);
  let found = headed && event ? { streamSeq: headed.seq, event } : undefined;
  // Final events always head their message: nothing can follow them in it.
  if (found && FINAL_HEADLINES.has(kind)) return found;
  for await (const { seq, entry } of scanLog(deps, runId, found ? found.streamSeq + 1 : 1)) {
    const event = entry.events.findLast((e) => e.kind === kind);
    if (event) found = { streamSeq: seq, event };
  }
  return found;
}

const FINAL_HEADLINES: ReadonlySet<string> = new Set([
  "run.committed",
  "run.failed",
  "run.halted",
  "run.admitted",
]);

/**
 * The `seq` of the run's last audit event: the next event's is this plus one. Its last message
 * says, unless that holds records only; then the whole log is read.
 */
export async function auditCount(deps: AuditQueries, runId: string): Promise<number> {
  return (await logHead(deps, runId)).events;
}

/** The run's last message's stream sequence (0 with none: what a fence on its log names), and its events' count. */
export async function logHead(deps: AuditQueries, runId: string): Promise<{ seq: number; events: number }> {
  const last = await lastLogMessage(deps, deps.subjects.logAll(runId));
  if (!last) return { seq: 0, events: 0 };
  const event = (await eventsOfMessage(deps, storedAsLog(last)))?.at(-1);
  if (event) return { seq: last.seq, events: event.seq };
  let events = 0;
  for await (const { entry } of scanLog(deps, runId)) events = entry.events.at(-1)?.seq ?? events;
  return { seq: last.seq, events };
}

/**
 * One run's log as the stream holds it, in one request: how many messages, and whether one says
 * the run finished (`run.committed` or `run.failed`).
 */
export async function auditTally(
  deps: AuditQueries,
  runId: string,
): Promise<{ messages: number; finished: boolean }> {
  const filter = deps.subjects.logAll(runId);
  const info = await withBusRetry(`counting ${filter}`, deps, () =>
    deps.jsm.streams.info(deps.subjects.streams().log, { subjects_filter: filter }),
  );
  const bySubject = info.state.subjects ?? {};
  const finals = new Set(["run.committed", "run.failed"].map((kind) => deps.subjects.log(runId, kind)));
  return {
    messages: Object.values(bySubject).reduce((sum, n) => sum + n, 0),
    finished: Object.keys(bySubject).some((subject) => finals.has(subject)),
  };
}
