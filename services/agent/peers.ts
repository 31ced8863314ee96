import type { WorkerBeat } from "../../shared/contracts/cluster.js";

/** A worker instance this one has heard beating. */
export interface Peer {
  workerId: string;
  instance: string;
  deadAfterMs: number;
  /** The ack subjects of the jobs it held at its last beat. */
  jobs: readonly string[];
  lastSeen: number;
  /** When it was last found still connected though silent: its silence counts from then. */
  checkedAt?: number;
  /** How many beats, announcements and ping answers came from it: each is a turn of its event loop. */
  heard: number;
}

/** A gone peer another survivor was to hand back, kept in case that survivor was gone too. */
interface Entrusted {
  peer: Peer;
  survivor: string;
}

/** How long an entrusted peer is kept, in multiples of its deadAfterMs: its jobs are stale by then. */
const ENTRUSTED_FOR = 10;

/**
 * Who else is alive, from their beats: the pure core of WorkerPresence. A peer silent for the time
 * it announced is suspected gone (the shell then asks the server whether its connection is). Its
 * jobs are handed back by exactly one survivor, the live instance whose name sorts first. Handing
 * a job back twice is not harmless on nats-server 2.9, which ignores the delivery count in an ack
 * subject: a second NAK would snatch the job from the worker it was just redelivered to (the WAL's
 * fencing would still stop a second writer).
 */
export class PeerTable {
  private readonly peers = new Map<string, Peer>();
  private entrusted: Entrusted[] = [];

  constructor(private readonly self: string) {}

  /** Records a beat; a leaving worker handed its jobs back itself, so it is simply forgotten. */
  heard(beat: WorkerBeat, now: number): void {
    if (beat.instance === this.self) return;
    if (beat.leaving) {
      this.peers.delete(beat.instance);
      return;
    }
    const { workerId, instance, deadAfterMs, jobs } = beat;
    const heard = (this.peers.get(instance)?.heard ?? 0) + 1;
    this.peers.set(instance, { workerId, instance, deadAfterMs, jobs, lastSeen: now, heard });
  }

  /**
   * Records an announcement: the jobs a peer has just taken, added to those of its last beat (its
   * next beat names them all again); otherwise it counts as a beat. A peer not heard of yet (this
   * instance started after its last beat) is known from now on with these jobs only.
   */
  took(announcement: WorkerBeat, now: number): void {
    const known = this.peers.get(announcement.instance)?.jobs ?? [];
    this.heard({ ...announcement, jobs: [...new Set([...known, ...announcement.jobs])] }, now);
  }

  /**
   * Forgets the peers silent past their deadline; returns those whose jobs this instance must hand
   * back if they are really gone. That includes a peer gone earlier whose designated survivor has
   * now gone too, having fallen silent before that peer's deadline (so it never noticed).
   */
  expire(now: number): Peer[] {
    const silent = (p: Peer): boolean => now - Math.max(p.lastSeen, p.checkedAt ?? 0) > p.deadAfterMs;
    const gone = [...this.peers.values()].filter(silent);
    for (const peer of gone) this.peers.delete(peer.instance);
    const orphans = [...gone];
    const kept: Entrusted[] = [];
    for (const entry of this.entrusted) {
      const survivor = gone.find((g) => g.instance === entry.survivor);
      if (now - entry.peer.lastSeen > ENTRUSTED_FOR * entry.peer.deadAfterMs) continue;
      if (!survivor) kept.push(entry);
      else if (survivor.lastSeen < entry.peer.lastSeen + entry.peer.deadAfterMs) orphans.push(entry.peer);
    }
    this.entrusted = kept;
    if (orphans.length === 0) return [];
    const survivor = this.survivor();
    if (survivor === this.self) return orphans;
    for (const peer of orphans) this.entrusted.push({ peer, survivor });
    return [];
  }

  /**
   * Forgives every peer's silence so far: this instance could not hear them (its connection was
   * down), so their silence says nothing about them.
   */
  excuse(now: number): void {
    for (const peer of this.peers.values()) peer.lastSeen = Math.max(peer.lastSeen, now);
  }

  /**
   * A suspect turned out to be connected (only slow, or stalled): it is watched again, its silence
   * counted from now. A beat heard meanwhile has already put it back.
   */
  stillThere(peer: Peer, now: number): void {
    if (!this.peers.has(peer.instance)) this.peers.set(peer.instance, { ...peer, checkedAt: now });
  }

  /** The jobs the live peers named in their last beats and announcements since. */
  named(): string[] {
    return [...this.peers.values()].flatMap((peer) => peer.jobs);
  }

  /** How often each live peer has been heard from (see Peer.heard). */
  heardCounts(): Map<string, number> {
    return new Map([...this.peers.values()].map((peer) => [peer.instance, peer.heard]));
  }

  /** The live instances this one knows of, itself excluded. */
  get live(): number {
    return this.peers.size;
  }

  /**
   * Whether this instance sorts first among the live ones it knows of: the one that acts for all of
   * them (hands back the jobs of the gone, looks for jobs nobody holds).
   */
  leads(): boolean {
    return this.survivor() === this.self;
  }

  /** The live instance that hands back the jobs of the gone: the one whose name sorts first. */
  private survivor(): string {
    let first = this.self;
    for (const instance of this.peers.keys()) if (instance < first) first = instance;
    return first;
  }
}
