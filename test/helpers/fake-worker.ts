import { jetstream, type JsMsg } from "@nats-io/jetstream";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { AgentEnv } from "../../services/agent/env.js";
import { ensureWorkerConsumer } from "../../shared/bus/jobs.js";
import type { ClusterSuite } from "./cluster-suite.js";

/** The job consumer's ack wait as the workers set it: the product's default. */
export const WORKER_ACK_WAIT_MS = AgentEnv.parse({}).AGENT_ACK_WAIT_MS;

/** A worker played by a connection of the test's own: it takes jobs, and does nothing with them. */
export interface FakeWorker {
  readonly nc: NatsConnection;
  /** Pulls one job from the shared consumer (waits for it); the job is neither renewed nor acked. */
  take(): Promise<JsMsg>;
  close(): Promise<void>;
}

/** Connects a fake worker to the suite's server. */
export async function fakeWorker(suite: ClusterSuite): Promise<FakeWorker> {
  const { server, bus } = suite;
  const nc = await connect({
    servers: server.url,
    ...(server.user ? { user: server.user, pass: server.pass ?? "" } : {}),
  });
  return {
    nc,
    take: async () => {
      const consumer = await ensureWorkerConsumer(bus.jsm, bus.subjects, { ackWaitMs: WORKER_ACK_WAIT_MS });
      const job = await (
        await jetstream(nc).consumers.get(bus.subjects.streams().runs, consumer)
      ).next({
        expires: 20_000,
      });
      if (!job) throw new Error("the fake worker was offered no job");
      return job;
    },
    close: async () => {
      if (!nc.isClosed()) await nc.close();
    },
  };
}
