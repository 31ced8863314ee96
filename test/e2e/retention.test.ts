import { firstJobHandledAgain } from "../helpers/first-job-again.js";
import { describe, expect, it } from "vitest";
import { AGENTCTL, runProcess, useClusterSuite } from "../helpers/cluster-suite.js";
import { logMessages } from "../helpers/finished-runs.js";
import { spec } from "../helpers/fixtures.js";

const DAY_MS = 86_400_000;

const suite = useClusterSuite("retention", {
  actors: [{ kind: "supervisor", env: { SUPERVISOR_LOG_MAX_AGE_MS: String(DAY_MS) } }],
});

describe("a finished run's log, with SUPERVISOR_LOG_MAX_AGE_MS set", () => {
  it("is kept until the max_age the supervisor gives the run log; its status and audit trail stay, replay reads it, and its first job delivered again does not start it afresh", async () => {
    const { config } = await suite.bus.jsm.streams.info(suite.bus.subjects.streams().log);
    expect(config).toMatchObject({ max_age: DAY_MS * 1_000_000, deny_delete: true, deny_purge: true });

    const agent = await suite.cluster.start("agent", "agent-1");
    const runSpec = spec({ tools: [], script: [{ text: "kept in the run log" }] });
    const { runId } = await suite.client.submit(runSpec);
    const status = await suite.waitFor(runId, (s) => s.status === "committed");
    const written = await logMessages(suite.bus, runId);
    expect(written).toBeGreaterThan(0);
    const trail = await suite.audit(runId);
    expect(trail.at(-1)?.kind).toBe("run.committed");
    const replay = await runProcess(process.execPath, [AGENTCTL, "replay", runId], { env: suite.env() });
    expect(replay.stdout).toMatch(
      new RegExp(`replay of ${runId}: .*reproduced identically.*\\(committed, COMMIT\\)`),
    );

    agent.child.kill("SIGTERM");
    await agent.exited;
    await firstJobHandledAgain(suite, runSpec, runId, "agent-2");
    // Read to its commit, the run is not started again: nothing is added to its log or its trail.
    expect(await logMessages(suite.bus, runId)).toBe(written);
    expect(await suite.audit(runId)).toEqual(trail);
    const { updatedAt: _, ...kept } = status;
    expect(await suite.client.status.get(runId)).toMatchObject(kept);
  }, 40_000);
});
