import type { JetStreamManager, StoredMsg } from "@nats-io/jetstream";
import type { MsgHdrs } from "@nats-io/transport-node";
import type { Clock } from "../runtime/clock.js";
import type { Random } from "../runtime/random.js";
import { withBusRetry } from "./retry.js";

/**
 * Messages, and bytes, per direct get: one request for a typical run's WAL or audit trail. A
 * batched direct get costs the server more per message than a consumer does, so pages are large.
 */
const PAGE = 1024;
const PAGE_BYTES = 4 * 1024 * 1024;
/**
 * A page not answered whole within this is given up and asked again: the client's own wait ends
 * at the first message, and a server that dies mid-answer would leave the read waiting for ever.
 */
const PAGE_MS = 5_000;

/** What a read takes: the stream's manager (direct gets), and a clock for retries. */
export interface ReadDeps {
  jsm: JetStreamManager;
  clock: Clock;
  random: Random;
}

export interface RangeQuery {
  stream: string;
  /** A subject filter (wildcards allowed). */
  filter: string;
  /** The stream sequence to start at (1 when absent). */
  fromSeq?: number;
  /**
   * Where the read must get to, known from the stream's leader: the sequence of the filter's last
   * message, or a number of messages. Absent: whatever the answering server holds.
   */
  untilSeq?: number;
  count?: number;
}

export interface RangeMessage {
  subject: string;
  seq: number;
  data: Uint8Array;
  headers?: MsgHdrs;
}

/**
 * Reads a range of a stream in order, a page of batched direct gets per request (no consumer).
 * Any replica may answer a direct get, one behind its leader too: a read that has an end to reach
 * (`untilSeq`, `count`) and finds nothing more short of it asks again from where it got to, as it
 * does through a leader election, until 15 s pass without progress (BUS_UNAVAILABLE).
 */
export async function* readRange(deps: ReadDeps, query: RangeQuery): AsyncGenerator<RangeMessage> {
  const until = query.untilSeq ?? Number.POSITIVE_INFINITY;
  let left = query.count ?? Number.POSITIVE_INFINITY;
  let next = query.fromSeq ?? 1;
  const bounded = query.untilSeq !== undefined || query.count !== undefined;
  while (left > 0 && next <= until) {
    const what = `reading ${query.filter} from ${query.stream}`;
    const got = await withBusRetry(what, deps, async () => {
      const page = await directPage(deps.jsm, query.stream, query.filter, next, Math.min(PAGE, left));
      if (page.length === 0 && bounded) throw new Error(`${what}: nothing from ${next} on, short of its end`);
      return page;
    });
    for (const msg of got) {
      if (msg.seq > until) return;
      yield msg;
      left -= 1;
      next = msg.seq + 1;
    }
    if (!bounded && (got.at(-1)?.pending ?? 0) === 0) return;
  }
}

/**
 * Every message of a filter that the answering server holds from `fromSeq` on, in order, without
 * retries: in a KV bucket (history 1) each key's latest entry, a deleted key as its marker. A key
 * rewritten during the read may come again at its new revision (callers keep the first or the last).
 */
export async function* readHeld(
  jsm: JetStreamManager,
  stream: string,
  filter: string,
  fromSeq = 1,
): AsyncGenerator<RangeMessage> {
  for (let next = fromSeq; ;) {
    const page = await directPage(jsm, stream, filter, next, PAGE);
    yield* page;
    const last = page.at(-1);
    if (!last || last.pending === 0) return;
    next = last.seq + 1;
  }
}

/**
 * One batched direct get: up to `batch` messages of `filter` from `seq` on, each with how many
 * match after it (`pending`). Nothing there is an empty page.
 */
export async function directPage(
  jsm: JetStreamManager,
  stream: string,
  filter: string,
  seq: number,
  batch: number,
): Promise<(RangeMessage & { pending: number })[]> {
  const messages = await jsm.direct.getBatch(stream, {
    seq,
    next_by_subj: filter,
    batch,
    max_bytes: PAGE_BYTES,
  });
  const timer = setTimeout(
    () => messages.stop(new Error(`a direct get of ${filter} from ${stream} unanswered for ${PAGE_MS} ms`)),
    PAGE_MS,
  );
  const page: (RangeMessage & { pending: number })[] = [];
  try {
    for await (const msg of messages) page.push(fromStored(msg));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  } finally {
    clearTimeout(timer);
  }
  return page;
}

function fromStored(msg: StoredMsg): RangeMessage & { pending: number } {
  return { subject: msg.subject, seq: msg.seq, data: msg.data, headers: msg.header, pending: msg.pending };
}

/** A direct get's answer when nothing matches from its start on. */
function isNotFound(err: unknown): boolean {
  return (err as { code?: unknown }).code === 404;
}
