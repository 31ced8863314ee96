import type { NatsConnection } from "@nats-io/transport-node";
import { logMessage } from "./log-message.ts";

/** The floor's streams: the run log, the job queue, and KV writes by how long values last. */
export type FloorStream = "log" | "status" | "queue" | "kv" | "counter";

/** One message our runtime sent for a loop, by what it is: a stream append or a request/reply. */
export type TraceEntry =
  /** `step`: this append holds a model turn's record, the end of a step (where the bench times steps). */
  | { kind: "append"; stream: FloorStream; bytes: number; step?: true }
  | { kind: "request"; service: string; bytes: number; replyBytes: number };

const STREAM_OF: [RegExp, FloorStream][] = [
  [/^agents\.log\./, "log"],
  // Buckets whose keys are rewritten (run status, the pool ledger): the floor keeps one value.
  [/^\$KV\.agents-(runs|pool)\./, "status"],
  // A value per key, kept: the tool services' idempotency records, agent memory, tool state.
  [/^\$KV\.agents-(idempotency|memory|tool-state)\./, "kv"],
  [/^agents\.runs\.queue\./, "queue"],
  // A run tree's budget: `Nats-Incr` adds to one counter per tree.
  [/^agents\.counters\./, "counter"],
];
/**
 * Requests of our protocol: the services', and the JetStream reads the runtime makes (KV and log
 * gets, a read's consumer, a worker's pull for its next job).
 */
const SERVICES =
  /^(?:agents\.(tools\.[a-z0-9_-]+|control\.lease|critic\.review|runs\.submit)|\$JS\.API\.(STREAM\.MSG\.GET\.\S+|CONSUMER\.(?:CREATE|DELETE|MSG\.NEXT)\.\S+))$/;

/**
 * How long the runtime goes on writing after the message that settles a loop: the run's final
 * status, its memory, its pool slot's release, its tree counter's give-back.
 */
const LOOP_TAIL_MS = 300;

/**
 * Records every message the runtime sends while `during` runs (one loop, nothing else on the
 * server): what the protocol floor must replay. Publish acks, message acks and JetStream's
 * advisories are left out: a bare client's publishes and reads cause them too. The recording
 * starts once the loop before has written its tail and ends once this one has: started at once, it
 * took in part of the tail before too, 48 to 51 messages a loop where one loop sends 45.
 */
export async function captureTrace(
  nc: NatsConnection,
  during: () => Promise<unknown>,
): Promise<TraceEntry[]> {
  await new Promise((resolve) => setTimeout(resolve, LOOP_TAIL_MS));
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
      // A consumer's delivery of a stored message (the supervisor's lifecycle watch, a worker's job)
      // carries the message's own subject: it is not a second append.
      if (msg.reply?.startsWith("$JS.ACK.")) continue;
      const stream = STREAM_OF.find(([pattern]) => pattern.test(msg.subject))?.[1];
      if (stream) {
        const step = stream === "log" && logMessage(msg).types.includes("MODEL");
        entries.push({
          kind: "append",
          stream,
          bytes: msg.data.length,
          ...(step ? { step: true as const } : {}),
        });
        continue;
      }
      const matched = SERVICES.exec(msg.subject);
      const service = matched ? (matched[1] ?? `js.${matched[2]}`) : undefined;
      if (service && msg.reply) {
        const entry = { kind: "request" as const, service, bytes: msg.data.length, replyBytes: 0 };
        entries.push(entry);
        pending.set(msg.reply, entry);
      }
    }
  })();
  await nc.flush();
  await during();
  await new Promise((resolve) => setTimeout(resolve, LOOP_TAIL_MS));
  sub.unsubscribe();
  await reading;
  return entries;
}
