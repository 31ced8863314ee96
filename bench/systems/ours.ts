import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Msg, Subscription } from "@nats-io/transport-node";
import { openActorBus, type ActorBus } from "../../dist/shared/bus/actor.js";
import { publishJob } from "../../dist/shared/bus/jobs.js";
import { PART_HEADER } from "../../dist/shared/bus/wal-parts.js";
import type { RunJob } from "../../dist/shared/contracts/cluster.js";
import { ClusterClient } from "../../dist/services/cli/client.js";
import { LocalCluster } from "../../dist/services/local/cluster.js";
import { systemClock } from "../../dist/shared/runtime/clock.js";
import { ActorEnv, parseEnv } from "../../dist/shared/runtime/config.js";
import { createLogger } from "../../dist/shared/runtime/logger.js";
import { systemRandom } from "../../dist/shared/runtime/random.js";
import type { LoopTiming } from "../lib/drive.ts";
import { logMessage } from "../lib/log-message.ts";
import { STEPS, ourLoopSpec } from "../lib/workload.ts";

/** One loop's timings: step latencies (submit → 1st model turn, then turn → turn) and the whole loop. */
export interface RunTiming extends LoopTiming {
  runId: string;
  status: string;
}

interface Tracker {
  /** When the bench first heard of the run (its submit, or an event that beat the submit's reply). */
  createdAt: number;
  submittedAt: number;
  lastAt: number;
  stepsMs: number[];
  status?: string;
  endedAt?: number;
  done?: (t: RunTiming) => void;
}

/**
 * The cluster settings of the benchmark: room for 1,000 loops in flight on two workers (the
 * defaults suit a small deployment: 8 runs per worker, 16 pool slots), production logging.
 */
export const OUR_BENCH_ENV: Record<string, string> = {
  AGENT_CONCURRENCY: "500",
  SUPERVISOR_POOL_CAPACITY: "20000",
  SUPERVISOR_TREE_ITERATION_CAP: "10000000",
};
const now = (): number => performance.now();

/** The headlines that settle a loop for the bench, and the status each stands for. */
const SETTLING: Record<string, string> = {
  "run.committed": "committed",
  "run.failed": "failed",
  "run.halted": "halted",
  "approval.requested": "awaiting_approval",
};

/** A part of a split message but its last (see wal-parts.ts). */
function isEarlierPart(msg: Msg): boolean {
  const [at, of] = (msg.headers?.get(PART_HEADER) ?? "").split("/");
  return at !== undefined && at !== "" && at !== of;
}

/**
 * Our runtime as users run it: a supervisor, the tool service, a critic and two agent workers,
 * each its own process, on one nats-server. The bench watches the run log with a plain
 * subscription to time each step as it becomes durable, and each run's end by its message's
 * subject (its headline event).
 */
export class OurCluster {
  private readonly trackers = new Map<string, Tracker>();
  /** Log messages this process has taken in, per run (its subscription can lag behind a burst). */
  private readonly logTaken = new Map<string, number>();
  private readonly subs: Subscription[] = [];
  /** Runs the bench no longer follows (see forget). */
  private readonly forgotten = new Set<string>();
  /** Called for every log message as it becomes durable: its run, record types and writer (from the message id). */
  readonly logListeners = new Set<
    (message: { runId: string; types: string[]; writer: string; at: number }) => void
  >();

  readonly cluster: LocalCluster;
  readonly bus: ActorBus;
  readonly client: ClusterClient;
  readonly logDir: string;

  private constructor(cluster: LocalCluster, bus: ActorBus, client: ClusterClient, logDir: string) {
    this.cluster = cluster;
    this.bus = bus;
    this.client = client;
    this.logDir = logDir;
  }

  static async start(natsUrl: string, env: Record<string, string> = {}, agents = 2): Promise<OurCluster> {
    const logDir = await mkdtemp(join(tmpdir(), "bench-ours-"));
    const cluster = new LocalCluster({ natsUrl, useConfUsers: false, logDir, env });
    await cluster.start("supervisor");
    const names = Array.from({ length: agents }, (_, i) => `agent-${i + 1}`);
    await Promise.all([
      cluster.start("tools"),
      cluster.start("critic"),
      ...names.map((name) => cluster.start("agent", name)),
    ]);
    const logger = createLogger({ actor: "bench", level: "error" });
    const bus = await openActorBus(parseEnv(ActorEnv, { NATS_URL: natsUrl }), "bench", {
      clock: systemClock,
      random: systemRandom,
      logger,
    });
    const ours = new OurCluster(cluster, bus, new ClusterClient(bus), logDir);
    ours.watch();
    return ours;
  }

  get pids(): Map<string, number> {
    return new Map([...this.cluster.actors].map(([name, actor]) => [name, actor.child.pid ?? 0]));
  }

  private tracker(runId: string): Tracker {
    let t = this.trackers.get(runId);
    if (!t) {
      const at = now();
      t = { createdAt: at, submittedAt: at, lastAt: at, stepsMs: [] };
      this.trackers.set(runId, t);
    }
    return t;
  }

  private watch(): void {
    const { nc, subjects } = this.bus;
    const log = nc.subscribe(subjects.logAll());
    this.subs.push(log);
    void (async () => {
      for await (const msg of log) {
        const { runId, types } = logMessage(msg);
        const at = now();
        if (this.logListeners.size > 0) {
          const writer = msg.headers?.get("Nats-Msg-Id").split(":")[2] ?? "";
          for (const listener of this.logListeners) listener({ runId, types, writer, at });
        }
        if (this.forgotten.has(runId)) continue;
        this.logTaken.set(runId, (this.logTaken.get(runId) ?? 0) + 1);
        if (types.includes("MODEL")) {
          const t = this.tracker(runId);
          t.stepsMs.push(at - t.lastAt);
          t.lastAt = at;
        }
        // Every part of a split message carries its headline: the run settles with the last.
        if (!isEarlierPart(msg)) this.settled(runId, msg.subject.split(".").slice(3).join("."));
      }
    })();
  }

  /** A run whose message is headed `kind`: settled when that ends it or leaves it to a human. */
  private settled(runId: string, kind: string): void {
    const status = SETTLING[kind];
    if (!status) return;
    const t = this.tracker(runId);
    t.status = status;
    t.endedAt = now();
    this.settle(runId, t);
  }

  private settle(runId: string, t: Tracker): void {
    if (!t.done || t.endedAt === undefined) return;
    const status = t.status ?? "?";
    const ok = status === "committed" && t.stepsMs.length === STEPS;
    t.done({ runId, stepsMs: t.stepsMs, loopMs: t.endedAt - t.submittedAt, status, ok });
    this.trackers.delete(runId);
    this.logTaken.delete(runId);
  }

  /** Submits one W1 loop and resolves when it settles (terminal, halted or waiting for approval). */
  async runLoop(spec: Record<string, unknown> = ourLoopSpec()): Promise<RunTiming> {
    const submittedAt = now();
    const reply = await this.client.submit(spec);
    const t = this.tracker(reply.runId);
    // Events can beat the submit's reply: the first step then counts from the submit, not from them.
    if (t.stepsMs.length > 0) t.stepsMs[0] = t.stepsMs[0]! + (t.createdAt - submittedAt);
    else t.lastAt = submittedAt;
    t.submittedAt = submittedAt;
    return new Promise((resolve) => {
      t.done = resolve;
      this.settle(reply.runId, t);
    });
  }

  /**
   * Resolves once this process has taken in `count` log messages of the run: a timing that starts
   * earlier would count the backlog of a burst the bench itself wrote.
   */
  async caughtUp(runId: string, count: number, timeoutMs = 60_000): Promise<void> {
    const until = now() + timeoutMs;
    while ((this.logTaken.get(runId) ?? 0) < count) {
      if (now() > until)
        throw new Error(
          `the bench took in only ${this.logTaken.get(runId) ?? 0}/${count} log messages of ${runId}`,
        );
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  }

  /**
   * Stops following a run the bench did not submit, and drops what it kept of it (a W3 history's
   * tracker holds a timing per step of its history, 10,000 for the longest, for the rest of the
   * bench otherwise).
   */
  forget(runId: string): void {
    this.forgotten.add(runId);
    this.trackers.delete(runId);
    this.logTaken.delete(runId);
  }

  /**
   * Hands a run to the workers with `job` and times it until the run's next log message is durable:
   * one holding the model's next turn, else the run did not resume (it failed, say) and this throws.
   */
  async timeResume(runId: string, job: RunJob): Promise<number> {
    const t0 = now();
    const appended = new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`run ${runId} was not resumed within 60 s`)), 60_000);
      const listener = (record: { runId: string; types: string[]; at: number }): void => {
        if (record.runId !== runId) return;
        clearTimeout(timer);
        this.logListeners.delete(listener);
        if (record.types.includes("MODEL")) resolve(record.at - t0);
        else
          reject(
            new Error(`run ${runId} did not resume: its next log message holds ${record.types.join(", ")}`),
          );
      };
      this.logListeners.add(listener);
    });
    await publishJob(this.bus, job, `${runId}:resume:${Date.now()}`);
    return appended;
  }

  /** Bytes JetStream holds for the runtime: the run log, the job queue and every KV bucket it writes. */
  async storedBytes(): Promise<number> {
    let total = 0;
    for (const name of this.bus.subjects.storeStreams())
      total += (await this.bus.jsm.streams.info(name)).state.bytes;
    return total;
  }

  async stop(): Promise<void> {
    for (const sub of this.subs) sub.unsubscribe();
    await this.bus.nc.drain();
    await this.cluster.stop();
  }
}
