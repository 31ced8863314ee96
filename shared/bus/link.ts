import { PermissionViolationError, type NatsConnection, type Status } from "@nats-io/transport-node";

/** One connection's up/down state, watched once however many parts of an actor ask. */
export interface Link {
  /** False while the connection is down (reconnecting) or closed. */
  connected(): boolean;
  /** Calls `listener` at the next disconnect; returns the function that cancels it. */
  onDisconnect(listener: () => void): () => void;
  /** Calls `listener` at the next reconnect; returns the function that cancels it. */
  onReconnect(listener: () => void): () => void;
  /** Calls `listener` for every publish the server refuses (permissions); returns the function that cancels it. */
  onPublishDenied(listener: (err: PermissionViolationError) => void): () => void;
  /** Calls `listener` for every subscription the server refuses (permissions); returns the function that cancels it. */
  onSubscribeDenied(listener: (err: PermissionViolationError) => void): () => void;
}

const links = new WeakMap<NatsConnection, Link>();

export function linkOf(nc: NatsConnection): Link {
  const known = links.get(nc);
  if (known) return known;
  let up = true;
  const waiting = new Set<() => void>();
  const returning = new Set<() => void>();
  const denied = { publish: new Set<Denied>(), subscription: new Set<Denied>() };
  void (async () => {
    for await (const status of nc.status()) {
      const refused = deniedOperation(status);
      if (refused) for (const listener of denied[refused.operation]) listener(refused);
      if (status.type === "reconnect") {
        up = true;
        notify(returning);
      } else if (status.type === "disconnect") {
        up = false;
        notify(waiting);
      }
    }
  })();
  const link: Link = {
    connected: () => up && !nc.isClosed(),
    onDisconnect: (listener) => {
      waiting.add(listener);
      return () => waiting.delete(listener);
    },
    onReconnect: (listener) => {
      returning.add(listener);
      return () => returning.delete(listener);
    },
    onPublishDenied: (listener) => {
      denied.publish.add(listener);
      return () => denied.publish.delete(listener);
    },
    onSubscribeDenied: (listener) => {
      denied.subscription.add(listener);
      return () => denied.subscription.delete(listener);
    },
  };
  links.set(nc, link);
  return link;
}

/**
 * Runs `send` (a publish: an ack, a NAK) now, or once the connection is back: the client drops
 * what is published while it reconnects (each attempt starts with an empty buffer).
 */
export function whenLinked(nc: NatsConnection, send: () => void): void {
  const link = linkOf(nc);
  if (link.connected()) send();
  else link.onReconnect(send);
}

/** Calls each one-shot listener once, emptying the set first (a listener may register again). */
function notify(listeners: Set<() => void>): void {
  const once = [...listeners];
  listeners.clear();
  for (const listener of once) listener();
}

/**
 * Whether a request failed because the server refused this NATS user the subject (the client
 * reports it as a failed request whose message names the violation, not as its own error class).
 */
export function deniedByPermissions(err: unknown): err is Error {
  return err instanceof Error && /permissions violation/i.test(err.message);
}

type Denied = (err: PermissionViolationError) => void;

/** The server's refusal (a publish or a subscription) a status reports, if it is one. */
function deniedOperation(status: Status): PermissionViolationError | undefined {
  return status.type === "error" && status.error instanceof PermissionViolationError
    ? status.error
    : undefined;
}
