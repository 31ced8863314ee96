import { expect } from "vitest";
import { WORKER_CONSUMER, publishJob } from "../../shared/bus/jobs.js";
import { RunSpec, type RunSpecInput } from "../../shared/contracts/run-spec.js";
import type { ClusterSuite } from "./cluster-suite.js";
import { walMessages } from "./finished-runs.js";
import { until } from "./until.js";

/**
 * A finished run's first job delivered again, as when its worker's ack was lost with it: queued,
 * taken once and handed back (so it comes with a delivery count of 2), then handed to a worker
 * started as `agent` once no other worker runs. Resolves with what that worker did: dropped the job
 * (what a finished run's job must get), or started the run afresh (a new WAL).
 */
export async function firstJobAgain(
  suite: ClusterSuite,
  runSpec: RunSpecInput,
  runId: string,
  agent: string,
): Promise<{ dropped: boolean; walMessages: number }> {
  const { bus } = suite;
  const job = { schemaVersion: 1 as const, runId, rootRunId: runId, depth: 0, auditSeq: 1 };
  await publishJob(bus, { ...job, spec: RunSpec.parse({ ...runSpec, runId }) }, `${runId}:again`);
  const consumer = await bus.js.consumers.get(bus.subjects.streams().runs, WORKER_CONSUMER);
  const taken = await consumer.next({ expires: 5_000 });
  expect(taken?.subject).toBe(bus.subjects.runQueue(runId));
  taken?.nak();
  await suite.cluster.start("agent", agent);
  const dropped = async () => /job dropped: its run finished/.test(await suite.log(agent));
  await until(async () => (await dropped()) || (await walMessages(bus, runId)) > 0, 10_000, {
    what: "the job dropped or the run restarted",
  });
  return { dropped: await dropped(), walMessages: await walMessages(bus, runId) };
}
