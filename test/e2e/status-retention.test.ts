import { describe, expect, it } from "vitest";
import { agentctlFails, useClusterSuite } from "../helpers/cluster-suite.js";
import { walMessages } from "../helpers/finished-runs.js";
import { firstJobAgain } from "../helpers/first-job-again.js";
import { spec } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";

const suite = useClusterSuite("status-retention", {
  actors: [
    {
      kind: "supervisor",
      env: { SUPERVISOR_WAL_RETAIN_MS: "300", SUPERVISOR_STATUS_RETAIN_MS: "1000" },
    },
  ],
});

describe("a finished run's status, with SUPERVISOR_STATUS_RETAIN_MS set", () => {
  it("is removed after the retention, no marker left; agentctl says so; its id is refused a new run, and its first job delivered again is dropped", async () => {
    const agent = await suite.cluster.start("agent", "agent-1");
    const runSpec = spec({ tools: [], script: [{ text: "gone from the runs bucket" }] });
    const runId = "status-removed";
    await suite.client.submit({ ...runSpec, runId });
    await suite.waitFor(runId, (s) => s.status === "committed");
    await until(async () => (await suite.bus.buckets.runs.get(runId)) === null, 10_000, {
      what: "the status removed",
    });
    expect(await walMessages(suite.bus, runId)).toBe(0);
    const trail = await suite.audit(runId);
    expect(trail.at(-1)?.kind).toBe("run.committed");

    const status = await agentctlFails(suite, ["status", runId]);
    expect(status.code).not.toBe(0);
    expect(status.error?.code).toBe("NOT_FOUND");
    expect(status.error?.message).toMatch(/status was removed/);
    const never = await agentctlFails(suite, ["status", "never-submitted"]);
    expect(never.error).toMatchObject({ code: "NOT_FOUND", message: "no run 'never-submitted'" });
    const replay = await agentctlFails(suite, ["replay", runId]);
    expect(replay.error?.message).toMatch(/finished, and its WAL was removed/);

    // Started again, it would call its tools again under keys whose records are gone.
    await expect(suite.client.submit({ ...runSpec, runId })).rejects.toMatchObject({ code: "RUN_REMOVED" });
    expect(await suite.bus.buckets.runs.get(runId)).toBeNull();
    const refused = await suite.audit(runId);
    expect(refused.slice(0, -1)).toEqual(trail);
    expect(refused.at(-1)).toMatchObject({ kind: "run.rejected", seq: trail.length + 1 });

    agent.child.kill("SIGTERM");
    await agent.exited;
    expect(await firstJobAgain(suite, runSpec, runId, "agent-2")).toEqual({ dropped: true, walMessages: 0 });
    expect(await suite.audit(runId)).toEqual(refused);
    expect(await suite.bus.buckets.runs.get(runId)).toBeNull();
  }, 40_000);
});
