import type { ErrorPayload } from "../../shared/contracts/common.js";
import type { RunRetrying, RunWaiting } from "../../shared/contracts/run-status.js";
import { toRfc3339 } from "../../shared/runtime/clock.js";
import type { ErrorCode } from "../../shared/runtime/errors.js";
import { AgentError } from "../../shared/runtime/errors.js";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import { checkDeadline, type GuardLimits, type GuardState } from "../../shared/loop/guard.js";
import type { LoopState } from "../../shared/loop/state.js";
import { MODEL_OUTAGE_CODES } from "../../shared/models/outage.js";
import { waitingOn } from "./breaker-wait.js";
import type { OutageWait } from "./journal.js";

/** A provider's outage, or a model actor or critic nobody answers for (the bus). */
export const OUTAGE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  ...MODEL_OUTAGE_CODES,
  "BUS_UNAVAILABLE",
]);

/** The longest a run handed back for a model outage waits before it is offered again. */
export const MAX_OUTAGE_RETRY_DELAY_MS = 60_000;

export function isOutage(code: string): boolean {
  return OUTAGE_CODES.has(code as ErrorCode);
}

/** When a run stops waiting out an outage: `outageMs` after its turn was first asked, or its deadline. */
export function giveUpAt(
  since: number,
  outageMs: number,
  state: { guard: Pick<GuardState, "startedAt">; limits: Pick<GuardLimits, "deadlineMs"> },
): number {
  const deadline = state.limits.deadlineMs;
  return Math.min(since + outageMs, deadline === undefined ? Infinity : state.guard.startedAt + deadline);
}

/**
 * What a failed model turn (or critic's review) does to its run. An outage (OUTAGE_CODES)
 * hands the run back, to be asked again later (an AgentError to throw: the lease fails, the job is
 * retried), for as long as the run has waited on this turn less than `outageMs` and its deadline
 * has not passed; past that, or for any other error, the failure goes to the loop (a failed turn
 * fails the run as `modelError`, a failed review sends the answer to repair), its message saying
 * how long it was tried. A run handed back for its provider's open breaker says in its status what
 * it waits for (`waiting`, see RunStatus).
 */
export function modelFailure<E extends Extract<LoopEvent, { type: "modelFailed" | "criticFailed" }>>(
  event: E,
  state: Pick<LoopState, "guard" | "limits">,
  waitingSince: number,
  outageMs: number,
  now: number,
): { handBack: AgentError; waiting?: RunWaiting } | { fail: E } {
  const { error } = event;
  const what = event.type === "modelFailed" ? "model turn" : "review";
  if (!isOutage(error.code)) return { fail: event };
  const waited = Math.max(0, now - waitingSince);
  const deadline = checkDeadline(state.guard, state.limits, now).kind === "circuitBreak";
  if (waited < outageMs && !deadline) {
    const stopsWaiting = giveUpAt(waitingSince, outageMs, state);
    const at = retryAtOf(error, now, stopsWaiting);
    const waiting = waitingOn(error, what, at.retryAt, stopsWaiting);
    return {
      handBack: new AgentError(
        error.code as ErrorCode,
        `${error.message} (the ${what} is asked again later; waiting on it for ${seconds(waited)})`,
        { details: { handedBack: what, waitedMs: waited, ...at } },
      ),
      ...(waiting ? { waiting } : {}),
    };
  }
  // Waiting turned off: the failure is the provider's, as it came.
  if (outageMs === 0 && !deadline) return { fail: event };
  const why = deadline ? "the run's deadline passed" : `tried for ${seconds(waited)}`;
  const failed: ErrorPayload = { ...error, message: `${error.message} (${why})` };
  return { fail: { ...event, error: failed } };
}

/**
 * What the status of a run handed back for an outage no open breaker names says (see
 * RunStatus.retrying): without it, a run retrying its provider for up to AGENT_MODEL_OUTAGE_MS
 * looked, to `watch` and `runs`, like a run still thinking. `nextTry`: when its worker offers the
 * job again (see retryDelay).
 */
export function retrying(
  event: Extract<LoopEvent, { type: "modelFailed" | "criticFailed" }>,
  since: number,
  stopsWaiting: number,
  nextTry: number,
): RunRetrying {
  return {
    for: event.type === "modelFailed" ? "model turn" : "review",
    code: event.error.code,
    reason: event.error.message,
    since: toRfc3339(since),
    nextTry: toRfc3339(Math.min(nextTry, stopsWaiting)),
    giveUpAt: toRfc3339(stopsWaiting),
  };
}

/**
 * What the status of a run handed back for an outage says it waits out: its provider's open
 * breaker (`waiting`: it spares the run's next takeovers while the breaker stays open), or, with no
 * breaker named, the retries (`retrying`: seen by whoever watches the run).
 */
export function outageWait(
  event: Extract<LoopEvent, { type: "modelFailed" | "criticFailed" }>,
  verdict: { waiting?: RunWaiting },
  since: number,
  stopsWaiting: number,
  nextTry: number,
): OutageWait {
  if (verdict.waiting) return { waiting: verdict.waiting };
  return { retrying: retrying(event, since, stopsWaiting, nextTry) };
}

/** A lease that failed because its run was handed back to wait out an outage (see modelFailure). */
export function handedBack(error: AgentError): boolean {
  const details = error.details as { handedBack?: unknown } | undefined;
  return typeof details?.handedBack === "string";
}

/**
 * When a turn refused by its provider's open breaker can next be tried: once the breaker's wait is
 * over (`until`), or, while another turn is trying the provider, as soon as the run may come back
 * (its answer usually comes within the second). Its run is offered again then, not on its own
 * doubling schedule, which left runs refused while the try was under way waiting up to a minute
 * after the provider was back. A run that stops waiting sooner (`stopsWaiting`: its deadline, say)
 * comes back then, and fails, rather than at a try after it.
 */
function retryAtOf(error: ErrorPayload, now: number, stopsWaiting: number): { retryAt?: number } {
  const breaker = (error.details as { breaker?: { until?: unknown; state?: unknown } } | undefined)?.breaker;
  if (typeof breaker?.until !== "number") return {};
  return { retryAt: breaker.state === "probing" ? now : Math.min(breaker.until, stopsWaiting) };
}

/** The time a handed-back run's turn can next be tried, when an open breaker said it. */
export function retryAt(error: AgentError): number | undefined {
  const at = (error.details as { retryAt?: unknown } | undefined)?.retryAt;
  return typeof at === "number" ? at : undefined;
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}
