import { describe, expect, it, onTestFinished } from "vitest";
import { z } from "zod";
import { publishJob } from "../../shared/bus/jobs.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { defineTool } from "../../shared/tools/tool.js";
import { agentctlOf, ended, serveCharge, settled, useClusterSuite } from "../helpers/cluster-suite.js";
import { queuedStatus, spec } from "../helpers/fixtures.js";
import { parentOfOne } from "../helpers/spawning.js";
import { until } from "../helpers/until.js";

/** The model's turn the halt lands in: long enough that its answer comes after the halt. */
const SLOW_TURN_MS = 3_000;

const suite = useClusterSuite("halt", {
  actors: [
    { kind: "supervisor" },
    { kind: "tools", env: { TOOLS: "echo" } },
    { kind: "agent", name: "agent-1" },
    { kind: "agent", name: "agent-2" },
  ],
  env: { AGENT_RETRY_DELAY_MS: "500" },
});

const { run: agentctl, refusal } = agentctlOf(suite);

/**
 * A booking, a side effect with a compensation: `unbook` gets what `book` was given and answered.
 * `bookMs`: how long a booking takes once started (it is counted in `booked` when it starts).
 */
function serveBookings(bookMs = 0): {
  booked: string[];
  /** The bookings that have finished. */
  made: string[];
  unbooked: unknown[];
  stop: () => void;
} {
  const booked: string[] = [];
  const made: string[] = [];
  const unbooked: unknown[] = [];
  const book = suite.serveTool(
    defineTool({
      name: "book",
      description: "Books an item.",
      input: z.object({ item: z.string() }),
      capability: { kind: "compute" },
      reversibility: "compensable",
      idempotent: true,
      compensation: { tool: "unbook" },
      execute: async (input) => {
        booked.push(input.item);
        await new Promise((r) => setTimeout(r, bookMs));
        made.push(input.item);
        return { output: { booking: `b-${input.item}` } };
      },
    }),
  );
  const unbook = suite.serveTool(
    defineTool({
      name: "unbook",
      description: "Cancels a booking.",
      input: z.object({ original: z.unknown(), output: z.unknown() }),
      capability: { kind: "compute" },
      reversibility: "compensable",
      idempotent: true,
      execute: (input) => {
        unbooked.push(input);
        return Promise.resolve({ output: { cancelled: true } });
      },
    }),
  );
  return {
    booked,
    made,
    unbooked,
    stop: () => {
      book.stop();
      unbook.stop();
    },
  };
}

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

describe("agentctl cancel: a run ended for good", () => {
  it("a run halted by the kill switch and cancelled under it undoes its booking and fails with RUN_CANCELLED", async () => {
    const { booked, unbooked, stop } = serveBookings();
    onTestFinished(stop);
    const { runId } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "book", input: { item: "room 12" } }] },
          { toolCalls: [{ name: "echo", input: { text: "confirm" } }], delayMs: 2_000 },
          { toolCalls: [{ name: "finish", input: { answer: "booked" } }] },
        ],
        tools: ["book", "unbook", "echo"],
      }),
    );
    await expect.poll(() => booked.length, { timeout: 10_000 }).toBe(1);
    await suite.client.killSwitch({ active: true, reason: "incident 9", by: "oncall" });
    try {
      // Halted at its next step, the echo call its 2 s turn answers.
      await suite.waitFor(runId, (s) => s.status === "halted", 10_000);
      // A cancel says why.
      expect((await refusal("cancel", runId))?.message).toMatch(/required option '--reason/);
      const reply = await agentctl("cancel", runId, "--reason", "wrong booking", "--by", "oncall");
      expect(reply.stdout).toContain(`run ${runId}: cancel queued`);
      // The undo runs under the kill switch, which stops new work only.
      const done = await suite.waitFor(runId, ended, 15_000);
      expect(done).toMatchObject({
        status: "failed",
        terminal: { reason: "[RUN_CANCELLED] cancelled by oncall: wrong booking" },
      });
    } finally {
      await suite.client.killSwitch({ active: false, reason: "resolved", by: "oncall" });
    }
    expect(booked).toEqual(["room 12"]);
    expect(unbooked).toEqual([{ original: { item: "room 12" }, output: { booking: "b-room 12" } }]);
    const trail = await suite.audit(runId);
    expect(trail.map((e) => e.seq)).toEqual(trail.map((_, i) => i + 1));
    const kinds = trail.map((e) => e.kind);
    const order = ["run.halted", "compensation.started", "compensation.completed", "run.failed"];
    expect(kinds.filter((k) => order.includes(k))).toEqual(order);
    expect(trail.find((e) => e.kind === "run.failed")?.reason).toMatch(/^\[RUN_CANCELLED\]/);
    // Ended, it cannot be cancelled again.
    const again = await refusal("cancel", runId, "--reason", "twice");
    expect(again).toMatchObject({ code: "INVALID_INPUT" });
    expect(again?.message).toContain("cannot be cancelled: it is failed");
  }, 60_000);

  it("a run halted while its booking runs, cancelled, learns from the booking service that it went through, and undoes it rather than leave it to a human", async () => {
    const { booked, made, unbooked, stop } = serveBookings(4_000);
    onTestFinished(stop);
    const { runId } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "book", input: { item: "room 7" } }] },
          { toolCalls: [{ name: "finish", input: { answer: "booked" } }] },
        ],
        tools: ["book", "unbook"],
      }),
    );
    await expect.poll(() => booked.length, { timeout: 10_000 }).toBe(1);
    await agentctl("halt", runId, "--reason", "double booking", "--by", "oncall");
    await suite.waitFor(runId, (s) => s.status === "halted", 10_000);
    // Cancelled while the booking still runs: the cancel waits for its outcome.
    await agentctl("cancel", runId, "--reason", "double booking", "--by", "oncall");
    expect(made).toEqual([]);
    const done = await suite.waitFor(runId, ended, 15_000);
    expect(done).toMatchObject({
      status: "failed",
      terminal: { reason: expect.stringMatching(/^\[RUN_CANCELLED\]/) as unknown },
    });
    expect(booked).toEqual(["room 7"]);
    expect(unbooked).toEqual([{ original: { item: "room 7" }, output: { booking: "b-room 7" } }]);
    const terminal = (await suite.wal(runId)).map((r) => r.record).findLast((r) => r.type === "TERMINAL");
    expect(terminal?.type === "TERMINAL" ? terminal.artifact : undefined).toMatchObject({
      compensations: [{ tool: "unbook", ok: true }],
      manualIntervention: [],
    });
    const trail = await suite.audit(runId);
    expect(trail.map((e) => e.seq)).toEqual(trail.map((_, i) => i + 1));
    const order = [
      "tool.intent",
      "run.halted",
      "tool.completed",
      "compensation.started",
      "compensation.completed",
      "run.failed",
    ];
    expect(trail.map((e) => e.kind).filter((k) => order.includes(k))).toEqual(order);
    expect(trail.find((e) => e.kind === "tool.completed")?.data).toMatchObject({ settledBy: "cancel" });
  }, 60_000);

  it("a halted child cancelled gives its parent RUN_CANCELLED as its result, and the parent goes on", async () => {
    const { runId, childId } = await parentOfOne(suite, "went on without it", 0, [
      { toolCalls: [{ name: "echo", input: { text: "child's work" } }], delayMs: 2_000 },
      { text: "child's answer" },
    ]);
    await agentctl("halt", childId, "--reason", "stuck", "--by", "oncall");
    await suite.waitFor(childId, (s) => s.status === "halted", 10_000);
    const reply = await agentctl("cancel", childId, "--reason", "not needed", "--by", "oncall");
    expect(reply.stdout).toContain(`run ${childId}: cancel queued: it stops, undoes what it can, then fails`);
    expect(await suite.waitFor(childId, ended, 15_000)).toMatchObject({ status: "failed" });
    const done = await suite.waitFor(runId, ended, 15_000);
    expect(done).toMatchObject({ status: "committed", terminal: { output: "went on without it" } });
    const completed = (await suite.wal(runId)).map((r) => r.record).find((r) => r.type === "COMPLETE");
    expect(completed?.type === "COMPLETE" ? completed.event.output : undefined).toMatchObject({
      results: [
        {
          runId: childId,
          status: "failed",
          error: { code: "RUN_CANCELLED", message: "cancelled by oncall: not needed" },
        },
      ],
    });
  }, 60_000);

  it("a parent cancelled alone stops where it waits, and the reply names the child still going; cancel --tree ends the child, mid-booking, which undoes its booking once it went through", async () => {
    const { made, unbooked, stop } = serveBookings(3_000);
    onTestFinished(stop);
    const { runId, childId } = await parentOfOne(
      suite,
      "never",
      0,
      [{ toolCalls: [{ name: "book", input: { item: "seat 3" } }] }, { text: "booked" }],
      ["book", "unbook"],
    );
    await until(async () => (await suite.wal(childId)).some((r) => r.record.type === "INTENT"), 10_000, {
      what: "the child's booking started",
    });
    const alone = await agentctl("cancel", runId, "--reason", "wrong trip", "--by", "oncall");
    expect(alone.stdout).toContain(`its children go on (cancel --tree ends them too): ${childId}`);
    const tree = await agentctl("cancel", runId, "--tree", "--reason", "wrong trip", "--by", "oncall");
    // The parent, stopping or stopped, is named again unless it has failed already.
    expect(tree.stdout).toMatch(new RegExp(`^tree ${runId}: cancel queued for [12] run\\(s\\): ${childId}`));
    expect(made).toEqual([]);
    for (const id of [childId, runId]) {
      expect(await suite.waitFor(id, ended, 20_000)).toMatchObject({
        status: "failed",
        terminal: { reason: "[RUN_CANCELLED] cancelled by oncall: wrong trip" },
      });
      const kinds = (await suite.audit(id)).map((e) => e.kind);
      expect(kinds.filter((k) => k === "run.halted" || k === "run.failed")).toEqual([
        "run.halted",
        "run.failed",
      ]);
    }
    expect(made).toEqual(["seat 3"]);
    expect(unbooked).toEqual([{ original: { item: "seat 3" }, output: { booking: "b-seat 3" } }]);
    // Nothing of the tree is left to cancel.
    expect(await refusal("cancel", runId, "--tree", "--reason", "again")).toMatchObject({
      code: "INVALID_INPUT",
    });
  }, 60_000);
});
