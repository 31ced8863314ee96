import { readAudit } from "../../shared/bus/audit.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { NatsConnection } from "@nats-io/transport-node";

/**
 * `nc` with its audit events held until `open` is called: every other publish (WAL appends, KV
 * writes, requests) goes through. Stands for a worker whose events trail its log (see RunJournal).
 */
export function auditGate(nc: NatsConnection): { nc: NatsConnection; open: () => void } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const gated = new Proxy(nc, {
    get: (target, key, receiver) =>
      key === "publish"
        ? (...args: Parameters<NatsConnection["publish"]>) => {
            if (args[0].includes(".audit.")) void gate.then(() => target.publish(...args));
            else target.publish(...args);
          }
        : (Reflect.get(target, key, receiver) as unknown),
  });
  return { nc: gated, open };
}

/** Resolves "settled" when `work` does within `ms`, else "waiting". */
export const within = (work: Promise<unknown>, ms = 300): Promise<string> =>
  Promise.race([
    work.then(() => "settled"),
    new Promise<string>((resolve) => setTimeout(() => resolve("waiting"), ms)),
  ]);

/** A run's audit trail as the stream holds it now. */
export async function auditTrail(bus: Parameters<typeof readAudit>[0], runId: string): Promise<AuditEvent[]> {
  const events: AuditEvent[] = [];
  for await (const event of readAudit(bus, { runId })) events.push(event);
  return events;
}
