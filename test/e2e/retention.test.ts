import { describe, expect, it } from "vitest";
import { agentctlFails, useClusterSuite } from "../helpers/cluster-suite.js";
import { walMessages } from "../helpers/finished-runs.js";
import { firstJobAgain } from "../helpers/first-job-again.js";
import { spec } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";

const RETAIN_MS = 500;

const suite = useClusterSuite("retention", {
  actors: [{ kind: "supervisor", env: { SUPERVISOR_WAL_RETAIN_MS: String(RETAIN_MS) } }],
});

describe("a finished run's WAL, with SUPERVISOR_WAL_RETAIN_MS set", () => {
  it("is removed after the retention; its status and audit trail stay, and its first job delivered again does not start it afresh", async () => {
    const agent = await suite.cluster.start("agent", "agent-1");
    const runSpec = spec({ tools: [], script: [{ text: "kept in the audit trail" }] });
    const { runId } = await suite.client.submit(runSpec);
    const status = await suite.waitFor(runId, (s) => s.status === "committed");
    expect(await walMessages(suite.bus, runId)).toBeGreaterThan(0);
    await until(async () => (await walMessages(suite.bus, runId)) === 0, 10_000, { what: "the WAL removed" });
    const trail = await suite.audit(runId);
    expect(trail.map((e) => e.kind)).toContain("run.committed");
    const replay = await agentctlFails(suite, ["replay", runId]);
    expect(replay.code).not.toBe(0);
    expect(replay.error?.code).toBe("NOT_FOUND");
    expect(replay.error?.message).toMatch(/committed, and its WAL was removed/);

    agent.child.kill("SIGTERM");
    await agent.exited;
    expect(await firstJobAgain(suite, runSpec, runId, "agent-2")).toEqual({ dropped: true, walMessages: 0 });
    expect(await suite.audit(runId)).toEqual(trail);
    expect(await suite.client.status.get(runId)).toEqual(status);
  }, 40_000);
});
