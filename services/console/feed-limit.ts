/**
 * How many live feeds (SSE connections) the console holds at once: each holds a NATS watcher or
 * consumer, so a page opened in many tabs, or a client that never closes, cannot exhaust them.
 */
import { AgentError } from "../../shared/runtime/errors.js";

export class FeedLimit {
  private open = 0;

  constructor(private readonly max: number) {}

  /** Takes a place (TOO_MANY_FEEDS when none is free); the function returned gives it back, once. */
  enter(): () => void {
    if (this.open >= this.max)
      throw new AgentError(
        "TOO_MANY_FEEDS",
        `the console holds ${this.max} live feeds already (CONSOLE_MAX_FEEDS): close a console tab, or raise CONSOLE_MAX_FEEDS`,
      );
    this.open += 1;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.open -= 1;
    };
  }

  get size(): number {
    return this.open;
  }
}
