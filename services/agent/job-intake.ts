import { JetStreamError, type Consumer, type JsMsg } from "@nats-io/jetstream";
import type { ActorBus } from "../../shared/bus/actor.js";
import { whenJetStreamAnswers } from "../../shared/bus/jetstream-silent.js";
import { ensureWorkerConsumer } from "../../shared/bus/jobs.js";
import type { KillSwitchView } from "../../shared/bus/kill-switch.js";
import type { ModelBreakers } from "../../shared/bus/model-breakers.js";
import type { Clock } from "../../shared/runtime/clock.js";
import type { Logger } from "../../shared/runtime/logger.js";
import { Recurring, type Occurrences } from "../../shared/runtime/recurring.js";

/**
 * What a worker binds on JetStream before it takes a job: the shared job consumer, and its watches
 * of the kill switch and of the model breakers. Each step is asked again (the watches started over)
 * while JetStream does not answer: a worker started as a JetStream cluster elects its leaders is
 * not stopped by one request's timeout.
 */
export async function bindJobIntake(
  bus: ActorBus,
  ackWaitMs: number,
  watches: { killSwitch: KillSwitchView; breakers: ModelBreakers },
): Promise<{ name: string; consumer: Consumer }> {
  return whenJetStreamAnswers("the worker's job consumer and watches", bus, async () => {
    const name = await ensureWorkerConsumer(bus.jsm, bus.subjects, { ackWaitMs });
    const consumer = await bus.js.consumers.get(bus.subjects.streams().runs, name);
    watches.killSwitch.stop();
    await watches.killSwitch.start(bus.buckets.pool, bus.logger);
    watches.breakers.stop();
    await watches.breakers.start();
    return { name, consumer };
  });
}

/** How long one job pull waits: a draining worker stops within this. */
export const JOB_PULL_MS = 1_000;
/**
 * The most jobs one pull asks for (never more than the worker has room for). One job per pull
 * capped a busy worker's intake at one job per turn of its event loop: at C = 1,000 on two cores
 * the queue kept 800 jobs waiting while the workers, with room for 1,000, held 170, and a run
 * waited 7.6 s (median) for its first step. Workers still share a burst: the server hands its
 * messages to the open pulls in turn, one each (FIFO per message). 32 did
 * better than 8 at C = 1,000 and worse at C = 100 (side by side, two pairs each).
 */
export const JOB_PULL_BATCH = 8;

/**
 * A job pull (JOB_PULL_MS) that got neither a job nor the server's idle heartbeat (every 500 ms)
 * for two heartbeats fails with this; a busy server does that, after a burst of writes, say. The
 * client gives no code for it, only this message.
 */
export function pullWentSilent(err: unknown): boolean {
  return err instanceof JetStreamError && err.message === "heartbeats missed";
}

/** How often a pull that keeps going silent, or failing, is said again while it lasts. */
export const PULL_SAY_EVERY_MS = 30_000;

export interface JobPulls {
  clock: Clock;
  logger: Logger;
  /** Aborted when the worker drains: no pull after it. */
  signal: AbortSignal;
  /** How many more jobs the worker has room for now. */
  room: () => number;
  /** Settles when a job the worker holds ends. */
  whenRoom: () => Promise<unknown>;
  take: (msg: JsMsg) => void;
}

/**
 * Pulls jobs for as long as the worker runs. A pull that goes silent or fails is said once, then
 * every PULL_SAY_EVERY_MS with how often it happened meanwhile, and the end of a run of them once:
 * while JetStream did not answer, each worker logged one warning a second.
 */
export async function pullJobs(consumer: Consumer, pulls: JobPulls): Promise<void> {
  const silent = new Recurring(pulls.clock, PULL_SAY_EVERY_MS);
  const failing = new Recurring(pulls.clock, PULL_SAY_EVERY_MS);
  while (!pulls.signal.aborted) {
    const free = pulls.room();
    if (free <= 0) {
      await pulls.whenRoom();
      continue;
    }
    try {
      const jobs = await consumer.fetch({
        max_messages: Math.min(JOB_PULL_BATCH, free),
        expires: JOB_PULL_MS,
      });
      for await (const msg of jobs) pulls.take(msg);
      sayOver(pulls.logger, "went silent", silent.over());
      sayOver(pulls.logger, "failed", failing.over());
    } catch (err) {
      if (pullWentSilent(err)) {
        // The pull is over, not broken: a pause before the next one only adds to the wait of a
        // job the silent second already held up.
        const said = silent.again();
        if (said)
          pulls.logger.warn(said, "the server answered a job pull with nothing for 1 s; pulling again");
        continue;
      }
      const said = failing.again();
      if (said) pulls.logger.warn({ err, ...said }, "pulling a job failed; retrying");
      await pulls.clock.sleep(500);
    }
  }
}

/** A single silent or failed pull was said already; a run of them is said to have ended. */
function sayOver(logger: Logger, what: string, ended: Occurrences | undefined): void {
  if (ended && ended.times > 1) {
    logger.info(
      ended,
      `job pulls answered again, after ${ended.times} in a row ${what} over ${ended.forMs} ms`,
    );
  }
}
