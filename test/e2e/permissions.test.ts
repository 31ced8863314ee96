import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { provision } from "../../shared/bus/provision.js";
import { Subjects } from "../../shared/bus/subjects.js";
import { NATS_USERS } from "../../services/local/cluster.js";
import { NATS_CONF } from "../../services/local/ensure-nats.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";

/** nats.conf as shipped: its users and permissions on a real server of this suite's own. */
describe("nats.conf", () => {
  let server: TestNats;
  const as = (kind: keyof typeof NATS_USERS) =>
    connect({ servers: server.url, user: NATS_USERS[kind].user, pass: NATS_USERS[kind].password });

  beforeAll(async () => {
    server = await startNats({ configFile: NATS_CONF });
    const nc = await as("supervisor");
    await provision(nc, { subjects: new Subjects(), replicas: 1 });
    await nc.close();
  });
  afterAll(async () => server?.stop());

  it("refuses unauthenticated connections", async () => {
    await expect(connect({ servers: server.url })).rejects.toThrow(/Authorization/i);
  });

  it("nobody can delete or purge AGENT_AUDIT", async () => {
    for (const kind of ["supervisor", "agent", "critic", "tools", "cli"] as const) {
      const nc = await as(kind);
      const jsm = await jetstreamManager(nc, { timeout: 2_000 });
      await expect(jsm.streams.delete("AGENT_AUDIT"), kind).rejects.toThrow();
      await expect(jsm.streams.purge("AGENT_AUDIT"), kind).rejects.toThrow();
      await nc.close();
    }
    const nc = await as("cli");
    const jsm = await jetstreamManager(nc);
    expect((await jsm.streams.info("AGENT_AUDIT")).config.name).toBe("AGENT_AUDIT");
    await nc.close();
  });
});
