import { systemClock } from "../../shared/runtime/clock.js";

/**
 * Polls `check` every `everyMs` until it holds; throws, naming `what`, after `withinMs`. Tests wait
 * for progress this way rather than for a fixed time, which a loaded machine outlasts. A `what`
 * given as a function is read at the failure: it can say what the last check saw.
 */
export async function until(
  check: () => boolean | Promise<boolean>,
  withinMs: number,
  { what = "the condition", everyMs = 25 }: { what?: string | (() => string); everyMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + withinMs;
  while (!(await check())) {
    if (Date.now() > deadline)
      throw new Error(`${typeof what === "function" ? what() : what}: not within ${withinMs} ms`);
    await systemClock.sleep(everyMs);
  }
}
