import type { ActorBus } from "../../shared/bus/actor.js";
import { fanOutKey } from "../../shared/bus/fanout.js";
import { continuationJob, publishJob } from "../../shared/bus/jobs.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import type { Counter } from "prom-client";

export interface StallOptions {
  /** A running run whose status has not changed for this long gets a fresh job. */
  staleMs: number;
}

/** How often the runs bucket is scanned: a few times per stale period, at most once a minute. */
export function scanInterval(staleMs: number): number {
  return Math.min(60_000, Math.max(1_000, Math.floor(staleMs / 4)));
}

/**
 * The runs that look stalled: `running`, unchanged for `staleMs`, and not parked on a fan-out
 * (a parent waiting for its children holds no job on purpose). Pure, for the scan below.
 */
export function stalledRuns(
  statuses: readonly RunStatus[],
  keys: ReadonlySet<string>,
  now: number,
  staleMs: number,
): RunStatus[] {
  return statuses.filter(
    (s) =>
      s.status === "running" && now - Date.parse(s.updatedAt) >= staleMs && !keys.has(fanOutKey(s.runId)),
  );
}

/**
 * Below this share of the runs bucket, the active runs' statuses are read one by one; above it,
 * the whole bucket in one streamed read is cheaper (bench/micro/stall-scan.ts).
 */
const ACTIVE_SHARE_FOR_GETS = 0.2;
/** Status reads in flight at once when they go one by one. */
const GETS_IN_FLIGHT = 64;

/** What the scan reads: the pool ledger, the runs bucket and its stream. */
export type StallScanBus = Pick<ActorBus, "nc" | "jsm" | "reads" | "subjects" | "clock" | "random"> & {
  buckets: Pick<ActorBus["buckets"], "runs" | "pool">;
};

/**
 * The runs to re-queue now. Only a run holding a pool slot can be running (it is admitted, and not
 * yet committed, failed or halted), so the scan reads those runs' statuses, not the whole runs
 * bucket: that keeps every run ever recorded, and a scan of it grows with the cluster's history
 * for as long as the cluster lives. A young cluster's bucket is mostly active runs: then one read
 * of the whole bucket costs less than a request per run.
 */
export async function findStalled(bus: StallScanBus, now: number, staleMs: number): Promise<RunStatus[]> {
  const active = await PoolLedger.of(bus).active();
  if (active.length === 0) return [];
  const recorded = (await bus.jsm.streams.info(`KV_${bus.subjects.buckets().runs}`)).state.messages;
  if (active.length > recorded * ACTIVE_SHARE_FOR_GETS) {
    const { statuses, keys } = await readRunsBucket(bus);
    const slots = new Set(active);
    return stalledRuns(
      statuses.filter((s) => slots.has(s.runId)),
      keys,
      now,
      staleMs,
    );
  }
  const store = new RunStatusStore(bus.buckets.runs);
  const statuses: RunStatus[] = [];
  for (let i = 0; i < active.length; i += GETS_IN_FLIGHT) {
    const page = await Promise.all(active.slice(i, i + GETS_IN_FLIGHT).map((runId) => store.get(runId)));
    for (const status of page) if (status) statuses.push(status);
  }
  // A parent waiting on its fan-out looks stalled: its fan-out key says otherwise.
  const candidates = stalledRuns(statuses, new Set(), now, staleMs);
  const keys = new Set<string>();
  for (const run of candidates) {
    const key = fanOutKey(run.runId);
    if ((await bus.buckets.runs.get(key))?.operation === "PUT") keys.add(key);
  }
  return stalledRuns(candidates, keys, now, staleMs);
}

/**
 * Re-queues runs that stopped moving. A run's job normally comes back on its own when its worker
 * dies (JetStream redelivers after ack_wait), but a job can be stranded by the server: nats-server
 * before 2.10.26 can stop redelivering a consumer's pending messages after the consumer's leader
 * changes (nats-server#6387, #6469), and the run would then wait forever. A fresh job is safe even
 * on a false alarm (a step longer than `staleMs`): a worker handed it drops it while a live worker
 * still drives the run with its first job, the WAL's fencing lets only one worker drive a run, and
 * a worker taking over settles an unfinished tool call by its idempotency key, never by running it
 * blindly again.
 */
export async function requeueStalled(
  bus: ActorBus,
  options: StallOptions,
  requeued: Counter,
  signal: AbortSignal,
): Promise<void> {
  const lastRequeue = new Map<string, number>();
  while (!signal.aborted) {
    await bus.clock.sleep(scanInterval(options.staleMs), signal).catch(() => undefined);
    if (signal.aborted) return;
    try {
      const now = bus.clock.now();
      for (const [runId, at] of lastRequeue) if (now - at >= options.staleMs) lastRequeue.delete(runId);
      for (const run of await findStalled(bus, now, options.staleMs)) {
        if (now - (lastRequeue.get(run.runId) ?? -Infinity) < options.staleMs) continue;
        lastRequeue.set(run.runId, now);
        await publishJob(bus, continuationJob(run), `${run.runId}:stalled:${run.updatedAt}`);
        requeued.inc();
        const idleMs = now - Date.parse(run.updatedAt);
        bus.logger.warn({ runId: run.runId, idleMs }, "run stalled (no progress, no job): re-queued");
      }
    } catch (err) {
      // A scan during a failover may fail; the next one will see the same runs.
      bus.logger.warn({ err }, "stalled-run scan failed; retrying at the next scan");
    }
  }
}
