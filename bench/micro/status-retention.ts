/**
 * The supervisor's retention of finished runs (SUPERVISOR_STATUS_RETAIN_MS) against a bare client
 * doing only the removals, side by side in one process on one nats-server. Each round records
 * `runs` finished runs (a log of `messages` messages of about 1 KB each, like a W1 loop's, the first
 * `calls` of them tool calls' INTENTs with an idempotency record each, a tree cap key, a committed
 * status and a `run.committed` message), then removes their records, tree keys and statuses: with
 * `sweepFinishedRuns` (its durable consumer, one message at a time, a status read, the log read for
 * the calls it names, their records' removal, the tree key's and the status's, the ack), or with the
 * same removals by sequence in a loop by a client that knows the keys (the floor), or by that client
 * purging each record's subject instead (floorByPurge). The run logs stay (only their max_age
 * removes them). Rounds rotate the order; medians of runs removed per second, ours over the floor,
 * and the buckets' bytes before and after. `node bench/micro/status-retention.ts [runs] [messages]
 * [rounds] [calls]` after `npm run build`.
 */
import { Counter } from "prom-client";
import { openActorBus } from "../../dist/shared/bus/actor.js";
import { RunStatusStore } from "../../dist/shared/bus/run-status.js";
import { treeCapKey } from "../../dist/shared/bus/tree-iterations.js";
import { idempotencyBucketKey } from "../../dist/shared/bus/idempotency-record.js";
import { encode } from "../../dist/shared/bus/codec.js";
import { LogEntry } from "../../dist/shared/contracts/log.js";
import type { WalRecord } from "../../dist/shared/contracts/wal.js";
import { startLocalNats } from "../../dist/services/local/nats-server.js";
import { RETENTION_CONSUMER, sweepFinishedRuns } from "../../dist/services/supervisor/retention.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { ActorEnv } from "../../dist/shared/runtime/config.js";
import { silentLogger } from "../../dist/shared/runtime/logger.js";
import { systemRandom } from "../../dist/shared/runtime/random.js";
import { median } from "../lib/stats.ts";
import { bucketStream } from "../../dist/shared/bus/subjects.js";

const RUNS = Number(process.argv[2] ?? 500);
const MESSAGES = Number(process.argv[3] ?? 60);
const ROUNDS = Number(process.argv[4] ?? 3);
const CALLS = Math.min(MESSAGES, Number(process.argv[5] ?? 19));
const PAD = "x".repeat(850);
const RECORD_OF_A_CALL = new TextEncoder().encode(
  JSON.stringify({ status: "done", reply: { ok: true, pad: PAD } }),
);

const nats = await startLocalNats({});
const bus = await openActorBus(ActorEnv.parse({ NATS_URL: nats.url }), "bench-retention", {
  clock: systemClock,
  random: systemRandom,
  logger: silentLogger,
});
const bucket = bus.subjects.buckets().idempotency;
const runsStream = bucketStream(bus.subjects.buckets().runs);
const poolStream = bucketStream(bus.subjects.buckets().pool);
/** A root run's tree budget as its last give-back leaves it: what the sweep removes with a root. */
const TREE_BUDGET = new TextEncoder().encode(JSON.stringify({ cap: 1_000 }));
const store = new RunStatusStore(bus.buckets.runs);

/** The bucket keys of a run's tool calls. */
const keysOf = (runId: string): string[] =>
  Array.from({ length: CALLS }, (_, m) => idempotencyBucketKey("echo", `${runId}:act-${m}`));

/** Log message `m` of a run: a tool call's INTENT for the first CALLS, then PHASE records; about 1 KB each. */
function logMessage(runId: string, m: number): Uint8Array {
  const base = { schemaVersion: 1 as const, runId, iteration: m, at: Date.now() };
  const record: WalRecord =
    m < CALLS
      ? {
          ...base,
          type: "INTENT",
          actionId: `act-${m}`,
          tool: "echo",
          input: { text: PAD },
          idempotencyKey: `${runId}:act-${m}`,
          purpose: "act",
        }
      : { ...base, type: "PHASE", from: "ACT", to: "ACT", reason: PAD };
  return encode(LogEntry, { records: [record], events: [] });
}

async function record(prefix: string): Promise<string[]> {
  const ids = Array.from({ length: RUNS }, (_, i) => `${prefix}-${i}`);
  for (let i = 0; i < ids.length; i += 50) {
    await Promise.all(
      ids.slice(i, i + 50).map(async (runId) => {
        for (let m = 0; m < MESSAGES; m += 1)
          await bus.js.publish(bus.subjects.log(runId, "step"), logMessage(runId, m));
        for (const key of keysOf(runId)) await bus.buckets.idempotency.put(key, RECORD_OF_A_CALL);
        await bus.buckets.pool.put(treeCapKey(runId), TREE_BUDGET);
        const at = new Date().toISOString();
        await store.put({
          runId,
          status: "committed",
          phase: "COMMIT",
          iteration: 20,
          usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 20, toolCalls: 19 },
          updatedAt: at,
        });
        const committed = encode(LogEntry, {
          records: [],
          events: [
            {
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
            },
          ],
        });
        await bus.js.publish(bus.subjects.log(runId, "run.committed"), committed);
      }),
    );
  }
  return ids;
}

/** What the buckets hold of idempotency records, statuses and tree budgets. */
const storedBytes = async (): Promise<number> =>
  (await bus.jsm.streams.info(bucketStream(bucket))).state.bytes +
  (await bus.jsm.streams.info(runsStream)).state.bytes +
  (await bus.jsm.streams.info(poolStream)).state.bytes;

/** Removes the runs' remains with the retention loop; resolves once every status is gone. */
async function sweep(ids: string[]): Promise<number> {
  const toolRecords = new Counter({ name: "bench_tool_records_removed", help: "-", registers: [] });
  const statuses = new Counter({ name: "bench_statuses_removed", help: "-", registers: [] });
  const treeBudgets = new Counter({ name: "bench_tree_budgets_removed", help: "-", registers: [] });
  const stop = new AbortController();
  const began = performance.now();
  const loop = sweepFinishedRuns(bus, { retainMs: 1 }, { toolRecords, statuses, treeBudgets }, stop.signal);
  while ((await statuses.get()).values[0]?.value !== ids.length) await systemClock.sleep(5);
  const ms = performance.now() - began;
  stop.abort();
  await loop;
  return ms;
}

/**
 * The floor: a run at a time, its records removed 16 at once (as the sweep's), then its tree key
 * and its status. Each is read for its sequence and deleted by it, as the sweep does; `byPurge`
 * purges each record's subject instead, one request rather than two.
 */
async function removeAll(ids: string[], byPurge: boolean): Promise<number> {
  const began = performance.now();
  const stream = bucketStream(bucket);
  const remove = async (key: string): Promise<void> => {
    if (byPurge) {
      await bus.jsm.streams.purge(stream, { filter: `$KV.${bucket}.${key}` });
      return;
    }
    const entry = await bus.buckets.idempotency.get(key);
    if (entry) await bus.jsm.streams.deleteMessage(stream, entry.revision, false);
  };
  for (const runId of ids) {
    const keys = keysOf(runId);
    for (let i = 0; i < keys.length; i += 16) await Promise.all(keys.slice(i, i + 16).map(remove));
    const tree = await bus.buckets.pool.get(treeCapKey(runId));
    if (tree) await bus.jsm.streams.deleteMessage(poolStream, tree.revision, false);
    const status = await bus.buckets.runs.get(runId);
    if (status) await bus.jsm.streams.deleteMessage(runsStream, status.revision, false);
  }
  return performance.now() - began;
}

type Variant = "ours" | "floor" | "floorByPurge";
const ORDER: Variant[] = ["ours", "floor", "floorByPurge"];
const perSecond: Record<Variant, number[]> = { ours: [], floor: [], floorByPurge: [] };
const bytes: { before: number; after: number }[] = [];
for (let round = 0; round < ROUNDS; round += 1) {
  // Rotated, so that no variant always runs first (or last) in a round.
  for (const variant of ORDER.map((_v, i) => ORDER[(round + i) % ORDER.length] as Variant)) {
    const ids = await record(`${variant}${round}`);
    const before = await storedBytes();
    const ms = variant === "ours" ? await sweep(ids) : await removeAll(ids, variant === "floorByPurge");
    bytes.push({ before, after: await storedBytes() });
    perSecond[variant].push((ids.length / ms) * 1_000);
    console.log(
      `round ${round} ${variant}: ${ids.length} runs' records, tree keys and statuses removed in ${ms.toFixed(0)} ms`,
    );
  }
}
const [ours, floor, byPurge] = ORDER.map((v) => median(perSecond[v])) as [number, number, number];
console.log(
  JSON.stringify({
    runs: RUNS,
    messages: MESSAGES,
    calls: CALLS,
    rounds: ROUNDS,
    oursRunsPerSec: Math.round(ours),
    floorRunsPerSec: Math.round(floor),
    floorByPurgeRunsPerSec: Math.round(byPurge),
    ratio: Number((ours / floor).toFixed(2)),
    storedBytesBeforeAfter: bytes.map((b) => `${b.before} -> ${b.after}`),
    consumer: RETENTION_CONSUMER,
  }),
);
await bus.nc.drain();
await nats.stop();
