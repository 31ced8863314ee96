// Subscribe to the audit stream from another system with plain nats.js: a durable consumer on
// AGENT_AUDIT, so a restarted subscriber continues where it stopped. Each event carries a per-run
// `seq`, gapless from 1: the subscriber checks it and would report a gap.
//
//   NATS_URL=nats://127.0.0.1:4222 NATS_USER=cli NATS_PASSWORD=cli-dev \
//     npm exec -- node examples/audit-subscriber.mjs [runId] [--until-final]
//
// With a runId it follows that run only; with --until-final it exits after the run's
// run.committed or run.failed event.
import { setTimeout as delay } from "node:timers/promises";
import { connect } from "@nats-io/transport-node";
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";

const args = process.argv.slice(2);
const runId = args.find((a) => !a.startsWith("--"));
const untilFinal = args.includes("--until-final");
const prefix = process.env.AGENTS_PREFIX ?? "agents";
const stream = prefix === "agents" ? "AGENT_AUDIT" : `${prefix.toUpperCase().replaceAll("-", "_")}_AUDIT`;
const durable = process.env.AUDIT_CONSUMER ?? `audit-subscriber-${runId ?? "all"}`;

const nc = await connect({
  servers: (process.env.NATS_URL ?? "nats://127.0.0.1:4222").split(","),
  ...(process.env.NATS_USER ? { user: process.env.NATS_USER, pass: process.env.NATS_PASSWORD ?? "" } : {}),
});
const consumer = await bind();
console.error(`subscribed to ${stream} as ${durable}`);
const lastSeq = new Map();
const messages = await consumer.consume();
for await (const msg of messages) {
  const event = msg.json();
  // A restarted subscriber resumes mid-run, so gaps are checked from the first event it sees.
  const previous = lastSeq.get(event.runId);
  if (previous !== undefined && event.seq <= previous) {
    msg.ack(); // a redelivery of an event already handled (its ack was lost): at-least-once
    continue;
  }
  if (previous !== undefined && event.seq !== previous + 1) {
    console.error(`GAP in ${event.runId}: expected seq ${previous + 1}, got ${event.seq}`);
  }
  lastSeq.set(event.runId, event.seq);
  console.log(JSON.stringify(event));
  msg.ack();
  if (untilFinal && (event.kind === "run.committed" || event.kind === "run.failed")) break;
}
await messages.close();
await nc.drain();

/**
 * Finds or creates the durable consumer. A server lost or a stream re-electing its leader answers
 * nothing for a few seconds: keep trying (for up to a minute) rather than die at start.
 */
async function bind() {
  const jsm = await jetstreamManager(nc);
  for (let attempt = 1; ; attempt++) {
    try {
      const existing = await jsm.consumers.info(stream, durable).catch((err) => {
        if (err instanceof JetStreamApiError && err.code === JetStreamApiCodes.ConsumerNotFound) return null;
        throw err;
      });
      if (!existing) await jsm.consumers.add(stream, consumerConfig());
      return await jetstream(nc).consumers.get(stream, durable);
    } catch (err) {
      if (attempt >= 60) throw err;
      console.error(`waiting for ${stream}: ${err.message}`);
      await delay(1_000);
    }
  }
}

function consumerConfig() {
  return {
    durable_name: durable,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    // One event in flight at a time keeps each run's events in order even across a redelivery (an
    // ack lost while a NATS server fails over comes back after ack_wait, before anything newer).
    max_ack_pending: 1,
    ack_wait: 5_000_000_000,
    filter_subject: runId ? `${prefix}.audit.${runId}.>` : `${prefix}.audit.>`,
  };
}
