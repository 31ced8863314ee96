import { expect } from "vitest";
import { WORKER_CONSUMER, publishJob } from "../../shared/bus/jobs.js";
import { RunSpec, type RunSpecInput } from "../../shared/contracts/run-spec.js";
import type { ClusterSuite } from "./cluster-suite.js";
import { until } from "./until.js";

/**
 * A finished run's first job delivered again, as when its worker's ack was lost with it: queued,
 * taken once and handed back (so it comes with a delivery count of 2), then handed to a worker
 * started as `agent` once no other worker runs. Resolves once that worker acknowledged it (the
 * job queue is a work queue: an acknowledged job leaves the stream).
 */
export async function firstJobHandledAgain(
  suite: ClusterSuite,
  runSpec: RunSpecInput,
  runId: string,
  agent: string,
): Promise<void> {
  const { bus } = suite;
  const job = { schemaVersion: 1 as const, runId, rootRunId: runId, depth: 0, auditSeq: 1 };
  await publishJob(bus, { ...job, spec: RunSpec.parse({ ...runSpec, runId }) }, `${runId}:again`);
  const consumer = await bus.js.consumers.get(bus.subjects.streams().runs, WORKER_CONSUMER);
  const taken = await consumer.next({ expires: 5_000 });
  expect(taken?.subject).toBe(bus.subjects.runQueue(runId));
  taken?.nak();
  await suite.cluster.start("agent", agent);
  const queued = async (): Promise<number> => {
    const subject = bus.subjects.runQueue(runId);
    const info = await bus.jsm.streams.info(bus.subjects.streams().runs, { subjects_filter: subject });
    return info.state.subjects?.[subject] ?? 0;
  };
  await until(async () => (await queued()) === 0, 15_000, { what: "the job handled again" });
}
