import { z } from "zod";
import { AuditEvent, type AuditKind, Phase } from "./audit.js";
import { RunUsage } from "./run-status.js";
import { WalRecord } from "./wal.js";

/** Where a run is after a transition, and when: what its status does not follow step by step. */
export const RunProgress = z.object({
  phase: Phase,
  iteration: z.number().int().nonnegative(),
  usage: RunUsage,
  /** The transition's time (epoch ms). */
  at: z.number().int().nonnegative(),
});
export type RunProgress = z.infer<typeof RunProgress>;

/**
 * One message of a run's log (`<prefix>.log.<runId>.<kind>`): one durable transition, its records
 * (what replay needs) and its audit events (what subscribers read) together, written in one
 * fenced append by the run's owner. Either list may be empty: the supervisor's admission carries
 * only `run.admitted`.
 */
export const LogEntry = z.object({
  records: z.array(WalRecord),
  events: z.array(AuditEvent),
  /** The run's progress after the transition, on a worker's messages. */
  progress: RunProgress.optional(),
});
export type LogEntry = z.infer<typeof LogEntry>;

/** A log message as a reader of its events alone sees it: its records are not read. */
export const LogEvents = z.object({ events: z.array(AuditEvent) });
export type LogEvents = z.infer<typeof LogEvents>;

/**
 * On a worker's messages: the stream sequence of the run's latest checkpoint before the message.
 * Read with the run's last message, it says where a resume starts reading the log.
 */
export const CHECKPOINT_HEADER = "Agents-Checkpoint";

/** The header listing the event kinds a log message carries, comma-separated, each once, in order. */
export const EVENTS_HEADER = "Agents-Events";

/**
 * The events a message's subject may name, the first present winning: a run's lifecycle, then a
 * human's part in it. Final events end their transition, so a message holding
 * `run.committed`, `run.failed` or `run.halted` is always on that event's subject.
 */
const HEADLINES: readonly AuditKind[] = [
  "run.committed",
  "run.failed",
  "run.halted",
  "run.resumed",
  "approval.requested",
  "approval.decided",
  "run.admitted",
];

/** The subject kind of a message carrying `events`: its most telling event, or `step`. Pure. */
export function headlineOf(events: readonly Pick<AuditEvent, "kind">[]): string {
  let best = HEADLINES.length;
  for (const { kind } of events) {
    const rank = HEADLINES.indexOf(kind);
    if (rank >= 0 && rank < best) best = rank;
  }
  return HEADLINES[best] ?? "step";
}
