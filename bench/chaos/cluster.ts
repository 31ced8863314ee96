/**
 * The soak's cluster, every actor a real OS process on 127.0.0.1: nats-server with the repo's
 * nats.conf and a store of its own, a supervisor, agent workers, a critic and the booking
 * service, each connecting as its own nats.conf user. The faults act through it.
 */
import { spawn } from "node:child_process";
import { createWriteStream } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { LocalCluster, NATS_USERS, type ActorProcess } from "../../dist/services/local/cluster.js";
import { NATS_CONF } from "../../dist/services/local/ensure-nats.js";
import { startLocalNats, type LocalNats } from "../../dist/services/local/nats-server.js";

const BOOKING_SERVICE = fileURLToPath(new URL("booking-service.ts", import.meta.url));
/** How long a process may take to be ready: replacements start while the machine is busy with the runs. */
const READY_MS = 60_000;

export interface ChaosClusterOptions {
  workers: number;
  logDir: string;
  ledger: string;
  bookMs: number;
  /** The environment of every actor (pool capacity and the like). */
  env: Record<string, string>;
}

export class ChaosCluster {
  /** Workers started and ready, in start order; a killed one leaves the list. */
  readonly workers: string[] = [];
  private supervisor = "supervisor-1";
  private started = 0;
  private rolls = 0;
  private booking?: { exited: Promise<unknown>; kill: (signal: NodeJS.Signals) => void };

  readonly nats: LocalNats;
  readonly actors: LocalCluster;
  private readonly options: ChaosClusterOptions;

  private constructor(nats: LocalNats, actors: LocalCluster, options: ChaosClusterOptions) {
    this.nats = nats;
    this.actors = actors;
    this.options = options;
  }

  static async start(options: ChaosClusterOptions): Promise<ChaosCluster> {
    const nats = await startLocalNats({ configFile: NATS_CONF });
    const actors = new LocalCluster({
      natsUrl: nats.url,
      useConfUsers: true,
      logDir: options.logDir,
      env: options.env,
      readyTimeoutMs: READY_MS,
    });
    const cluster = new ChaosCluster(nats, actors, options);
    try {
      // The supervisor provisions the streams and buckets first.
      await actors.start("supervisor", cluster.supervisor);
      await Promise.all([
        actors.start("critic"),
        cluster.startBooking(),
        ...Array.from({ length: options.workers }, () => cluster.addWorker()),
      ]);
    } catch (err) {
      await cluster.stop();
      throw err;
    }
    return cluster;
  }

  /** Starts one more worker; it counts as live once it is ready. */
  async addWorker(): Promise<string> {
    this.started += 1;
    const name = `agent-${this.started}`;
    await this.actors.start("agent", name);
    this.workers.push(name);
    return name;
  }

  /** SIGKILL to a live worker (a crash: no drain, no hand-back). */
  killWorker(name: string): void {
    this.workers.splice(this.workers.indexOf(name), 1);
    this.actors.signal(name, "SIGKILL");
  }

  /** The nats-server killed, down `downMs`, and started again on its port and store. */
  restartNats(downMs: number): Promise<void> {
    return this.nats.restart({ signal: "SIGKILL", downMs });
  }

  /** The supervisor rolled: SIGTERM (it answers what it has taken, then exits), then a new one. */
  async rollSupervisor(): Promise<void> {
    const old = this.actors.actors.get(this.supervisor) as ActorProcess;
    this.actors.signal(this.supervisor, "SIGTERM");
    await old.exited;
    this.rolls += 1;
    this.supervisor = `supervisor-${this.rolls + 1}`;
    await this.actors.start("supervisor", this.supervisor);
  }

  async stop(): Promise<void> {
    this.booking?.kill("SIGTERM");
    await Promise.all([this.booking?.exited, this.actors.stop(5_000)]);
    await this.nats.stop();
  }

  /** SIGKILL to every process of the cluster: the soak's own deadline passed while it stopped. */
  killAll(): void {
    for (const actor of this.actors.actors.values()) actor.child.kill("SIGKILL");
    this.booking?.kill("SIGKILL");
    if (this.nats.pid !== undefined) process.kill(this.nats.pid, "SIGKILL");
  }

  /** The booking service (bench/chaos/booking-service.ts), as the tool user, logging beside the actors. */
  private startBooking(): Promise<void> {
    const logFile = join(this.options.logDir, "booking.log");
    const log = createWriteStream(logFile, { flags: "a" });
    const child = spawn(process.execPath, [BOOKING_SERVICE], {
      env: {
        ...process.env,
        ...this.options.env,
        NATS_URL: this.nats.url,
        NATS_USER: NATS_USERS.tools.user,
        NATS_PASSWORD: NATS_USERS.tools.password,
        CHAOS_LEDGER: this.options.ledger,
        CHAOS_BOOK_MS: String(this.options.bookMs),
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = new Promise((resolve) => child.once("exit", resolve));
    this.booking = { exited, kill: (signal) => child.kill(signal) };
    child.stdout.pipe(log);
    child.stderr.pipe(log);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the booking service was not ready within ${READY_MS} ms: see ${logFile}`)),
        READY_MS,
      );
      const onData = (chunk: Buffer): void => {
        if (!chunk.toString().includes("booking service ready")) return;
        clearTimeout(timer);
        child.stdout.off("data", onData);
        resolve();
      };
      child.stdout.on("data", onData);
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`the booking service exited before it was ready: see ${logFile}`));
      });
    });
  }
}
