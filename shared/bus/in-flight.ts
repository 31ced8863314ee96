import type { Subscription } from "@nats-io/transport-node";

/**
 * The requests a service has taken and not yet answered: what its graceful stop waits for. An
 * actor that drained its connection with a handler still at work had that handler's own requests
 * refused ("connection draining"): a lease answered with the error, a tool call's outcome never
 * recorded (a non-idempotent tool's run then waits out the tool's timeout and halts for a human).
 */
export class InFlight {
  private readonly running = new Set<Promise<unknown>>();

  /** Counts `work` in until it settles; returns it. */
  track<T>(work: Promise<T>): Promise<T> {
    this.running.add(work);
    const done = (): void => {
      this.running.delete(work);
    };
    work.then(done, done);
    return work;
  }

  /** Settles once nothing tracked is running, work tracked meanwhile included. */
  async settled(): Promise<void> {
    while (this.running.size > 0) await Promise.allSettled([...this.running]);
  }
}

/**
 * Stops endpoints before their connection drains: the server gives them no more requests (a queue
 * group's other members, or a requester's wait for a service, get them), then every request taken
 * is finished and answered while the connection still carries the handlers' own requests.
 */
export async function stopServing(subs: readonly Subscription[], inFlight: InFlight): Promise<void> {
  // Already closed or draining: nothing more arrives either way.
  await Promise.all(subs.map((sub) => sub.drain().catch(() => undefined)));
  await inFlight.settled();
}
