import type { JsMsg } from "@nats-io/jetstream";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { encode } from "../../shared/bus/codec.js";

/** The subject a job is acknowledged on; the client's message class has it, its public type does not. */
export function ackSubjectOf(msg: JsMsg): string | undefined {
  const reply = "reply" in msg ? msg.reply : undefined;
  return typeof reply === "string" && reply.length > 0 ? reply : undefined;
}

/**
 * A worker's beat, naming the jobs it holds, every `beatMs`: how `agentctl cluster` lists the live
 * workers. Nothing acts on it: JetStream gives a dead worker's jobs to another once their ack wait
 * passes without a renewal.
 */
export class WorkerBeats {
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly bus: Pick<ActorBus, "nc" | "subjects" | "logger">,
    private readonly self: {
      workerId: string;
      instance: string;
      beatMs: number;
      /** The policies the worker registers (see WorkerBeat.policies). */
      policies: readonly string[];
    },
    /** The ack subjects of the jobs held now. */
    private readonly held: () => string[],
  ) {}

  start(): void {
    this.send(false);
    this.timer = setInterval(() => this.send(false), this.self.beatMs);
    this.timer.unref();
  }

  /** The last beat says the worker is leaving (it drained): `agentctl cluster` shows it so. */
  stop(): void {
    clearInterval(this.timer);
    this.send(true);
  }

  private send(leaving: boolean): void {
    const { workerId, instance, beatMs, policies } = this.self;
    const beat: WorkerBeat = {
      schemaVersion: 1,
      workerId,
      instance,
      deadAfterMs: 4 * beatMs,
      jobs: leaving ? [] : this.held().slice(0, 1_000),
      ...(leaving ? { leaving } : {}),
      ...(policies.length > 0 ? { policies: [...policies] } : {}),
    };
    try {
      this.bus.nc.publish(this.bus.subjects.workerBeat(instance), encode(WorkerBeat, beat));
    } catch (err) {
      // A closed or reconnecting connection: the next beat names every job held.
      this.bus.logger.debug({ err }, "a worker beat was not sent");
    }
  }
}
