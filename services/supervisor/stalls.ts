import type { ActorBus } from "../../shared/bus/actor.js";
import { fanOutKey } from "../../shared/bus/fanout.js";
import { continuationJob, publishJob } from "../../shared/bus/jobs.js";
import { readRunsBucket } from "../../shared/bus/run-status.js";
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
 * Re-queues runs that stopped moving. A run's job normally comes back on its own when its worker
 * dies (JetStream redelivers after ack_wait), but a job can be stranded by the server: nats-server
 * before 2.10.26 can stop redelivering a consumer's pending messages after the consumer's leader
 * changes (nats-server#6387, #6469), and the run would then wait forever. A fresh job is safe even
 * on a false alarm: the WAL's fencing lets only one worker drive a run, and a worker taking over
 * settles an unfinished tool call by its idempotency key, never by running it blindly again.
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
      const { statuses, keys } = await readRunsBucket(bus);
      const now = bus.clock.now();
      for (const run of stalledRuns(statuses, keys, now, options.staleMs)) {
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
