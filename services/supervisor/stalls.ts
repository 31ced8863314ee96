import type { ActorBus } from "../../shared/bus/actor.js";
import { fanInResults, fanOutKey, readFanOut } from "../../shared/bus/fanout.js";
import { continuationJob, publishJob } from "../../shared/bus/jobs.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import { RunStatusValue, type RunStatus } from "../../shared/contracts/run-status.js";
import type { Counter, Gauge } from "prom-client";
import type { Logger } from "../../shared/runtime/logger.js";
import { bucketStream } from "../../shared/bus/subjects.js";

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
 * (a parent waiting for its children holds no job on purpose). A run waiting on its provider's
 * open breaker (`waiting`) is due back at the breaker's `until`, one retrying an outage
 * (`retrying`) at its `nextTry`: it is stalled only `staleMs` after that. Pure, for the scan below.
 */
export function stalledRuns(
  statuses: readonly RunStatus[],
  keys: ReadonlySet<string>,
  now: number,
  staleMs: number,
): RunStatus[] {
  return statuses.filter(
    (s) => s.status === "running" && now - lastMoved(s) >= staleMs && !keys.has(fanOutKey(s.runId)),
  );
}

function lastMoved(s: RunStatus): number {
  const at = Date.parse(s.updatedAt);
  const due = s.waiting?.until ?? s.retrying?.nextTry;
  return due ? Math.max(at, Date.parse(due)) : at;
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
  logger?: Logger;
};

/** The runs holding a pool slot, as one scan found them. */
export interface SlotScan {
  /** The statuses of the runs holding a slot. */
  statuses: RunStatus[];
  /** Runs holding a slot with no status: an admission stopped between taking the slot and recording the run. */
  unrecorded: string[];
  /** The runs bucket's other live keys, when the scan read the whole bucket (fan-outs). */
  keys?: Set<string>;
}

/**
 * Reads the runs holding a pool slot. Only those can be running or queued (they are admitted, and
 * not yet committed, failed or halted), so the scan reads those runs' statuses, not the whole runs
 * bucket: that keeps every run ever recorded, and a scan of it grows with the cluster's history
 * for as long as the cluster lives. A young cluster's bucket is mostly active runs: then one read
 * of the whole bucket costs less than a request per run.
 */
export async function scanSlots(bus: StallScanBus): Promise<SlotScan> {
  const active = await PoolLedger.of(bus).active();
  if (active.length === 0) return { statuses: [], unrecorded: [] };
  const recorded = (await bus.jsm.streams.info(bucketStream(bus.subjects.buckets().runs))).state.messages;
  const slots = new Set(active);
  if (active.length > recorded * ACTIVE_SHARE_FOR_GETS) {
    const { statuses, keys } = await readRunsBucket(bus);
    const held = statuses.filter((s) => slots.has(s.runId));
    for (const s of held) slots.delete(s.runId);
    return { statuses: held, unrecorded: [...slots], keys };
  }
  const store = new RunStatusStore(bus.buckets.runs);
  const statuses: RunStatus[] = [];
  for (let i = 0; i < active.length; i += GETS_IN_FLIGHT) {
    const page = await Promise.all(active.slice(i, i + GETS_IN_FLIGHT).map((runId) => store.get(runId)));
    for (const status of page) {
      if (!status) continue;
      statuses.push(status);
      slots.delete(status.runId);
    }
  }
  return { statuses, unrecorded: [...slots] };
}

/**
 * How many runs a scan found holding a slot, per status (every status, 0 included, so a series
 * that empties reads 0 rather than vanishing), and `unrecorded`: slots with no status.
 */
export function slotsByStatus(scan: SlotScan): Map<RunStatusValue | "unrecorded", number> {
  const counts = new Map<RunStatusValue | "unrecorded", number>(RunStatusValue.options.map((v) => [v, 0]));
  for (const { status } of scan.statuses) counts.set(status, (counts.get(status) ?? 0) + 1);
  counts.set("unrecorded", scan.unrecorded.length);
  return counts;
}

/**
 * The runs to re-queue now, among those a scan found holding a slot. A run with a fan-out record
 * is parked while a child of that fan-out has not ended; once they all have, it should have moved
 * (the fan-in job is queued when the last one ends): it is stalled like any run, and a worker
 * taking it over finds the fan-in itself. The record stays after its fan-in, so a parent that went
 * on and later stopped moving is stalled too (it was taken for parked, for the rest of its life).
 */
export async function stalledAmong(
  bus: Pick<StallScanBus, "buckets" | "logger">,
  scan: SlotScan,
  now: number,
  staleMs: number,
): Promise<RunStatus[]> {
  const candidates = stalledRuns(scan.statuses, new Set(), now, staleMs);
  const parked = new Set<string>();
  for (const run of candidates) {
    const key = fanOutKey(run.runId);
    if (scan.keys && !scan.keys.has(key)) continue;
    if (await parkedOnChildren(bus, run.runId)) parked.add(key);
  }
  return stalledRuns(candidates, parked, now, staleMs);
}

/** Whether the run waits for a child of its fan-out; one whose record cannot be read is left waiting. */
async function parkedOnChildren(
  bus: Pick<StallScanBus, "buckets" | "logger">,
  runId: string,
): Promise<boolean> {
  try {
    const fanOut = await readFanOut(bus.buckets.runs, runId);
    return fanOut !== undefined && (await fanInResults(bus.buckets.runs, fanOut)) === undefined;
  } catch (err) {
    bus.logger?.warn(
      { err, runId },
      "a run's fan-out record is unreadable: the run is taken for waiting on its children",
    );
    return true;
  }
}

/** The runs to re-queue now (see scanSlots and stalledAmong). */
export async function findStalled(bus: StallScanBus, now: number, staleMs: number): Promise<RunStatus[]> {
  return stalledAmong(bus, await scanSlots(bus), now, staleMs);
}

/**
 * Re-queues runs that stopped moving. A run's job normally comes back on its own when its worker
 * dies (JetStream redelivers after ack_wait), but a job can be stranded by the server: nats-server
 * before 2.10.26 can stop redelivering a consumer's pending messages after the consumer's leader
 * changes (nats-server#6387, #6469), and the run would then wait forever. A fresh job is safe even
 * on a false alarm (a step longer than `staleMs`): a worker handed it drops it while a live worker
 * still drives the run with its first job, the WAL's fencing lets only one worker drive a run, and
 * a worker taking over settles an unfinished tool call by its idempotency key, never by running it
 * blindly again. The same scan hands what it found to `lost` (LostAdmissions: admissions stopped
 * midway), and its count of runs per status to `holding`.
 */
export async function requeueStalled(
  bus: ActorBus,
  options: StallOptions,
  deps: {
    requeued: Counter;
    /** Set from each scan: see slotsByStatus. */
    holding?: Gauge;
    lost?: { settle(scan: SlotScan, now: number): Promise<void> };
  },
  signal: AbortSignal,
): Promise<void> {
  const lastRequeue = new Map<string, number>();
  while (!signal.aborted) {
    await bus.clock.sleep(scanInterval(options.staleMs), signal).catch(() => undefined);
    if (signal.aborted) return;
    try {
      const now = bus.clock.now();
      for (const [runId, at] of lastRequeue) if (now - at >= options.staleMs) lastRequeue.delete(runId);
      const scan = await scanSlots(bus);
      for (const [status, count] of slotsByStatus(scan)) deps.holding?.set({ status }, count);
      for (const run of await stalledAmong(bus, scan, now, options.staleMs)) {
        if (now - (lastRequeue.get(run.runId) ?? -Infinity) < options.staleMs) continue;
        lastRequeue.set(run.runId, now);
        await publishJob(bus, continuationJob(run), `${run.runId}:stalled:${run.updatedAt}`);
        deps.requeued.inc();
        const idleMs = now - Date.parse(run.updatedAt);
        bus.logger.warn({ runId: run.runId, idleMs }, "run stalled (no progress, no job): re-queued");
      }
      await deps.lost?.settle(scan, now);
    } catch (err) {
      // A scan during a failover may fail; the next one will see the same runs.
      bus.logger.warn({ err }, "stalled-run scan failed; retrying at the next scan");
    }
  }
}
