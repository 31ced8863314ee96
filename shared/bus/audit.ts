import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { AuditEvent } from "../contracts/audit.js";
import type { Clock } from "../runtime/clock.js";
import type { Random } from "../runtime/random.js";
import { decode, encode } from "./codec.js";
import { publishWithRetry } from "./retry.js";
import type { Subjects } from "./subjects.js";

export interface AuditDeps {
  js: JetStreamClient;
  subjects: Subjects;
  clock: Clock;
  random: Random;
}

/**
 * Publishes one audit event on `<prefix>.audit.<runId>.<kind>`. The message id is the event's
 * `auditId` (`runId:seq`), so a retry, or a resumed worker re-emitting an event it cannot know
 * was published, never stores it twice.
 */
export async function publishAudit(deps: AuditDeps, event: AuditEvent): Promise<number> {
  const data = encode(AuditEvent, event);
  const subject = deps.subjects.audit(event.runId, event.kind);
  const ack = await publishWithRetry(`audit publish of ${event.auditId}`, deps, () =>
    deps.js.publish(subject, data, { msgID: event.auditId }),
  );
  return ack.seq;
}

/**
 * Reads what the audit stream holds when called, in stream order, with an ordered consumer (one
 * run's events, or all), from the beginning; at most `limit` events.
 */
export async function* readAudit(
  deps: Pick<AuditDeps, "js" | "subjects"> & { jsm: JetStreamManager },
  options: { runId?: string; limit?: number } = {},
): AsyncGenerator<AuditEvent> {
  const stream = deps.subjects.streams().audit;
  const filter = deps.subjects.auditAll(options.runId);
  const info = await deps.jsm.streams.info(stream, { subjects_filter: filter });
  const held = Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
  let remaining = Math.min(held, options.limit ?? held);
  if (remaining === 0) return;
  const consumer = await deps.js.consumers.get(stream, {
    filter_subjects: filter,
    deliver_policy: DeliverPolicy.All,
  });
  while (remaining > 0) {
    const batch = await consumer.fetch({ max_messages: Math.min(256, remaining), expires: 5_000 });
    for await (const msg of batch) {
      yield decode(AuditEvent, msg.data);
      if (--remaining === 0) return;
    }
  }
}

/** How many audit events the stream holds for one run: the next event's `seq` is this plus one. */
export async function auditCount(
  deps: { jsm: JetStreamManager; subjects: Subjects },
  runId: string,
): Promise<number> {
  const info = await deps.jsm.streams.info(deps.subjects.streams().audit, {
    subjects_filter: deps.subjects.auditAll(runId),
  });
  return Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
}
