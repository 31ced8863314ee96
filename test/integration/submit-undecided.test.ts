import { TimeoutError } from "@nats-io/transport-node";
import { beforeAll, describe, expect, it } from "vitest";
import type { ActorBus } from "../../shared/bus/actor.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { failureReply, serve } from "../../shared/bus/serve.js";
import { SubmitReply } from "../../shared/contracts/control.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { ClusterClient } from "../../services/cli/client.js";
import { FanOutHandler } from "../../services/agent/fanout.js";
import { Admission } from "../../services/supervisor/admission.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { auditKinds } from "../helpers/finished-runs.js";
import { spec } from "../helpers/fixtures.js";
import { aroundRunsBucket } from "../helpers/runs-bucket.js";
import { spawnCall } from "../helpers/spawning.js";

/**
 * A supervisor that cannot reach JetStream while it decides a submit (a stream's leader election,
 * a server restarting) answers that it did not decide: its reads and writes of run statuses time
 * out here, `failing` times for the runs whose ids begin with `key`.
 */
const suite = useActorBus("sud", { random: seededRandom(23) });
const faults = { key: "", failing: 0 };
let served = 0;
let pool: PoolLedger;

function faultyRuns(bus: ActorBus): ActorBus {
  return aroundRunsBucket(bus, ["get", "create"], (key, call) => {
    if (!key.startsWith(faults.key) || faults.failing <= 0) return call();
    faults.failing -= 1;
    return Promise.reject(new TimeoutError());
  });
}

beforeAll(() => {
  pool = PoolLedger.of(suite.bus);
  const bus = faultyRuns(suite.bus);
  const limits = { poolCapacity: 20, maxDepth: 3, treeIterationCap: 100 };
  const admission = new Admission(bus, PoolLedger.of(bus), limits, uuidIds);
  serve(suite.bus.nc, suite.bus.subjects.runsSubmit(), {
    queue: "supervisor",
    reply: SubmitReply,
    logger: silentLogger,
    handle: (msg) => {
      served += 1;
      return admission.submit(msg.data);
    },
    onError: failureReply,
  });
});

const wait = (waitMs: number) => ({ waitMs, clock: systemClock, random: seededRandom(5) });

describe("a submit the supervisor could not decide (JetStream out of its reach)", () => {
  it("of a named run is asked again within the client's wait and admitted, with no rejection in its trail", async () => {
    const runId = `named-undecided-${Date.now()}`;
    Object.assign(faults, { key: runId, failing: 2 });
    served = 0;
    const reply = await new ClusterClient(suite.bus, wait(5_000)).submit({ ...spec(), runId });
    expect(reply).toMatchObject({ ok: true, runId, status: "admitted" });
    expect(served).toBe(3);
    expect(await auditKinds(suite.bus, runId)).toEqual(["run.admitted"]);
    expect((await pool.active()).filter((id) => id === runId)).toHaveLength(1);
  }, 30_000);

  it("of an unnamed run is asked once: it fails with the supervisor's code, retryable", async () => {
    Object.assign(faults, { key: "", failing: 1 });
    served = 0;
    const failed = await new ClusterClient(suite.bus, wait(5_000)).submit(spec()).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(AgentError);
    expect(failed).toMatchObject({
      code: "INTERNAL",
      retryable: true,
      message: expect.stringMatching(
        /^the supervisor could not decide the submit of run \S+ \(timeout\): it was not refused; submit it again under the same runId/,
      ) as unknown,
    });
    expect(served).toBe(1);
  }, 30_000);

  it("of a parent's spawn is asked again: the child admitted, the parent parked on it (not a failed child)", async () => {
    const { state, effect, childId } = await spawnCall(suite.bus.buckets.pool, `parent-a-${Date.now()}`);
    Object.assign(faults, { key: childId, failing: 2 });
    expect(await new FanOutHandler(suite.bus, wait(5_000)).spawn(effect, state)).toBe("park");
    expect(await new RunStatusStore(suite.bus.buckets.runs).get(childId)).toMatchObject({ status: "queued" });
    expect(await auditKinds(suite.bus, childId)).toEqual(["run.admitted"]);
  }, 30_000);

  it("of a parent's spawn still undecided after the wait fails the lease, recording nothing for the child; the retried spawn admits it", async () => {
    const { state, effect, childId } = await spawnCall(suite.bus.buckets.pool, `parent-b-${Date.now()}`);
    Object.assign(faults, { key: childId, failing: 1_000 });
    const failed = await new FanOutHandler(suite.bus, wait(1_000))
      .spawn(effect, state)
      .catch((e: unknown) => e);
    expect(failed).toMatchObject({ code: "INTERNAL", retryable: true });
    faults.failing = 0;
    expect(await new RunStatusStore(suite.bus.buckets.runs).get(childId)).toBeUndefined();
    expect(await auditKinds(suite.bus, childId)).toEqual([]);
    expect(await new FanOutHandler(suite.bus, wait(1_000)).spawn(effect, state)).toBe("park");
    expect(await auditKinds(suite.bus, childId)).toEqual(["run.admitted"]);
  }, 30_000);
});
