import { JetStreamApiError } from "@nats-io/jetstream";
import { errors } from "@nats-io/transport-node";
import type { Clock } from "../runtime/clock.js";
import { AgentError } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";

/** JetStream's own answer while it has no leader: "JetStream system temporarily unavailable". */
const TEMPORARILY_UNAVAILABLE = 10008;

/**
 * Whether `err` (or an error it caused, a few causes deep) says the NATS server answers but its
 * JetStream does not: a request to its API timed out, or JetStream said it is temporarily
 * unavailable. Seen on a JetStream cluster that lost the quorum of its servers.
 */
export function isJetStreamSilent(err: unknown, depth = 0): boolean {
  if (err instanceof errors.TimeoutError) return true;
  if (err instanceof JetStreamApiError) return err.code === TEMPORARILY_UNAVAILABLE;
  if (!(err instanceof Error) || depth >= 3) return false;
  return isJetStreamSilent(err.cause, depth + 1);
}

/** What to check when JetStream does not answer, said once for every place that meets it. */
export const JETSTREAM_SILENT_CAUSES =
  "a JetStream cluster without a quorum of its servers (start the ones that are down), or a server whose JetStream stopped (its log says why: a full disk, say)";

/**
 * `what` failed because the server at `server` answers and its JetStream does not, as
 * BUS_UNAVAILABLE saying what to check; undefined for any other error (and for an AgentError,
 * which says its own code already).
 */
export function jetStreamSilent(what: string, err: unknown, server: string): AgentError | undefined {
  if (err instanceof AgentError || !isJetStreamSilent(err)) return undefined;
  return new AgentError(
    "BUS_UNAVAILABLE",
    `${what}: the NATS server at ${server} answers, its JetStream does not (${errorText(err)}): ${JETSTREAM_SILENT_CAUSES}`,
    { cause: err },
  );
}

/** How long an actor's setup waits for a JetStream that does not answer (NATS_CONNECT_WAIT_MS's default). */
export const SETUP_WAIT_MS = 60_000;
/** How often a wait for JetStream says it still waits. */
const SAY_EVERY_MS = 10_000;

export interface JetStreamWait {
  /** How long to wait (SETUP_WAIT_MS unless given). */
  waitMs?: number;
  /** Told, instead of a warning, when the wait starts and every 10 s of it (agentctl's stderr). */
  onWait?: (error: Error) => void;
}

/**
 * Runs `setup` (provisioning, a consumer's or a watch's setup: JetStream requests, each safe to ask
 * again) until it succeeds while JetStream does not answer, every second for up to `waitMs`,
 * saying so when the wait starts and every 10 s; then throws BUS_UNAVAILABLE saying what to check.
 * Any other error is thrown at once. Right after a JetStream cluster gets its quorum back its
 * streams elect their leaders: a supervisor whose release loop's setup timed out then stopped
 * ("pool release loop stopped"), five seconds after it had started.
 */
export async function whenJetStreamAnswers<T>(
  what: string,
  deps: { clock: Clock; logger: Logger; nc: { getServer(): string } },
  setup: () => Promise<T>,
  wait: JetStreamWait = {},
): Promise<T> {
  const waitMs = wait.waitMs ?? SETUP_WAIT_MS;
  // From the first silence, not the first request: that one may have spent its whole timeout.
  let since: number | undefined;
  let saidAt = Number.NEGATIVE_INFINITY;
  for (;;) {
    try {
      return await setup();
    } catch (err) {
      if (!isJetStreamSilent(err) || err instanceof AgentError) throw err;
      const now = deps.clock.now();
      since ??= now;
      const silent = jetStreamSilent(`${what} (waited ${now - since} ms)`, err, deps.nc.getServer());
      if (now - since >= waitMs) throw silent ?? err;
      if (now - saidAt >= SAY_EVERY_MS) {
        saidAt = now;
        if (wait.onWait) wait.onWait(silent ?? (err as Error));
        else
          deps.logger.warn(
            { reason: errorText(err), waitMs },
            `${what}: the NATS server answers, its JetStream does not yet: waiting for it`,
          );
      }
      await deps.clock.sleep(1_000);
    }
  }
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));
