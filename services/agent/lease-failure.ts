import type { AgentError } from "../../shared/runtime/errors.js";
import type { Logger } from "../../shared/runtime/logger.js";
import { isModelOutage } from "../../shared/models/outage.js";
import type { Random } from "../../shared/runtime/random.js";
import { BREAKER_RETURN_SPREAD_MS } from "./breaker-wait.js";
import { handedBack, MAX_OUTAGE_RETRY_DELAY_MS, retryAt } from "./model-outage.js";

/** The longest a job whose lease keeps failing the same way waits before it is offered again. */
export const MAX_RETRY_DELAY_MS = 300_000;

/**
 * How long a job whose lease failed waits before it is offered again. A transient failure (the bus,
 * a supervisor out of reach) is retried after `baseMs`. A model provider's outage (see
 * model-outage.ts) waits twice as long at each delivery, up to a minute: a rate-limited provider is
 * not asked again by every waiting run every few seconds; so does a run that found the NATS server's
 * storage full (STORAGE_FULL). One that is not retryable (the run's log cannot be replayed by this
 * build: NONDETERMINISM) will fail the same way until a deploy fixes it, so the job stays queued,
 * and waits twice as long at each delivery, up to five minutes, instead of being replayed twice a
 * second: the run is not lost, and a fix resumes it.
 */
export function retryDelay(
  error: AgentError,
  deliveryCount: number,
  baseMs: number,
  now = 0,
  random?: Random,
): number {
  const at = retryAt(error);
  // A turn an open breaker refused: offered again once the breaker lets a turn try the provider,
  // the breaker's runs spread out (see BREAKER_RETURN_SPREAD_MS).
  if (at !== undefined) {
    const spread = at > now && random ? Math.floor(random.next() * BREAKER_RETURN_SPREAD_MS) : 0;
    return Math.min(MAX_OUTAGE_RETRY_DELAY_MS, Math.max(baseMs, at - now) + spread);
  }
  const doubled = baseMs * 2 ** Math.min(20, Math.max(0, deliveryCount - 1));
  // Room comes back when an operator makes it: a full store is waited out like a provider's outage.
  if (isModelOutage(error.code) || error.code === "STORAGE_FULL") {
    return Math.min(MAX_OUTAGE_RETRY_DELAY_MS, doubled);
  }
  if (error.retryable) return baseMs;
  return Math.min(MAX_RETRY_DELAY_MS, doubled);
}

/**
 * Logs a lease that failed and goes back to the queue: a run handed back to wait out an outage, as
 * configured, is a warning without a stack; any other failure an error.
 */
export function logLeaseFailure(log: Logger, error: AgentError, delivery: number, delayMs: number): void {
  if (handedBack(error)) {
    const at = retryAt(error);
    log.warn(
      {
        code: error.code,
        delivery,
        delayMs,
        reason: error.message,
        ...(at === undefined ? {} : { retryAt: new Date(at).toISOString() }),
      },
      "run handed back to wait out an outage",
    );
    return;
  }
  if (error.code === "STORAGE_FULL") {
    // An operator's to fix, said once per hand back: no stack, nothing of the run is lost.
    log.warn(
      { code: error.code, delivery, delayMs, reason: error.message },
      "run handed back: the NATS server's storage is full; it goes on from where it stopped once there is room",
    );
    return;
  }
  log.error(
    { err: error, code: error.code, retryable: error.retryable, delivery, delayMs },
    error.retryable
      ? "run lease failed; the job will be retried"
      : "run lease failed and will fail again until the cause is fixed (a deploy that can replay its log); retrying with backoff",
  );
}
