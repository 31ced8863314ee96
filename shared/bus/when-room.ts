import type { Clock } from "../runtime/clock.js";
import { toAgentError } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";
import type { Random } from "../runtime/random.js";
import { fullJitterDelay } from "../tools/backoff.js";

/**
 * How long a write put off for a full store is tried again before it is given up (and, for a tool
 * call's record, the call is left to a human, as after a crash).
 */
export const ROOM_WAIT_MS = 60 * 60_000;
const ROOM_BACKOFF = { baseDelayMs: 250, maxDelayMs: 5_000 };

/**
 * Runs `write`. When a full store refuses it (STORAGE_FULL), returns "later" and keeps trying it in
 * the background, every few seconds, until it goes through or ROOM_WAIT_MS have passed: for a
 * write only this process can make, after the fact it records has happened (a tool call that ran),
 * which nobody could make once this process let it go. Any other failure is thrown as it came.
 */
export async function nowOrWhenRoom<T>(
  deps: { clock: Clock; random: Random },
  log: () => Logger,
  what: string,
  write: () => Promise<T>,
): Promise<T | "later"> {
  try {
    return await write();
  } catch (err) {
    if (toAgentError(err).code !== "STORAGE_FULL") throw err;
    log().warn({ code: "STORAGE_FULL" }, `${what}: the store is full; trying again until there is room`);
    void keepTrying(deps, log, what, write);
    return "later";
  }
}

async function keepTrying(
  deps: { clock: Clock; random: Random },
  log: () => Logger,
  what: string,
  write: () => Promise<unknown>,
): Promise<void> {
  const giveUpAt = deps.clock.now() + ROOM_WAIT_MS;
  for (let attempt = 0; deps.clock.now() < giveUpAt; attempt++) {
    await deps.clock.sleep(Math.max(1, fullJitterDelay(Math.min(attempt, 10), ROOM_BACKOFF, deps.random)));
    try {
      await write();
      log().info(`${what}: written, now that there is room`);
      return;
    } catch (err) {
      if (toAgentError(err).code !== "STORAGE_FULL") {
        log().error({ err }, `${what}: failed`);
        return;
      }
    }
  }
  log().error(`${what}: the store had no room for ${ROOM_WAIT_MS} ms; given up`);
}
