/**
 * A run's memory recall as an agent's memories pile up: each size's memories (about 300 bytes,
 * each followed by `others` of a second agent, so the two interleave in the bucket as agents'
 * commits do; 1 by default, 20 for an agent that commits seldom among busy ones) are stored, then one agent's memories are recalled by a store that reads them all
 * (`MEMORY_RECALL_WINDOW=0`, the behaviour before) and by one with the default window of 1,000:
 * cold (a new store: a worker's first recall of the agent, which searches for the window's start)
 * and warm (the next recall, after 10 more memories). Rounds alternate which store goes first;
 * medians of each, and the window's ratio to reading everything.
 * `node bench/micro/memory-recall.ts [sizes, comma-separated] [rounds] [others]` after `npm run build`.
 */
import { openActorBus } from "../../dist/shared/bus/actor.js";
import { KvMemory, memoryReads } from "../../dist/shared/bus/kv-memory.js";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { ActorEnv, memoryRecallWindow } from "../../dist/shared/runtime/config.js";
import { silentLogger } from "../../dist/shared/runtime/logger.js";
import { systemRandom } from "../../dist/shared/runtime/random.js";
import { median, round } from "../lib/stats.ts";

const SIZES = (process.argv[2] ?? "1000,10000,50000").split(",").map(Number);
const ROUNDS = Number(process.argv[3] ?? 5);
const OTHERS = Number(process.argv[4] ?? 1);
const WINDOW = memoryRecallWindow.parse(undefined);
const FILLER = "the quick brown fox jumps over the lazy dog ".repeat(6);

const nats = await startLocalNats({});
const bus = await openActorBus(ActorEnv.parse({ NATS_URL: nats.url }), "bench-memory", {
  clock: systemClock,
  random: systemRandom,
  logger: silentLogger,
});
const store = (window: number): KvMemory =>
  new KvMemory(bus.buckets.memory, systemClock, memoryReads(bus, window));
const writer = store(0);
let written = 0;

/** Stores `count` memories of `agent`, each with OTHERS of another agent, 64 at a time. */
async function grow(agent: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 64) {
    const n = Math.min(64, count - i);
    await Promise.all(
      Array.from({ length: n }, () => {
        written += 1;
        const others = Array.from({ length: OTHERS }, (_, k) =>
          writer.remember(`${agent}-other`, `question ${written}.${k} answer ${FILLER}`),
        );
        return Promise.all([writer.remember(agent, `question ${written} answer ${FILLER}`), ...others]);
      }),
    );
  }
}

async function timed(recall: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await recall();
  return performance.now() - t0;
}

const rows: Record<string, number | string>[] = [];
for (const size of SIZES) {
  const agent = `agent-${size}`;
  await grow(agent, size);
  const all: number[] = [];
  const cold: number[] = [];
  const warm: number[] = [];
  for (let round = 0; round < ROUNDS; round += 1) {
    const windowed = store(WINDOW);
    const sides = [
      async () => all.push(await timed(() => writer.recall(agent, "question answer", 5))),
      async () => {
        cold.push(await timed(() => windowed.recall(agent, "question answer", 5)));
        await grow(agent, 10);
        warm.push(await timed(() => windowed.recall(agent, "question answer", 5)));
      },
    ];
    if (round % 2 === 1) sides.reverse();
    for (const side of sides) await side();
  }
  const row = {
    memories: size,
    others: size * OTHERS,
    allMs: round(median(all)),
    windowColdMs: round(median(cold)),
    windowWarmMs: round(median(warm)),
    coldVsAll: round(median(cold) / median(all)),
    warmVsAll: round(median(warm) / median(all)),
  };
  rows.push(row);
  process.stderr.write(`${JSON.stringify(row)}\n`);
}
console.table(rows);
await bus.nc.drain();
await nats.stop();
