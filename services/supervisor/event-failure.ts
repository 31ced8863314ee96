import type { JsMsg } from "@nats-io/jetstream";
import type { ActorBus } from "../../shared/bus/actor.js";
import { AgentError } from "../../shared/runtime/errors.js";

/**
 * What a supervisor loop reading lifecycle events does when handling one failed: an unreadable
 * event is skipped for good (TERM: it will never read better), anything else is offered again in
 * a second (`failed` says what could not be done). Never throws: when the connection closed under
 * it (a supervisor shutting down with events in flight), the event stays unacknowledged, and
 * JetStream delivers it again to a replica or a restart.
 */
export function onEventFailure(
  bus: Pick<ActorBus, "logger">,
  msg: JsMsg,
  err: unknown,
  failed: string,
): void {
  try {
    if (err instanceof AgentError && err.code === "INVALID_INPUT") {
      bus.logger.error({ err, subject: msg.subject }, "unreadable audit event skipped");
      msg.term();
      return;
    }
    bus.logger.error({ err, subject: msg.subject }, `${failed}; retrying`);
    msg.nak(1_000);
  } catch (closed) {
    bus.logger.warn({ err: closed, subject: msg.subject }, "lifecycle event left for redelivery");
  }
}
