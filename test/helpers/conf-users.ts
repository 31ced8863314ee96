import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll } from "vitest";
import { provision } from "../../shared/bus/provision.js";
import type { Subjects } from "../../shared/bus/subjects.js";
import { NATS_USERS } from "../../services/local/cluster.js";
import { NATS_CONF } from "../../services/local/ensure-nats.js";
import { startNats, type TestNats } from "./nats-server.js";

export type ConfUser = keyof typeof NATS_USERS;

/**
 * A nats-server on the shipped nats.conf for the suite, provisioned by its supervisor user, and a
 * connection as any of its users (closed with the suite): real logins, real denials.
 */
export function useConfUsers(subjects: Subjects): {
  server: () => TestNats;
  as: (user: ConfUser) => Promise<NatsConnection>;
} {
  let server: TestNats | undefined;
  const open: NatsConnection[] = [];
  const running = (): TestNats => {
    if (!server) throw new Error("the nats.conf server is not started yet (use it inside a test)");
    return server;
  };
  const as = async (user: ConfUser): Promise<NatsConnection> => {
    const { user: name, password } = NATS_USERS[user];
    const nc = await connect({ servers: running().url, user: name, pass: password });
    open.push(nc);
    return nc;
  };
  beforeAll(async () => {
    server = await startNats({ configFile: NATS_CONF });
    await provision(await as("supervisor"), { subjects, replicas: 1 });
  });
  afterAll(async () => {
    await Promise.all(open.map((nc) => nc.close()));
    await server?.stop();
  });
  return { server: running, as };
}
