import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import { RunStatus } from "../contracts/run-status.js";
import { decode, encode } from "./codec.js";
import type { Subjects } from "./subjects.js";

/**
 * Every key the runs bucket holds a message for (a deleted key's marker counts: check with a get),
 * from the stream's subject index, paged. Not `kv.keys()`: that listing ends only when a message
 * reports nothing pending, and a key rewritten while it lists can make it wait out a 30 s heartbeat.
 */
export async function runsBucketKeys(deps: { jsm: JetStreamManager; subjects: Subjects }): Promise<string[]> {
  const bucket = deps.subjects.buckets().runs;
  const prefix = `$KV.${bucket}.`;
  const info = await deps.jsm.streams.info(`KV_${bucket}`, { subjects_filter: `${prefix}>` });
  return Object.keys(info.state.subjects ?? {}).map((subject) => subject.slice(prefix.length));
}

/** Run status on the `agents-runs` bucket, keyed by runId: what `watch` and `status` read. */
export class RunStatusStore {
  constructor(private readonly kv: KV) {}

  async put(status: RunStatus): Promise<void> {
    await this.kv.put(status.runId, encode(RunStatus, status));
  }

  async get(runId: string): Promise<RunStatus | undefined> {
    const entry = await this.kv.get(runId);
    if (!entry || entry.operation !== "PUT") return undefined;
    return decode(RunStatus, entry.value);
  }

  /** Every change of one run's status, starting with the current one; ends when `signal` aborts. */
  async *watch(runId: string, signal?: AbortSignal): AsyncGenerator<RunStatus> {
    const watcher = await this.kv.watch({ key: runId });
    const stop = (): void => watcher.stop();
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
