/**
 * The supervisor's stall scan, before and now, side by side in one process on one nats-server:
 * the whole runs bucket in one streamed read (before), against `findStalled` (now), which reads
 * the pool ledger and then only the active runs' statuses unless they are most of the bucket.
 * The bucket holds `recorded` finished runs and `active` running ones; rounds interleaved; medians
 * and their ratio, for several active counts.
 * `node bench/micro/stall-scan.ts [recorded] [rounds]` after `npm run build`.
 */
import { Kvm } from "@nats-io/kv";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { findStalled, stalledRuns, type StallScanBus } from "../../dist/services/supervisor/stalls.js";
import { connectBus } from "../../dist/shared/bus/connect.js";
import { PoolLedger } from "../../dist/shared/bus/pool.js";
import { provision } from "../../dist/shared/bus/provision.js";
import { readRunsBucket, RunStatusStore } from "../../dist/shared/bus/run-status.js";
import { Subjects } from "../../dist/shared/bus/subjects.js";
import type { RunStatus } from "../../dist/shared/contracts/run-status.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { silentLogger } from "../../dist/shared/runtime/logger.js";
import { systemRandom } from "../../dist/shared/runtime/random.js";
import { median } from "../lib/stats.ts";

const RECORDED = Number(process.argv[2] ?? 20_000);
const ROUNDS = Number(process.argv[3] ?? 5);
const ACTIVE = [16, 1_000, 4_000];
const STALE_MS = 60_000;

const nats = await startLocalNats({});
const nc = await connectBus({ servers: nats.url, name: "bench-stall-scan", logger: silentLogger });
const subjects = new Subjects();
await provision(nc, { subjects, replicas: 1 });
const kvm = new Kvm(nc);
const names = subjects.buckets();
const runs = await kvm.open(names.runs);
const bus: StallScanBus = {
  nc,
  subjects,
  reads: jetstream(nc),
  jsm: await jetstreamManager(nc),
  buckets: { runs, pool: await kvm.open(names.pool) },
  clock: systemClock,
  random: systemRandom,
};
const store = new RunStatusStore(runs);
const ledger = PoolLedger.of(bus);

const status = (runId: string, value: RunStatus["status"], updatedAt: string): RunStatus => ({
  runId,
  status: value,
  phase: value === "running" ? "ACT" : "COMMIT",
  iteration: 20,
  usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 20, toolCalls: 19 },
  updatedAt,
});
async function putAll(ids: string[], make: (id: string) => RunStatus): Promise<void> {
  for (let i = 0; i < ids.length; i += 200)
    await Promise.all(ids.slice(i, i + 200).map((id) => store.put(make(id))));
}
const now = new Date().toISOString();
await putAll(
  Array.from({ length: RECORDED }, (_, i) => `done-${i}`),
  (id) => status(id, "committed", now),
);

const rows: string[] = [];
let admitted = 0;
for (const active of ACTIVE) {
  // Active runs: running, and the first of them stalled (unchanged for longer than STALE_MS).
  const ids = Array.from({ length: active - admitted }, (_, i) => `active-${admitted + i}`);
  await Promise.all(ids.map((id) => ledger.acquire(id, 100_000)));
  const old = new Date(Date.now() - 2 * STALE_MS).toISOString();
  await putAll(ids, (id) => status(id, "running", id === "active-0" ? old : now));
  admitted = active;
  const variants: Record<string, () => Promise<number>> = {
    "whole bucket": async () => {
      const { statuses, keys } = await readRunsBucket(bus);
      return stalledRuns(statuses, keys, Date.now(), STALE_MS).length;
    },
    findStalled: async () => (await findStalled(bus, Date.now(), STALE_MS)).length,
  };
  const ms = new Map<string, number[]>();
  for (let r = 0; r < ROUNDS; r += 1) {
    const order = r % 2 === 0 ? Object.keys(variants) : Object.keys(variants).reverse();
    for (const name of order) {
      const t0 = performance.now();
      const found = await variants[name]!();
      if (found !== 1) throw new Error(`${name} found ${found} stalled runs, not 1`);
      ms.set(name, [...(ms.get(name) ?? []), performance.now() - t0]);
    }
  }
  const before = median(ms.get("whole bucket")!);
  const after = median(ms.get("findStalled")!);
  rows.push(`| ${active} | ${before.toFixed(1)} | ${after.toFixed(1)} | ${(before / after).toFixed(1)}× |`);
  process.stderr.write(`${active} active done\n`);
}
process.stdout.write(
  `${RECORDED} finished runs in the bucket, ${ROUNDS} rounds, median ms per scan\n\n` +
    `| active runs | whole bucket | findStalled | ratio |\n|---:|---:|---:|---:|\n${rows.join("\n")}\n`,
);
await nc.close();
await nats.stop();
