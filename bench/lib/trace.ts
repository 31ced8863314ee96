import type { NatsConnection } from "@nats-io/transport-node";
import { walMessage } from "./wal-message.ts";

/** One message our runtime sent for a loop, by what it is: a stream append or a request/reply. */
export type TraceEntry =
  /** `step`: this append holds a model turn's record, the end of a step (where the bench times steps). */
  | { kind: "append"; stream: "wal" | "audit" | "status" | "queue"; bytes: number; step?: true }
  | { kind: "request"; service: string; bytes: number; replyBytes: number };

const STREAM_OF: [RegExp, "wal" | "audit" | "status" | "queue"][] = [
  [/^agents\.wal\./, "wal"],
  [/^agents\.audit\./, "audit"],
  [/^\$KV\.agents-runs\./, "status"],
  [/^agents\.runs\.queue\./, "queue"],
];
const SERVICES = /^agents\.(tools\.[a-z0-9_-]+|control\.lease|critic\.review|runs\.submit)$/;

/**
 * Records every message the runtime sends while `during` runs (one loop, nothing else on the
 * server): what the protocol floor must replay. JetStream's own API traffic and acks are left
 * out: a bare client pays for those too.
 */
export async function captureTrace(
  nc: NatsConnection,
  during: () => Promise<unknown>,
): Promise<TraceEntry[]> {
  const entries: TraceEntry[] = [];
  const pending = new Map<string, Extract<TraceEntry, { kind: "request" }>>();
  const sub = nc.subscribe(">");
  const reading = (async () => {
    for await (const msg of sub) {
      const awaited = pending.get(msg.subject);
      if (awaited) {
        awaited.replyBytes = msg.data.length;
        pending.delete(msg.subject);
        continue;
      }
      const stream = STREAM_OF.find(([pattern]) => pattern.test(msg.subject))?.[1];
      if (stream) {
        const step = stream === "wal" && walMessage(msg).types.includes("MODEL");
        entries.push({
          kind: "append",
          stream,
          bytes: msg.data.length,
          ...(step ? { step: true as const } : {}),
        });
        continue;
      }
      const service = SERVICES.exec(msg.subject)?.[1];
      if (service && msg.reply) {
        const entry = { kind: "request" as const, service, bytes: msg.data.length, replyBytes: 0 };
        entries.push(entry);
        pending.set(msg.reply, entry);
      }
    }
  })();
  await nc.flush();
  await during();
  await new Promise((resolve) => setTimeout(resolve, 300));
  sub.unsubscribe();
  await reading;
  return entries;
}
