import { DeliverPolicy, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { AuditEvent } from "../contracts/audit.js";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { fullJitterDelay } from "../tools/backoff.js";
import { decode, encode } from "./codec.js";
import type { Subjects } from "./subjects.js";

const RETRIES = 5;
const BACKOFF = { baseDelayMs: 50, maxDelayMs: 2_000 };

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
  for (let attempt = 0; ; attempt++) {
    try {
      return (await deps.js.publish(subject, data, { msgID: event.auditId })).seq;
    } catch (err) {
      if (attempt >= RETRIES)
        throw new AgentError("BUS_UNAVAILABLE", `audit publish failed for ${event.auditId}`, { cause: err });
      await deps.clock.sleep(fullJitterDelay(attempt, BACKOFF, deps.random));
    }
  }
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
