import type { ActorBus } from "../../shared/bus/actor.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { readRunsBucket, RunStatusStore } from "../../shared/bus/run-status.js";
import { RunStatusValue, type RunStatus } from "../../shared/contracts/run-status.js";
import type { Gauge } from "prom-client";
import type { Logger } from "../../shared/runtime/logger.js";
import { bucketStream } from "../../shared/bus/subjects.js";

/** How often the held slots are scanned: a few times per stale period, at most once a minute. */
export function scanInterval(staleMs: number): number {
  return Math.min(60_000, Math.max(1_000, Math.floor(staleMs / 4)));
}

/**
 * Below this share of the runs bucket, the active runs' statuses are read one by one; above it,
 * the whole bucket in one streamed read is cheaper.
 */
const ACTIVE_SHARE_FOR_GETS = 0.2;
/** Status reads in flight at once when they go one by one. */
const GETS_IN_FLIGHT = 64;

/** What the scan reads: the pool ledger, the runs bucket and its stream. */
export type SlotScanBus = Pick<ActorBus, "nc" | "jsm" | "subjects" | "clock" | "random"> & {
  buckets: Pick<ActorBus["buckets"], "runs" | "pool">;
  logger?: Logger;
};

/** The runs holding a pool slot, as one scan found them. */
export interface SlotScan {
  /** The statuses of the runs holding a slot. */
  statuses: RunStatus[];
  /** Runs holding a slot with no status: an admission stopped between taking the slot and recording the run. */
  unrecorded: string[];
}

/**
 * Reads the runs holding a pool slot. Only those can be running or queued (they are admitted, and
 * not yet committed, failed or halted), so the scan reads those runs' statuses, not the whole runs
 * bucket: that keeps every run ever recorded, and a scan of it grows with the cluster's history
 * for as long as the cluster lives. A young cluster's bucket is mostly active runs: then one read
 * of the whole bucket costs less than a request per run.
 */
export async function scanSlots(bus: SlotScanBus): Promise<SlotScan> {
  const active = await PoolLedger.of(bus).active();
  if (active.length === 0) return { statuses: [], unrecorded: [] };
  const recorded = (await bus.jsm.streams.info(bucketStream(bus.subjects.buckets().runs))).state.messages;
  const slots = new Set(active);
  if (active.length > recorded * ACTIVE_SHARE_FOR_GETS) {
    const { statuses } = await readRunsBucket(bus);
    const held = statuses.filter((s) => slots.has(s.runId));
    for (const s of held) slots.delete(s.runId);
    return { statuses: held, unrecorded: [...slots] };
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
 * Scans the held slots every few seconds (see scanInterval): each scan sets `holding` (see
 * slotsByStatus) and hands what it found to `lost` (LostAdmissions: admissions stopped midway).
 */
export async function watchSlots(
  bus: SlotScanBus,
  staleMs: number,
  deps: { holding: Gauge; lost: { settle(scan: SlotScan, now: number): Promise<void> } },
  signal: AbortSignal,
): Promise<void> {
  while (!signal.aborted) {
    await bus.clock.sleep(scanInterval(staleMs), signal).catch(() => undefined);
    if (signal.aborted) return;
    try {
      const scan = await scanSlots(bus);
      for (const [status, count] of slotsByStatus(scan)) deps.holding.set({ status }, count);
      await deps.lost.settle(scan, bus.clock.now());
    } catch (err) {
      // A scan during a failover may fail; the next one will see the same slots.
      bus.logger?.warn({ err }, "the scan of held pool slots failed; retrying at the next scan");
    }
  }
}
