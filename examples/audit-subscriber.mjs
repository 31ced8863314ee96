// Subscribe to the run log from another system with plain nats.js: a durable consumer on AGENT_LOG,
// so a restarted subscriber continues where it stopped. Each message is one durable step of one
// run, its records and its audit events in a compact body (docs/audit-stream.md) that the
// runtime's `decodeLogEvents` gives back whole; this prints the events, one JSON line each. Each
// event carries a per-run `seq`, gapless from 1: the subscriber checks it and would report a gap.
//
//   npm run build    # once: the decoder is imported from dist/
//   NATS_URL=nats://127.0.0.1:4222 NATS_USER=cli NATS_PASSWORD=cli-dev \
//     npm exec -- node examples/audit-subscriber.mjs [runId] [--until-final]
//
// It reads the login and TLS settings the actors read (docs/security.md): NATS_NKEY_SEED_FILE or
// NATS_CREDS_FILE instead of a password, NATS_TLS_CA, NATS_TLS_CERT and NATS_TLS_KEY or a tls://
// URL for TLS, which is then required.
//
// With a runId it follows that run's log only; without, every run's, and the refused submits
// (`run.rejected` on agents.rejected.<runId>: a refused run id names no run, so it has no log).
// With --until-final it exits after the run's run.committed or run.failed event.
import { Buffer } from "node:buffer";
import { setTimeout as delay } from "node:timers/promises";
import { readFileSync } from "node:fs";
import { TextEncoder } from "node:util";
import { connect, credsAuthenticator, nkeyAuthenticator } from "@nats-io/transport-node";
import {
  AckPolicy,
  DeliverPolicy,
  JetStreamApiCodes,
  JetStreamApiError,
  jetstream,
  jetstreamManager,
} from "@nats-io/jetstream";
import { decodeLogEvents } from "../dist/shared/bus/log-codec.js";

const args = process.argv.slice(2);
const runId = args.find((a) => !a.startsWith("--"));
const untilFinal = args.includes("--until-final");
const prefix = process.env.AGENTS_PREFIX ?? "agents";
const stream = prefix === "agents" ? "AGENT_LOG" : `${prefix.toUpperCase().replaceAll("-", "_")}_LOG`;
const durable = process.env.AUDIT_CONSUMER ?? `audit-subscriber-${runId ?? "all"}`;

const nc = await connect({
  servers: (process.env.NATS_URL ?? "nats://127.0.0.1:4222").split(","),
  ...login(process.env),
  ...tls(process.env),
});
const jsm = await jetstreamManager(nc);
const consumer = await bind();
console.error(`subscribed to ${stream} as ${durable}`);
const lastSeq = new Map();
// Pulls that expire after 5 s, not the client's 30 s: a pull lost with its consumer's leader (a NATS
// server of a cluster fails over) is noticed by two missed idle heartbeats, half an expiry each, and
// asked again. With 30 s the subscriber sat silent for half a minute after a failover.
const messages = await consumer.consume({ expires: 5_000 });
for await (const msg of messages) {
  if (msg.subject.startsWith(`${prefix}.rejected.`)) {
    console.log(JSON.stringify(msg.json()));
    msg.ack();
    continue;
  }
  const events = await eventsOf(msg).catch((err) => {
    // A body this build cannot read (a newer format, a damaged one) is reported, not retried for
    // ever; a failed read of a split message's parts is thrown, and the message comes again.
    if (err?.code !== "INVALID_INPUT") throw err;
    console.error(`UNREADABLE message ${msg.seq} on ${msg.subject}: ${err.message}`);
    return [];
  });
  msg.ack();
  let final = false;
  for (const event of events) {
    // A restarted subscriber resumes mid-run, so gaps are checked from the first event it sees.
    const previous = lastSeq.get(event.runId);
    // A redelivery of a message already handled (its ack was lost): at-least-once.
    if (previous !== undefined && event.seq <= previous) continue;
    if (previous !== undefined && event.seq !== previous + 1) {
      console.error(`GAP in ${event.runId}: expected seq ${previous + 1}, got ${event.seq}`);
    }
    lastSeq.set(event.runId, event.seq);
    console.log(JSON.stringify(event));
    final ||= event.kind === "run.committed" || event.kind === "run.failed";
  }
  if (untilFinal && final) break;
}
await messages.close();
await nc.drain();

/**
 * The audit events a message holds, whole (its records are left unread). A message too large for one NATS
 * message is split into parts on one subject: each carries `Agents-Wal-Part: <k>/<n>`, the later
 * ones `Agents-Part-Of: <sequence of part 1>`. Only the last part yields the entry, read whole from
 * part 1 (direct gets): a subscriber restarted between the parts still gets it.
 */
async function eventsOf(msg) {
  const part = msg.headers?.get("Agents-Wal-Part");
  if (!part) return decodeLogEvents(msg.data);
  const [at, of] = part.split("/").map(Number);
  if (at !== of) return [];
  const chunks = [];
  let seq = Number(msg.headers.get("Agents-Part-Of"));
  for (let i = 1; i < of; i++) {
    const earlier = await jsm.direct.getMessage(stream, { seq, next_by_subj: msg.subject });
    chunks.push(earlier.data);
    seq = earlier.seq + 1;
  }
  chunks.push(msg.data);
  return decodeLogEvents(Buffer.concat(chunks));
}

/**
 * Finds or creates the durable consumer. A server lost or a stream re-electing its leader answers
 * nothing for a few seconds: keep trying (for up to a minute) rather than die at start.
 */
async function bind() {
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
    // One message in flight at a time keeps each run's messages in order even across a redelivery
    // (an ack lost while a NATS server fails over comes back after ack_wait, before anything newer).
    max_ack_pending: 1,
    ack_wait: 5_000_000_000,
    filter_subjects: runId ? [`${prefix}.log.${runId}.>`] : [`${prefix}.log.>`, `${prefix}.rejected.>`],
  };
}

/** A password, or an NKey seed file or credentials file, read again at each connection. */
function login(env) {
  const file = (path) => () => readFileSync(path);
  if (env.NATS_NKEY_SEED_FILE) {
    const seed = file(env.NATS_NKEY_SEED_FILE);
    return { authenticator: nkeyAuthenticator(() => new TextEncoder().encode(seed().toString().trim())) };
  }
  if (env.NATS_CREDS_FILE) return { authenticator: credsAuthenticator(file(env.NATS_CREDS_FILE)) };
  return env.NATS_USER ? { user: env.NATS_USER, pass: env.NATS_PASSWORD ?? "" } : {};
}

/** TLS, required, when a file or a tls:// URL asks for it; nats.js reads the files at each connection. */
function tls(env) {
  const { NATS_TLS_CA: caFile, NATS_TLS_CERT: certFile, NATS_TLS_KEY: keyFile } = env;
  if (!caFile && !certFile && !/(^|,)\s*tls:\/\//i.test(env.NATS_URL ?? "")) return {};
  return { tls: { ...(caFile ? { caFile } : {}), ...(certFile ? { certFile, keyFile } : {}) } };
}
