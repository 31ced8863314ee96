import { describe, expect, it } from "vitest";
import { publishJob } from "../../shared/bus/jobs.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { openTree } from "../../shared/bus/tree-iterations.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import {
  agentctlOf,
  ended,
  serveCharge,
  settled,
  OPERATOR_CLUSTER,
  useClusterSuite,
} from "../helpers/cluster-suite.js";
import { queuedStatus, spec } from "../helpers/fixtures.js";
import { parentOfOne } from "../helpers/spawning.js";
import { until } from "../helpers/until.js";

/** The model's turn the halt lands in: long enough that its answer comes after the halt. */
const SLOW_TURN_MS = 3_000;

const suite = useClusterSuite("halt", OPERATOR_CLUSTER);

const { run: agentctl, refusal } = agentctlOf(suite);

describe("agentctl halt: one run stopped where it is", () => {
  it("a run in the middle of a model turn halts at once, frees its pool slot, and the worker's late answer is fenced off; other runs go on; resume continues it and nothing is paid twice", async () => {
    const { executions } = serveCharge(suite, 0, "pay");
    const halted = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "pay", input: { amount: 1 } }] },
          { toolCalls: [{ name: "echo", input: { text: "slow" } }], delayMs: SLOW_TURN_MS },
          { toolCalls: [{ name: "finish", input: { answer: "halted, resumed, done" } }] },
        ],
        tools: ["pay", "echo"],
      }),
    );
    const other = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "echo", input: { text: "a" } }], delayMs: 1_000 },
          { toolCalls: [{ name: "finish", input: { answer: "not halted" } }] },
        ],
      }),
    );
    // Paid, and now in its slow turn (whose records, the payment's result among them, are written
    // with the turn's answer).
    await until(() => executions.size === 1, 10_000, { what: "the payment made" });
    await new Promise((r) => setTimeout(r, 300));
    const asked = Date.now();
    const reply = await agentctl("halt", halted.runId, "--reason", "runaway spend", "--by", "oncall");
    expect(reply.stdout).toMatch(/halt queued/);
    const status = await suite.waitFor(halted.runId, (s) => s.status === "halted", 10_000);
    // Not at its next step: the turn still had seconds to go.
    expect(Date.now() - asked).toBeLessThan(SLOW_TURN_MS);
    expect(status.terminal?.reason).toBe("runaway spend");
    const events = await suite.audit(halted.runId);
    expect(events.find((e) => e.kind === "run.halted")).toMatchObject({
      actor: "human",
      data: { by: "oncall" },
    });
    // The operator finds it among the runs not finished, and among the halted ones.
    const listed = JSON.parse((await agentctl("runs", "--status", "halted", "--json")).stdout) as {
      runId: string;
    }[];
    expect(listed.map((r) => r.runId)).toContain(halted.runId);
    expect((await agentctl("runs")).stdout).toMatch(new RegExp(`^${halted.runId} +halted +`, "m"));
    expect(await refusal("runs", "--status", "paused")).toMatchObject({ code: "INVALID_INPUT" });
    const pool = PoolLedger.of(suite.bus);
    await until(async () => !(await pool.active()).includes(halted.runId), 5_000, {
      what: "its pool slot freed",
    });
    // The turn's answer, when it comes, is not written: its worker no longer drives the run.
    await until(
      async () => (await suite.logs()).includes("fenced: another worker drives this run"),
      SLOW_TURN_MS * 3,
      {
        what: "the turn's worker fenced off",
      },
    );
    expect((await suite.client.statusOf(halted.runId))?.status).toBe("halted");
    expect((await suite.waitFor(other.runId, settled, 15_000)).status).toBe("committed");
    // Halted twice, or halted when finished: refused, with a stable code.
    expect(await refusal("halt", halted.runId)).toMatchObject({ code: "INVALID_INPUT" });
    expect(await refusal("halt", other.runId)).toMatchObject({ code: "INVALID_INPUT" });
    expect(await refusal("halt", "run-nobody")).toMatchObject({ code: "NOT_FOUND" });

    expect((await agentctl("resume", halted.runId, "--by", "oncall")).stdout).toMatch(/resume queued/);
    // Not `settled`, which a halted run already is.
    const done = await suite.waitFor(
      halted.runId,
      (st) => st.status === "committed" || st.status === "failed",
      20_000,
    );
    expect(done).toMatchObject({ status: "committed", terminal: { output: "halted, resumed, done" } });
    expect([...executions.values()]).toEqual([1]);
    const trail = await suite.audit(halted.runId);
    expect(trail.map((e) => e.seq)).toEqual(trail.map((_, i) => i + 1));
    expect(trail.filter((e) => e.kind === "run.halted")).toHaveLength(1);
    expect(trail.filter((e) => e.kind === "run.resumed")).toHaveLength(1);
  }, 60_000);

  it("a run waiting for approval halts where it waits, and resumes to wait again", async () => {
    const { runId } = await suite.client.submit(
      spec({ requiresApproval: true, script: [{ text: "ship it" }] }),
    );
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval", 10_000);
    await agentctl("halt", runId, "--by", "oncall");
    const halted = await suite.waitFor(runId, (s) => s.status === "halted", 10_000);
    expect(halted.terminal?.reason).toBe("stopped by an operator");
    // Its approval is not taken while it is halted.
    expect(await refusal("approve", runId)).toMatchObject({ code: "INVALID_INPUT" });
    await agentctl("resume", runId, "--by", "oncall");
    await suite.waitFor(runId, (s) => s.status === "awaiting_approval", 10_000);
    await agentctl("approve", runId, "--by", "alice");
    expect(await suite.waitFor(runId, settled, 10_000)).toMatchObject({
      status: "committed",
      terminal: { output: "ship it" },
    });
  }, 60_000);

  it.each([
    {
      command: "halt",
      queued: "halt queued (it has not started yet: it halts once a worker starts it)",
      ends: { status: "halted", terminal: { reason: "before it ran" } },
    },
    {
      command: "cancel",
      queued:
        "cancel queued: it stops once a worker starts it (it has not started yet), undoes what it can, then fails",
      ends: { status: "failed", terminal: { reason: "[RUN_CANCELLED] cancelled by oncall: before it ran" } },
    },
  ])(
    "a run no worker has started yet is stopped once one does: its $command waits for it",
    async ({ command, queued: said, ends }) => {
      // Admitted, its first job not taken yet (as when every worker is busy): its status says queued.
      const queued = `run-queued-${command}-${Date.now().toString(36)}`;
      await new RunStatusStore(suite.bus.buckets.runs).put(queuedStatus(queued));
      const reply = await agentctl(command, queued, "--reason", "before it ran", "--by", "oncall");
      expect(reply.stdout).toContain(`run ${queued}: ${said}`);
      // The job is handed back meanwhile, not dropped: once after reading the run's empty log, then
      // on the status alone.
      const handedBack = new RegExp(
        `"runId":"${queued}"[^\\n]*${command} handed back: its run has not started yet`,
        "g",
      );
      await until(async () => ((await suite.logs()).match(handedBack)?.length ?? 0) >= 2, 10_000, {
        what: `the ${command} handed back twice`,
      });
      // Its first job is taken now: the run starts on a 5 s model turn, and the stop lands in it.
      const script = [{ text: "too late", delayMs: 5_000 }];
      await openTree(suite.bus.buckets.pool, queued, 1_000);
      await publishJob(
        suite.bus,
        {
          schemaVersion: 1,
          runId: queued,
          rootRunId: queued,
          depth: 0,
          auditSeq: 0,
          spec: RunSpec.parse(spec({ script })),
        },
        `${queued}:start`,
      );
      expect(await suite.waitFor(queued, (s) => s.status === ends.status, 15_000)).toMatchObject(ends);
    },
    60_000,
  );

  it("a parent waiting for its child halts where it waits; the child goes on; resumed, the parent takes the child's result and commits", async () => {
    const { runId, childId } = await parentOfOne(suite, "parent done");
    await agentctl("halt", runId, "--reason", "tree paused", "--by", "oncall");
    expect(await suite.waitFor(runId, (s) => s.status === "halted", 10_000)).toMatchObject({
      terminal: { reason: "tree paused" },
    });
    // Its children are not halted with it: the child commits, and its fan-in finds the parent halted.
    expect(await suite.waitFor(childId, settled, 15_000)).toMatchObject({ status: "committed" });
    const dropped = new RegExp(`"runId":"${runId}"[^\\n]*stale event dropped`);
    await until(async () => dropped.test(await suite.logs()), 10_000, {
      what: "the fan-in dropped while the parent is halted",
    });
    expect((await suite.client.statusOf(runId))?.status).toBe("halted");
    await agentctl("resume", runId, "--by", "oncall");
    const done = await suite.waitFor(runId, ended, 15_000);
    expect(done).toMatchObject({ status: "committed", terminal: { output: "parent done" } });
    const wal = (await suite.wal(runId)).map((r) => r.record);
    const completed = wal.find((r) => r.type === "COMPLETE");
    expect(completed?.type === "COMPLETE" ? completed.event.output : undefined).toMatchObject({
      results: [{ runId: childId, status: "committed", output: "child's answer" }],
    });
  }, 60_000);

  it("under the kill switch a child halts and its parent waits for it rather than taking the halt as its answer; resume --tree resumes the child, and the parent gets its answer", async () => {
    const { runId, childId } = await parentOfOne(suite, "parent after the incident", 0, [
      { toolCalls: [{ name: "echo", input: { text: "child's work" } }], delayMs: 2_000 },
      { text: "child's answer" },
    ]);
    await suite.client.killSwitch({ active: true, reason: "incident 7", by: "oncall" });
    try {
      // The child halts at its next step, once its 2 s turn is answered.
      expect(await suite.waitFor(childId, (s) => s.status === "halted", 10_000)).toMatchObject({
        terminal: { reason: expect.stringMatching(/incident 7/) as unknown },
      });
      // The supervisor has read the child's `run.halted` (its slot freed), where a fan-in is made.
      const released = new RegExp(`"runId":"${childId}"[^\n]*pool slot released`);
      await until(async () => released.test(await suite.logs()), 10_000, {
        what: "the child's halt read by the supervisor",
      });
      // A parent given the halt as its child's result would take its next step, and halt there.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect((await suite.client.statusOf(runId))?.status).toBe("running");
      expect((await suite.wal(runId)).some((r) => r.record.type === "COMPLETE")).toBe(false);
    } finally {
      await suite.client.killSwitch({ active: false, reason: "resolved", by: "oncall" });
    }
    // The parent is not halted: the tree's resume resumes the child alone.
    const resumed = await agentctl("resume", runId, "--tree", "--by", "oncall");
    expect(resumed.stdout).toContain(`resume queued for 1 run(s): ${childId}`);
    const done = await suite.waitFor(runId, ended, 20_000);
    expect(done).toMatchObject({ status: "committed", terminal: { output: "parent after the incident" } });
    const completed = (await suite.wal(runId)).map((r) => r.record).find((r) => r.type === "COMPLETE");
    expect(completed?.type === "COMPLETE" ? completed.event.output : undefined).toMatchObject({
      results: [{ runId: childId, status: "committed", output: "child's answer" }],
    });
  }, 60_000);

  it("halt --tree stops a parent and the child it waits for; resume --tree resumes the child first, and both commit", async () => {
    const { runId, childId } = await parentOfOne(suite, "tree done", 1_000);
    const halted = await agentctl("halt", runId, "--tree", "--reason", "tree stop", "--by", "oncall");
    expect(halted.stdout).toContain(`halt queued for 2 run(s): ${runId}, ${childId}`);
    for (const id of [runId, childId]) {
      expect(await suite.waitFor(id, (s) => s.status === "halted", 10_000)).toMatchObject({
        terminal: { reason: "tree stop" },
      });
    }
    const listed = JSON.parse(
      (await agentctl("runs", "--root", runId, "--status", "halted", "--json")).stdout,
    ) as {
      runId: string;
    }[];
    expect(listed.map((r) => r.runId).sort()).toEqual([runId, childId].sort());
    // Nothing left to halt in the tree.
    expect(await refusal("halt", runId, "--tree")).toMatchObject({ code: "INVALID_INPUT" });
    const resumed = await agentctl("resume", runId, "--tree", "--by", "oncall");
    expect(resumed.stdout).toContain(`resume queued for 2 run(s): ${childId}, ${runId}`);
    for (const id of [childId, runId]) {
      const done = await suite.waitFor(id, ended, 20_000);
      expect(done.status, `${id}: ${done.terminal?.reason}`).toBe("committed");
    }
    expect((await suite.client.statusOf(runId))?.terminal?.output).toBe("tree done");
    expect(await refusal("resume", runId, "--tree")).toMatchObject({ code: "INVALID_INPUT" });
  }, 60_000);
});
