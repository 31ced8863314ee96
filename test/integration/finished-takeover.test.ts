import { describe, expect, it } from "vitest";
import { RunLease } from "../../services/agent/drive.js";
import type { LeaseDeps } from "../../services/agent/lease-deps.js";
import { IterationLeases } from "../../services/agent/leases.js";
import { LeaseRedaction } from "../../services/agent/redaction.js";
import { KillSwitchView } from "../../shared/bus/kill-switch.js";
import { LogWriter, readLog } from "../../shared/bus/run-log.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { statusOf } from "../../shared/loop/status.js";
import type { RunJob } from "../../shared/contracts/cluster.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { describeTool } from "../../shared/tools/tool.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { auditTrail } from "../helpers/audit-trail.js";
import { echoCall, runner, spec } from "../helpers/fixtures.js";

const suite = useActorBus("ft", { random: systemRandom });

/** A lease as a worker makes one for a job delivered again (no spec, no event), on `bus`. */
function leaseOf(bus: LeaseDeps["bus"], job: RunJob): RunLease {
  const deps = {
    bus,
    checkpointEvery: 3,
    discover: () => Promise.resolve([describeTool(echoTool)]),
    performer: { restore: () => Promise.resolve(true) },
    redaction: new LeaseRedaction(undefined),
    leases: new IterationLeases(bus, 4).forRun(job),
    killSwitch: new KillSwitchView(),
    workerId: "agent-t",
    writerId: "agent-t-1-00000000.j1",
    jobSeq: 1,
    heldElsewhere: () => Promise.resolve(false),
    deliveryCount: 2,
    logger: silentLogger,
    metrics: new ActorMetrics("agent"),
    heartbeat: () => undefined,
    heartbeatMs: 1_000,
    stopping: new AbortController().signal,
    retryDelay: () => 0,
    modelOutageMs: 0,
    breakerOf: () => undefined,
  } as unknown as LeaseDeps;
  return new RunLease(deps, job);
}

describe("a job for a run that committed while its worker died", () => {
  it("ends at once: the log holds the run's events with its records, and the status is brought up to date", async () => {
    const runId = "ft-committed";
    const result = await runner({ checkpointEvery: 3 }).run(
      spec({ script: [echoCall("one"), echoCall("two"), { text: "done" }] }),
      { runId },
    );
    expect(result.state.status).toBe("committed");
    // The dead worker wrote the whole run, records and events, and died before its status write.
    const { terminal: _, ...running } = statusOf(result.state, Date.now());
    await new RunStatusStore(suite.bus.buckets.runs).put({ ...running, status: "running", phase: "ACT" });
    await new LogWriter(suite.bus, runId, "agent-d-1-00000000.j1", 0, 0).append(result.wal, result.audit);
    const job: RunJob = { schemaVersion: 1, runId, rootRunId: runId, depth: 0, auditSeq: 1 };
    expect(await leaseOf(suite.bus, job).run()).toBe("done");
    expect(await new RunStatusStore(suite.bus.buckets.runs).get(runId)).toMatchObject({
      status: "committed",
    });
    // Nothing written twice: the trail is the run's, once.
    const events = await auditTrail(suite.bus, runId);
    expect(events).toEqual(result.audit);
    expect((await readLog(suite.bus, runId)).messages).toBe(1);
  });

  it("is dropped when the run's status is gone (removed by retention): nothing is written back", async () => {
    const runId = "ft-removed";
    const result = await runner().run(spec(), { runId });
    await new LogWriter(suite.bus, runId, "agent-d-1-00000000.j1", 0, 0).append(result.wal, result.audit);
    const job: RunJob = { schemaVersion: 1, runId, rootRunId: runId, depth: 0, auditSeq: 1 };
    expect(await leaseOf(suite.bus, job).run()).toBe("done");
    expect(await new RunStatusStore(suite.bus.buckets.runs).get(runId)).toBeUndefined();
  });
});
