/**
 * The supervisor's WAL retention against a bare client doing only the purges, side by side in one
 * process on one nats-server. Each round records `runs` finished runs (a WAL of `messages`
 * messages of about 1 KB each, like a W1 loop's, a committed status and a `run.committed`), then
 * removes their WALs: with `sweepFinishedWals` (its durable consumer, one event at a time, a status
 * read, the purge, the ack), or with one purge per run in a loop (the floor). Rounds alternate;
 * medians of runs removed per second, their ratio, and the file store's bytes before and after.
 * `node bench/micro/wal-retention.ts [runs] [messages] [rounds]` after `npm run build`.
 */
import { Counter } from "prom-client";
import { openActorBus } from "../../dist/shared/bus/actor.js";
import { publishAudit } from "../../dist/shared/bus/audit.js";
import { RunStatusStore } from "../../dist/shared/bus/run-status.js";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { RETENTION_CONSUMER, sweepFinishedWals } from "../../dist/services/supervisor/retention.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { ActorEnv } from "../../dist/shared/runtime/config.js";
import { silentLogger } from "../../dist/shared/runtime/logger.js";
import { systemRandom } from "../../dist/shared/runtime/random.js";
import { median } from "../lib/stats.ts";

const RUNS = Number(process.argv[2] ?? 500);
const MESSAGES = Number(process.argv[3] ?? 60);
const ROUNDS = Number(process.argv[4] ?? 3);
const RECORD = new Uint8Array(1_000).fill(120);

const nats = await startLocalNats({});
const bus = await openActorBus(ActorEnv.parse({ NATS_URL: nats.url }), "bench-retention", {
  clock: systemClock,
  random: systemRandom,
  logger: silentLogger,
});
const walStream = bus.subjects.streams().wal;
const store = new RunStatusStore(bus.buckets.runs);

async function record(prefix: string): Promise<string[]> {
  const ids = Array.from({ length: RUNS }, (_, i) => `${prefix}-${i}`);
  for (let i = 0; i < ids.length; i += 50) {
    await Promise.all(
      ids.slice(i, i + 50).map(async (runId) => {
        for (let m = 0; m < MESSAGES; m += 1) await bus.js.publish(bus.subjects.wal(runId), RECORD);
        const at = new Date().toISOString();
        await store.put({
          runId,
          status: "committed",
          phase: "COMMIT",
          iteration: 20,
          usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 20, toolCalls: 19 },
          updatedAt: at,
        });
        await publishAudit(bus, {
          schemaVersion: 1,
          auditId: `${runId}:1`,
          runId,
          rootRunId: runId,
          seq: 1,
          iteration: 20,
          phase: "COMMIT",
          kind: "run.committed",
          actor: "agent",
          status: "passed",
          artifacts: [],
          data: {},
          timestamp: at,
        });
      }),
    );
  }
  return ids;
}

const walBytes = async (): Promise<number> => (await bus.jsm.streams.info(walStream)).state.bytes;

/** Removes the WALs with the retention loop; resolves once every one is gone. */
async function sweep(ids: string[]): Promise<number> {
  const removed = new Counter({ name: "bench_removed", help: "-", registers: [] });
  const stop = new AbortController();
  const began = performance.now();
  const loop = sweepFinishedWals(bus, { retainMs: 1 }, removed, stop.signal);
  while ((await removed.get()).values[0]?.value !== ids.length) await systemClock.sleep(5);
  const ms = performance.now() - began;
  stop.abort();
  await loop;
  return ms;
}

/** The floor: one purge per run, in a loop. */
async function purgeAll(ids: string[]): Promise<number> {
  const began = performance.now();
  for (const runId of ids) await bus.jsm.streams.purge(walStream, { filter: bus.subjects.wal(runId) });
  return performance.now() - began;
}

const perSecond: { ours: number[]; floor: number[] } = { ours: [], floor: [] };
const bytes: { before: number; after: number }[] = [];
for (let round = 0; round < ROUNDS; round += 1) {
  for (const variant of round % 2 === 0 ? (["ours", "floor"] as const) : (["floor", "ours"] as const)) {
    const ids = await record(`${variant}${round}`);
    const before = await walBytes();
    const ms = variant === "ours" ? await sweep(ids) : await purgeAll(ids);
    bytes.push({ before, after: await walBytes() });
    perSecond[variant].push((ids.length / ms) * 1_000);
    console.log(`round ${round} ${variant}: ${ids.length} WALs removed in ${ms.toFixed(0)} ms`);
  }
}
const ours = median(perSecond.ours);
const floor = median(perSecond.floor);
console.log(
  JSON.stringify({
    runs: RUNS,
    messages: MESSAGES,
    rounds: ROUNDS,
    oursRunsPerSec: Math.round(ours),
    floorRunsPerSec: Math.round(floor),
    ratio: Number((ours / floor).toFixed(2)),
    walBytesBeforeAfter: bytes.map((b) => `${b.before} -> ${b.after}`),
    consumer: RETENTION_CONSUMER,
  }),
);
await bus.nc.drain();
await nats.stop();
