import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openActorBus, type ActorBus } from "../../shared/bus/actor.js";
import { queuedJobKinds } from "../../shared/bus/jobs.js";
import { linkOf } from "../../shared/bus/link.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { serve } from "../../shared/bus/serve.js";
import { ControlReply } from "../../shared/contracts/cluster.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { ClusterClient } from "../../services/cli/client.js";
import { controlFailure } from "../../services/supervisor/control-failure.js";
import { haltRun } from "../../services/supervisor/halt.js";
import { treeStatus } from "../helpers/fixtures.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";
import { until } from "../helpers/until.js";

/**
 * An operator's halt whose reply is lost with the connection: the NATS server restarts while the
 * supervisor is answering it. agentctl asks it again once the server is back, and the supervisor
 * queues the halt once (one per state of the run).
 */
describe("a halt whose reply a server restart lost", () => {
  let server: TestNats;
  let supervisor: ActorBus;
  let operator: ActorBus;
  const asked: string[] = [];

  const open = (env: ActorEnv, name: string): Promise<ActorBus> =>
    openActorBus(env, name, { clock: systemClock, random: seededRandom(11), logger: silentLogger });

  beforeAll(async () => {
    // Its own server: the test restarts it.
    server = await startNats({ own: true });
    const env = ActorEnv.parse({ NATS_URL: server.url, AGENTS_PREFIX: `co${process.pid}` });
    supervisor = await open(env, "supervisor-test");
    operator = await open(env, "agentctl-test");
    serve(supervisor.nc, supervisor.subjects.halt(), {
      queue: "supervisor",
      reply: ControlReply,
      logger: silentLogger,
      handle: async (msg) => {
        const reply = await haltRun(supervisor, msg.data);
        asked.push(msg.subject);
        // The first reply goes out while the server is down: it is lost.
        if (asked.length === 1) await systemClock.sleep(1_500);
        return reply;
      },
      onError: controlFailure,
    });
    await supervisor.nc.flush();
  }, 30_000);

  afterAll(async () => {
    await operator?.nc.close();
    await supervisor?.nc.close();
    await server?.stop();
  });

  it("is asked again once the server is back, and queued once", async () => {
    const runId = "halted-across-restart";
    await new RunStatusStore(supervisor.buckets.runs).put(treeStatus(runId, "running"));
    const client = new ClusterClient(operator, {
      waitMs: 20_000,
      clock: systemClock,
      random: seededRandom(3),
    });
    const halted = client.halt({ runId, by: "ops", reason: "incident" });
    await until(() => asked.length === 1, 5_000, { what: "the halt reaches the supervisor" });
    await server.restart?.({ downMs: 500 });
    expect(await halted).toBe(`run ${runId}: halt queued`);
    expect(asked.length).toBeGreaterThanOrEqual(2);
    await until(() => linkOf(supervisor.nc).connected(), 10_000, { what: "the supervisor back" });
    expect(await queuedJobKinds(supervisor, runId)).toEqual(["halt"]);
  }, 60_000);
});
