import { describe, expect, it } from "vitest";
import { WORKER_CONSUMER, publishJob } from "../../shared/bus/jobs.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { AGENTCTL, runProcess, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";

const RETAIN_MS = 500;

const suite = useClusterSuite("retention", {
  actors: [{ kind: "supervisor", env: { SUPERVISOR_WAL_RETAIN_MS: String(RETAIN_MS) } }],
});

/** How many messages the WAL stream holds for one run. */
async function walMessages(runId: string): Promise<number> {
  const info = await suite.bus.jsm.streams.info(suite.bus.subjects.streams().wal, {
    subjects_filter: suite.bus.subjects.wal(runId),
  });
  return Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
}

describe("a finished run's WAL, with SUPERVISOR_WAL_RETAIN_MS set", () => {
  it("is removed after the retention; its status and audit trail stay, and its first job delivered again does not start it afresh", async () => {
    const agent = await suite.cluster.start("agent", "agent-1");
    const runSpec = spec({ tools: [], script: [{ text: "kept in the audit trail" }] });
    const { runId } = await suite.client.submit(runSpec);
    const status = await suite.waitFor(runId, (s) => s.status === "committed");
    expect(await walMessages(runId)).toBeGreaterThan(0);
    await until(async () => (await walMessages(runId)) === 0, 10_000, { what: "the WAL removed" });
    const trail = await suite.audit(runId);
    expect(trail.map((e) => e.kind)).toContain("run.committed");
    const replay = await runProcess(process.execPath, [AGENTCTL, "replay", runId], { env: suite.env() }).then(
      () => ({ stderr: "", code: 0 }),
      (err: { stderr: string; code: number }) => err,
    );
    expect(replay.code).not.toBe(0);
    const error = JSON.parse(replay.stderr.trim().split("\n").at(-1) ?? "{}") as {
      error?: { code: string; message: string };
    };
    expect(error.error?.code).toBe("NOT_FOUND");
    expect(error.error?.message).toMatch(/WAL was removed/);

    // The run's first job delivered again after that, as when its worker's ack was lost with it.
    agent.child.kill("SIGTERM");
    await agent.exited;
    const { bus } = suite;
    const job = { schemaVersion: 1 as const, runId, rootRunId: runId, depth: 0, auditSeq: 1 };
    await publishJob(bus, { ...job, spec: RunSpec.parse({ ...runSpec, runId }) }, `${runId}:again`);
    const consumer = await bus.js.consumers.get(bus.subjects.streams().runs, WORKER_CONSUMER);
    const taken = await consumer.next({ expires: 5_000 });
    expect(taken?.subject).toBe(bus.subjects.runQueue(runId));
    taken?.nak();
    await suite.cluster.start("agent", "agent-2");
    // Dropped, or (what this guards against) started afresh: a new WAL.
    const dropped = async () => /job dropped: its run finished/.test(await suite.log("agent-2"));
    await until(async () => (await dropped()) || (await walMessages(runId)) > 0, 10_000, {
      what: "the job dropped or the run restarted",
    });
    expect(await walMessages(runId)).toBe(0);
    expect(await suite.audit(runId)).toEqual(trail);
    expect(await suite.client.status.get(runId)).toEqual(status);
    expect(await dropped()).toBe(true);
  }, 40_000);
});
