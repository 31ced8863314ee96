import type { JetStreamManager } from "@nats-io/jetstream";
import { directPage, readHeld, type RangeMessage } from "./read-range.js";

/**
 * The latest `size` messages of a filter in a stream whose subjects hold one message each (a KV
 * bucket with history 1), oldest first, read without reading the ones before them. A direct get
 * of one message says how many match after it, so a binary search over the stream's sequences
 * finds the last start that leaves `size` to read: about log2(stream length) one-message gets,
 * then the window itself. A key rewritten during the read may come twice (its latest last).
 */
export async function readRecent(
  jsm: JetStreamManager,
  stream: string,
  filter: string,
  size: number,
): Promise<RangeMessage[]> {
  const from = await windowStart(jsm, stream, filter, size);
  const messages: RangeMessage[] = [];
  if (from === undefined) return messages;
  for await (const msg of readHeld(jsm, stream, filter, from)) messages.push(msg);
  return messages.slice(-size);
}

/** The sequence the window starts at; undefined when nothing matches. */
async function windowStart(
  jsm: JetStreamManager,
  stream: string,
  filter: string,
  size: number,
): Promise<number | undefined> {
  const matching = async (seq: number): Promise<{ seq: number; count: number } | undefined> => {
    const [first] = await directPage(jsm, stream, filter, seq, 1);
    return first && { seq: first.seq, count: first.pending + 1 };
  };
  const first = await matching(1);
  if (!first || first.count <= size) return first?.seq;
  // At least `size` match from `low` on, fewer than `size` from `high` on.
  let low = first.seq;
  let high = (await jsm.streams.info(stream)).state.last_seq + 1;
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    const probe = await matching(middle);
    // Writes during the search only raise the counts: a start found stays a start.
    if (probe && probe.count >= size) low = probe.seq;
    else high = middle;
  }
  return low;
}
