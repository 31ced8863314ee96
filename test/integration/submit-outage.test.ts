import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { PoolLedger } from "../../shared/bus/pool.js";
import { failureReply, serve } from "../../shared/bus/serve.js";
import { SubmitReply } from "../../shared/contracts/control.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import type { ServiceWait } from "../../shared/bus/request.js";
import { ClusterClient } from "../../services/cli/client.js";
import { FanOutHandler } from "../../services/agent/fanout.js";
import { Admission } from "../../services/supervisor/admission.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { AGENTCTL, runProcess } from "../helpers/cluster-suite.js";
import { acrossCut, startCuttingProxy } from "../helpers/cutting-proxy.js";
import { auditKinds } from "../helpers/finished-runs.js";
import { spec } from "../helpers/fixtures.js";
import { spawnCall } from "../helpers/spawning.js";

const suite = useActorBus("sbo", { random: seededRandom(17) });
let pool: PoolLedger;

beforeAll(() => {
  pool = PoolLedger.of(suite.bus);
  const admission = new Admission(
    suite.bus,
    pool,
    { poolCapacity: 10, maxDepth: 3, treeIterationCap: 100 },
    uuidIds,
  );
  serve(suite.bus.nc, suite.bus.subjects.runsSubmit(), {
    queue: "supervisor",
    reply: SubmitReply,
    logger: silentLogger,
    handle: (msg) => admission.submit(msg.data),
    onError: failureReply,
  });
});

/** What a request's sender sees of the supervisor: the suite's bus with its own connection. */
type Sender = ConstructorParameters<typeof ClusterClient>[0];

/**
 * A submit (`send`, given the sender's bus and agentctl's wait for the cluster) whose connection is
 * cut the moment it sends the request: the supervisor gets it and answers nowhere. The sender is
 * let back a second later.
 */
function submitAcrossCut<T>(send: (bus: Sender, wait: ServiceWait) => Promise<T>): Promise<T | AgentError> {
  const wait = { waitMs: 10_000, clock: systemClock, random: seededRandom(3) };
  return acrossCut(suite.server, suite.bus.subjects.runsSubmit(), (nc) =>
    Promise.resolve(() => send({ ...suite.bus, nc }, wait).catch((err: unknown) => err as AgentError)),
  );
}

describe("a submit whose reply a dropped connection lost", () => {
  it("of a named run is asked again once the client is back: answered existing, the run admitted once", async () => {
    const runId = `named-${Date.now()}`;
    const reply = await submitAcrossCut((bus, wait) =>
      new ClusterClient(bus, wait).submit({ ...spec(), runId }),
    );
    expect(reply).toMatchObject({ ok: true, runId, status: "existing" });
    expect(await auditKinds(suite.bus, runId)).toEqual(["run.admitted"]);
    expect((await pool.active()).filter((id) => id === runId)).toHaveLength(1);
  }, 30_000);

  it("of an unnamed run fails as unknown (BUS_UNAVAILABLE), not asked again: it would start a second run", async () => {
    const before = (await pool.active()).length;
    const reply = await submitAcrossCut((bus, wait) => new ClusterClient(bus, wait).submit(spec()));
    expect(reply).toBeInstanceOf(AgentError);
    expect(reply).toMatchObject({
      code: "BUS_UNAVAILABLE",
      message: expect.stringMatching(/outcome is unknown/) as unknown,
    });
    // The supervisor admitted the one it got.
    expect((await pool.active()).length).toBe(before + 1);
  }, 30_000);

  it("from agentctl without --run-id: the id agentctl made is sent again once it is back, answered existing, the run admitted once", async () => {
    const file = join(await mkdtemp(join(tmpdir(), "sbo-")), "spec.json");
    await writeFile(file, JSON.stringify(spec()));
    const proxy = await startCuttingProxy(suite.server.url);
    try {
      const cut = proxy.cutOn(suite.bus.subjects.runsSubmit());
      const submitted = runProcess(process.execPath, [AGENTCTL, "submit", file], {
        env: {
          ...process.env,
          NATS_URL: proxy.url,
          AGENTS_PREFIX: suite.bus.subjects.prefix,
          ...(suite.server.user
            ? { NATS_USER: suite.server.user, NATS_PASSWORD: suite.server.pass ?? "" }
            : {}),
        },
      });
      await cut;
      await systemClock.sleep(1_000);
      proxy.admit();
      const [answer, runId = ""] = (await submitted).stdout.trim().split(" ");
      expect(answer).toBe("existing");
      expect(runId).toMatch(/^run-[0-9a-f]{32}$/);
      expect(await auditKinds(suite.bus, runId)).toEqual(["run.admitted"]);
    } finally {
      await proxy.close();
    }
  }, 30_000);

  it("of a parent's spawn is asked again once the worker is back: the child admitted once, the parent parked on it, no lease failed", async () => {
    const { state, effect, childId } = await spawnCall(suite.bus.buckets.pool, `parent-${Date.now()}`);
    const outcome = await submitAcrossCut((bus, wait) => new FanOutHandler(bus, wait).spawn(effect, state));
    expect(outcome).toBe("park");
    expect(await auditKinds(suite.bus, childId)).toEqual(["run.admitted"]);
  }, 30_000);
});
