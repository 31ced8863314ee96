/**
 * A circuit breaker per tool: closed until `failureThreshold` consecutive failures, then open
 * (calls refused) for `cooldownMs`, then half-open: one trial call closes it on success or
 * re-opens it on failure. Time comes from the caller, so it is testable without waiting.
 */
export type BreakerState = "closed" | "open" | "halfOpen";

export interface BreakerOptions {
  failureThreshold: number;
  cooldownMs: number;
}

export const DEFAULT_BREAKER: BreakerOptions = { failureThreshold: 5, cooldownMs: 30_000 };

export class CircuitBreaker {
  private state: BreakerState = "closed";
  private failures = 0;
  private openedAt = 0;
  private trialInFlight = false;

  constructor(private readonly options: BreakerOptions = DEFAULT_BREAKER) {}

  current(now: number): BreakerState {
    if (this.state === "open" && now - this.openedAt >= this.options.cooldownMs) return "halfOpen";
    return this.state;
  }

  /** Whether a call may go through now; in half-open only one trial at a time. */
  tryAcquire(now: number): boolean {
    const state = this.current(now);
    if (state === "closed") return true;
    if (state === "open") return false;
    if (this.trialInFlight) return false;
    this.state = "halfOpen";
    this.trialInFlight = true;
    return true;
  }

  onSuccess(): void {
    this.state = "closed";
    this.failures = 0;
    this.trialInFlight = false;
  }

  /** An acquired call that decided nothing (it never reached the tool): a half-open trial may go again. */
  release(): void {
    this.trialInFlight = false;
  }

  onFailure(now: number): void {
    this.trialInFlight = false;
    if (this.state === "halfOpen") {
      this.trip(now);
      return;
    }
    this.failures++;
    if (this.failures >= this.options.failureThreshold) this.trip(now);
  }

  private trip(now: number): void {
    this.state = "open";
    this.openedAt = now;
    this.failures = 0;
  }
}
