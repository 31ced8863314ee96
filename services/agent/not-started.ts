import type { KV } from "@nats-io/kv";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import type { RunJob } from "../../shared/contracts/cluster.js";
import { isFinished, type RunStatus } from "../../shared/contracts/run-status.js";
import { AgentError } from "../../shared/runtime/errors.js";

/**
 * A job with no spec, for a run with no log: a halt or a cancel an operator queued for a run no
 * worker has started yet is the one such job that may still apply (every other outside event
 * answers what a started run asked for). While the run's status says it has not finished, it waits
 * for it: RUN_NOT_STARTED (retryable) hands the job back, and once a worker has started the run, the
 * next delivery stops it where it is. Returns for any other job, which can never start a run. `read`:
 * the run's status when the caller read it already.
 */
export async function waitForStart(runs: KV, job: RunJob, read?: RunStatus): Promise<void> {
  const type = job.event?.type;
  if (type !== "halt" && type !== "cancel") return;
  const status = read ?? (await new RunStatusStore(runs).get(job.runId));
  if (!status || isFinished(status)) return;
  throw new AgentError(
    "RUN_NOT_STARTED",
    `run '${job.runId}' has not started yet: its ${type} waits for a worker to start it`,
    { details: { event: type } },
  );
}
