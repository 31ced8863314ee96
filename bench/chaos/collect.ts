/**
 * What the soak reads back from the cluster once the runs settled: every run's audit events (the
 * whole run log), and the status of every child run they name.
 */
import type { ClusterClient } from "../../dist/services/cli/client.js";
import { readAudit } from "../../dist/shared/bus/audit.js";
import type { AuditEvent } from "../../dist/shared/contracts/audit.js";
import type { Outcome } from "./driver.ts";

const CLOSING: Record<string, string> = { committed: "run.committed", failed: "run.failed" };
/** A run's closing event can follow its status (a lost admission's `run.failed`): it is waited for this long. */
const CLOSING_WAIT_MS = 5_000;

export async function readTrails(client: ClusterClient, outcomes: readonly Outcome[]): Promise<AuditEvent[]> {
  const deadline = Date.now() + CLOSING_WAIT_MS;
  for (;;) {
    const events: AuditEvent[] = [];
    for await (const event of readAudit(client.bus, {})) events.push(event);
    const closed = new Set(
      events.filter((e) => e.kind === "run.committed" || e.kind === "run.failed").map((e) => e.runId),
    );
    const waiting = outcomes.some((o) => CLOSING[o.status] !== undefined && !closed.has(o.run.runId));
    if (!waiting || Date.now() >= deadline) return events;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The status of each child run the trails name (a run whose root is another run). */
export async function childStatuses(
  client: ClusterClient,
  events: readonly AuditEvent[],
): Promise<Map<string, string>> {
  const ids = [...new Set(events.filter((e) => e.rootRunId !== e.runId).map((e) => e.runId))];
  const statuses = await Promise.all(
    ids.map(async (id) => (await client.status.get(id))?.status ?? "missing"),
  );
  return new Map(ids.map((id, i) => [id, statuses[i] as string]));
}
