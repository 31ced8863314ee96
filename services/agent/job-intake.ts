import type { Consumer } from "@nats-io/jetstream";
import type { ActorBus } from "../../shared/bus/actor.js";
import { whenJetStreamAnswers } from "../../shared/bus/jetstream-silent.js";
import { ensureWorkerConsumer } from "../../shared/bus/jobs.js";
import type { KillSwitchView } from "../../shared/bus/kill-switch.js";
import type { ModelBreakers } from "../../shared/bus/model-breakers.js";

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
