import { appendEvent, logHead, type AuditDeps } from "../../shared/bus/audit.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { LogWriter } from "../../shared/bus/run-log.js";
import type { WalRecord } from "../../shared/contracts/wal.js";

/** Appends records one message each, as a log written one step at a time; returns the last sequence. */
export async function appendEach(writer: LogWriter, records: readonly WalRecord[]): Promise<number> {
  let seq = 0;
  for (const record of records) seq = await writer.append([record]);
  return seq;
}

/**
 * Appends one event as a message of its run's log, after whatever the log holds (as its owner
 * would); returns the message's sequence.
 */
export async function publishEvent(deps: AuditDeps, event: AuditEvent): Promise<{ seq: number }> {
  const head = await logHead(deps, event.runId);
  const seq = await appendEvent(deps, event, head.seq, event.auditId);
  if (seq === "refused") throw new Error(`${event.runId}'s log moved on while ${event.kind} was appended`);
  return { seq };
}
