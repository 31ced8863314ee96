import { firstJobHandledAgain } from "../helpers/first-job-again.js";
import { describe, expect, it } from "vitest";
import { readBucket } from "../../shared/bus/bucket-read.js";
import { treeCapKey } from "../../shared/bus/tree-iterations.js";
import { readFanOut } from "../../shared/bus/fanout.js";
import { IterationLeases } from "../../services/agent/leases.js";
import { AGENTCTL, agentctlFails, runProcess, useClusterSuite } from "../helpers/cluster-suite.js";
import { logMessages } from "../helpers/finished-runs.js";
import { spec } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";

const suite = useClusterSuite("status-retention", {
  actors: [
    {
      kind: "supervisor",
      env: { SUPERVISOR_STATUS_RETAIN_MS: "1000" },
    },
  ],
});

describe("a finished run's status, with SUPERVISOR_STATUS_RETAIN_MS set", () => {
  it("is removed after the retention, no marker left, its log kept; agentctl says so; its id is refused a new run, and its first job delivered again starts nothing and brings no status back", async () => {
    const agent = await suite.cluster.start("agent", "agent-1");
    const runSpec = spec({ tools: [], script: [{ text: "gone from the runs bucket" }] });
    const runId = "status-removed";
    await suite.client.submit({ ...runSpec, runId });
    await suite.waitFor(runId, (s) => s.status === "committed");
    const written = await logMessages(suite.bus, runId);
    expect(written).toBeGreaterThan(0);
    await until(async () => (await suite.bus.buckets.runs.get(runId)) === null, 10_000, {
      what: "the status removed",
    });
    // The log is kept whole: the stream refuses purges, and only its max_age removes a message.
    expect(await logMessages(suite.bus, runId)).toBe(written);
    const trail = await suite.audit(runId);
    expect(trail.at(-1)?.kind).toBe("run.committed");

    const status = await agentctlFails(suite, ["status", runId]);
    expect(status.code).not.toBe(0);
    expect(status.error?.code).toBe("NOT_FOUND");
    expect(status.error?.message).toMatch(/status was removed/);
    const never = await agentctlFails(suite, ["status", "never-submitted"]);
    expect(never.error).toMatchObject({ code: "NOT_FOUND", message: "no run 'never-submitted'" });
    // What it did stays readable from its log: replay reproduces it.
    const replay = await runProcess(process.execPath, [AGENTCTL, "replay", runId], { env: suite.env() });
    expect(replay.stdout).toMatch(
      new RegExp(`replay of ${runId}: .*reproduced identically.*\\(committed, COMMIT\\)`),
    );

    // Started again, it would call its tools again under keys whose records are gone.
    await expect(suite.client.submit({ ...runSpec, runId })).rejects.toMatchObject({ code: "RUN_REMOVED" });
    expect(await suite.bus.buckets.runs.get(runId)).toBeNull();
    const refused = await suite.audit(runId);
    expect(refused.slice(0, -1)).toEqual(trail);
    // Recorded beside the run's log, not in it: the log is the run's own.
    expect(refused.at(-1)).toMatchObject({ kind: "run.rejected", seq: 1, data: { code: "RUN_REMOVED" } });
    expect(await logMessages(suite.bus, runId)).toBe(written);

    agent.child.kill("SIGTERM");
    await agent.exited;
    await firstJobHandledAgain(suite, runSpec, runId, "agent-2");
    expect(await logMessages(suite.bus, runId)).toBe(written);
    expect(await suite.audit(runId)).toEqual(refused);
    // A status written back would never be removed again (the run's commit was swept already).
    expect(await suite.bus.buckets.runs.get(runId)).toBeNull();
  }, 40_000);

  it("a run tree's cap and counter go with its root's status; a run of the retired tree is granted nothing, and no child of it is admitted", async () => {
    await suite.cluster.start("agent", "agent-3");
    const child = spec({ tools: [], script: [{ text: "child done" }] });
    const rootId = "retired-tree";
    await suite.client.submit({
      ...spec({
        script: [
          { toolCalls: [{ name: "spawn_agent", input: { runs: [child] } }] },
          { toolCalls: [{ name: "finish", input: { answer: "parent done" } }] },
        ],
        tools: ["spawn_agent"],
        capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
      }),
      runId: rootId,
    });
    await until(async () => (await readFanOut(suite.bus.buckets.runs, rootId)) !== undefined, 10_000, {
      what: "the fan-out",
    });
    const [childId] = (await readFanOut(suite.bus.buckets.runs, rootId))?.children ?? [];
    await suite.waitFor(rootId, (s) => s.status === "committed", 20_000);
    const tree = treeCapKey(rootId);
    await until(async () => (await suite.bus.buckets.pool.get(tree)) === null, 10_000, {
      what: "the tree's cap removed",
    });
    // Removed by its sequence: no delete marker, and the pool bucket keeps nothing of the tree.
    const keys: string[] = [];
    for await (const { key } of readBucket(suite.bus.jsm, suite.bus.subjects.buckets().pool)) keys.push(key);
    expect(keys).not.toContain(tree);
    // The status goes next (after the fan-out record): a sweep stopped between the two does both again.
    await until(async () => (await suite.bus.buckets.runs.get(rootId)) === null, 5_000, {
      what: "the root's status removed",
    });
    expect(await suite.log("supervisor")).toMatch(/finished run tree's budget removed/);
    // The tree's counter was purged before: the counters stream keeps nothing of the tree.
    const counter = suite.bus.subjects.treeCounter(rootId, "iterations");
    const counters = suite.bus.subjects.streams().counters;
    expect(await suite.bus.jsm.direct.getMessage(counters, { last_by_subj: counter })).toBeNull();

    // The child, were it resumed now, reserves iterations: the tree is not counted afresh.
    const reserved = new IterationLeases(suite.bus, 4).reserve(
      { runId: childId ?? "", rootRunId: rootId },
      1,
    );
    await expect(reserved).rejects.toMatchObject({ code: "GLOBAL_CAP", details: { retired: true } });
    expect(await suite.bus.buckets.pool.get(tree)).toBeNull();
    await expect(
      suite.client.submit({ ...child, parent: { runId: rootId, rootRunId: rootId, depth: 0 } }),
    ).rejects.toMatchObject({
      code: "GLOBAL_CAP",
      message: expect.stringMatching(/no iteration budget/) as string,
    });
  }, 40_000);
});
