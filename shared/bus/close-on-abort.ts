/**
 * Closes a consumer's messages when `signal` aborts, and at once when it already has: a listener
 * added after the abort would never hear it, and the loop reading the messages would wait for
 * ever (a stop that came while the consumer was being made). The close is not awaited: closed
 * before its first pull, an ordered consumer's never settles (@nats-io/jetstream 3.4.0).
 */
export function closeOnAbort(messages: { close(): Promise<unknown> }, signal: AbortSignal | undefined): void {
  const close = (): void => void messages.close().catch(() => undefined);
  if (signal?.aborted) close();
  else signal?.addEventListener("abort", close, { once: true });
}
