import type { Clock } from "../runtime/clock.js";
import { AgentError, isAgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { fullJitterDelay } from "../tools/backoff.js";

const RETRIES = 5;
const BACKOFF = { baseDelayMs: 50, maxDelayMs: 2_000 };

/**
 * Runs a JetStream publish until it lands: timeouts and leader elections ("no responders",
 * "jetstream not enabled") are retried with full-jitter backoff, which is safe because every
 * publish carries a message id. `classify` turns errors that must not be retried into AgentErrors.
 */
export async function publishWithRetry<T>(
  what: string,
  deps: { clock: Clock; random: Random },
  publish: () => Promise<T>,
  classify: (err: unknown) => AgentError | undefined = () => undefined,
): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await publish();
    } catch (err) {
      const fatal = isAgentError(err) ? err : classify(err);
      if (fatal) throw fatal;
      if (attempt >= RETRIES)
        throw new AgentError("BUS_UNAVAILABLE", `${what} failed after ${RETRIES + 1} attempts`, {
          cause: err,
        });
      await deps.clock.sleep(fullJitterDelay(attempt, BACKOFF, deps.random));
    }
  }
}
