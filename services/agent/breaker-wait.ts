import type { KV } from "@nats-io/kv";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import type { RunJob } from "../../shared/contracts/cluster.js";
import type { ErrorPayload } from "../../shared/contracts/common.js";
import { ModelBreaker } from "../../shared/contracts/model-breaker.js";
import type { RunStatus, RunWaiting } from "../../shared/contracts/run-status.js";
import { toRfc3339 } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";

/**
 * How far apart the runs an open breaker sent back return once a call may try the provider again.
 * They all learnt the same time (the breaker's `until`): arriving together, each took its run over
 * (its checkpoint read, its lease asked) for one of them to try the provider and the rest to be
 * refused again. Spread over a second, the first tries it and the others find the try under way.
 */
export const BREAKER_RETURN_SPREAD_MS = 1_000;

/**
 * What the status of a run handed back for its provider's open breaker says it waits for (see
 * RunStatus.waiting); undefined when the turn's failure names no breaker (an outage the breaker
 * has not opened for yet, or breakers turned off).
 */
export function waitingOn(
  error: ErrorPayload,
  what: RunWaiting["for"],
  retryAt: number | undefined,
  until: number,
): RunWaiting | undefined {
  const parsed = ModelBreaker.safeParse((error.details as { breaker?: unknown } | undefined)?.breaker);
  if (!parsed.success || retryAt === undefined || !Number.isFinite(until)) return undefined;
  return {
    for: what,
    provider: parsed.data.provider,
    until: toRfc3339(retryAt),
    giveUpAt: toRfc3339(until),
    reason: parsed.data.reason,
  };
}

/**
 * When a run whose status says it waits on a breaker is next offered, if the worker handed its job
 * should leave it queued without reading it: at the end of the breaker's wait (or when the run
 * stops waiting, if sooner), or, while another worker's call tries the provider, after the retry
 * delay. Undefined when the run is to be taken over as usual: the breaker is closed (or unknown to
 * this worker), a call may try the provider now, or the run has waited long enough.
 */
export function deferral(
  waiting: RunWaiting | undefined,
  breaker: ModelBreaker | undefined,
  now: number,
): number | undefined {
  if (!waiting || breaker?.provider !== waiting.provider) return undefined;
  const stopsWaiting = Date.parse(waiting.giveUpAt);
  if (now >= stopsWaiting || now >= breaker.until) return undefined;
  return breaker.state === "probing" ? now : Math.min(breaker.until, stopsWaiting);
}

/**
 * The run's status, read for a job that cannot tell where the run's checkpoint is. A run the status
 * says waits on its provider's open breaker (see deferral) is left queued, unread: the lease ends
 * with `leftWaiting`. Taken over, the breaker would refuse its turn again, after a takeover that
 * read its log and asked its lease for nothing. A later end of the breaker's wait is written to
 * the status, unless another write came first (the wait stands without it, so a failed write is
 * let go).
 */
export async function statusUnlessWaiting(
  runs: KV,
  job: Pick<RunJob, "runId" | "event">,
  breakerOf: (provider: string) => ModelBreaker | undefined,
  now: number,
): Promise<RunStatus | undefined> {
  const store = new RunStatusStore(runs);
  const read = await store.read(job.runId);
  const waiting = read?.status.waiting;
  if (!read || !waiting || job.event) return read?.status;
  const retryAt = deferral(waiting, breakerOf(waiting.provider), now);
  if (retryAt === undefined) return read.status;
  const until = toRfc3339(retryAt);
  if (retryAt > now && until !== waiting.until) {
    const moved = { ...read.status, waiting: { ...waiting, until }, updatedAt: toRfc3339(now) };
    await store.update(moved, read.revision).catch(() => false);
  }
  throw leftWaiting(waiting, retryAt);
}

/** The lease's end for a run left waiting (see deferral): the job goes back until `retryAt`. */
export function leftWaiting(waiting: RunWaiting, retryAt: number): AgentError {
  return new AgentError(
    "MODEL_UNAVAILABLE",
    `the run still waits on model provider ${waiting.provider}'s breaker (${waiting.reason}): left queued`,
    { details: { handedBack: waiting.for, leftWaiting: waiting.provider, retryAt } },
  );
}

/** The provider whose breaker a job was left waiting on (see leftWaiting), if it was. */
export function leftWaitingOn(error: AgentError): string | undefined {
  const on = (error.details as { leftWaiting?: unknown } | undefined)?.leftWaiting;
  return typeof on === "string" ? on : undefined;
}
