import { servicePollDelay } from "../tools/backoff.js";
import type { ServiceWait } from "./request.js";

/**
 * The codes of a request the service could not decide: JetStream was out of its reach while it
 * read or wrote what the request is about (a server restarting, a stream's leader election), its
 * storage was full (STORAGE_FULL), or it failed on its own. No decision, so none is recorded as
 * one: not in a run's trail, not as a spawned child's failure.
 */
const UNDECIDED = new Set(["BUS_UNAVAILABLE", "INTERNAL", "STORAGE_FULL"]);

export function isUndecided(error: { code: string }): boolean {
  return UNDECIDED.has(error.code);
}

/**
 * An undecided request worth asking again within a client's wait: not one refused for a full
 * store, which stays full until an operator makes room (the client says so at once).
 */
function askAgain(error: { code: string }): boolean {
  return isUndecided(error) && error.code !== "STORAGE_FULL";
}

/** A request/reply contract's answer: done, or refused with a stable code. */
type Reply = { ok: true } | { ok: false; error: { code: string } };

/**
 * Asks a request that may be sent twice (its second copy is answered as the first was, or finds
 * the first one's work done) until it is decided, within `wait`: asked again when the connection
 * drops before its reply (see ServiceWait.repeatable) and when the service answers that it could
 * not decide (but for a full store). `resent`: a copy was sent after one that may have been carried
 * out, so a refusal may be the first copy's work seen by the second (a run halted by it, say).
 */
export async function askUntilDecided<R extends Reply>(
  wait: ServiceWait,
  ask: (wait: ServiceWait) => Promise<R>,
): Promise<{ reply: R; resent: boolean }> {
  let resent = false;
  const onResend = (): void => {
    resent = true;
    wait.onResend?.();
  };
  const until = wait.clock.now() + wait.waitMs;
  for (let asked = 0; ; asked++) {
    const waitMs = Math.max(0, until - wait.clock.now());
    const reply = await ask({ ...wait, waitMs, repeatable: true, onResend });
    const left = until - wait.clock.now();
    if (reply.ok || !askAgain(reply.error) || left <= 0) return { reply, resent };
    resent = true;
    if (asked === 0) wait.onWait?.();
    await wait.clock.sleep(Math.min(left, servicePollDelay(asked, wait.random)));
  }
}
