import { describe, expect, it, onTestFinished } from "vitest";
import { bookingTools, type Bookings } from "../helpers/bookings.js";
import { ended, OPERATOR_CLUSTER, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import { parentOfOne } from "../helpers/spawning.js";
import { until } from "../helpers/until.js";

/**
 * What a cancel waits for. Two workers that drive one run each: a parent's undo and its child's
 * cancel wait for each other's worker, as they do on a busy cluster. A worker waits 1 s for a
 * service nobody serves.
 */
const suite = useClusterSuite("cancelwait", {
  ...OPERATOR_CLUSTER,
  env: { ...OPERATOR_CLUSTER.env, AGENT_CONCURRENCY: "1", AGENT_SERVICE_WAIT_MS: "1000" },
});

function serveBookings(bookMs = 0): Bookings & { stop: () => void } {
  const { tools, ...seen } = bookingTools(bookMs);
  const served = tools.map((tool) => suite.serveTool(tool));
  return { ...seen, stop: () => served.forEach((s) => s.stop()) };
}

/**
 * A parent waiting on one child that has booked a seat and now spends `turnMs` on its answer
 * (holding its worker), cancelled: the parent's worker cancels the child and waits for it. `busy`:
 * a run of 3 s is submitted right after the cancel.
 */
async function cancelWhileChildAnswers(turnMs: number, busy: boolean) {
  const bookings = serveBookings();
  onTestFinished(bookings.stop);
  const { runId, childId } = await parentOfOne(
    suite,
    "never",
    0,
    [{ toolCalls: [{ name: "book", input: { item: "seat 1" } }] }, { text: "booked", delayMs: turnMs }],
    ["book", "unbook"],
  );
  await until(() => Promise.resolve(bookings.made.length === 1), 10_000, { what: "the child's booking" });
  await suite.client.cancel({ runId, reason: "wrong trip", by: "oncall" });
  // Busies the next free worker: a child's cancel queued after its parent has failed waits behind it.
  const busyRun = busy
    ? await suite.client.submit(spec({ script: [{ text: "busy", delayMs: 3_000 }] }))
    : undefined;
  const parent = await suite.waitFor(runId, ended, 30_000);
  const child = await suite.waitFor(childId, ended, 30_000);
  // The next case starts with both workers free: with this run still going, the next case's
  // cancel waited seconds for a worker on a loaded host, and its child committed first.
  if (busyRun) await suite.waitFor(busyRun.runId, ended, 30_000);
  const terminal = (await suite.wal(runId)).map((r) => r.record).findLast((r) => r.type === "TERMINAL");
  const report = terminal?.type === "TERMINAL" ? terminal.artifact : undefined;
  return { runId, childId, bookings, parent, child, report };
}

describe("a parent cancelled while its child is about to commit", () => {
  it("the child commits before its cancel finds a worker: the parent, which waited for it, undoes its booking", async () => {
    // The child's answer (1.5 s) ends before the parent's lease stops waiting (3 s); its cancel
    // waits for a worker until then, and finds it committed.
    const { runId, childId, bookings, parent, child, report } = await cancelWhileChildAnswers(1_500, true);
    expect(parent).toMatchObject({ status: "failed" });
    expect(child).toMatchObject({ status: "committed" });
    expect(bookings.unbooked).toEqual([{ original: { item: "seat 1" }, output: { booking: "b-seat 1" } }]);
    expect(report).toMatchObject({ compensations: [{ tool: "undo_children", ok: true }] });
    // The child's cancel is read by the first worker free after the parent fails, moments after it.
    const ignored = new RegExp(`"runId":"${childId}"[^\\n]*run already finished; event ignored`);
    await until(async () => ignored.test(await suite.logs()), 10_000, {
      what: "the child's cancel, read after it committed, ignored",
      everyMs: 100,
    });
    expect(await suite.logs()).not.toMatch(new RegExp(`"runId":"${runId}"[^\\n]*stale event dropped`));
  }, 60_000);

  it("the child still answers when the parent's lease stops waiting: the parent is handed back, its cancel's job takes it up again, and the child, cancelled, undoes its own booking", async () => {
    // The child's answer (10 s) outlasts the parent's wait (3 s) and the hand-back after it by far.
    const { runId, childId, bookings, parent, child, report } = await cancelWhileChildAnswers(10_000, false);
    expect(parent).toMatchObject({
      status: "failed",
      terminal: { reason: "[RUN_CANCELLED] cancelled by oncall: wrong trip" },
    });
    expect(child).toMatchObject({
      status: "failed",
      terminal: {
        reason: expect.stringContaining(`cancelled by agent: its parent ${runId} is failing`) as string,
      },
    });
    // Undone once, by the child itself; the parent found nothing of it committed.
    expect(bookings.unbooked).toHaveLength(1);
    expect(report).toMatchObject({ compensations: [{ tool: "undo_children", ok: true }] });
    const logs = await suite.logs();
    expect(logs).toMatch(
      new RegExp(`"runId":"${runId}"[^\\n]*run handed back: it waits for its children to end`),
    );
    expect(logs).toMatch(new RegExp(`"runId":"${runId}"[^\\n]*event applied by this job before`));
    // A takeover handed back again leaves no record: one resume, the lease that undid, however
    // many were handed back before it.
    const kinds = (await suite.audit(runId)).map((e) => e.kind);
    expect(kinds.filter((k) => k === "run.resumed")).toEqual(["run.resumed"]);
    // The child's first worker, fenced, lets go once its answer is in: then both workers are free.
    const letGo = new RegExp(`"runId":"${childId}"[^\\n]*fenced: another worker drives this run; letting go`);
    await until(async () => letGo.test(await suite.logs()), 20_000, {
      what: "the child's first worker letting go",
      everyMs: 100,
    });
  }, 60_000);
});

describe("a cancel whose call's tool service is down", () => {
  it("is handed back until the service answers, then learns the booking went through and undoes it, rather than leave it to a human", async () => {
    // The booking (4 s) outlasts the cancel's wait for a tool service (1 s) and its takeover: the
    // cancel, not the run, learns how it ended. With 1 s that was a race, lost when run alone.
    const first = serveBookings(4_000);
    onTestFinished(first.stop);
    const { runId } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "book", input: { item: "room 9" } }] },
          { toolCalls: [{ name: "finish", input: { answer: "booked" } }] },
        ],
        tools: ["book", "unbook"],
      }),
    );
    await until(() => Promise.resolve(first.booked.length === 1), 10_000, { what: "the booking started" });
    // The service goes away mid-booking (the booking still ends, and is recorded), then the cancel.
    first.stop();
    await suite.client.cancel({ runId, reason: "double booking", by: "oncall" });
    await until(
      async () => new RegExp(`"runId":"${runId}"[^\\n]*the cancel waits for it`).test(await suite.logs()),
      10_000,
      { what: "the cancel handed back" },
    );
    expect((await suite.client.status.get(runId))?.status).toBe("halted");
    const second = serveBookings();
    onTestFinished(second.stop);
    const done = await suite.waitFor(runId, ended, 20_000);
    expect(done).toMatchObject({
      status: "failed",
      terminal: { reason: "[RUN_CANCELLED] cancelled by oncall: double booking" },
    });
    expect(first.made).toEqual(["room 9"]);
    expect(second.unbooked).toEqual([{ original: { item: "room 9" }, output: { booking: "b-room 9" } }]);
    const terminal = (await suite.wal(runId)).map((r) => r.record).findLast((r) => r.type === "TERMINAL");
    expect(terminal?.type === "TERMINAL" ? terminal.artifact : undefined).toMatchObject({
      compensations: [{ tool: "unbook", ok: true }],
      manualIntervention: [],
    });
  }, 60_000);
});
