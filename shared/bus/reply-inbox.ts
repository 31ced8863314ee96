import { createInbox, type Msg, type MsgHdrs, type NatsConnection } from "@nats-io/transport-node";
import { linkOf, whenLinked, type Link } from "./link.js";

/**
 * How often requests whose reply is overdue are failed: a timeout fires up to this late. Requests
 * here wait hundreds of milliseconds or more (tool calls, acks), and one timer for all of
 * them is what spares the client's timer per request.
 */
const SWEEP_MS = 50;

/**
 * A reply that did not come (timeout, connection lost) or came as the server's "no responders"
 * (nobody subscribed: a service not running, no stream on the subject). `disconnected` means the
 * outcome is unknown: the request may have been acted on.
 */
export class ReplyError extends Error {
  constructor(
    message: string,
    readonly reason: "timeout" | "disconnected" | "no-responders",
  ) {
    super(message);
    this.name = "ReplyError";
  }
}

interface Waiter {
  subject: string;
  resolve: (msg: Msg) => void;
  reject: (err: Error) => void;
  deadline: number;
  /** Not sent yet: made while the link was down, it waits for the link to come back. */
  held?: boolean;
}

const inboxes = new WeakMap<NatsConnection, ReplyInbox>();

/**
 * Request/reply for everything an actor asks on every step (tool calls, JetStream acks).
 * The same wire exchange as the client's `nc.request` (a message with a reply subject), but every
 * reply of a connection arrives on one subscription and overdue requests are failed by one sweep:
 * the client's request makes its own timer and mux entry, and an error object with a stack trace
 * even on success: 1.3× the client CPU per request one at a time, 4× with 64 in flight
 * (`node bench/micro/publish-ack.ts`).
 */
export class ReplyInbox {
  private readonly inbox = createInbox();
  private readonly waiting = new Map<string, Waiter>();
  private readonly sweeper: ReturnType<typeof setInterval>;
  private readonly link: Link;
  private sent = 0;

  private constructor(private readonly nc: NatsConnection) {
    this.link = linkOf(nc);
    // Lives as long as the connection (and is resubscribed by it after a reconnect).
    nc.subscribe(`${this.inbox}.*`, { callback: (_err, msg) => this.settle(msg) });
    this.sweeper = setInterval(() => this.sweep(), SWEEP_MS);
    this.sweeper.unref();
    this.watch();
  }

  /** The connection's inbox, made on first use. */
  static of(nc: NatsConnection): ReplyInbox {
    let inbox = inboxes.get(nc);
    if (!inbox) inboxes.set(nc, (inbox = new ReplyInbox(nc)));
    return inbox;
  }

  /**
   * Sends `data` to `subject` and resolves with the reply; while the connection is down, sends it
   * once it is back. Rejects with ReplyError when no reply comes in `timeoutMs`, the connection
   * drops after it was sent, or nobody listens on the subject; with the
   * server's error when it refuses the publish (permissions); with the client's own error when
   * the message cannot be sent at all (over `max_payload`, connection closed).
   */
  request(
    subject: string,
    data: Uint8Array,
    options: { timeoutMs: number; headers?: MsgHdrs },
  ): Promise<Msg> {
    this.sent += 1;
    const token = this.sent.toString(36);
    return new Promise<Msg>((resolve, reject) => {
      const deadline = performance.now() + options.timeoutMs;
      const waiter: Waiter = { subject, resolve, reject, deadline };
      this.waiting.set(token, waiter);
      // The client drops what is published while it reconnects (each attempt starts with an empty
      // buffer), so such a request would only ever time out: it waits for the link instead, within
      // its own deadline. Nothing was sent, so it is not an unknown outcome.
      if (this.link.connected()) {
        this.publish(token, waiter, data, options.headers);
        return;
      }
      waiter.held = true;
      whenLinked(this.nc, () => {
        // Only a request still waiting goes out: one past its deadline was failed by the sweep.
        if (this.waiting.get(token) !== waiter) return;
        waiter.held = false;
        this.publish(token, waiter, data, options.headers);
      });
    });
  }

  private publish(token: string, waiter: Waiter, data: Uint8Array, headers: MsgHdrs | undefined): void {
    try {
      const reply = `${this.inbox}.${token}`;
      this.nc.publish(waiter.subject, data, headers ? { reply, headers } : { reply });
    } catch (err) {
      this.waiting.delete(token);
      waiter.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  private settle(msg: Msg): void {
    const token = msg.subject.slice(this.inbox.length + 1);
    const waiter = this.waiting.get(token);
    if (!waiter) return;
    this.waiting.delete(token);
    if (msg.headers?.code === 503 && msg.data.length === 0)
      waiter.reject(
        new ReplyError(`nobody answered on '${waiter.subject}' (no responders)`, "no-responders"),
      );
    else waiter.resolve(msg);
  }

  private sweep(): void {
    const now = performance.now();
    for (const [token, waiter] of this.waiting) {
      if (waiter.deadline > now) continue;
      this.waiting.delete(token);
      waiter.reject(new ReplyError(`no reply on '${waiter.subject}' in time`, "timeout"));
    }
  }

  /**
   * A reply in flight when the connection drops may never come: those requests fail at once (and
   * are retried on the new connection where that is safe), as the client's do. A publish the
   * server refuses (permissions) gets no reply either: it fails with the server's error.
   */
  private watch(): void {
    const link = this.link;
    const dropped = (): void => {
      this.fail(
        (waiter) => !waiter.held,
        new ReplyError(
          "the connection was lost before the reply came: the outcome is unknown",
          "disconnected",
        ),
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
