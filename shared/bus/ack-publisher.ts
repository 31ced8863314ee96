import { JetStreamApiError, type ApiError, type PubAck } from "@nats-io/jetstream";
import { headers, type Msg, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
import { ReplyError, ReplyInbox } from "./reply-inbox.js";

/** The header JetStream keeps a message's deduplication id in. */
export const MSG_ID_HEADER = "Nats-Msg-Id";

/** How long a publish waits for its ack: the JetStream client's default request timeout. */
export const PUBLISH_ACK_TIMEOUT_MS = 5_000;

export interface AckedPublishOptions {
  /** JetStream's deduplication id (`Nats-Msg-Id`). */
  msgID?: string;
  /** The fencing token: the stream sequence the subject's last message must have. */
  expectLastSubjectSequence?: number;
  /** The subject (wildcards allowed) whose last message the fence names; the published one when absent. */
  expectLastSubjectSequenceSubject?: string;
  headers?: MsgHdrs;
}

/**
 * An ack that did not come (timeout, connection lost) or came as the server's "no responders"
 * (no stream took the message: JetStream is down or electing a leader). Transient: the
 * publish is retried, safely, since every publish carries a message id.
 */
export class PublishAckError extends Error {
  constructor(
    message: string,
    readonly reason: "timeout" | "disconnected" | "no-responders" | "unreadable",
  ) {
    super(message);
    this.name = "PublishAckError";
  }
}

/** A stream's ack; `val` is a counter's new total, as a decimal string (a `Nats-Incr` publish). */
export type Ack = PubAck & { val?: string };

const publishers = new WeakMap<NatsConnection, AckPublisher>();

/**
 * JetStream publishes with an ack, for the records every step writes (WAL appends, audit events).
 * The same wire exchange as the client's `js.publish` (a message with a reply subject, answered by
 * the stream with a PubAck or an API error), through the connection's ReplyInbox: `js.publish`
 * goes through the client's request per message, 1.3× the client CPU per publish one at a time,
 * 2.5× with 64 in flight (`node bench/micro/publish-ack.ts`).
 */
export class AckPublisher {
  private constructor(
    private readonly replies: ReplyInbox,
    private readonly timeoutMs: number,
  ) {}

  /** The connection's publisher, made on first use (with that call's `timeoutMs`). */
  static of(nc: NatsConnection, timeoutMs = PUBLISH_ACK_TIMEOUT_MS): AckPublisher {
    let publisher = publishers.get(nc);
    if (!publisher) publishers.set(nc, (publisher = new AckPublisher(ReplyInbox.of(nc), timeoutMs)));
    return publisher;
  }

  /**
   * Publishes and resolves with the stream's ack. Rejects with JetStreamApiError when the stream
   * refuses the message (a wrong expected sequence: error code 10071), with PublishAckError when
   * no ack comes, and with the client's own error when the message cannot be sent at all (over
   * `max_payload`, connection closed).
   */
  async publish(subject: string, data: Uint8Array, options: AckedPublishOptions = {}): Promise<Ack> {
    const { msgID, expectLastSubjectSequence, expectLastSubjectSequenceSubject } = options;
    let h = options.headers;
    if (msgID !== undefined || expectLastSubjectSequence !== undefined) {
      h ??= headers();
      if (msgID !== undefined) h.set(MSG_ID_HEADER, msgID);
      if (expectLastSubjectSequence !== undefined)
        h.set("Nats-Expected-Last-Subject-Sequence", String(expectLastSubjectSequence));
      if (expectLastSubjectSequenceSubject !== undefined)
        h.set("Nats-Expected-Last-Subject-Sequence-Subject", expectLastSubjectSequenceSubject);
    }
    let msg: Msg;
    try {
      msg = await this.replies.request(subject, data, {
        timeoutMs: this.timeoutMs,
        ...(h ? { headers: h } : {}),
      });
    } catch (err) {
      if (!(err instanceof ReplyError)) throw err;
      const message = {
        timeout: `no ack within ${this.timeoutMs} ms`,
        disconnected: "the connection was lost before the ack came",
        "no-responders": "no stream answered the publish (no responders)",
      }[err.reason];
      throw new PublishAckError(message, err.reason);
    }
    return parseAck(msg);
  }
}

function parseAck(msg: Msg): Ack {
  let ack: { error?: ApiError } & Partial<Ack>;
  try {
    ack = msg.json();
  } catch {
    throw new PublishAckError("the publish's ack is not JSON", "unreadable");
  }
  if (ack.error) throw new JetStreamApiError(ack.error);
  if (typeof ack.stream !== "string" || typeof ack.seq !== "number")
    throw new PublishAckError("the publish's ack names no stream sequence", "unreadable");
  return { ...ack, stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate ?? false };
}
