import {
  AckPolicy,
  DeliverPolicy,
  type JetStreamManager,
  type ConsumerConfig,
  type MsgRequest,
  type StoredMsg,
} from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { RunJob } from "../contracts/cluster.js";
import type { RunStatus } from "../contracts/run-status.js";
import type { Clock } from "../runtime/clock.js";
import type { Random } from "../runtime/random.js";
import { AckPublisher } from "./ack-publisher.js";
import { decode, encodeOwn } from "./codec.js";
import { ensureDurable } from "./durable.js";
import { jobTraceHeaders } from "./trace-context.js";
import { withBusRetry } from "./retry.js";
import type { Subjects } from "./subjects.js";

export const WORKER_CONSUMER = "agent-workers";
const NANOS_PER_MS = 1_000_000;

export interface JobDeps {
  nc: NatsConnection;
  subjects: Subjects;
  clock: Clock;
  random: Random;
}

/**
 * Puts a job on the work queue. `msgID` names what the job is for (`<runId>:start`,
 * `<runId>:approval:<n>`), so a supervisor retrying after a lost ack never queues it twice.
 */
export async function publishJob(
  deps: JobDeps,
  job: RunJob,
  msgID: string,
): Promise<{ seq: number; duplicate: boolean }> {
  // Built by the runtime from what it validated (a parsed submit, its own records); the worker
  // taking the job validates it (RunJob) as it comes in.
  const data = encodeOwn(RunJob, job);
  // The run's span, as the parent of what the worker taking the job does (see RunTrace).
  const headers = jobTraceHeaders(deps.subjects.prefix, job);
  const ack = await withBusRetry(`job for run ${job.runId}`, deps, () =>
    AckPublisher.of(deps.nc).publish(deps.subjects.runQueue(job.runId), data, {
      msgID,
      ...(headers ? { headers } : {}),
    }),
  );
  return { seq: ack.seq, duplicate: ack.duplicate };
}

/**
 * Whether a job of the run is on the work queue: waiting, or held by a worker (the queue drops a
 * job only once it is acknowledged).
 */
export async function hasQueuedJob(deps: QueueReadDeps, runId: string): Promise<boolean> {
  return (await lastJobMessage(deps, runId)) !== null;
}

type QueueReadDeps = Pick<JobDeps, "subjects" | "clock" | "random"> & { jsm: JetStreamManager };

/**
 * What the run's jobs on the work queue (waiting, or held by a worker) carry, oldest first: each
 * one's event type, "start" for a job with none, "unreadable" for one this build cannot read. At
 * most `max` (a run has a few at once).
 */
export async function queuedJobKinds(deps: QueueReadDeps, runId: string, max = 16): Promise<string[]> {
  return (await queuedJobs(deps, runId, max)).map((job) =>
    job ? (job.event?.type ?? "start") : "unreadable",
  );
}

/**
 * The run's jobs on the work queue (waiting, or held by a worker), oldest first, undefined for one
 * this build cannot read. At most `max`.
 */
export async function queuedJobs(
  deps: QueueReadDeps,
  runId: string,
  max = 16,
): Promise<(RunJob | undefined)[]> {
  const subject = deps.subjects.runQueue(runId);
  const jobs: (RunJob | undefined)[] = [];
  for (let seq = 1; jobs.length < max;) {
    // STREAM.MSG.GET takes `next_by_subj`; the client types it for direct gets only.
    const query = { seq, next_by_subj: subject } as unknown as MsgRequest;
    const msg = await withBusRetry(`reading the jobs on ${subject}`, deps, () =>
      deps.jsm.streams.getMessage(deps.subjects.streams().runs, query),
    );
    if (!msg) break;
    jobs.push(readJob(msg.data));
    seq = msg.seq + 1;
  }
  return jobs;
}

function readJob(data: Uint8Array): RunJob | undefined {
  try {
    return decode(RunJob, data);
  } catch {
    return undefined;
  }
}

async function lastJobMessage(deps: QueueReadDeps, runId: string): Promise<StoredMsg | null> {
  const subject = deps.subjects.runQueue(runId);
  return withBusRetry(`looking for a job on ${subject}`, deps, () =>
    deps.jsm.streams.getMessage(deps.subjects.streams().runs, { last_by_subj: subject }),
  );
}

/** A job that continues an existing run (its spec is in the WAL), with the outside event to continue with, if any. */
export function continuationJob(run: RunStatus, event?: RunJob["event"]): RunJob {
  return {
    schemaVersion: 1,
    runId: run.runId,
    rootRunId: run.rootRunId ?? run.runId,
    ...(run.parentRunId ? { parentRunId: run.parentRunId } : {}),
    depth: run.depth ?? 0,
    auditSeq: 0,
    ...(event ? { event } : {}),
  };
}

export interface WorkerConsumerOptions {
  /** How long a job may go without an ack or a heartbeat before JetStream hands it to another worker. */
  ackWaitMs: number;
  name?: string;
}

/**
 * The one durable pull consumer every agent worker shares. Created or updated in place, so
 * workers started with a new ack wait converge on it; a job is never dropped for having been
 * delivered too often (a run survives any number of worker crashes). It puts no cap of its own on
 * the jobs in flight: each worker pulls only what it has room for (`AGENT_CONCURRENCY`), and the
 * server's default of 1,000 unacknowledged jobs would silently cap a cluster scaled past it.
 */
export async function ensureWorkerConsumer(
  jsm: JetStreamManager,
  subjects: Subjects,
  options: WorkerConsumerOptions,
): Promise<string> {
  const name = options.name ?? WORKER_CONSUMER;
  const stream = subjects.streams().runs;
  const config: Partial<ConsumerConfig> = {
    durable_name: name,
    ack_policy: AckPolicy.Explicit,
    deliver_policy: DeliverPolicy.All,
    ack_wait: options.ackWaitMs * NANOS_PER_MS,
    max_deliver: -1,
    max_ack_pending: -1,
    filter_subject: subjects.runQueueAll(),
  };
  const existing = await ensureDurable(jsm, stream, { ...config, durable_name: name });
  if (existing && (existing.config.ack_wait !== config.ack_wait || existing.config.max_ack_pending !== -1))
    await jsm.consumers.update(stream, name, config);
  return name;
}
