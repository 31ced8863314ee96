import { DeliverPolicy } from "@nats-io/jetstream";
import type { RunProgress } from "../contracts/log.js";
import type { RunStatus } from "../contracts/run-status.js";
import { toRfc3339 } from "../runtime/clock.js";
import type { ActorBus } from "./actor.js";
import { closeOnAbort } from "./close-on-abort.js";
import { decodeLogProgress } from "./log-codec.js";
import { lastLogMessage, storedAsLog, wholeMessage, type LogMessage } from "./run-log.js";
import { RunStatusStore } from "./run-status.js";

/** What reading a run's progress takes (an actor's bus has it). */
export type ProgressReads = Pick<ActorBus, "js" | "jsm" | "subjects" | "clock" | "random" | "buckets">;

/**
 * A running run's status with its progress (phase, iteration, usage, and when) as its log's latest
 * message tells it: a worker writes the status only when it changes, and every log message
 * carries the progress. Any other status is exact as it is.
 */
export function withProgress(status: RunStatus, progress: RunProgress | undefined): RunStatus {
  if (!progress || status.status !== "running") return status;
  const { at, ...rest } = progress;
  return { ...status, ...rest, updatedAt: toRfc3339(at) };
}

function progressOf(whole: Uint8Array | undefined): RunProgress | undefined {
  if (!whole) return undefined;
  try {
    return decodeLogProgress(whole);
  } catch {
    // Not a message this build can read: no progress, rather than a failed `watch`.
    return undefined;
  }
}

/** The progress the run's last log message tells; undefined for a run with none from a worker yet. */
export async function readProgress(deps: ProgressReads, runId: string): Promise<RunProgress | undefined> {
  const head = await lastLogMessage(deps, deps.subjects.logAll(runId));
  return head ? progressOfMessage(deps, storedAsLog(head)) : undefined;
}

/** The run's status now, with its progress (see withProgress); undefined for a run with no status. */
export async function statusWithProgress(deps: ProgressReads, runId: string): Promise<RunStatus | undefined> {
  const [status, progress] = await Promise.all([
    new RunStatusStore(deps.buckets.runs).get(runId),
    readProgress(deps, runId),
  ]);
  return status && withProgress(status, progress);
}

/**
 * The run's status with its progress, now and at each change of either: its status's changes (a KV
 * watch) and its log's messages (an ordered consumer, from the latest). Ends when `signal` aborts
 * or the caller stops reading.
 */
export async function* followRun(
  deps: ProgressReads,
  runId: string,
  signal?: AbortSignal,
): AsyncGenerator<RunStatus> {
  const stop = new AbortController();
  const onAbort = (): void => stop.abort();
  if (signal?.aborted) stop.abort();
  signal?.addEventListener("abort", onAbort, { once: true });
  let status: RunStatus | undefined;
  let progress: RunProgress | undefined;
  let changed = false;
  let wake: (() => void) | undefined;
  const changes = (): void => {
    changed = true;
    wake?.();
  };
  stop.signal.addEventListener("abort", changes, { once: true });
  const statuses = (async () => {
    for await (const s of new RunStatusStore(deps.buckets.runs).watch(runId, stop.signal)) {
      status = s;
      changes();
    }
  })();
  const messages = (async () => {
    const consumer = await deps.js.consumers.get(deps.subjects.streams().log, {
      filter_subjects: [deps.subjects.logAll(runId)],
      deliver_policy: DeliverPolicy.Last,
    });
    const stream = await consumer.consume();
    closeOnAbort(stream, stop.signal);
    for await (const msg of stream) {
      progress = (await progressOfMessage(deps, msg)) ?? progress;
      changes();
    }
  })();
  // Either ending ends the follow (a connection closed, say); a failure is thrown to its reader.
  let failed: { err: unknown } | undefined;
  const ended = Promise.all(
    [statuses, messages].map((source) =>
      source
        .catch((err: unknown) => {
          failed ??= { err };
        })
        .finally(() => stop.abort()),
    ),
  );
  let shown = "";
  try {
    while (!stop.signal.aborted) {
      if (!changed) await new Promise<void>((resolve) => (wake = resolve));
      changed = false;
      const now = status && withProgress(status, progress);
      const seen = JSON.stringify(now);
      if (!now || stop.signal.aborted || seen === shown) continue;
      shown = seen;
      yield now;
    }
  } finally {
    stop.abort();
    signal?.removeEventListener("abort", onAbort);
    await ended;
  }
  if (failed) throw failed.err;
}

async function progressOfMessage(deps: ProgressReads, msg: LogMessage): Promise<RunProgress | undefined> {
  return progressOf(await wholeMessage(deps, msg));
}
