import { DeliverPolicy, type JetStreamClient } from "@nats-io/jetstream";
import { drainReader, openReader, readsManager, type RangeMessage, type Reader } from "./read-range.js";

/** Filters whose window start one process remembers; past this many, the longest unused is dropped. */
const REMEMBERED = 10_000;
/** Most counting consumers one search makes (a search over 2^40 sequences needs about 40). */
const MAX_PROBES = 64;

export type WindowMessage = RangeMessage & { subject: string };

/**
 * The latest `size` messages of a filter's subjects in a stream whose subjects hold one message
 * each (a KV bucket with history 1: a subject's message is its latest), oldest first, read without
 * reading the ones before them. nats-server 2.9 can neither deliver a filter's messages newest
 * first nor say at which sequence its last `size` begin; what it does say, when a consumer is
 * made, is how many messages match from the consumer's start on (counting costs it a scan of the
 * stream from there). So a filter's first read looks back from the stream's end over 2 × `size`
 * sequences, then twice as many at each step, until a start leaves at least `size` to read (or
 * the stream's start is reached); past 2 × `size`, it halves the range between its last two
 * starts until one leaves between `size` and 2 × `size`. One counting consumer per step; the last
 * reads. The start found is kept for the filter (for a filter nothing matches, the stream's end
 * when it looked), and the next read begins there: one consumer, at most 2 × `size` messages
 * while fewer than `size` new ones arrive in between, and a new look from the stream's end
 * otherwise.
 */
export class RecentWindow {
  /** Per filter, where its next read starts; `empty`: nothing matched before it when it was kept. */
  private readonly starts = new Map<string, { seq: number; empty: boolean }>();

  constructor(
    private readonly reads: JetStreamClient,
    private readonly stream: string,
    readonly size: number,
  ) {
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError(`window size ${size}: expected a positive integer`);
  }

  async read(filter: string): Promise<WindowMessage[]> {
    const { reader, end } = await this.open(filter);
    const messages: WindowMessage[] = [];
    for await (const msg of drainReader(reader, `reading ${filter} from ${this.stream}`)) messages.push(msg);
    const kept = messages.slice(-this.size);
    const first = kept[0];
    if (first) this.remember(filter, { seq: first.seq, empty: false });
    // Nothing matches: the next read need not look back further than where the stream ended.
    else if (end !== undefined) this.remember(filter, { seq: end, empty: true });
    return kept;
  }

  /**
   * A reader with at most 2 × size messages to deliver (unless writes outran the look), the
   * filter's latest among them; and, when it looked back from the stream's end, where that was.
   */
  private async open(filter: string): Promise<{ reader: Reader; end?: number }> {
    const cached = this.starts.get(filter);
    if (cached === undefined) return this.search(filter, 1);
    const reader = await this.from(filter, cached.seq);
    if (reader.pending <= 2 * this.size && (reader.pending > 0 || cached.empty)) {
      // Used now: the last to be dropped (an agent with no memories keeps its start as it was).
      this.remember(filter, cached);
      return { reader };
    }
    reader.close();
    // Nothing from a start that found messages before: the stream was purged or made anew, and
    // its sequences may have started over below the start kept.
    if (reader.pending === 0) this.starts.delete(filter);
    return this.search(filter, reader.pending === 0 ? 1 : cached.seq);
  }

  /**
   * Looks back from the stream's end, no further than `floor`, for a start that leaves size to
   * 2 × size messages. Each sequence holds at most one message, so from one start to the next the
   * count falls by at most one, and such a start exists when more than size match from `floor`;
   * messages written meanwhile only raise the counts.
   */
  private async search(filter: string, floor: number): Promise<{ reader: Reader; end: number }> {
    const jsm = await readsManager(this.reads);
    const end = (await jsm.streams.info(this.stream)).state.last_seq + 1;
    // Fewer than size match from `high` on; more than 2 × size from `low`, once one is found.
    let high = end;
    let low: number | undefined;
    let span = 2 * this.size;
    for (let probes = 0; probes < MAX_PROBES; probes += 1) {
      const start = low === undefined ? Math.max(floor, high - span) : Math.floor((low + high) / 2);
      const reader = await this.from(filter, start);
      const { pending } = reader;
      const few = pending < this.size;
      if (!few && pending <= 2 * this.size) return { reader, end };
      if (few && start === floor) return { reader, end };
      reader.close();
      if (few) {
        high = start;
        span *= 2;
      } else low = start;
      if (low !== undefined && high - low <= 1) break;
    }
    // Writes kept moving the range (or the probes ran out): read from where the look got to.
    return { reader: await this.from(filter, low ?? floor), end };
  }

  private from(filter: string, seq: number): Promise<Reader> {
    return openReader(this.reads, this.stream, {
      filter_subject: filter,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: seq,
    });
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
