import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import type { LoopState } from "../../shared/loop/state.js";
import type { Logger } from "../../shared/runtime/logger.js";
import type { RunJournal } from "./journal.js";
import type { LeaseDeps } from "./lease-deps.js";
import { giveUpAt, modelFailure, outageWait } from "./model-outage.js";

/**
 * A model turn or a review the provider failed for an outage (see modelFailure) hands the run
 * back, to be asked again after a delay, instead of failing the run (or sending its answer to
 * repair): the step that asked it is recorded first (unless the lease took the run over to ask it
 * again), so a later lease counts the wait from it. Any other event is returned as it is.
 */
export async function handBackOnOutage(
  event: LoopEvent | undefined,
  turn: { state: LoopState; since: number; takeover: boolean },
  lease: {
    deps: Pick<LeaseDeps, "bus" | "modelOutageMs" | "retryDelay">;
    journal: RunJournal;
    log: () => Logger;
  },
): Promise<LoopEvent | undefined> {
  if (event?.type !== "modelFailed" && event?.type !== "criticFailed") return event;
  const { state, since, takeover } = turn;
  const { deps, journal } = lease;
  const now = deps.bus.clock.now();
  const verdict = modelFailure(event, state, since, deps.modelOutageMs, now);
  if ("fail" in verdict) return verdict.fail;
  if (!takeover) await journal.settle();
  // A status that could not be written costs only the takeovers it would spare (see outageWait).
  const stops = giveUpAt(since, deps.modelOutageMs, state);
  const wait = outageWait(event, verdict, since, stops, now + deps.retryDelay(verdict.handBack));
  await journal
    .putStatus(state, wait)
    .catch((err: unknown) => lease.log().warn({ err }, "the run's wait could not be written to its status"));
  throw verdict.handBack;
}
