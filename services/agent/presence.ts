import type { Msg, Subscription } from "@nats-io/transport-node";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { ReplyInbox } from "../../shared/bus/reply-inbox.js";
import { isNoResponders } from "../../shared/bus/request.js";
import type { ActorMetrics } from "../../shared/runtime/metrics.js";
import { PeerTable, type Peer } from "./peers.js";
import { nakJobs, StraySweep, streamSeqOf } from "./strays.js";

const EMPTY = new Uint8Array(0);
/** A connected peer that cannot answer this fast is stalled: it keeps its jobs either way. */
const PING_TIMEOUT_MS = 1_000;

export interface PresenceOptions {
  workerId: string;
  /** This process's life (see WorkerBeat.instance). */
  instance: string;
  beatMs: number;
  deadAfterMs: number;
  /** The job consumer's ack wait: past it, JetStream has handed a dead worker's jobs on itself. */
  ackWaitMs: number;
  /** The shared job consumer (see StraySweep). */
  consumer: string;
}

/**
 * An agent worker's heartbeat to the other workers, and its watch over theirs. JetStream alone
 * notices a dead worker only when a job's ack wait runs out (30 s by default). With the beats a
 * survivor notices a silence within `deadAfterMs`, then asks the silent worker directly: the server
 * answers "no responders" at once when that worker's connection is gone (a killed process's socket
 * closes), and only then are its jobs negatively acknowledged, so another worker resumes them at
 * once; then the survivor looks for jobs nobody named (StraySweep), those the server handed to the
 * dead worker's pull as it died. A worker that has just started also looks for jobs nobody
 * named, once it has heard the others (see `arrive`): those of workers that died before it came.
 * A worker that is only stalled (a long synchronous stretch, a stopped process) still holds its
 * connection and keeps its jobs. Beats are plain NATS messages: losing some only leaves a takeover
 * to the ack wait, and a worker wrongly judged dead loses its run to the WAL's fencing, never runs
 * a step twice.
 */
export class WorkerPresence {
  private readonly table: PeerTable;
  private sub: Subscription | undefined;
  private tookSub: Subscription | undefined;
  private pings: Subscription | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private lastTick = 0;
  private deaf = false;
  /**
   * When this worker began listening to the others, until it has looked once for jobs held by
   * workers gone before it arrived (see `arrive`).
   */
  private arrivedAt: number | undefined;
  /** Jobs taken since the last announcement, named once this turn of the event loop ends. */
  private taken: string[] = [];
  private announcing: ReturnType<typeof setImmediate> | undefined;
  private readonly ackPrefix: string;
  private readonly strays: StraySweep;
  /**
   * Silent peers being asked whether they are there: their jobs still count as named, or a search
   * for unnamed jobs would take a stalled worker's for stranded ones.
   */
  private readonly suspects = new Map<string, Peer>();

  constructor(
    private readonly bus: ActorBus,
    private readonly options: PresenceOptions,
    /** The ack subjects of the jobs this worker holds now. */
    private readonly held: () => string[],
    private readonly metrics: ActorMetrics,
  ) {
    this.table = new PeerTable(options.instance);
    // Only the work queue's jobs: a forged beat cannot make a survivor NAK anything else.
    this.ackPrefix = `$JS.ACK.${bus.subjects.streams().runs}.`;
    this.strays = new StraySweep({
      bus,
      consumer: options.consumer,
      named: () => this.named(),
      heardCounts: () => this.table.heardCounts(),
      beatMs: options.beatMs,
      maxWaitMs: options.deadAfterMs,
      metrics,
    });
  }

  start(): void {
    const { nc, subjects } = this.bus;
    this.sub = nc.subscribe(subjects.workerBeatAll(), {
      callback: (err, msg) => {
        if (err) this.bus.logger.error({ err }, "the worker beat subscription failed");
        else this.onBeat(msg, "beat");
      },
    });
    this.tookSub = nc.subscribe(subjects.workerTookAll(), {
      callback: (err, msg) => {
        if (err) this.bus.logger.error({ err }, "the worker announcement subscription failed");
        else this.onBeat(msg, "took");
      },
    });
    this.pings = this.bus.nc.subscribe(this.bus.subjects.workerPing(this.options.instance), {
      callback: (err, msg) => {
        if (!err) msg.respond(encode(WorkerBeat, this.beatOf(false)));
      },
    });
    this.lastTick = this.bus.clock.now();
    this.arrivedAt = this.lastTick;
    this.beat(false);
    this.timer = setInterval(() => this.tick(), this.options.beatMs);
  }

  /**
   * This worker has taken a job: the others hear of it as soon as this turn of the event loop
   * ends, not at the next beat, so a worker killed a moment after a take does not leave the job to
   * the ack wait. The announcement names only the jobs taken since the last one (a beat names all
   * of them, and grows with them): the jobs of one pull, which arrive together, share one.
   */
  announce(job: string): void {
    if (this.timer === undefined) return;
    this.taken.push(job);
    this.announcing ??= setImmediate(() => {
      this.announcing = undefined;
      const jobs = this.taken;
      this.taken = [];
      this.send(this.bus.subjects.workerTook(this.options.instance), this.beatOf(false, jobs));
    });
  }

  /**
   * Whether a live worker, this one included, holds the job with this stream sequence, as far as
   * their beats and announcements tell (a suspect, not yet confirmed gone, still counts).
   */
  names(jobSeq: number): boolean {
    return this.named().has(jobSeq);
  }

  /** The last beat says this worker is leaving: it has handed its jobs back itself. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    if (this.announcing !== undefined) clearImmediate(this.announcing);
    this.timer = undefined;
    this.announcing = undefined;
    this.taken = [];
    this.sub?.unsubscribe();
    this.tookSub?.unsubscribe();
    this.pings?.unsubscribe();
    this.beat(true);
    await this.strays.stop();
  }

  private onBeat(msg: Msg, kind: "beat" | "took"): void {
    try {
      const beat = decode(WorkerBeat, msg.data);
      const now = this.bus.clock.now();
      if (kind === "beat") this.table.heard(beat, now);
      else this.table.took(beat, now);
    } catch (err) {
      const { subjects } = this.bus;
      this.metrics.badRequests.inc({
        subject: kind === "beat" ? subjects.workerBeatAll() : subjects.workerTookAll(),
      });
      this.bus.logger.warn({ err, subject: msg.subject }, "unreadable worker beat ignored");
    }
  }

  private tick(): void {
    const now = this.bus.clock.now();
    const late = now - this.lastTick > 2 * this.options.beatMs;
    this.lastTick = now;
    // While disconnected this worker hears nobody, and a NAK would be sent, stale, on reconnecting.
    if (!this.bus.connected()) {
      this.deaf = true;
      return;
    }
    this.beat(false);
    if (this.deaf) {
      this.deaf = false;
      this.table.excuse(now);
      // Beats were missed while deaf: the others are known again only after a whole listening spell.
      if (this.arrivedAt !== undefined) this.arrivedAt = now;
      return;
    }
    // After a stall of this process the others' beats are still unread: judge nobody until they are.
    if (late) return;
    for (const peer of this.table.expire(now)) void this.confirm(peer);
    this.arrive(now);
  }

  /**
   * Once this worker has listened for `deadAfterMs` (every live worker has beaten several times
   * meanwhile), the first-sorting live instance looks for jobs that no live worker names. Those
   * include the jobs of workers that died before any live one heard them beat: every worker of a
   * deployment killed at once, or a worker killed before its first beat. Nobody hands those back
   * by name, and without this look they wait out the ack wait (30 s by default). Only the
   * first-sorting instance looks, so that two workers starting together do not both hand the same
   * jobs back (a second NAK would snatch a job from its new holder on nats-server 2.9).
   */
  private arrive(now: number): void {
    if (this.arrivedAt === undefined || now - this.arrivedAt < this.options.deadAfterMs) return;
    this.arrivedAt = undefined;
    if (!this.table.leads()) return;
    this.bus.logger.info(
      { live: this.table.live },
      "looking for jobs held by workers gone before this one started",
    );
    this.strays.request([]);
  }

  /** Asks a silent peer whether it is there, its jobs still named meanwhile (see `suspects`). */
  private async confirm(peer: Peer): Promise<void> {
    this.suspects.set(peer.instance, peer);
    try {
      await this.ask(peer);
    } finally {
      this.suspects.delete(peer.instance);
    }
  }

  /** Hands a silent peer's jobs back only if its connection is gone. */
  private async ask(peer: Peer): Promise<void> {
    const { bus, options } = this;
    const fields = { worker: peer.workerId, instance: peer.instance };
    try {
      const reply = await ReplyInbox.of(bus.nc).request(bus.subjects.workerPing(peer.instance), EMPTY, {
        timeoutMs: Math.min(options.deadAfterMs, PING_TIMEOUT_MS),
      });
      this.table.heard(decode(WorkerBeat, reply.data), bus.clock.now());
    } catch (err) {
      const now = bus.clock.now();
      if (!isNoResponders(err)) {
        this.table.stillThere(peer, now);
        bus.logger.info(
          { ...fields, err },
          "a worker missed its beats but is still connected; its jobs stay",
        );
        return;
      }
      // Past half the ack wait JetStream hands the jobs on itself (or soon will): a NAK then could
      // snatch a job from its new holder.
      if (now - peer.lastSeen >= options.ackWaitMs / 2) return;
      this.strays.request(await this.handBack(peer, now));
    }
  }

  /** A beat names every job held (none when leaving); an announcement, `jobs` just taken. */
  private beatOf(leaving: boolean, jobs?: string[]): WorkerBeat {
    const { workerId, instance, deadAfterMs } = this.options;
    return {
      schemaVersion: 1,
      workerId,
      instance,
      deadAfterMs,
      jobs: leaving ? [] : (jobs ?? this.held()),
      ...(leaving ? { leaving } : {}),
    };
  }

  private beat(leaving: boolean): void {
    this.send(this.bus.subjects.workerBeat(this.options.instance), this.beatOf(leaving));
  }

  private send(subject: string, beat: WorkerBeat): void {
    try {
      this.bus.nc.publish(subject, encode(WorkerBeat, beat));
    } catch (err) {
      // A closed or reconnecting connection: the next beat names every job held.
      this.bus.logger.debug({ err, subject }, "a worker beat was not sent");
    }
  }

  /** Every job a live worker names now, this one's included, by stream sequence. */
  private named(): Set<number> {
    const seqs = new Set<number>();
    const suspected = [...this.suspects.values()].flatMap((peer) => peer.jobs);
    for (const job of [...this.table.named(), ...suspected, ...this.held()]) {
      const seq = streamSeqOf(job);
      if (seq !== undefined) seqs.add(seq);
    }
    return seqs;
  }

  private async handBack(peer: Peer, now: number): Promise<string[]> {
    const jobs = peer.jobs.filter((job) => job.startsWith(this.ackPrefix));
    await nakJobs(this.bus, this.options.consumer, jobs);
    this.metrics.jobsHandedBack.inc(jobs.length);
    this.bus.logger.warn(
      { worker: peer.workerId, instance: peer.instance, silentMs: now - peer.lastSeen, jobs: jobs.length },
      "a worker stopped beating and its connection is gone; its jobs go back to the queue",
    );
    return jobs;
  }
}
