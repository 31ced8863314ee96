import { Kvm } from "@nats-io/kv";
import { connect, type NatsConnection } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NATS_USERS } from "../../services/local/cluster.js";
import { NATS_CONF } from "../../services/local/ensure-nats.js";
import { openActorBus, type ActorBus } from "../../shared/bus/actor.js";
import { bucketStream } from "../../shared/bus/subjects.js";
import {
  REDACTED_INPUTS_MAX_AGE_MS,
  redactedInputKey,
  runRedactedInputs,
} from "../../shared/bus/redacted-inputs.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";

/** The redacted inputs' bucket under the shipped permission model (nats.conf's users). */
describe("the redacted inputs' bucket", () => {
  let server: TestNats;
  let supervisor: ActorBus;
  let agent: ActorBus;
  const others: NatsConnection[] = [];
  const open = (kind: keyof typeof NATS_USERS) =>
    openActorBus(
      ActorEnv.parse({
        NATS_URL: server.url,
        NATS_USER: NATS_USERS[kind].user,
        NATS_PASSWORD: NATS_USERS[kind].password,
      }),
      `${kind}-test`,
      { clock: systemClock, random: seededRandom(5), logger: silentLogger },
    );

  beforeAll(async () => {
    server = await startNats({ configFile: NATS_CONF });
    supervisor = await open("supervisor");
    agent = await open("agent");
  }, 30_000);
  afterAll(async () => {
    for (const nc of [supervisor?.nc, agent?.nc, ...others]) await nc?.close();
    await server?.stop();
  });

  it("keeps a run's call input for the agents, reads it back, forgets it; provisioned on file storage with its max_age", async () => {
    const inputs = runRedactedInputs(agent.buckets.redactedInputs, "run-1", agent);
    const callId = "call/with:odd chars é";
    await inputs.keep(callId, { apiKey: "sk-kept" });
    expect(await runRedactedInputs(agent.buckets.redactedInputs, "run-1", agent).read(callId)).toEqual({
      input: { apiKey: "sk-kept" },
    });
    expect(
      await runRedactedInputs(agent.buckets.redactedInputs, "run-2", agent).read(callId),
    ).toBeUndefined();
    await inputs.forget(callId);
    expect(await inputs.read(callId)).toBeUndefined();
    const name = bucketStream(agent.subjects.buckets().redactedInputs);
    const info = await agent.jsm.streams.info(name);
    expect(info.config.storage).toBe("file");
    expect(info.config.max_age).toBe(REDACTED_INPUTS_MAX_AGE_MS * 1_000_000);
    // Forgotten is gone from the store: a purge leaves a marker with no data.
    expect(info.state.messages).toBe(1);
    const key = `$KV.${agent.subjects.buckets().redactedInputs}.${redactedInputKey("run-1", callId)}`;
    const marker = await agent.jsm.streams.getMessage(name, { last_by_subj: key });
    expect(marker?.data.length).toBe(0);
  });

  it("every user but the agents' may neither read nor write it", async () => {
    const inputs = runRedactedInputs(agent.buckets.redactedInputs, "run-3", agent);
    await inputs.keep("c1", { apiKey: "sk-only-agents" });
    const bucket = agent.subjects.buckets().redactedInputs;
    for (const kind of ["supervisor", "critic", "tools", "cli", "console"] as const) {
      const nc = await connect({
        servers: server.url,
        user: NATS_USERS[kind].user,
        pass: NATS_USERS[kind].password,
      });
      others.push(nc);
      const kv = await new Kvm(nc).open(bucket);
      const key = redactedInputKey("run-3", "c1");
      await expect(kv.get(key), kind).rejects.toThrow(/Permissions Violation/);
      await expect(kv.put(key, new TextEncoder().encode("x")), kind).rejects.toThrow(/Permissions Violation/);
    }
    expect(await inputs.read("c1")).toEqual({ input: { apiKey: "sk-only-agents" } });
  }, 60_000);
});
