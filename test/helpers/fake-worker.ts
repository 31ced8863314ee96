import { jetstream, type JsMsg } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { ackSubjectOf } from "../../services/agent/strays.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { ensureWorkerConsumer } from "../../shared/bus/jobs.js";
import { WorkerBeat } from "../../shared/contracts/cluster.js";
import type { ClusterSuite } from "./cluster-suite.js";

/** The job consumer's ack wait in the suites that use fake workers: far longer than a hand-back. */
export const FAKE_WORKER_ACK_WAIT_MS = 60_000;

/**
 * The cluster settings of a suite whose workers are judged within a second or so, with the ack
 * wait long enough to tell a hand-back from it. Start it with no agent worker: a job submitted
 * then can only go to a fake worker's pull.
 */
export const FAST_PRESENCE_ENV = {
  AGENT_ACK_WAIT_MS: String(FAKE_WORKER_ACK_WAIT_MS),
  AGENT_BEAT_MS: "250",
  AGENT_DEAD_AFTER_MS: "1000",
  AGENT_STATUS_EVERY_MS: "0",
};

/** A worker as the others see it, played by a connection of the test's own. */
export interface FakeWorker {
  readonly nc: NatsConnection;
  /** Sends one beat naming `jobs`. */
  beat(jobs?: readonly string[]): void;
  /** Pulls one job from the shared consumer (waits for it); the job is neither named nor acked. */
  take(): Promise<JsMsg>;
  close(): Promise<void>;
}

/** Connects a fake worker under `instance` (its worker id too); it beats only when told to. */
export async function fakeWorker(suite: ClusterSuite, instance: string): Promise<FakeWorker> {
  const { server, bus } = suite;
  const nc = await connect({
    servers: server.url,
    ...(server.user ? { user: server.user, pass: server.pass ?? "" } : {}),
  });
  return {
    nc,
    beat: (jobs = []) =>
      nc.publish(
        bus.subjects.workerBeat(instance),
        encode(WorkerBeat, {
          schemaVersion: 1,
          workerId: instance,
          instance,
          deadAfterMs: 1_000,
          jobs: [...jobs],
        }),
      ),
    take: async () => {
      const consumer = await ensureWorkerConsumer(bus.jsm, bus.subjects, {
        ackWaitMs: FAKE_WORKER_ACK_WAIT_MS,
      });
      const job = await (
        await jetstream(nc).consumers.get(bus.subjects.streams().runs, consumer)
      ).next({
        expires: 20_000,
      });
      if (!job) throw new Error(`the fake worker ${instance} was offered no job`);
      return job;
    },
    close: async () => {
      if (!nc.isClosed()) await nc.close();
    },
  };
}

/** The subject a job is acknowledged on: every job a pull delivers has one. */
export function ackSubject(job: JsMsg): string {
  const subject = ackSubjectOf(job);
  if (!subject) throw new Error("a pulled job without an ack subject");
  return subject;
}

/** Starts an agent worker and settles once it has beaten: from then on it hears the others. */
export async function startHeard(suite: ClusterSuite, name: string): Promise<void> {
  const { nc, subjects } = suite.bus;
  const beaten = new Promise<void>((resolve) => {
    const sub = nc.subscribe(subjects.workerBeatAll(), {
      callback: (err, msg) => {
        if (err || decode(WorkerBeat, msg.data).workerId !== name) return;
        sub.unsubscribe();
        resolve();
      },
    });
  });
  await suite.cluster.start("agent", name);
  await beaten;
}
