import { JetStreamApiError } from "@nats-io/jetstream";
import type { ActorBus } from "./actor.js";
import { deniedByPermissions } from "./link.js";
import { withBusRetry } from "./retry.js";

/**
 * JetStream's answers to a delete of a message that is gone: "sequence not found" when the stream
 * no longer reaches back to it, and a failed delete saying "no message found" when it does.
 */
const SEQUENCE_NOT_FOUND = 10043;
const MESSAGE_DELETE_FAILED = 10057;

/** What removing one message did: a message already gone counts as removed. */
export type Removal = "removed" | "denied";

/**
 * Removes one message of a stream by its sequence, leaving no marker behind (a bucket's key is
 * then as if never written). A delete retried after its reply was lost finds the message gone:
 * settled as removed. One refused to this NATS user (a permissions.conf older than the
 * supervisor) is `denied`, for the caller to say; anything else is retried, then thrown.
 */
export function removeMessage(
  bus: Pick<ActorBus, "jsm" | "clock" | "random" | "logger">,
  stream: string,
  seq: number,
  what: string,
): Promise<Removal> {
  return withBusRetry(`removing ${what}`, bus, () =>
    bus.jsm.streams.deleteMessage(stream, seq, false).then((): Removal => "removed", failedRemoval),
  );
}

function failedRemoval(err: unknown): Removal {
  if (deniedByPermissions(err)) return "denied";
  const gone =
    err instanceof JetStreamApiError &&
    (err.code === SEQUENCE_NOT_FOUND ||
      (err.code === MESSAGE_DELETE_FAILED && /no message found/i.test(err.message)));
  if (gone) return "removed";
  throw err;
}
