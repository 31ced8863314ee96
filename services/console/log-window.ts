/**
 * What a run's page needs of its log, kept while the log is read message by message: its spec, its
 * tool calls shortened, its last TERMINAL record, and at most `max` events (the newest) after
 * `afterSeq`. A run of a hundred thousand events is read once and never held whole. Pure.
 */
import { z } from "zod";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { shorten } from "./run-view.js";

/** How many events a run's page shows at most by default, and at most when asked. */
export const TIMELINE_EVENTS = 500;
export const TIMELINE_EVENTS_MAX = 5_000;

export class LogWindow {
  private readonly events: AuditEvent[] = [];
  private readonly kept: WalRecord[] = [];
  private terminal: WalRecord | undefined;
  private first = true;
  /** Events after `afterSeq` left out: older than the `max` newest. */
  more = 0;
  /** Messages read: none means the log does not name the run. */
  messages = 0;

  constructor(
    private readonly afterSeq: number,
    private readonly max: number,
  ) {}

  add(entry: { records: readonly WalRecord[]; events: readonly AuditEvent[] }): void {
    this.messages += 1;
    for (const record of entry.records) this.keep(record);
    for (const event of entry.events) {
      if (event.seq <= this.afterSeq) continue;
      this.events.push(event);
      if (this.events.length > this.max) {
        this.events.shift();
        this.more += 1;
      }
    }
  }

  /** The events and records kept, for runView. */
  read(): { events: AuditEvent[]; records: WalRecord[] } {
    return {
      events: [...this.events],
      records: this.terminal ? [...this.kept, this.terminal] : [...this.kept],
    };
  }

  private keep(record: WalRecord): void {
    // The run's first record is its start event, which holds the spec (see specOf).
    if (this.first) {
      this.first = false;
      this.kept.push(record);
      return;
    }
    if (record.type === "INTENT") this.kept.push({ ...record, input: shorten(record.input) });
    else if (record.type === "COMPLETE")
      this.kept.push({ ...record, event: { ...record.event, output: shorten(record.event.output) } });
    else if (record.type === "ABORT") this.kept.push(record);
    else if (record.type === "TERMINAL") this.terminal = record;
  }
}

const count = (max: number) => z.coerce.number().int().min(0).max(max);

/** `?afterSeq=&limit=` of a run's view: the events after an event's seq, at most `limit` of them. */
export const TimelinePage = z.object({
  afterSeq: count(Number.MAX_SAFE_INTEGER).default(0),
  limit: count(TIMELINE_EVENTS_MAX).pipe(z.number().min(1)).default(TIMELINE_EVENTS),
});
export type TimelinePage = z.infer<typeof TimelinePage>;

/** A run view's query: INVALID_INPUT naming what is wrong. */
export function parseTimelinePage(query: Record<string, string>): TimelinePage {
  const parsed = TimelinePage.safeParse({ afterSeq: query.afterSeq, limit: query.limit });
  if (parsed.success) return parsed.data;
  throw new AgentError(
    "INVALID_INPUT",
    parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") +
      ` (afterSeq: an event's seq; limit: 1 to ${TIMELINE_EVENTS_MAX} events)`,
  );
}
