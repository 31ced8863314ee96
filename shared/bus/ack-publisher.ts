import { JetStreamApiError, type ApiError, type PubAck } from "@nats-io/jetstream";
import { createInbox, headers, type Msg, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
import { linkOf } from "./link.js";

/** How long a publish waits for its ack: the JetStream client's default request timeout. */
export const PUBLISH_ACK_TIMEOUT_MS = 5_000;
/** How often publishes whose ack is overdue are failed. */
const SWEEP_MS = 250;

export interface AckedPublishOptions {
  /** JetStream's deduplication id (`Nats-Msg-Id`). */
  msgID?: string;
  /** The fencing token: the stream sequence the subject's last message must have. */
  expectLastSubjectSequence?: number;
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

interface Waiter {
  subject: string;
  resolve: (ack: PubAck) => void;
  reject: (err: Error) => void;
  deadline: number;
}

const publishers = new WeakMap<NatsConnection, AckPublisher>();

/**
 * JetStream publishes with an ack, for the records every step writes (WAL appends, audit events).
 * The same wire exchange as the client's `js.publish` (a message with a reply subject, answered by
 * the stream with a PubAck or an API error), but all acks of a connection arrive on one
 * subscription and overdue ones are failed by one sweep. `js.publish` goes through a request per
 * message (its own timer, mux entry, and an error object with a stack trace made even on success):
 * 1.5× the client CPU per publish one at a time, 2.5× with 64 in flight
 * (`node bench/micro/publish-ack.ts`).
 */
export class AckPublisher {
  private readonly inbox = createInbox();
  private readonly waiting = new Map<string, Waiter>();
  private readonly sweeper: ReturnType<typeof setInterval>;
  private sent = 0;

  private constructor(
    private readonly nc: NatsConnection,
    private readonly timeoutMs: number,
  ) {
    // Lives as long as the connection (and is resubscribed by it after a reconnect).
    nc.subscribe(`${this.inbox}.*`, { callback: (_err, msg) => this.settle(msg) });
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
    this.watch();
  }

  /** The connection's publisher, made on first use (with that call's `timeoutMs`). */
  static of(nc: NatsConnection, timeoutMs = PUBLISH_ACK_TIMEOUT_MS): AckPublisher {
    let publisher = publishers.get(nc);
    if (!publisher) publishers.set(nc, (publisher = new AckPublisher(nc, timeoutMs)));
    return publisher;
  }

  /**
   * Publishes and resolves with the stream's ack. Rejects with JetStreamApiError when the stream
   * refuses the message (a wrong expected sequence: error code 10071), with PublishAckError when
   * no ack comes, and with the client's own error when the message cannot be sent at all (over
   * `max_payload`, connection closed).
   */
  publish(subject: string, data: Uint8Array, options: AckedPublishOptions = {}): Promise<PubAck> {
    const { msgID, expectLastSubjectSequence } = options;
    let h = options.headers;
    if (msgID !== undefined || expectLastSubjectSequence !== undefined) {
      h ??= headers();
      if (msgID !== undefined) h.set("Nats-Msg-Id", msgID);
      if (expectLastSubjectSequence !== undefined)
        h.set("Nats-Expected-Last-Subject-Sequence", String(expectLastSubjectSequence));
    }
    this.sent += 1;
    const token = this.sent.toString(36);
    return new Promise<PubAck>((resolve, reject) => {
      this.waiting.set(token, { subject, resolve, reject, deadline: performance.now() + this.timeoutMs });
      try {
        this.nc.publish(subject, data, { reply: `${this.inbox}.${token}`, ...(h ? { headers: h } : {}) });
      } catch (err) {
        this.waiting.delete(token);
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  private settle(msg: Msg): void {
    const token = msg.subject.slice(this.inbox.length + 1);
    const waiter = this.waiting.get(token);
    if (!waiter) return;
    this.waiting.delete(token);
    if (msg.headers?.code === 503) {
      waiter.reject(new PublishAckError("no stream answered the publish (no responders)", "no-responders"));
      return;
    }
    let ack: { error?: ApiError } & Partial<PubAck>;
    try {
      ack = msg.json();
    } catch {
      waiter.reject(new PublishAckError("the publish's ack is not JSON", "unreadable"));
      return;
    }
    if (ack.error) waiter.reject(new JetStreamApiError(ack.error));
    else if (typeof ack.stream !== "string" || typeof ack.seq !== "number")
      waiter.reject(new PublishAckError("the publish's ack names no stream sequence", "unreadable"));
    else waiter.resolve({ ...ack, stream: ack.stream, seq: ack.seq, duplicate: ack.duplicate ?? false });
  }

  /** Waiters are kept in the order they were sent, so the overdue ones come first. */
  private sweep(): void {
    const now = performance.now();
    for (const [token, waiter] of this.waiting) {
      if (waiter.deadline > now) return;
      this.waiting.delete(token);
      waiter.reject(new PublishAckError(`no ack within ${this.timeoutMs} ms`, "timeout"));
    }
  }

  /**
   * A reply in flight when the connection drops may never come: those publishes fail at once and
   * are retried on the new connection, as the client's requests are. A publish the server refuses
   * (permissions) gets no reply either: it fails with the server's error, as a request does.
   */
  private watch(): void {
    const link = linkOf(this.nc);
    const dropped = (): void => {
      this.fail(
        () => true,
        new PublishAckError("the connection was lost before the ack came", "disconnected"),
      );
      link.onDisconnect(dropped);
    };
    link.onDisconnect(dropped);
    link.onPublishDenied((err) => this.fail((waiter) => waiter.subject === err.subject, err));
    void this.nc.closed().then(() => clearInterval(this.sweeper));
  }

  private fail(which: (waiter: Waiter) => boolean, err: Error): void {
    for (const [token, waiter] of this.waiting) {
      if (!which(waiter)) continue;
      this.waiting.delete(token);
      waiter.reject(err);
    }
  }
}
