/**
 * The faults, while the runs go: a live worker killed with SIGKILL every `killEveryMs` (± half,
 * drawn from the seed) and a replacement started at once; the nats-server killed and started again
 * once, and the supervisor rolled once, when the given shares of the runs have finished. Each
 * fault is kept with its time, for the report and for reading the runs' trails against.
 */
import type { Random } from "../../dist/shared/runtime/random.js";
import type { ChaosCluster } from "./cluster.ts";

export interface Fault {
  at: number;
  /** When the cluster was whole again: the server back, the new supervisor ready (a kill: at once). */
  end: number;
  kind: "kill" | "nats-restart" | "supervisor-roll";
  target: string;
}

export interface FaultPlan {
  killEveryMs: number;
  maxKills: number;
  /** Share of the runs finished (0..1) at which the nats-server restarts; undefined: never. */
  restartAt?: number;
  natsDownMs: number;
  /** Share of the runs finished at which the supervisor rolls; undefined: never. */
  rollAt?: number;
}

export class Faults {
  readonly log: Fault[] = [];
  readonly errors: string[] = [];
  private readonly pending = new Set<Promise<unknown>>();
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private restarted = false;
  private rolled = false;

  private readonly cluster: ChaosCluster;
  private readonly plan: FaultPlan;
  private readonly random: Random;
  private readonly say: (line: string) => void;

  constructor(cluster: ChaosCluster, plan: FaultPlan, random: Random, say: (line: string) => void) {
    this.cluster = cluster;
    this.plan = plan;
    this.random = random;
    this.say = say;
  }

  count(kind: Fault["kind"]): number {
    return this.log.filter((f) => f.kind === kind).length;
  }

  /** Starts the kills. */
  start(): void {
    if (this.plan.killEveryMs <= 0) return;
    const next = (): void => {
      if (this.stopped) return;
      this.timer = setTimeout(
        () => {
          this.kill();
          next();
        },
        this.plan.killEveryMs * (0.5 + this.random.next()),
      );
    };
    next();
  }

  /** Told each time a run finishes: the one-off faults come at their share of the runs. */
  progress(share: number): void {
    if (!this.restarted && this.plan.restartAt !== undefined && share >= this.plan.restartAt) {
      this.restarted = true;
      this.track("nats-restart", "nats-server", this.cluster.restartNats(this.plan.natsDownMs));
    }
    if (!this.rolled && this.plan.rollAt !== undefined && share >= this.plan.rollAt) {
      this.rolled = true;
      this.track("supervisor-roll", "supervisor", this.cluster.rollSupervisor());
    }
  }

  /** Stops the kills and waits for what is under way (a restart, replacements starting). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  /** A live worker killed (one at least stays), and a replacement started. */
  private kill(): void {
    const live = this.cluster.workers;
    if (live.length < 2 || this.count("kill") >= this.plan.maxKills) return;
    const victim = live[Math.floor(this.random.next() * live.length)] as string;
    this.cluster.killWorker(victim);
    // The others go on at once: the replacement's start is not part of the fault.
    this.track("kill", victim, this.cluster.addWorker(), true);
  }

  private track(kind: Fault["kind"], target: string, work: Promise<unknown>, instant = false): void {
    const fault: Fault = { at: Date.now(), end: Date.now(), kind, target };
    this.log.push(fault);
    this.say(`fault: ${kind} ${target}`);
    const done = work.then(
      () => {
        if (!instant) fault.end = Date.now();
      },
      (err: unknown) => void this.errors.push(`${kind} ${target}: ${String(err)}`),
    );
    this.pending.add(done);
    void done.finally(() => this.pending.delete(done));
  }
}
