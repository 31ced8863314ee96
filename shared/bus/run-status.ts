import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { RunStatus } from "../contracts/run-status.js";
import type { Clock } from "../runtime/clock.js";
import type { Random } from "../runtime/random.js";
import { decode, encode } from "./codec.js";
import { readBucket } from "./bucket-read.js";
import { withBusRetry } from "./retry.js";
import { refusedOnly } from "./run-log.js";
import type { Subjects } from "./subjects.js";

/** What the runs bucket holds now: every run's status, and the other live keys (fan-outs). */
export interface RunsBucket {
  statuses: RunStatus[];
  keys: Set<string>;
}

/**
 * Reads the whole runs bucket in one streamed read (see readBucket). Not a `get` per key: a round
 * trip per run ever recorded.
 */
export async function readRunsBucket(deps: {
  jsm: JetStreamManager;
  subjects: Subjects;
}): Promise<RunsBucket> {
  const held: RunsBucket = { statuses: [], keys: new Set() };
  for await (const { key, data } of readBucket(deps.jsm, deps.subjects.buckets().runs)) {
    const status = parseStatus(data);
    if (status) held.statuses.push(status);
    else held.keys.add(key);
  }
  return held;
}

function parseStatus(data: Uint8Array): RunStatus | undefined {
  try {
    return decode(RunStatus, data);
  } catch {
    return undefined;
  }
}

/**
 * Run status on the `agents-runs` bucket, keyed by runId: what `watch` and `status` read. Given
 * `retry` (a worker's, whose leases write statuses as they go), its reads and writes ride out a
 * JetStream outage as the WAL's do, instead of failing the lease with the client's bare timeout
 * (an INTERNAL error, and the run handed back) at a restart or a leader election.
 */
export class RunStatusStore {
  constructor(
    private readonly kv: KV,
    private readonly retry?: { clock: Clock; random: Random },
  ) {}

  async put(status: RunStatus): Promise<void> {
    await this.io(`writing the status of ${status.runId}`, () =>
      this.kv.put(status.runId, encode(RunStatus, status)),
    );
  }

  async get(runId: string): Promise<RunStatus | undefined> {
    return (await this.read(runId))?.status;
  }

  /** The status with its revision, for a write that must not land over a newer one (see update). */
  async read(runId: string): Promise<{ status: RunStatus; revision: number } | undefined> {
    const entry = await this.io(`reading the status of ${runId}`, () => this.kv.get(runId));
    if (!entry || entry.operation !== "PUT") return undefined;
    return { status: decode(RunStatus, entry.value), revision: entry.revision };
  }

  /**
   * Writes the status only if it is still at `revision`: the revision written, or false when
   * another write came first.
   */
  update(status: RunStatus, revision: number): Promise<number | false> {
    return this.io(`writing the status of ${status.runId}`, () =>
      this.kv.update(status.runId, encode(RunStatus, status), revision).then((next) => next, refusedOnly),
    );
  }

  /** Writes the status only if the run has none: false when it has (a run's status is never replaced). */
  create(status: RunStatus): Promise<boolean> {
    return this.io(`writing the status of ${status.runId}`, () =>
      this.kv.create(status.runId, encode(RunStatus, status)).then(() => true, refusedOnly),
    );
  }

  /**
   * One read or write of the bucket, retried through an outage when the store was given `retry`.
   * A compare-and-set retried after an outage lost its ack is refused by its own write: false,
   * "written meanwhile", which it was.
   */
  private io<T>(what: string, op: () => Promise<T>): Promise<T> {
    return this.retry ? withBusRetry(what, this.retry, op) : op();
  }

  /** Every change of one run's status, starting with the current one; ends when `signal` aborts. */
  async *watch(runId: string, signal?: AbortSignal): AsyncGenerator<RunStatus> {
    const watcher = await this.kv.watch({ key: runId });
    const stop = (): void => watcher.stop();
    // Aborted while the watch was being made: no listener added now would hear it.
    if (signal?.aborted) stop();
    signal?.addEventListener("abort", stop, { once: true });
    try {
      for await (const entry of watcher) {
        if (entry.operation === "PUT") yield decode(RunStatus, entry.value);
      }
    } finally {
      signal?.removeEventListener("abort", stop);
      watcher.stop();
    }
  }
}
