import { readAudit } from "../../shared/bus/audit.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";

/** A run's audit trail as the stream holds it now. */
export async function auditTrail(bus: Parameters<typeof readAudit>[0], runId: string): Promise<AuditEvent[]> {
  const events: AuditEvent[] = [];
  for await (const event of readAudit(bus, { runId })) events.push(event);
  return events;
}
