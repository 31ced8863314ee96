/**
 * One look of a survivor's search for stranded jobs (services/agent/strays.ts) reads every job in
 * flight, as nats-server 2.9 has no batched read. This times a look over N jobs in flight (the
 * default 1,000), its range read in 8 parts side by side against one by one, in turns in one
 * process; every job is named, so a look hands nothing back and each round reads the same range.
 * `node bench/micro/stray-search.ts [jobs] [rounds]` after `npm run build`.
 */
import { jetstream } from "@nats-io/jetstream";
import { StraySweep } from "../../dist/services/agent/strays.js";
import { openActorBus } from "../../dist/shared/bus/actor.js";
import { ensureWorkerConsumer } from "../../dist/shared/bus/jobs.js";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { ActorEnv, parseEnv } from "../../dist/shared/runtime/config.js";
import { createLogger } from "../../dist/shared/runtime/logger.js";
import { ActorMetrics } from "../../dist/shared/runtime/metrics.js";
import { systemRandom } from "../../dist/shared/runtime/random.js";
import { median } from "../lib/stats.ts";

const JOBS = Number(process.argv[2] ?? 1_000);
const ROUNDS = Number(process.argv[3] ?? 9);
/** About a W1 job's size (its spec). */
const payload = new Uint8Array(3_000);

const nats = await startLocalNats({});
const logger = createLogger({ actor: "bench", level: "error" });
const bus = await openActorBus(parseEnv(ActorEnv, { NATS_URL: nats.url }), "bench", {
  clock: systemClock,
  random: systemRandom,
  logger,
});
try {
  const consumer = await ensureWorkerConsumer(bus.jsm, bus.subjects, { ackWaitMs: 600_000 });
  for (let i = 0; i < JOBS; i += 500) {
    const batch = Math.min(500, JOBS - i);
    await Promise.all(
      Array.from({ length: batch }, (_, j) => bus.js.publish(bus.subjects.runQueue(`r${i + j}`), payload)),
    );
  }
  const pull = await jetstream(bus.nc).consumers.get(bus.subjects.streams().runs, consumer);
  for (let taken = 0; taken < JOBS;)
    for await (const _msg of await pull.fetch({ max_messages: 1_000, expires: 2_000 })) taken += 1;
  const everyJob = new Set(Array.from({ length: JOBS + 1 }, (_, i) => i + 1));
  const look = async (walks: number): Promise<number> => {
    const sweep = new StraySweep({
      bus,
      consumer,
      named: () => everyJob,
      heardCounts: () => new Map(),
      beatMs: 0,
      maxWaitMs: 0,
      metrics: new ActorMetrics("bench"),
      walks,
    });
    const t0 = performance.now();
    sweep.request([]);
    await sweep.idle();
    return performance.now() - t0;
  };
  const times: Record<number, number[]> = { 1: [], 8: [] };
  await look(8);
  for (let round = 0; round < ROUNDS; round += 1)
    for (const walks of [1, 8]) times[walks]!.push(await look(walks));
  const [one, eight] = [median(times[1]!), median(times[8]!)];
  console.log(
    `${JOBS} jobs in flight, ${ROUNDS} rounds: one look ${one.toFixed(0)} ms one by one, ` +
      `${eight.toFixed(0)} ms in 8 parts (medians; ${(one / eight).toFixed(2)}×)`,
  );
} finally {
  await bus.nc.close();
  await nats.stop();
}
