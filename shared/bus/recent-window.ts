import type { JetStreamManager } from "@nats-io/jetstream";
import { directPage, readHeld, type RangeMessage } from "./read-range.js";

/** Filters whose window start one process remembers; past this many, the longest unused is dropped. */
const REMEMBERED = 10_000;
/** Most counts one search makes (a search over 2^40 sequences needs about 40). */
const MAX_PROBES = 64;

/**
 * The latest `size` messages of a filter's subjects in a stream whose subjects hold one message
 * each (a KV bucket with history 1), oldest first, read without reading the ones before them. A
 * stream cannot be read newest first, but a one-message direct get says how many messages match
 * from its start on (counting costs the server a walk of the filter's subjects, about what
 * reading a page of them costs). So a filter's first read looks back from the stream's end over
 * 2 × `size` sequences, then twice as many at each step, until a start leaves at least `size` to
 * read (or the stream's start is reached); past 2 × `size`, it halves the range between its last
 * two starts until one leaves between `size` and 2 × `size`. The start found is kept for the
 * filter (for a filter nothing matches, the stream's end when it looked), and the next read
 * begins there: one count, then at most 2 × `size` messages while fewer than `size` new ones
 * arrive in between, and a new look from the stream's end otherwise.
 */
export class RecentWindow {
  /** Per filter, where its next read starts; `empty`: nothing matched before it when it was kept. */
  private readonly starts = new Map<string, { seq: number; empty: boolean }>();

  constructor(
    private readonly jsm: JetStreamManager,
    private readonly stream: string,
    readonly size: number,
  ) {
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError(`window size ${size}: expected a positive integer`);
  }

  async read(filter: string): Promise<RangeMessage[]> {
    const { from, end } = await this.start(filter);
    const messages: RangeMessage[] = [];
    if (from !== undefined)
      for await (const msg of readHeld(this.jsm, this.stream, filter, from)) messages.push(msg);
    const kept = messages.slice(-this.size);
    const first = kept[0];
    if (first) this.remember(filter, { seq: first.seq, empty: false });
    // Nothing matches: the next read need not look back further than where the stream ended.
    else if (end !== undefined) this.remember(filter, { seq: end, empty: true });
    return kept;
  }

  /**
   * Where to read from, leaving at most 2 × size messages (unless writes outran the look), the
   * filter's latest among them (none: nothing to read); and, when it looked back from the
   * stream's end, where that was.
   */
  private async start(filter: string): Promise<{ from?: number; end?: number }> {
    const cached = this.starts.get(filter);
    if (cached === undefined) return this.search(filter, 1);
    const count = await this.count(filter, cached.seq);
    if (count <= 2 * this.size && (count > 0 || cached.empty)) {
      // Used now: the last to be dropped (an agent with no memories keeps its start as it was).
      this.remember(filter, cached);
      return count > 0 ? { from: cached.seq } : {};
    }
    // Nothing from a start that found messages before: the stream was purged or made anew, and
    // its sequences may have started over below the start kept.
    if (count === 0) this.starts.delete(filter);
    return this.search(filter, count === 0 ? 1 : cached.seq);
  }

  /**
   * Looks back from the stream's end, no further than `floor`, for a start that leaves size to
   * 2 × size messages. Each sequence holds at most one message, so from one start to the next the
   * count falls by at most one, and such a start exists when more than size match from `floor`;
   * messages written meanwhile only raise the counts.
   */
  private async search(filter: string, floor: number): Promise<{ from?: number; end: number }> {
    const end = (await this.jsm.streams.info(this.stream)).state.last_seq + 1;
    // Fewer than size match from `high` on; more than 2 × size from `low`, once one is found.
    let high = end;
    let low: number | undefined;
    let span = 2 * this.size;
    for (let probes = 0; probes < MAX_PROBES; probes += 1) {
      const start = low === undefined ? Math.max(floor, high - span) : Math.floor((low + high) / 2);
      const count = await this.count(filter, start);
      const few = count < this.size;
      if (!few && count <= 2 * this.size) return { from: start, end };
      if (few && start === floor) return count > 0 ? { from: start, end } : { end };
      if (few) {
        high = start;
        span *= 2;
      } else low = start;
      if (low !== undefined && high - low <= 1) break;
    }
    // Writes kept moving the range (or the probes ran out): read from where the look got to.
    return { from: low ?? floor, end };
  }

  /** How many messages match from `seq` on: one message's get, which says how many follow it. */
  private async count(filter: string, seq: number): Promise<number> {
    const [first] = await directPage(this.jsm, this.stream, filter, seq, 1);
    return first ? first.pending + 1 : 0;
  }

  private remember(filter: string, start: { seq: number; empty: boolean }): void {
    this.starts.delete(filter);
    this.starts.set(filter, start);
    if (this.starts.size > REMEMBERED) {
      const oldest = this.starts.keys().next().value;
      if (oldest !== undefined) this.starts.delete(oldest);
    }
  }
}
