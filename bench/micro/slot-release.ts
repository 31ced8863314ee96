/**
 * The supervisor's slot releases, before and now, side by side in one process on one nats-server:
 * a backlog of `backlog` settled runs' lifecycle messages (as after a burst of runs finishing), with
 * `held` other runs holding slots (parked or running), drained by the loop as it was (each release
 * awaited before the next message: one ledger write per run) and by `releaseSlots` (up to 64 messages
 * at once: releases queued together share a write). Rounds interleaved; medians and their ratio.
 * `node bench/micro/slot-release.ts [backlog] [rounds]` after `npm run build`.
 */
import { AckPolicy, DeliverPolicy, jetstream } from "@nats-io/jetstream";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { RELEASE_CONSUMER, releaseSlots } from "../../dist/services/supervisor/control.js";
import { openActorBus } from "../../dist/shared/bus/actor.js";
import { appendEvent } from "../../dist/shared/bus/audit.js";
import { POOL_KEY, PoolLedger } from "../../dist/shared/bus/pool.js";
import { decodeLogEvents } from "../../dist/shared/bus/log-codec.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { ActorEnv, parseEnv } from "../../dist/shared/runtime/config.js";
import { silentLogger } from "../../dist/shared/runtime/logger.js";
import { systemRandom } from "../../dist/shared/runtime/random.js";
import { median } from "../lib/stats.ts";

const BACKLOG = Number(process.argv[2] ?? 1_000);
const ROUNDS = Number(process.argv[3] ?? 5);
const HELD = [0, 2_000];
const BEFORE_CONSUMER = "bench-release-one-at-a-time";

const nats = await startLocalNats({});
const bus = await openActorBus(parseEnv(ActorEnv, { NATS_URL: nats.url }), "bench-slot-release", {
  clock: systemClock,
  random: systemRandom,
  logger: silentLogger,
});
const stream = bus.subjects.streams().log;
const pool = PoolLedger.of(bus);
const js = jetstream(bus.nc);

/** The loop as it was: one lifecycle message at a time, its release awaited before the next. */
async function oneAtATime(signal: AbortSignal): Promise<void> {
  const consumer = await js.consumers.get(stream, BEFORE_CONSUMER);
  const messages = await consumer.consume({ max_messages: 64 });
  signal.addEventListener("abort", () => void messages.close(), { once: true });
  for await (const msg of messages) {
    for (const event of decodeLogEvents(msg.data)) await pool.release(event.runId);
    msg.ack();
  }
}

const variants: Record<string, { consumer: string; loop: (signal: AbortSignal) => Promise<void> }> = {
  "one at a time": { consumer: BEFORE_CONSUMER, loop: oneAtATime },
  releaseSlots: { consumer: RELEASE_CONSUMER, loop: (signal) => releaseSlots(bus, pool, signal) },
};

async function drained(consumer: string): Promise<void> {
  for (;;) {
    const info = await bus.jsm.consumers.info(stream, consumer);
    if (info.num_pending === 0 && info.num_ack_pending === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const revision = async (): Promise<number> => (await bus.buckets.pool.get(POOL_KEY))?.revision ?? 0;

let round = 0;
/** One drain of a fresh backlog by `name`: its time, ms, and the ledger writes it took. */
async function drain(name: string): Promise<{ ms: number; writes: number }> {
  const { consumer, loop } = variants[name]!;
  round += 1;
  const ids = Array.from({ length: BACKLOG }, (_, i) => `done-${round}-${i}`);
  await Promise.all(ids.map((id) => pool.acquire(id, 1_000_000)));
  // Only this variant's consumer exists while the backlog is published: it alone delivers it.
  await bus.jsm.consumers.add(stream, {
    durable_name: consumer,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.New,
    filter_subject: bus.subjects.logLifecycle(),
  });
  for (let i = 0; i < ids.length; i += 200) {
    await Promise.all(
      ids.slice(i, i + 200).map((runId) =>
        // The run's only message: a log fenced at 0, as a fresh run id's is.
        appendEvent(
          bus,
          {
            schemaVersion: 1,
            auditId: `${runId}:2`,
            runId,
            rootRunId: runId,
            seq: 2,
            iteration: 1,
            phase: "COMMIT",
            kind: "run.committed",
            actor: "agent",
            status: "passed",
            artifacts: [],
            timestamp: new Date().toISOString(),
          },
          0,
          `${runId}:2`,
        ),
      ),
    );
  }
  const before = await revision();
  const stop = new AbortController();
  const t0 = performance.now();
  const running = loop(stop.signal);
  await drained(consumer);
  const ms = performance.now() - t0;
  stop.abort();
  await running;
  await bus.jsm.consumers.delete(stream, consumer);
  const left = (await pool.active()).filter((id) => id.startsWith(`done-${round}-`)).length;
  if (left > 0) throw new Error(`${name}: ${left} slots of the backlog still held`);
  return { ms, writes: (await revision()) - before };
}

const rows: string[] = [];
let holding = 0;
for (const held of HELD) {
  await Promise.all(
    Array.from({ length: held - holding }, (_, i) => pool.acquire(`held-${holding + i}`, 1_000_000)),
  );
  holding = held;
  const ms = new Map<string, number[]>();
  const writes = new Map<string, number[]>();
  for (let r = 0; r < ROUNDS; r += 1) {
    const order = r % 2 === 0 ? Object.keys(variants) : Object.keys(variants).reverse();
    for (const name of order) {
      const result = await drain(name);
      ms.set(name, [...(ms.get(name) ?? []), result.ms]);
      writes.set(name, [...(writes.get(name) ?? []), result.writes]);
    }
  }
  const [before, after] = Object.keys(variants).map((name) => median(ms.get(name)!));
  const [writesBefore, writesAfter] = Object.keys(variants).map((name) => median(writes.get(name)!));
  rows.push(
    `| ${held} | ${before!.toFixed(0)} | ${after!.toFixed(0)} | ${(before! / after!).toFixed(1)}× | ` +
      `${writesBefore} | ${writesAfter} |`,
  );
  process.stderr.write(`${held} held done\n`);
}
process.stdout.write(
  `${BACKLOG} settled runs' messages as one backlog, ${ROUNDS} rounds, medians\n\n` +
    `| runs holding slots | one at a time, ms | releaseSlots, ms | ratio | ledger writes, one at a time | ledger writes, releaseSlots |\n` +
    `|---:|---:|---:|---:|---:|---:|\n${rows.join("\n")}\n`,
);
await bus.nc.close();
await nats.stop();
