import { describe, expect, it } from "vitest";
import { RunLease } from "../../services/agent/drive.js";
import type { LeaseDeps } from "../../services/agent/lease-deps.js";
import { IterationLeases } from "../../services/agent/leases.js";
import { publishAudit } from "../../shared/bus/audit.js";
import { KillSwitchView } from "../../shared/bus/kill-switch.js";
import { WalWriter } from "../../shared/bus/wal.js";
import type { RunJob } from "../../shared/contracts/cluster.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { systemRandom } from "../../shared/runtime/random.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { describeTool } from "../../shared/tools/tool.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { auditGate, auditTrail, within } from "../helpers/audit-gate.js";
import { echoCall, runner, spec } from "../helpers/fixtures.js";

const suite = useActorBus("ft", { random: systemRandom });

/** A lease as a worker makes one for a job delivered again (no spec, no event), on `bus`. */
function leaseOf(bus: LeaseDeps["bus"], job: RunJob): RunLease {
  const deps = {
    bus,
    checkpointEvery: 3,
    statusEveryMs: 1_000,
    discover: () => Promise.resolve([describeTool(echoTool)]),
    performer: { restore: () => Promise.resolve(true) },
    leases: new IterationLeases(bus, 4),
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
  it("ends only once the events that worker did not publish are stored: its job is not acknowledged before", async () => {
    const runId = "ft-committed";
    const result = await runner({ checkpointEvery: 3 }).run(
      spec({ script: [echoCall("one"), echoCall("two"), { text: "done" }] }),
      { runId },
    );
    expect(result.state.status).toBe("committed");
    // The dead worker wrote the whole log, then published all but the run's last three events.
    await new WalWriter(suite.bus, runId, "agent-d-1-00000000.j1", 0, 0).appendBatch(result.wal);
    const published = result.audit.length - 3;
    for (const event of result.audit.slice(0, published)) await publishAudit(suite.bus, event);

    const gate = auditGate(suite.bus.nc);
    const job: RunJob = { schemaVersion: 1, runId, rootRunId: runId, depth: 0, auditSeq: 1 };
    const run = leaseOf({ ...suite.bus, nc: gate.nc }, job).run();
    const early = await within(run, 500);
    // Acknowledged now, the job would be gone with the events still missing if this worker died.
    expect(early).toBe("waiting");
    expect((await auditTrail(suite.bus, runId)).length).toBe(published);
    gate.open();
    expect(await run).toBe("done");
    const events = await auditTrail(suite.bus, runId);
    expect(events.map((e) => e.seq)).toEqual(result.audit.map((e) => e.seq));
    expect(events.at(-1)?.kind).toBe("run.committed");
  });
});
