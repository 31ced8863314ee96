import type { Msg, Subscription } from "@nats-io/transport-node";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { decode, encode } from "../../shared/bus/codec.js";
import type { ActorMetrics } from "../../shared/runtime/metrics.js";
import { PeerTable, type Peer } from "./peers.js";

const NAK = new TextEncoder().encode("-NAK");

export interface PresenceOptions {
  workerId: string;
  /** This process's life (see WorkerBeat.instance). */
  instance: string;
  beatMs: number;
  deadAfterMs: number;
}

/**
 * An agent worker's heartbeat to the other workers, and its watch over theirs. JetStream alone
 * notices a dead worker only when a job's ack wait runs out (30 s by default); with the beats a
 * survivor notices within `deadAfterMs` and negatively acknowledges the dead worker's jobs, so
 * another worker resumes them at once. Beats are plain NATS messages: losing some only leaves a
 * takeover to the ack wait, and a worker wrongly judged dead loses its run to the WAL's fencing,
 * never runs a step twice.
 */
export class WorkerPresence {
  private readonly table: PeerTable;
  private sub: Subscription | undefined;
  private timer: ReturnType<typeof setInterval> | undefined;
  private lastTick = 0;
  private deaf = false;
  private readonly ackPrefix: string;

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
  }

  start(): void {
    this.sub = this.bus.nc.subscribe(this.bus.subjects.workerBeatAll(), {
      callback: (err, msg) => {
        if (err) this.bus.logger.error({ err }, "the worker beat subscription failed");
        else this.onBeat(msg);
      },
    });
    this.lastTick = this.bus.clock.now();
    this.beat(false);
    this.timer = setInterval(() => this.tick(), this.options.beatMs);
  }

  /** The last beat says this worker is leaving: it has handed its jobs back itself. */
  stop(): void {
    clearInterval(this.timer);
    this.sub?.unsubscribe();
    this.beat(true);
  }

  /** Other live worker instances this one hears. */
  get peers(): number {
    return this.table.live;
  }

  private onBeat(msg: Msg): void {
    try {
      this.table.heard(decode(WorkerBeat, msg.data), this.bus.clock.now());
    } catch (err) {
      this.metrics.badRequests.inc({ subject: this.bus.subjects.workerBeatAll() });
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
      return;
    }
    // After a stall of this process the others' beats are still unread: judge nobody until they are.
    if (late) return;
    for (const peer of this.table.expire(now)) {
      try {
        this.handBack(peer, now);
      } catch (err) {
        // The connection is down: the jobs wait out their ack wait instead.
        this.bus.logger.warn({ err, worker: peer.workerId }, "could not hand a gone worker's jobs back");
      }
    }
  }

  private beat(leaving: boolean): void {
    const { workerId, instance, deadAfterMs } = this.options;
    const beat: WorkerBeat = {
      schemaVersion: 1,
      workerId,
      instance,
      deadAfterMs,
      jobs: leaving ? [] : this.held(),
      ...(leaving ? { leaving } : {}),
    };
    try {
      this.bus.nc.publish(this.bus.subjects.workerBeat(instance), encode(WorkerBeat, beat));
    } catch (err) {
      // A closed or reconnecting connection: the next beat tries again.
      this.bus.logger.debug({ err }, "a worker beat was not sent");
    }
  }

  private handBack(peer: Peer, now: number): void {
    const jobs = peer.jobs.filter((job) => job.startsWith(this.ackPrefix));
    for (const job of jobs) this.bus.nc.publish(job, NAK);
    this.metrics.jobsHandedBack.inc(jobs.length);
    this.bus.logger.warn(
      { worker: peer.workerId, instance: peer.instance, silentMs: now - peer.lastSeen, jobs: jobs.length },
      "a worker stopped beating; its jobs go back to the queue",
    );
  }
}
