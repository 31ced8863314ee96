import type { ModelBreaker } from "../contracts/model-breaker.js";
import { AgentError, isAgentError, type ErrorBody } from "../runtime/errors.js";
import { isModelOutage } from "./outage.js";

/**
 * AGENT_MODEL_BREAKER_* and CRITIC_MODEL_BREAKER_*: when a provider's breaker opens, and how long it
 * stays open.
 */
export interface BreakerSettings {
  /** Outages in a row among one provider's calls through this worker that open its breaker (0: never). */
  failures: number;
  /** How long an opened breaker waits before one call tries the provider again. */
  cooldownMs: number;
}

/**
 * The longest a breaker waits between tries: each failed probe doubles its wait up to this (or up
 * to the configured cooldown, when that is longer), as a handed-back run's own retries do.
 */
export const MAX_BREAKER_COOLDOWN_MS = 60_000;

/** What a model call may do now: go ahead, go as the one call that tries an open breaker, or wait. */
export type Admission = { go: "call" } | { go: "probe" } | { go: "refuse"; breaker: ModelBreaker };

export function admission(breaker: ModelBreaker | undefined, now: number): Admission {
  if (!breaker) return { go: "call" };
  if (now < breaker.until) return { go: "refuse", breaker };
  return { go: "probe" };
}

/** A breaker opened by `by` after the outage `error`. */
export function opened(
  provider: string,
  error: ErrorBody,
  settings: BreakerSettings,
  now: number,
  by: string,
): ModelBreaker {
  return {
    provider,
    state: "open",
    until: now + settings.cooldownMs,
    openedAt: now,
    cooldownMs: settings.cooldownMs,
    reason: reasonOf(error),
    by,
    failedProbes: 0,
  };
}

/**
 * The breaker while `by`'s call tries the provider: another call may try once a cooldown has passed
 * with no answer (a worker that died mid-probe does not keep the breaker shut).
 */
export function probing(breaker: ModelBreaker, now: number, by: string): ModelBreaker {
  return { ...breaker, state: "probing", until: now + breaker.cooldownMs, by };
}

/** The breaker after its probe failed with `error`: open again, for twice as long. */
export function reopened(
  breaker: ModelBreaker,
  error: ErrorBody,
  settings: BreakerSettings,
  now: number,
  by: string,
): ModelBreaker {
  const bound = Math.max(settings.cooldownMs, MAX_BREAKER_COOLDOWN_MS);
  const cooldownMs = Math.min(bound, breaker.cooldownMs * 2);
  return {
    ...breaker,
    state: "open",
    until: now + cooldownMs,
    cooldownMs,
    reason: reasonOf(error),
    by,
    failedProbes: breaker.failedProbes + 1,
  };
}

/**
 * The error a call refused by an open breaker fails with: the provider's own outage code, so the
 * run waits it out as it would a failed call (see model-outage.ts), without the call.
 */
export function refusal(breaker: ModelBreaker, now: number): AgentError {
  const open = Math.round((now - breaker.openedAt) / 1000);
  const next =
    breaker.state === "probing"
      ? "another worker is trying it"
      : `next try after ${new Date(breaker.until).toISOString()}`;
  return new AgentError(
    "MODEL_UNAVAILABLE",
    `model provider ${breaker.provider} not asked: its breaker has been open for ${open} s (${breaker.reason}); ${next}`,
    { details: { breaker } },
  );
}

function reasonOf(error: ErrorBody): string {
  return `${error.code}: ${error.message}`.slice(0, 500);
}

/**
 * A call's outage, told the breaker it left open (opened or reopened by this outage, or open since
 * the call was sent): its run then comes back when the breaker lets a call try the provider, as a
 * refused one does, not on a schedule its refusals have stretched (each refusal is a delivery, and
 * the doubling counts deliveries). Anything else is returned as it is.
 */
export function withOpenBreaker(err: unknown, breaker: ModelBreaker | undefined, now: number): unknown {
  if (!breaker || now >= breaker.until || !isAgentError(err) || !isModelOutage(err.code)) return err;
  const details = typeof err.details === "object" && err.details !== null ? err.details : {};
  return new AgentError(err.code, err.message, { details: { ...details, breaker }, cause: err });
}
