import { InvalidArgumentError } from "@nats-io/transport-node";
import type { Clock } from "../runtime/clock.js";
import { AgentError, isAgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { fullJitterDelay } from "../tools/backoff.js";
import { storageFull } from "./storage-full.js";

/** Long enough to ride out a stream leader election after a server is lost (a few seconds). */
export const BUDGET_MS = 15_000;
export const BACKOFF = { baseDelayMs: 100, maxDelayMs: 2_000 };

/**
 * Runs a JetStream operation until it succeeds: timeouts and leader elections ("no responders",
 * "jetstream not enabled") are retried with full-jitter backoff for up to 15 s. Safe for publishes
 * because every publish carries a message id, and for reads because they change nothing.
 * `classify` turns errors that must not be retried into AgentErrors; `budgetMs` lets a write that
 * is worth more than 15 s of waiting (an outcome only its writer knows) keep trying longer.
 *
 * A write refused for a full store fails at once with STORAGE_FULL, whatever its budget: nothing
 * was written (there is no lost ack to find again), room comes back when an operator makes it, not
 * within an outage's seconds, and the caller knows better how to wait (a worker hands its run back,
 * a submit is answered, a tool service writes a call's outcome once there is room).
 */
export async function withBusRetry<T>(
  what: string,
  deps: { clock: Clock; random: Random },
  publish: () => Promise<T>,
  classify: (err: unknown) => AgentError | undefined = () => undefined,
  budgetMs = BUDGET_MS,
): Promise<T> {
  const giveUpAt = deps.clock.now() + budgetMs;
  for (let attempt = 0; ; attempt++) {
    try {
      return await publish();
    } catch (err) {
      const fatal = isAgentError(err) ? err : (tooLarge(what, err) ?? classify(err));
      if (fatal) throw fatal;
      const full = storageFull(what, err);
      if (full) throw full;
      if (deps.clock.now() >= giveUpAt)
        throw new AgentError("BUS_UNAVAILABLE", `${what} failed after ${attempt + 1} attempts`, {
          cause: err,
        });
      await deps.clock.sleep(fullJitterDelay(attempt, BACKOFF, deps.random));
    }
  }
}

/** The client refuses a message over the server's max_payload before sending it. */
function tooLarge(what: string, err: unknown): AgentError | undefined {
  if (!(err instanceof InvalidArgumentError) || !err.message.includes("max_payload")) return undefined;
  return new AgentError("PAYLOAD_TOO_LARGE", `${what}: ${err.message}`, { cause: err });
}
