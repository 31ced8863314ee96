import { jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll } from "vitest";
import { connectBus } from "../../shared/bus/connect.js";
import { provision } from "../../shared/bus/provision.js";
import { Subjects } from "../../shared/bus/subjects.js";
import { InstantClock } from "../../shared/runtime/clock.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { startNats, type TestNats } from "./nats-server.js";

export interface BusSuite {
  server: TestNats;
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  subjects: Subjects;
  clock: InstantClock;
  random: ReturnType<typeof seededRandom>;
  /** The provisioned KV buckets, open. */
  buckets: { runs: KV; pool: KV; idempotency: KV; memory: KV; modelBreakers: KV };
}

/**
 * A real nats-server, a connection and provisioned streams for one suite, under a prefix of its
 * own so suites sharing a server (NATS_URL) never see each other. Fields are filled in beforeAll.
 */
export function useBusSuite(name: string, options: { own?: boolean } = {}): BusSuite {
  const suite = {
    subjects: new Subjects(`${name}${process.pid}x${Date.now().toString(36)}`),
    clock: new InstantClock(0),
    random: seededRandom(1),
  } as BusSuite;
  beforeAll(async () => {
    // `own`: a server of the suite's own, which its tests may restart (TestNats.restart).
    suite.server = await startNats({ own: options.own ?? false });
    suite.nc = await connectBus({
      servers: suite.server.url,
      name: `${name}-test`,
      logger: silentLogger,
      ...(suite.server.user ? { user: suite.server.user, pass: suite.server.pass ?? "" } : {}),
    });
    await provision(suite.nc, { subjects: suite.subjects, replicas: 1 });
    suite.js = jetstream(suite.nc);
    suite.jsm = await jetstreamManager(suite.nc);
    const kvm = new Kvm(suite.nc);
    const names = suite.subjects.buckets();
    suite.buckets = {
      runs: await kvm.open(names.runs),
      pool: await kvm.open(names.pool),
      idempotency: await kvm.open(names.idempotency),
      memory: await kvm.open(names.memory),
      modelBreakers: await kvm.open(names.modelBreakers),
    };
  });
  afterAll(async () => {
    await suite.nc?.drain();
    await suite.server?.stop();
  });
  return suite;
}
