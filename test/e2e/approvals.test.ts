import { describe, expect, it } from "vitest";
import { continuationJob, publishJob, WORKER_CONSUMER } from "../../shared/bus/jobs.js";
import { readIterations } from "../../shared/bus/tree-iterations.js";
import { AGENTCTL, runProcess, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";

const suite = useClusterSuite("approvals", {
  actors: [
    { kind: "supervisor" },
    { kind: "tools", env: { TOOLS: "echo" } },
    { kind: "critic" },
    { kind: "agent", name: "agent-1" },
  ],
  env: { AGENT_ACK_WAIT_MS: "2000", AGENT_RETRY_DELAY_MS: "500" },
});

const agentctl = (...args: string[]): Promise<{ stdout: string; stderr: string }> =>
  runProcess(process.execPath, [AGENTCTL, ...args], {
    env: { ...process.env, NATS_URL: suite.server.url, AGENTS_PREFIX: suite.prefix },
  });

async function parked(script: { text: string }[]): Promise<{ runId: string; iteration: number }> {
  const { runId } = await suite.client.submit(spec({ requiresApproval: true, script }));
  const status = await suite.waitFor(runId, (s) => s.status === "awaiting_approval");
  return { runId, iteration: status.iteration };
}

/** Jobs the worker consumer has taken, and whether any is still queued or being worked on. */
async function queue(): Promise<{ delivered: number; busy: number }> {
  const info = await suite.bus.jsm.consumers.info(suite.bus.subjects.streams().runs, WORKER_CONSUMER);
  return { delivered: info.delivered.consumer_seq, busy: info.num_pending + info.num_ack_pending };
}

describe("approvals through agentctl, on a cluster of processes", () => {
  it("the run waits in awaiting_approval holding no worker; approve commits it, reject fails it and keeps the reason", async () => {
    const approved = await parked([{ text: "ship it" }]);
    const rejected = await parked([{ text: "ship it" }]);
    // Parked runs hold no job: once the worker acknowledges the last one (just after it records
    // the wait), nothing is pending or being worked on in the queue.
    await expect.poll(async () => (await queue()).busy, { timeout: 5_000 }).toBe(0);
    expect((await agentctl("approve", approved.runId, "--by", "alice")).stdout).toMatch(/approve recorded/);
    await agentctl("reject", rejected.runId, "--by", "bob", "--reason", "not today");

    expect((await suite.waitFor(approved.runId, settled)).status).toBe("committed");
    const decided = (await suite.audit(approved.runId)).find((e) => e.kind === "approval.decided");
    expect(decided).toMatchObject({
      actor: "human",
      status: "passed",
      data: { decision: "approve", by: "alice" },
    });

    const failed = await suite.waitFor(rejected.runId, settled);
    expect(failed.status).toBe("failed");
    expect(failed.terminal?.reason).toBe("rejected");
    const refused = (await suite.audit(rejected.runId)).find((e) => e.kind === "approval.decided");
    expect(refused).toMatchObject({
      actor: "human",
      status: "failed",
      reason: "not today",
      data: { decision: "reject", by: "bob" },
    });
  }, 60_000);

  it("modify sends the run back to its agent with the feedback; the revision asks again, and approving it commits the revision", async () => {
    const run = await parked([{ text: "The report." }, { text: "The report, dated 2026-11-24." }]);
    const out = await agentctl("modify", run.runId, "--by", "carol", "--feedback", "add the date");
    expect(out.stdout).toMatch(/modify recorded/);

    const again = await suite.waitFor(
      run.runId,
      (s) => s.status === "awaiting_approval" && s.iteration > run.iteration,
    );
    expect(again.status).toBe("awaiting_approval");
    const trail = await suite.audit(run.runId);
    expect(trail.filter((e) => e.kind === "approval.requested")).toHaveLength(2);
    expect(trail.find((e) => e.kind === "approval.decided")).toMatchObject({
      reason: "add the date",
      data: { decision: "modify", by: "carol" },
    });
    expect(trail.some((e) => e.kind === "repair.started")).toBe(true);

    await agentctl("approve", run.runId, "--by", "carol");
    const done = await suite.waitFor(run.runId, settled);
    expect(done.status).toBe("committed");
    expect(done.terminal?.output).toBe("The report, dated 2026-11-24.");

    // Feedback is what modify is for: without it the request never leaves agentctl.
    const bad = await agentctl("modify", run.runId).catch((err: { code: number; stderr: string }) => err);
    expect(bad).toMatchObject({ code: 2 });
    expect(JSON.parse((bad as { stderr: string }).stderr.trim().split("\n").at(-1) ?? "")).toMatchObject({
      error: { code: "INVALID_INPUT" },
    });
  }, 60_000);

  it("a job with no event for a parked run (a re-queue) changes nothing: the run stays parked, and what its worker reserved ahead goes back to the tree", async () => {
    const run = await parked([{ text: "ship it" }]);
    const used = () => readIterations(suite.bus, run.runId);
    const calls = (await suite.audit(run.runId)).filter((e) => e.kind === "model.responded").length;
    expect(calls).toBe(1);
    await expect.poll(used, { timeout: 5_000 }).toBe(calls);

    const before = await queue();
    const status = await suite.waitFor(run.runId, (s) => s.status === "awaiting_approval");
    await publishJob(suite.bus, continuationJob(status), `${run.runId}:requeue`);
    await expect
      .poll(
        async () => {
          const now = await queue();
          return now.delivered > before.delivered && now.busy === 0;
        },
        { timeout: 10_000 },
      )
      .toBe(true);
    // The worker reserves as it opens any job without an event (most lead to a model call); this
    // one needed none, and what it reserved went back.
    await expect.poll(used, { timeout: 5_000 }).toBe(calls);
    expect((await suite.waitFor(run.runId, (s) => s.status === "awaiting_approval")).iteration).toBe(
      run.iteration,
    );
    await agentctl("approve", run.runId, "--by", "dave");
    expect((await suite.waitFor(run.runId, settled)).status).toBe("committed");
    const all = (await suite.audit(run.runId)).filter((e) => e.kind === "model.responded").length;
    await expect.poll(used, { timeout: 5_000 }).toBe(all);
  }, 60_000);
});
