import type { ActorBus } from "../../shared/bus/actor.js";
import { appendEvent, lastAuditEvent, recordRejection } from "../../shared/bus/audit.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { toRfc3339 } from "../../shared/runtime/clock.js";
import type { AgentError } from "../../shared/runtime/errors.js";

/** Who an event of the admission's is about. */
export interface EventIds {
  runId: string;
  rootRunId: string;
  parentRunId: string | undefined;
}

/**
 * Writes the run's first log message, `run.admitted` (seq 1), fenced at an empty log; returns its
 * seq. Refused, the log has its admission already (a copy of this submit, or an admission being
 * finished): that one's seq is continued from.
 */
export async function recordAdmitted(
  bus: ActorBus,
  ids: EventIds,
  data: Record<string, unknown>,
): Promise<number> {
  const event = admissionEvent(bus, ids, "run.admitted", "passed", undefined, data);
  if ((await appendEvent(bus, event, 0, "admission")) !== "refused") return 1;
  const admitted = await lastAuditEvent(bus, ids.runId, "run.admitted");
  return admitted?.event.seq ?? 1;
}

/** A refused submit, recorded outside the run's log (see recordRejection). */
export async function recordRejected(bus: ActorBus, ids: EventIds, error: AgentError): Promise<void> {
  const event = admissionEvent(bus, ids, "run.rejected", "failed", error.message, { code: error.code });
  await recordRejection(bus, { ...event, auditId: `${ids.runId}:rejected:${bus.clock.now()}` });
}

function admissionEvent(
  bus: ActorBus,
  ids: EventIds,
  kind: "run.admitted" | "run.rejected",
  status: AuditEvent["status"],
  reason: string | undefined,
  data: Record<string, unknown>,
): AuditEvent {
  const { runId, rootRunId, parentRunId } = ids;
  return {
    schemaVersion: 1,
    auditId: `${runId}:1`,
    runId,
    rootRunId,
    ...(parentRunId ? { parentRunId } : {}),
    seq: 1,
    iteration: 0,
    phase: "PLAN",
    kind,
    actor: "supervisor",
    status,
    ...(reason !== undefined ? { reason } : {}),
    artifacts: [],
    data,
    timestamp: toRfc3339(bus.clock.now()),
  };
}
