import { DeliverPolicy, type JetStreamClient } from "@nats-io/jetstream";
import { drainReader, openReader, type RangeMessage, type Reader } from "./read-range.js";

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
 * made, is how many messages match from the consumer's start on. So the first read of a filter
 * counts all of it; past 2 × `size`, a search halves the range of start sequences with one counting
 * consumer per step until a start leaves between `size` and 2 × `size` to read. The start found is
 * kept for the filter, and the next read begins there: one consumer, at most 2 × `size` messages
 * while fewer than `size` new ones arrive in between, and a new search otherwise.
 */
export class RecentWindow {
  private readonly starts = new Map<string, number>();
  private manager: ReturnType<JetStreamClient["jetstreamManager"]> | undefined;

  constructor(
    private readonly reads: JetStreamClient,
    private readonly stream: string,
    readonly size: number,
  ) {
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError(`window size ${size}: expected a positive integer`);
  }

  async read(filter: string): Promise<WindowMessage[]> {
    const reader = await this.open(filter);
    const messages: WindowMessage[] = [];
    for await (const msg of drainReader(reader, `reading ${filter} from ${this.stream}`)) messages.push(msg);
    const kept = messages.slice(-this.size);
    const first = kept[0];
    if (first) this.remember(filter, first.seq);
    else this.starts.delete(filter);
    return kept;
  }

  /** A reader with at most 2 × size messages to deliver, the filter's latest among them. */
  private async open(filter: string): Promise<Reader> {
    const cached = this.starts.get(filter);
    let reader = cached === undefined ? await this.latest(filter) : await this.from(filter, cached);
    // Nothing from a start that found messages before: the stream was purged or made anew, and
    // its sequences may have started over below the start kept.
    if (cached !== undefined && reader.pending === 0) {
      reader.close();
      this.starts.delete(filter);
      reader = await this.latest(filter);
    }
    if (reader.pending <= 2 * this.size) return reader;
    reader.close();
    return this.search(filter, cached ?? 1);
  }

  /**
   * Halves [low, high) until a start leaves size to 2 × size messages: more than 2 × size match from
   * `low` on, none past the stream's last sequence. Each sequence holds at most one message, so the
   * count falls by at most one per step and such a start exists; messages written meanwhile can
   * only raise the counts, and the search then settles on a start past its range's middle.
   */
  private async search(filter: string, from: number): Promise<Reader> {
    const jsm = await (this.manager ??= this.reads.jetstreamManager(false));
    let low = from;
    let high = (await jsm.streams.info(this.stream)).state.last_seq + 1;
    for (let probes = 0; probes < MAX_PROBES && high - low > 1; probes += 1) {
      const mid = Math.floor((low + high) / 2);
      const reader = await this.from(filter, mid);
      if (reader.pending >= this.size && reader.pending <= 2 * this.size) return reader;
      reader.close();
      if (reader.pending > 2 * this.size) low = mid;
      else high = mid;
    }
    // Writes kept moving the range (or the probes ran out): read from where the search got to.
    return this.from(filter, high - 1);
  }

  private latest(filter: string): Promise<Reader> {
    return openReader(this.reads, this.stream, {
      filter_subject: filter,
      deliver_policy: DeliverPolicy.LastPerSubject,
    });
  }

  private from(filter: string, seq: number): Promise<Reader> {
    return openReader(this.reads, this.stream, {
      filter_subject: filter,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: seq,
    });
  }

  private remember(filter: string, seq: number): void {
    this.starts.delete(filter);
    this.starts.set(filter, seq);
    if (this.starts.size > REMEMBERED) {
      const oldest = this.starts.keys().next().value;
      if (oldest !== undefined) this.starts.delete(oldest);
    }
  }
}
