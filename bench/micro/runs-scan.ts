/**
 * The supervisor's stall scan reads the whole runs bucket. Side by side in one process on one
 * nats-server: the runtime's `readRunsBucket` (batched direct gets, a page of keys per request) against
 * what the scan did before (the bucket's key listing from the stream's subject index, then a `get`
 * per key), over N recorded runs, rounds interleaved; medians and their ratio.
 * `node bench/micro/runs-scan.ts [runs] [rounds]` after `npm run build`.
 */
import { Kvm } from "@nats-io/kv";
import { jetstreamManager } from "@nats-io/jetstream";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { connectBus } from "../../dist/shared/bus/connect.js";
import { provision } from "../../dist/shared/bus/provision.js";
import { readRunsBucket, RunStatusStore } from "../../dist/shared/bus/run-status.js";
import { bucketStream, kvSubject, Subjects } from "../../dist/shared/bus/subjects.js";
import type { RunStatus } from "../../dist/shared/contracts/run-status.js";
import { silentLogger } from "../../dist/shared/runtime/logger.js";
import { median } from "../lib/stats.ts";

const RUNS = Number(process.argv[2] ?? 5_000);
const ROUNDS = Number(process.argv[3] ?? 5);

const nats = await startLocalNats({});
const nc = await connectBus({ servers: nats.url, name: "bench-runs-scan", logger: silentLogger });
const subjects = new Subjects();
await provision(nc, { subjects, replicas: 1 });
const bucket = subjects.buckets().runs;
const store = new RunStatusStore(await new Kvm(nc).open(bucket));
const jsm = await jetstreamManager(nc);

const status = (i: number): RunStatus => ({
  runId: `run-${i}`,
  status: "committed",
  phase: "COMMIT",
  iteration: 20,
  usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 20, toolCalls: 19 },
  updatedAt: new Date().toISOString(),
});
for (let i = 0; i < RUNS; i += 100)
  await Promise.all(Array.from({ length: Math.min(100, RUNS - i) }, (_, j) => store.put(status(i + j))));

/** The scan before: the key listing, then one get per key. Returns how many statuses it read. */
async function perKey(): Promise<number> {
  const prefix = kvSubject(bucket, "");
  const info = await jsm.streams.info(bucketStream(bucket), { subjects_filter: `${prefix}>` });
  let read = 0;
  for (const subject of Object.keys(info.state.subjects ?? {}))
    if (await store.get(subject.slice(prefix.length))) read += 1;
  return read;
}

const variants: Record<string, () => Promise<number>> = {
  "listing + get per key": perKey,
  readRunsBucket: async () => (await readRunsBucket({ jsm, subjects })).statuses.length,
};
const ms = new Map<string, number[]>();
for (let r = 0; r < ROUNDS; r += 1) {
  const order = r % 2 === 0 ? Object.keys(variants) : Object.keys(variants).reverse();
  for (const name of order) {
    const t0 = performance.now();
    const read = await variants[name]!();
    if (read !== RUNS) throw new Error(`${name} read ${read} statuses of ${RUNS}`);
    ms.set(name, [...(ms.get(name) ?? []), performance.now() - t0]);
  }
}
const before = median(ms.get("listing + get per key")!);
const after = median(ms.get("readRunsBucket")!);
process.stdout.write(
  `${RUNS} runs in the bucket, ${ROUNDS} rounds, medians\n\n| scan | ms |\n|---|---:|\n` +
    `| listing + get per key | ${before.toFixed(0)} |\n| readRunsBucket | ${after.toFixed(0)} |\n` +
    `| ratio | ${(before / after).toFixed(1)}× |\n`,
);
await nc.close();
await nats.stop();
