import { describe, expect, it, onTestFinished } from "vitest";
import { bookingTools, type Bookings } from "../helpers/bookings.js";
import {
  agentctlFails,
  agentctlOf,
  ended,
  OPERATOR_CLUSTER,
  useClusterSuite,
} from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { parentOfOne } from "../helpers/spawning.js";
import { until } from "../helpers/until.js";

const suite = useClusterSuite("cancel", OPERATOR_CLUSTER);

const { run: agentctl, refusal } = agentctlOf(suite);

/** The booking tools (see bookingTools), served from the test process until `stop`. */
function serveBookings(bookMs = 0): Bookings & { stop: () => void } {
  const { tools, ...seen } = bookingTools(bookMs);
  const served = tools.map((tool) => suite.serveTool(tool));
  return { ...seen, stop: () => served.forEach((s) => s.stop()) };
}

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
      // What it halted with, and what an operator can do about it.
      const halted = (await agentctl("result", runId)).stdout;
      expect(halted).toMatch(new RegExp(`^HALT {2}[^\\n]*incident 9[^\\n]*\\(${runId}, `));
      expect(halted).toContain(`\`agentctl resume ${runId}\` continues it`);
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
    // Its failure report: the booking undone, nothing left to a human.
    const report = (await agentctl("result", runId)).stdout;
    expect(report).toMatch(/^FAIL {2}\[RUN_CANCELLED\] cancelled by oncall: wrong booking/);
    expect(report).toMatch(/compensations \(1, most recent first\):\n {2}\S+ {2}undone by unbook\n/);
    expect(report).toContain("left to a human: nothing");
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

  it("a parent that fails after its child committed a booking undoes the child's booking with its own calls; the child stays committed", async () => {
    const bookings = serveBookings();
    onTestFinished(bookings.stop);
    const child = spec({
      script: [{ toolCalls: [{ name: "book", input: { item: "seat 9" } }] }, { text: "booked" }],
      tools: ["book", "unbook"],
    });
    // Its iteration limit fails it at the turn after the fan-in.
    const { runId } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "spawn_agent", input: { runs: [child] } }] },
          { toolCalls: [{ name: "echo", input: { text: "one more" } }] },
          { toolCalls: [{ name: "echo", input: { text: "and more" } }] },
          { toolCalls: [{ name: "finish", input: { answer: "never" } }] },
        ],
        tools: ["spawn_agent", "echo", "book", "unbook"],
        capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
        resources: { maxIterations: 1 },
      }),
    );
    const childId = `${runId}-act-1-1`;
    expect(await suite.waitFor(runId, ended, 20_000)).toMatchObject({ status: "failed" });
    expect(bookings.unbooked).toEqual([{ original: { item: "seat 9" }, output: { booking: "b-seat 9" } }]);
    const terminal = (await suite.wal(runId)).map((r) => r.record).findLast((r) => r.type === "TERMINAL");
    expect(terminal?.type === "TERMINAL" ? terminal.artifact : undefined).toMatchObject({
      compensations: [{ tool: "undo_children", ok: true }],
      manualIntervention: [],
    });
    const started = (await suite.audit(runId)).find((e) => e.kind === "compensation.started");
    expect(started).toMatchObject({
      actor: "tool:undo_children",
      data: { compensatingTool: "undo_children" },
    });
    // The child's run ended as it did: its status and its trail say committed; its status also
    // says its parent undid it, as `agentctl runs` shows.
    expect(await suite.waitFor(childId, ended, 1_000)).toMatchObject({
      status: "committed",
      undone: { by: runId, calls: [{ actionId: "act-1", compensation: "unbook", ok: true }] },
    });
    expect((await suite.audit(childId)).map((e) => e.kind)).not.toContain("compensation.started");
    const listed = await agentctl("runs", "--root", runId, "--all");
    expect(listed.stdout).toMatch(
      new RegExp(`^${childId} +committed .* undone by ${runId} \\(1 call\\)$`, "m"),
    );
    // The parent's and its child's (longer) ids padded alike: their status columns line up.
    const columns = listed.stdout
      .trim()
      .split("\n")
      .map((line) => line.search(/ (committed|failed) /));
    expect(columns).toHaveLength(2);
    expect(new Set(columns).size).toBe(1);
    // Its log replays to the same transitions, the spawn and the undo included.
    expect((await agentctl("replay", runId)).stdout).toMatch(/transitions reproduced identically/);
  }, 60_000);

  it("a parent cancelled while it waits on two children undoes the booking of the one that committed; the other, still going, is cancelled", async () => {
    const bookings = serveBookings();
    onTestFinished(bookings.stop);
    const booking = (item: string, delayMs = 0) =>
      spec({
        script: [{ toolCalls: [{ name: "book", input: { item } }], delayMs }, { text: "booked" }],
        tools: ["book", "unbook"],
      });
    const { runId } = await suite.client.submit(
      spec({
        script: [
          {
            toolCalls: [
              { name: "spawn_agent", input: { runs: [booking("seat 1"), booking("seat 2", 5_000)] } },
            ],
          },
          { toolCalls: [{ name: "finish", input: { answer: "never" } }] },
        ],
        tools: ["spawn_agent", "book", "unbook"],
        capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
      }),
    );
    const [first, second] = [`${runId}-act-1-1`, `${runId}-act-1-2`];
    await suite.waitFor(first, (s) => s.status === "committed", 15_000);
    const reply = await agentctl("cancel", runId, "--reason", "wrong trip", "--by", "oncall");
    expect(reply.stdout).toContain(`its children still going are cancelled with it: ${second}`);
    expect(reply.stdout).toContain(
      `its committed children have what they did undone with its own calls: ${first}`,
    );
    // The other cancelled by the parent's undo, which waits until none can commit before it reads who did.
    await cancelledWithParent(runId, second);
    expect(bookings.booked).toEqual(["seat 1"]);
    expect(bookings.unbooked).toEqual([{ original: { item: "seat 1" }, output: { booking: "b-seat 1" } }]);
    const terminal = (await suite.wal(runId)).map((r) => r.record).findLast((r) => r.type === "TERMINAL");
    expect(terminal?.type === "TERMINAL" ? terminal.artifact : undefined).toMatchObject({
      compensations: [{ tool: "undo_children", ok: true }],
    });
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

  /**
   * A parent waiting for its one child, which is in the middle of a 3 s booking: what a cancel of
   * the tree, or of the parent alone, finds.
   */
  const parentOfABooking = async (): Promise<{
    runId: string;
    childId: string;
    bookings: ReturnType<typeof serveBookings>;
  }> => {
    const bookings = serveBookings(3_000);
    onTestFinished(bookings.stop);
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
    return { runId, childId, bookings };
  };

  /** The run stopped where it was (its trail: run.halted), then failed with this reason. */
  const cancelledAs = async (id: string, reason: string): Promise<void> => {
    expect(await suite.waitFor(id, ended, 20_000)).toMatchObject({ status: "failed", terminal: { reason } });
    const kinds = (await suite.audit(id)).map((e) => e.kind);
    expect(kinds.filter((k) => k === "run.halted" || k === "run.failed")).toEqual([
      "run.halted",
      "run.failed",
    ]);
  };

  /** The parent cancelled by oncall, and its child by the parent's undo: both stopped, then failed. */
  const cancelledWithParent = async (runId: string, childId: string): Promise<void> => {
    const parentFailed = "[RUN_CANCELLED] cancelled by oncall: wrong trip";
    await cancelledAs(runId, parentFailed);
    await cancelledAs(
      childId,
      `[RUN_CANCELLED] cancelled by agent: its parent ${runId} is failing: ${parentFailed}`,
    );
  };

  /** The supervisor's count of runs cancelled because their parent failed. */
  const orphansCancelled = async (): Promise<number> => {
    const port = suite.cluster.actors.get("supervisor")?.healthPort;
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    return Number(/^agents_orphans_cancelled_total\{[^}]*\} (\d+)$/m.exec(metrics)?.[1] ?? Number.NaN);
  };

  it("cancel --tree ends a parent and its child, the child first, mid-booking: the child undoes its booking once it went through", async () => {
    const { runId, childId, bookings } = await parentOfABooking();
    const tree = await agentctl("cancel", runId, "--tree", "--reason", "wrong trip", "--by", "oncall");
    expect(tree.stdout).toContain(`tree ${runId}: cancel queued for 2 run(s): ${childId}, ${runId}`);
    expect(bookings.made).toEqual([]);
    for (const id of [childId, runId])
      await cancelledAs(id, "[RUN_CANCELLED] cancelled by oncall: wrong trip");
    expect(bookings.made).toEqual(["seat 3"]);
    expect(bookings.unbooked).toEqual([{ original: { item: "seat 3" }, output: { booking: "b-seat 3" } }]);
    // Nothing of the tree is left to cancel.
    expect(await refusal("cancel", runId, "--tree", "--reason", "again")).toMatchObject({
      code: "INVALID_INPUT",
    });
  }, 60_000);

  it("a parent cancelled alone stops where it waits and cancels its child, mid-booking, before it fails: the child undoes its booking once it went through", async () => {
    const { runId, childId, bookings } = await parentOfABooking();
    const before = await orphansCancelled();
    const alone = await agentctl("cancel", runId, "--reason", "wrong trip", "--by", "oncall");
    expect(alone.stdout).toContain(`its children still going are cancelled with it: ${childId}`);
    // The child cancelled by the parent's undo (halted at once, it can no longer commit; it undoes its own).
    await cancelledWithParent(runId, childId);
    expect(bookings.made).toEqual(["seat 3"]);
    expect(bookings.unbooked).toEqual([{ original: { item: "seat 3" }, output: { booking: "b-seat 3" } }]);
    // Nothing was left going when the parent failed: the supervisor's pass cancels nothing.
    expect(await orphansCancelled()).toBe(before);
    // The child's end hands the failing parent nothing: no worker reads the parent again to drop it.
    // The supervisor says so when it reads the child's end from the audit stream, which trails the
    // child's status: a moment after the wait above can end.
    const settledLine = new RegExp(
      `"runId":"${runId}"[^\\n]*children settled after their parent finished, or began to fail`,
    );
    await until(async () => settledLine.test(await suite.logs()), 5_000, {
      what: "the supervisor's line on the children settled after their parent began to fail",
    });
    const logs = await suite.logs();
    expect(logs).not.toMatch(
      new RegExp(`"runId":"${runId}"[^\\n]*(run already finished|stale event dropped)`),
    );
    // A child submitted after its parent failed (its worker was mid-spawn when the cancel came,
    // after the supervisor's pass) would have nobody to take its result: refused.
    const late = { ...spec({ script: [{ text: "late" }] }), parent: { runId, rootRunId: runId, depth: 0 } };
    await expect(suite.client.submit(late)).rejects.toMatchObject({ code: "PARENT_FINISHED" });
  }, 60_000);
  it("a child an operator halted after its booking stays halted when its parent fails: its resume is refused (PARENT_FINISHED), and cancelled, it undoes its booking", async () => {
    const bookings = serveBookings();
    onTestFinished(bookings.stop);
    const { runId, childId } = await parentOfOne(
      suite,
      "never",
      0,
      [{ toolCalls: [{ name: "book", input: { item: "seat 4" } }] }, { text: "booked", delayMs: 3_000 }],
      ["book", "unbook"],
    );
    await until(() => Promise.resolve(bookings.made.length === 1), 10_000, { what: "the child's booking" });
    await agentctl("halt", childId, "--reason", "inspect", "--by", "oncall");
    await suite.waitFor(childId, (s) => s.status === "halted", 10_000);
    // The parent, parked, waits on it: `runs` says so on its line.
    const listed = await agentctl("runs", "--root", runId);
    expect(listed.stdout).toMatch(new RegExp(`^${runId} +running .* children: 1 halted$`, "m"));
    await agentctl("cancel", runId, "--reason", "wrong trip", "--by", "oncall");
    // Its undo does not wait on a halted child (it cannot commit), nor does it cancel it.
    expect(await suite.waitFor(runId, ended, 20_000)).toMatchObject({ status: "failed" });
    const failed = await agentctlFails(suite, ["resume", childId, "--by", "oncall"]);
    expect(failed.code).not.toBe(0);
    expect(failed.error).toMatchObject({
      code: "PARENT_FINISHED",
      message: expect.stringContaining(
        `run '${childId}' stays halted: its parent ${runId} failed: [RUN_CANCELLED] cancelled by oncall: wrong trip.`,
      ) as unknown,
    });
    expect(await suite.waitFor(childId, (s) => s.status === "halted", 1_000)).toMatchObject({
      status: "halted",
    });
    const orphaned = await agentctl("runs", "--root", runId);
    expect(orphaned.stdout).toMatch(
      new RegExp(
        `^${childId} +halted .* orphaned, cancel it: its parent ${runId} failed: \\[RUN_CANCELLED\\]`,
        "m",
      ),
    );
    expect(bookings.unbooked).toEqual([]);
    await agentctl("cancel", childId, "--reason", "its parent failed", "--by", "oncall");
    await cancelledAs(childId, "[RUN_CANCELLED] cancelled by oncall: its parent failed");
    expect(bookings.made).toEqual(["seat 4"]);
    expect(bookings.unbooked).toEqual([{ original: { item: "seat 4" }, output: { booking: "b-seat 4" } }]);
  }, 60_000);
});
