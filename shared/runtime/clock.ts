/**
 * Time is injected everywhere the loop or a policy needs it, so tests run on a simulated clock
 * and a replayed run sees the same timestamps it saw the first time.
 */
export interface Clock {
  now(): number;
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason as Error);
        return;
      }
      const timer = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, ms);
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(signal?.reason as Error);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    }),
};

interface Sleeper {
  until: number;
  resolve: () => void;
  reject: (reason: unknown) => void;
}

/** A clock that only moves when told to; sleepers wake in deadline order as time passes them. */
export class ManualClock implements Clock {
  private current: number;
  private sleepers: Sleeper[] = [];

  constructor(start = 0) {
    this.current = start;
  }

  now(): number {
    return this.current;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason as Error);
        return;
      }
      const sleeper: Sleeper = { until: this.current + ms, resolve, reject };
      this.sleepers.push(sleeper);
      signal?.addEventListener(
        "abort",
        () => {
          this.sleepers = this.sleepers.filter((s) => s !== sleeper);
          reject(signal.reason as Error);
        },
        { once: true },
      );
    });
  }

  /** Moves time forward, waking every sleeper whose deadline has passed. */
  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      const next = this.sleepers.filter((s) => s.until <= target).sort((a, b) => a.until - b.until)[0];
      if (!next) break;
      this.current = Math.max(this.current, next.until);
      this.sleepers = this.sleepers.filter((s) => s !== next);
      next.resolve();
      // Let the woken continuation run (and maybe schedule new sleepers) before the next one.
      await flushMicrotasks();
    }
    this.current = target;
  }

  pendingSleepers(): number {
    return this.sleepers.length;
  }
}

async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

/**
 * Virtual time that never waits: a sleep completes on the next macrotask and only then moves the
 * clock forward. A sleep cancelled before that (a timeout that lost its race) moves nothing, so
 * timeouts do not fire spuriously while backoff delays still show up in `now()`.
 */
export class InstantClock implements Clock {
  private current: number;
  constructor(start = 0) {
    this.current = start;
  }
  now(): number {
    return this.current;
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason as Error);
        return;
      }
      const timer = setImmediate(() => {
        signal?.removeEventListener("abort", onAbort);
        this.current += Math.max(0, ms);
        resolve();
      });
      const onAbort = (): void => {
        clearImmediate(timer);
        reject(signal?.reason as Error);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

export function toRfc3339(epochMs: number): string {
  return new Date(epochMs).toISOString();
}
