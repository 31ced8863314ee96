import type { Gauge } from "prom-client";
import type { Clock } from "../runtime/clock.js";
import type { Logger } from "../runtime/logger.js";
import { JETSTREAM_SILENT_CAUSES } from "./jetstream-silent.js";

export interface JetStreamWatchOptions {
  /** How often JetStream is asked (its account info: one small request). */
  everyMs: number;
  /** How long JetStream may go unanswered before the actor says so and stops being ready. */
  silentAfterMs: number;
}

/** As long as a WAL append rides out a leader election before it gives up (BUDGET_MS). */
export const DEFAULT_JETSTREAM_WATCH: JetStreamWatchOptions = { everyMs: 5_000, silentAfterMs: 15_000 };

/** The watch for a silence of `silentAfterMs` (JETSTREAM_SILENT_MS): asked three times in it, and at least every 5 s. */
export function jetStreamWatchFor(silentAfterMs: number): JetStreamWatchOptions {
  return {
    everyMs: Math.min(DEFAULT_JETSTREAM_WATCH.everyMs, Math.ceil(silentAfterMs / 3)),
    silentAfterMs,
  };
}

/**
 * Whether the NATS server's JetStream answers this actor, asked every few seconds while the
 * connection is up. A JetStream cluster that lost its quorum keeps the connection up and answers
 * nothing on JetStream, so a connection alone cannot tell an actor's readiness. Once
 * JetStream has not answered for `silentAfterMs`, the actor logs one error saying what to check,
 * its `/readyz` says not ready and `agents_jetstream_answering` is 0, until it answers again.
 */
export class JetStreamWatch {
  private lastAnswer: number;
  private said = false;
  private readonly stopping = new AbortController();

  constructor(
    private readonly deps: {
      clock: Clock;
      logger: Logger;
      /** One request to JetStream; rejects when JetStream does not answer, or answers an error. */
      ask: () => Promise<unknown>;
      connected: () => boolean;
      gauge?: Gauge;
    },
    private readonly options: JetStreamWatchOptions = DEFAULT_JETSTREAM_WATCH,
  ) {
    this.lastAnswer = deps.clock.now();
    deps.gauge?.set(1);
  }

  /** False once JetStream has gone `silentAfterMs` without answering. */
  answering(): boolean {
    return this.deps.clock.now() - this.lastAnswer < this.options.silentAfterMs;
  }

  /** Asks every `everyMs` until stop(); never rejects. */
  async run(): Promise<void> {
    const { signal } = this.stopping;
    while (!signal.aborted) {
      await this.check();
      await this.deps.clock.sleep(this.options.everyMs, signal).catch(() => undefined);
    }
  }

  stop(): void {
    this.stopping.abort(new Error("stopped"));
  }

  /** One question to JetStream, and what its answer (or its silence) changes. */
  async check(): Promise<void> {
    // Disconnected, nothing can answer: readiness says so already, and the watch starts over on
    // reconnecting rather than calling a JetStream silent that was never asked.
    if (!this.deps.connected()) {
      this.answered();
      return;
    }
    try {
      await this.deps.ask();
      this.answered();
    } catch (err) {
      this.unanswered(err);
    }
  }

  private answered(): void {
    const now = this.deps.clock.now();
    if (this.said) {
      this.said = false;
      this.deps.logger.info({ silentMs: now - this.lastAnswer }, "JetStream answers again");
    }
    this.lastAnswer = now;
    this.deps.gauge?.set(1);
  }

  private unanswered(err: unknown): void {
    if (this.answering() || this.said) return;
    this.said = true;
    this.deps.gauge?.set(0);
    const silentMs = this.deps.clock.now() - this.lastAnswer;
    this.deps.logger.error(
      { silentMs, reason: err instanceof Error ? err.message : String(err) },
      `the NATS server's JetStream has not answered for ${Math.round(silentMs / 1000)} s while the server does: no run moves until it does. Check for ${JETSTREAM_SILENT_CAUSES}`,
    );
  }
}
