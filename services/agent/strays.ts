import type { JsMsg, MsgRequest } from "@nats-io/jetstream";
import type { ActorBus } from "../../shared/bus/actor.js";
import type { ActorMetrics } from "../../shared/runtime/metrics.js";

/** The body of a negative acknowledgement, sent on a job's ack subject. */
export const NAK = new TextEncoder().encode("-NAK");
/** Messages one look reads at most: a work queue holds the jobs in flight, not the cluster's history. */
const MAX_READS = 10_000;
/** Reads in flight at once: a look walks that many parts of its range side by side. */
const WALKS = 8;
/** A range shorter than this many sequences per walk is walked in fewer parts. */
const WALK_PART = 64;

/** The parts of the sequence range `first..last` that one look walks side by side. */
export function walkParts(
  first: number,
  last: number,
  walks = WALKS,
  minPart = WALK_PART,
): [number, number][] {
  if (last < first) return [];
  const size = Math.max(minPart, Math.ceil((last - first + 1) / walks));
  const parts: [number, number][] = [];
  for (let from = first; from <= last; from += size) parts.push([from, Math.min(last, from + size - 1)]);
  return parts;
}

/** The subject a job is acknowledged on; the client's message class has it, its public type does not. */
export function ackSubjectOf(msg: JsMsg): string | undefined {
  const reply = "reply" in msg ? msg.reply : undefined;
  return typeof reply === "string" && reply.length > 0 ? reply : undefined;
}

/**
 * The stream sequence a JetStream ack subject names: `$JS.ACK.<stream>.<consumer>.<deliveries>.
 * <sseq>.<dseq>.<time>.<pending>`, or the form with a domain and an account hash after `ACK` (11 or
 * 12 tokens) that clients also read.
 */
export function streamSeqOf(ackSubject: string): number | undefined {
  const tokens = ackSubject.split(".");
  if (tokens[0] !== "$JS" || tokens[1] !== "ACK") return undefined;
  const at = tokens.length === 9 ? 5 : tokens.length === 11 || tokens.length === 12 ? 7 : undefined;
  const seq = at === undefined ? NaN : Number(tokens[at]);
  return Number.isSafeInteger(seq) && seq > 0 ? seq : undefined;
}

/**
 * An ack subject for a delivery whose own subject nobody read. nats-server looks a NAK's job up by
 * its stream sequence and only checks that the consumer sequence lies between the ack floor and
 * the last delivery (2.9 and the later releases alike), so the consumer's last delivered sequence
 * stands in for the unknown one.
 */
export function strayAckSubject(
  stream: string,
  consumer: string,
  streamSeq: number,
  consumerSeq: number,
): string {
  return `$JS.ACK.${stream}.${consumer}.1.${streamSeq}.${consumerSeq}.0.0`;
}

/**
 * The subjects a gone worker's jobs are handed back on: each job's own ack subject, with the
 * consumer's last delivered sequence (`lastDelivered`) in place of the job's. nats-server 2.9
 * ignores a NAK whose consumer sequence is at or below the ack floor, and the floor can pass a job
 * still held: a server restarted after some job was redelivered (a gone worker's, handed on) reads
 * its pending jobs back with their latest deliveries, and acknowledging a job then moves the floor
 * to just below the latest delivery of the next job still pending in stream order, past the
 * earlier deliveries of jobs held behind it. A NAK on such a job's own subject was dropped, and the
 * job waited out its ack wait (test/integration/hand-back.test.ts).
 */
export function handBackSubjects(
  stream: string,
  consumer: string,
  jobs: readonly string[],
  lastDelivered: number,
): string[] {
  return jobs.map((job) => {
    const seq = streamSeqOf(job);
    return seq === undefined ? job : strayAckSubject(stream, consumer, seq, lastDelivered);
  });
}

/**
 * NAKs jobs under the consumer's last delivery (see handBackSubjects), or on their own subjects
 * when the consumer cannot be read now, which hands back all but those the ack floor has passed.
 * Never rejects: a job whose NAK is lost waits out its ack wait.
 */
export async function nakJobs(
  bus: Pick<ActorBus, "nc" | "jsm" | "subjects" | "logger">,
  consumer: string,
  jobs: readonly string[],
): Promise<void> {
  if (jobs.length === 0) return;
  const stream = bus.subjects.streams().runs;
  let subjects = jobs;
  try {
    const info = await bus.jsm.consumers.info(stream, consumer);
    subjects = handBackSubjects(stream, consumer, jobs, info.delivered.consumer_seq);
  } catch (err) {
    bus.logger.warn({ err }, "the job consumer could not be read: handing jobs back on their own subjects");
  }
  try {
    for (const subject of subjects) bus.nc.publish(subject, NAK);
  } catch (err) {
    // This connection is down: the jobs wait out their ack wait instead.
    bus.logger.warn({ err, jobs: jobs.length }, "could not hand jobs back");
  }
}

/**
 * Whether every live worker has been heard from twice since `before` was taken (a worker first
 * heard since, twice in all). Between two of its messages a worker's event loop has read what its
 * connection had received before the first, so a job it held at the first look is named by then.
 * One message is not enough: a beat may leave on a timer while the job still waits unread.
 */
export function heardTwiceSince(
  before: ReadonlyMap<string, number>,
  now: ReadonlyMap<string, number>,
): boolean {
  for (const [instance, count] of now) if (count < (before.get(instance) ?? 0) + 2) return false;
  return true;
}

/** The jobs of both looks that nobody named in either: those two looks apart are stranded. */
export function strays(first: ReadonlySet<number>, second: ReadonlySet<number>): number[] {
  return [...first].filter((seq) => second.has(seq)).sort((a, b) => a - b);
}

export interface StraySweepDeps {
  bus: Pick<ActorBus, "nc" | "jsm" | "subjects" | "clock" | "logger">;
  /** The shared job consumer. */
  consumer: string;
  /** The stream sequences of every job a live worker (this one included) names now. */
  named: () => ReadonlySet<number>;
  /** How often each live worker has been heard from (see PeerTable.heardCounts). */
  heardCounts: () => ReadonlyMap<string, number>;
  /** The workers' beat: the pause before the first look, and between checks for the second. */
  beatMs: number;
  /**
   * The longest wait for every live worker to be heard from twice: one silent for this long is
   * being asked whether it is there, its jobs named meanwhile (the deadAfterMs of the beats).
   */
  maxWaitMs: number;
  metrics: Pick<ActorMetrics, "strayJobsHandedBack">;
  /** Parts of a look's range read side by side (8; bench/micro/stray-search.ts compares 1). */
  walks?: number;
}

/**
 * Finds the jobs nats-server handed to a worker's open pull as the worker died. A killed worker's
 * connection lingers on the server for a few milliseconds (up to about 100 under load), and jobs
 * delivered to its pull then were never read, so no beat or announcement named them: they would
 * wait out the ack wait (30 s by default). After handing a gone worker's named jobs back, the
 * survivor looks twice at the work queue's delivered and unacknowledged jobs, the second time once
 * every live worker has been heard from twice since the first, and hands back those no live worker
 * named in either look. A job a live worker holds is named within a turn of its event loop, and
 * the second look waits for two; a worker silent past its deadline is being asked whether it is
 * there, its jobs counted as named meanwhile. One still unnamed (taken by a stalled worker after
 * its last beat) is handed on anyway: its first holder loses the run to the WAL's fencing, and
 * never runs a step twice. A newly started worker looks the same way once it has heard the others
 * (see WorkerPresence.arrive): that finds the jobs of workers gone before any live one heard them.
 */
export class StraySweep {
  private running: Promise<void> | undefined;
  private again = false;
  /** Jobs just handed back by name: still unnamed while they wait for a free worker, not stranded. */
  private handedBack = new Set<number>();
  private readonly stopped = new AbortController();

  constructor(private readonly deps: StraySweepDeps) {}

  /**
   * Sweeps soon, after the jobs of a gone worker were handed back (their ack subjects); a request
   * while a sweep runs makes it sweep once more after.
   */
  request(handedBack: readonly string[]): void {
    for (const job of handedBack) {
      const seq = streamSeqOf(job);
      if (seq !== undefined) this.handedBack.add(seq);
    }
    if (this.stopped.signal.aborted) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.sweep()
      .catch((err: unknown) => {
        if (!this.stopped.signal.aborted)
          this.deps.bus.logger.warn({ err }, "looking for stranded jobs failed");
      })
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.request([]);
        } else this.handedBack = new Set();
      });
  }

  /** Settles once no sweep is under way or asked for. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  /** Ends the sweep under way at its next pause; a leaving worker hands nothing back. */
  async stop(): Promise<void> {
    this.stopped.abort(new Error("the worker is stopping"));
    await this.running;
  }

  private async sweep(): Promise<void> {
    const { bus, consumer, beatMs, maxWaitMs } = this.deps;
    const { signal } = this.stopped;
    await bus.clock.sleep(beatMs, signal);
    const first = await this.unnamed();
    if (first.size === 0) return;
    // A worker whose event loop lags (a busy host) may hold a job it has not read yet, so not named.
    const before = this.deps.heardCounts();
    for (let waited = 0; ; waited += beatMs) {
      await bus.clock.sleep(beatMs, signal);
      if (waited + beatMs >= maxWaitMs || heardTwiceSince(before, this.deps.heardCounts())) break;
    }
    const found = strays(first, await this.unnamed());
    if (found.length === 0) return;
    const stream = bus.subjects.streams().runs;
    const info = await bus.jsm.consumers.info(stream, consumer);
    if (signal.aborted) return;
    for (const seq of found)
      bus.nc.publish(strayAckSubject(stream, consumer, seq, info.delivered.consumer_seq), NAK);
    this.deps.metrics.strayJobsHandedBack.inc(found.length);
    bus.logger.warn(
      { jobs: found.length, streamSeqs: found.slice(0, 20) },
      "jobs no live worker holds, never named by any worker, go back to the queue",
    );
  }

  /** The delivered, unacknowledged jobs nobody names now, by stream sequence. */
  private async unnamed(): Promise<Set<number>> {
    const { bus, consumer } = this.deps;
    const stream = bus.subjects.streams().runs;
    const info = await bus.jsm.consumers.info(stream, consumer);
    const out = new Set<number>();
    if (info.num_ack_pending === 0) return out;
    const named = this.deps.named();
    const parts = walkParts(info.ack_floor.stream_seq + 1, info.delivered.stream_seq, this.deps.walks);
    const budget = Math.ceil(MAX_READS / Math.max(parts.length, 1));
    const walked = await Promise.all(parts.map(([from, to]) => this.walk(stream, from, to, budget)));
    for (const seq of walked.flat()) if (!named.has(seq) && !this.handedBack.has(seq)) out.add(seq);
    return out;
  }

  /** The sequences of the messages still in the work queue from `from` to `to`, at most `budget`. */
  private async walk(stream: string, from: number, to: number, budget: number): Promise<number[]> {
    const { bus } = this.deps;
    const seqs: number[] = [];
    for (let seq = from; seq <= to;) {
      if (seqs.length === budget) {
        bus.logger.warn({ from: seq, to }, "too many jobs in flight to look for stranded ones past here");
        break;
      }
      // STREAM.MSG.GET takes `next_by_subj` since nats-server 2.9 (the client types it for direct gets
      // only): it skips the jobs already acknowledged, which a work queue has deleted.
      const query = { seq, next_by_subj: bus.subjects.runQueueAll() } as unknown as MsgRequest;
      const msg = await bus.jsm.streams.getMessage(stream, query);
      if (!msg || msg.seq > to) break;
      seqs.push(msg.seq);
      seq = msg.seq + 1;
    }
    return seqs;
  }
}
