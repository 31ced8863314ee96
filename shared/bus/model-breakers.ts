import type { KV, KvEntry } from "@nats-io/kv";
import { decode, encode } from "./codec.js";
import { ModelBreaker } from "../contracts/model-breaker.js";
import type { Clock } from "../runtime/clock.js";
import type { ModelDriver } from "../models/driver.js";
import { toAgentError, type ErrorBody } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";
import type { ActorMetrics } from "../runtime/metrics.js";
import {
  admission,
  opened,
  probing,
  refusal,
  reopened,
  withOpenBreaker,
  type Admission,
  type BreakerSettings,
} from "../models/breaker-policy.js";
import { isModelOutage } from "../models/outage.js";

export interface ModelBreakersDeps {
  clock: Clock;
  logger: Logger;
  workerId: string;
  metrics?: ActorMetrics;
}

/** A bucket key's last value as this worker knows it: the breaker (none: closed) and its revision. */
interface Known {
  breaker: ModelBreaker | undefined;
  revision: number;
}

const CALL: Admission = { go: "call" };

/** A bucket key for any provider string: KV keys allow letters, digits and `-_=./` only. */
export function breakerKey(provider: string): string {
  return Buffer.from(provider, "utf8").toString("base64url");
}

/**
 * The model providers' breakers the workers share (the `<prefix>-model-breakers` bucket): a
 * provider whose calls through one worker failed as outages `failures` times in a row is not called
 * by any worker for a cooldown; then one call, whichever worker's claim lands first, tries it, and
 * its outcome closes the breaker or opens it for twice as long. Without it every run waiting out an
 * outage asks the provider on its own schedule: a thousand runs keep a rate-limited provider
 * limited, and spend their workers' time on the driver's retries.
 *
 * Each worker watches the bucket, so deciding whether a call may go reads nothing; it writes only
 * when a breaker changes. A breaker it cannot read or write lets the call go: the breaker saves
 * calls, and must never be what stops a run.
 */
export class ModelBreakers {
  private readonly known = new Map<string, Known>();
  /** Outages in a row among each provider's calls through this worker. */
  private readonly outages = new Map<string, number>();
  private stopWatch: (() => void) | undefined;

  constructor(
    private readonly kv: KV,
    private readonly settings: BreakerSettings,
    private readonly deps: ModelBreakersDeps,
  ) {}

  get enabled(): boolean {
    return this.settings.failures > 0;
  }

  async start(): Promise<void> {
    if (!this.enabled) return;
    const watcher = await this.kv.watch();
    this.stopWatch = () => watcher.stop();
    void (async () => {
      for await (const entry of watcher) this.observe(entry);
    })();
  }

  stop(): void {
    this.stopWatch?.();
  }

  /**
   * `driver` with its provider's breaker in front: a call the breaker refuses fails at once with
   * MODEL_UNAVAILABLE (the run waits the outage out as it would a failed call), and every call's
   * outcome is counted. A driver with no provider (the scripted model) is returned as it is.
   */
  guard(driver: ModelDriver): ModelDriver {
    const { provider } = driver;
    if (!provider || !this.enabled) return driver;
    const complete: ModelDriver["complete"] = async (request, signal) => {
      const admitted = await this.admit(provider);
      if (admitted.go === "refuse") throw refusal(admitted.breaker, this.deps.clock.now());
      const call = { probe: admitted.go === "probe", sentAt: this.deps.clock.now() };
      try {
        const response = await driver.complete(request, signal);
        await this.settle(provider, undefined, call);
        return response;
      } catch (err) {
        // A call this worker gave up on (it is stopping) says nothing about the provider.
        if (signal?.aborted) throw err;
        await this.settle(provider, toAgentError(err).toBody(), call);
        throw withOpenBreaker(err, this.breakerOf(provider), this.deps.clock.now());
      }
    };
    return { id: driver.id, locality: driver.locality, provider, complete };
  }

  /** The breaker of `provider` as this worker last saw it (undefined: closed). */
  breakerOf(provider: string): ModelBreaker | undefined {
    return this.known.get(breakerKey(provider))?.breaker;
  }

  /** Whether a call to `provider` may go now, and whether it is the one that tries an open breaker. */
  async admit(provider: string): Promise<Admission> {
    if (!this.enabled) return CALL;
    const key = breakerKey(provider);
    const known = this.known.get(key);
    const now = this.deps.clock.now();
    const verdict = admission(known?.breaker, now);
    if (verdict.go === "refuse") this.deps.metrics?.modelCallsRefused.inc({ provider });
    if (verdict.go !== "probe" || !known?.breaker) return verdict;
    const written = await this.write(key, probing(known.breaker, now, this.deps.workerId), known.revision);
    if (written === "written") {
      this.deps.logger.info(
        { provider, openForMs: now - known.breaker.openedAt },
        "model provider's breaker: one call tries the provider again",
      );
      return verdict;
    }
    // Another worker's claim landed first: its call tries the provider; this one waits.
    const fresh = this.known.get(key)?.breaker;
    if (written === "failed" || !fresh) return CALL;
    const again = admission(fresh, now);
    if (again.go === "call") return again;
    this.deps.metrics?.modelCallsRefused.inc({ provider });
    return { go: "refuse", breaker: fresh };
  }

  /**
   * Counts a call's outcome. A provider that answered (a response, or an error that is not an
   * outage) closes its breaker when the call was the probe, or was sent after the breaker opened; an
   * outage opens it at the `failures`-th in a row, or opens it again when the call was the probe.
   */
  async settle(
    provider: string,
    error: ErrorBody | undefined,
    call: { probe: boolean; sentAt: number },
  ): Promise<void> {
    if (!this.enabled) return;
    const key = breakerKey(provider);
    const known = this.known.get(key);
    const breaker = known?.breaker;
    if (!error || !isModelOutage(error.code)) {
      this.outages.delete(provider);
      if (known && breaker && (call.probe || call.sentAt >= breaker.openedAt)) await this.close(key, known);
      return;
    }
    const now = this.deps.clock.now();
    const by = this.deps.workerId;
    if (call.probe && known && breaker) {
      const next = reopened(breaker, error, this.settings, now, by);
      if ((await this.write(key, next, known.revision)) === "written") this.opened(next, "its probe failed");
      return;
    }
    const count = (this.outages.get(provider) ?? 0) + 1;
    if (breaker || count < this.settings.failures) {
      this.outages.set(provider, count);
      return;
    }
    this.outages.delete(provider);
    const next = opened(provider, error, this.settings, now, by);
    if ((await this.write(key, next, "absent")) === "written") {
      this.opened(next, `${count} outages in a row`);
    }
  }

  private opened(breaker: ModelBreaker, why: string): void {
    this.deps.metrics?.modelBreakersOpened.inc({ provider: breaker.provider });
    this.deps.logger.warn(
      { provider: breaker.provider, cooldownMs: breaker.cooldownMs, reason: breaker.reason },
      `model provider's breaker opened (${why}): no worker calls it for ${breaker.cooldownMs} ms`,
    );
  }

  private async close(key: string, known: Known): Promise<void> {
    try {
      await this.kv.delete(key, { previousSeq: known.revision });
      // The marker's revision comes with the watch.
      this.remember(key, undefined, known.revision);
      this.deps.logger.info(
        { provider: known.breaker?.provider },
        "model provider's breaker closed: the provider answered",
      );
    } catch {
      // Changed since (closed, or opened again by a failed probe): what the bucket says stands.
      await this.refresh(key);
    }
  }

  /**
   * Writes a breaker if the key is still at `revision`, or holds no breaker (`absent`: never
   * written, or deleted). `lost`: another worker wrote first (the key is read again); `failed`: the
   * bucket could not be reached.
   */
  private async write(
    key: string,
    breaker: ModelBreaker,
    revision: number | "absent",
  ): Promise<"written" | "lost" | "failed"> {
    const data = encode(ModelBreaker, breaker);
    try {
      const written =
        revision === "absent" ? await this.kv.create(key, data) : await this.kv.update(key, data, revision);
      this.remember(key, breaker, written);
      return "written";
    } catch {
      return (await this.refresh(key)) ? "lost" : "failed";
    }
  }

  private async refresh(key: string): Promise<boolean> {
    try {
      const entry = await this.kv.get(key);
      if (entry) this.observe(entry);
      return true;
    } catch (err) {
      this.deps.logger.warn({ err }, "model breakers' bucket unreadable: calls go ahead");
      return false;
    }
  }

  private observe(entry: KvEntry): void {
    if (entry.operation !== "PUT") {
      this.remember(entry.key, undefined, entry.revision);
      return;
    }
    try {
      this.remember(entry.key, decode(ModelBreaker, entry.value), entry.revision);
    } catch (err) {
      this.deps.logger.error({ err, key: entry.key }, "unreadable model breaker ignored");
    }
  }

  /**
   * Keeps the newest of what was written and what the watch delivers, whichever comes first. A
   * breaker seen closed starts this worker's count afresh: the outages it counted while the breaker
   * was open (calls sent before it opened) came before the answer that closed it, so are not in a row.
   */
  private remember(key: string, breaker: ModelBreaker | undefined, revision: number): void {
    const known = this.known.get(key);
    if (known && known.revision > revision) return;
    if (known?.breaker && !breaker) this.outages.delete(known.breaker.provider);
    this.known.set(key, { breaker, revision });
  }
}
