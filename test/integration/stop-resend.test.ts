import type { Msg } from "@nats-io/transport-node";
import { TimeoutError } from "@nats-io/transport-node";
import { beforeAll, describe, expect, it } from "vitest";
import { encode } from "../../shared/bus/codec.js";
import { queuedJobKinds, queuedJobs } from "../../shared/bus/jobs.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { readKillSwitch } from "../../shared/bus/kill-switch.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { serve } from "../../shared/bus/serve.js";
import { ApprovalRequest, ControlReply, ResumeRequest } from "../../shared/contracts/cluster.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { silentLogger } from "../../shared/runtime/logger.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { ClusterClient } from "../../services/cli/client.js";
import { cancelRun } from "../../services/supervisor/cancel.js";
import { decideApproval } from "../../services/supervisor/approval.js";
import { setKillSwitch } from "../../services/supervisor/control.js";
import { controlFailure } from "../../services/supervisor/control-failure.js";
import { haltRun } from "../../services/supervisor/halt.js";
import { resumeRun } from "../../services/supervisor/resume.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { lifecycle } from "../helpers/finished-runs.js";
import { treeStatus } from "../helpers/fixtures.js";

/**
 * An operator's stop whose outcome the client does not know: the supervisor could not reach
 * JetStream while it handled it (here its handler times out once, before or after doing its work,
 * as a lost publish ack leaves it), or the reply was lost with the connection. A halt, a cancel, the
 * kill switch, an approval and a resume (these two naming the run's status as read) are asked
 * again; a tree's resume is not.
 */
const suite = useActorBus("srs", { random: seededRandom(29) });
/** How the next request fails: before its handler runs, or after it (its work done, its reply lost). */
const fault: { next?: "before" | "after"; meanwhile?: () => Promise<unknown> } = {};
let served = 0;
let statuses: RunStatusStore;

beforeAll(() => {
  statuses = new RunStatusStore(suite.bus.buckets.runs);
  const { bus } = suite;
  const handlers: [string, (msg: Msg) => Promise<ControlReply>][] = [
    [bus.subjects.approvalsAll(), (msg) => decideApproval(bus, msg.subject, msg.data)],
    [bus.subjects.halt(), (msg) => haltRun(bus, msg.data)],
    [bus.subjects.cancel(), (msg) => cancelRun(bus, msg.data)],
    [bus.subjects.killSwitch(), (msg) => setKillSwitch(bus, msg.data)],
    [bus.subjects.resume(), (msg) => resumeRun(bus, PoolLedger.of(bus), 10, msg.data)],
  ];
  for (const [subject, handle] of handlers) {
    serve(bus.nc, subject, {
      queue: "supervisor",
      reply: ControlReply,
      logger: silentLogger,
      handle: async (msg) => {
        served += 1;
        const when = fault.next;
        fault.next = undefined;
        if (when === "before") throw new TimeoutError();
        const reply = await handle(msg);
        if (when !== "after") return reply;
        // What the run's worker did with the stop before the copy asked again reaches the supervisor.
        await fault.meanwhile?.();
        throw new TimeoutError();
      },
      onError: controlFailure,
    });
  }
});

/** The next request's first copy is carried out, `meanwhile` (its run's worker) runs, and its reply is lost. */
function firstCopyDone(meanwhile: () => Promise<unknown>): void {
  Object.assign(fault, { next: "after", meanwhile });
}

/** Moves the run on to `next`, returning the revision its status had: a request naming it is stale. */
async function movedOn(next: RunStatus): Promise<number> {
  const read = await statuses.read(next.runId);
  await statuses.put(next);
  return read?.revision ?? 0;
}

/** `handled` (a supervisor's handling of a stale request) is refused with RUN_CHANGED, queuing nothing. */
async function refusedAsChanged(runId: string, handled: Promise<unknown>): Promise<void> {
  await expect(handled).rejects.toMatchObject({ code: "RUN_CHANGED" });
  expect(await queuedJobKinds(suite.bus, runId)).toEqual([]);
}

/** What `request` fails with. */
const failure = (request: Promise<unknown>): Promise<unknown> => request.catch((e: unknown) => e);

const client = (): ClusterClient =>
  new ClusterClient(suite.bus, { waitMs: 5_000, clock: systemClock, random: seededRandom(7) });
const stop = { by: "ops", reason: "incident" };

async function running(runId: string, o: Partial<RunStatus> = {}): Promise<void> {
  await statuses.put({ ...treeStatus(runId, "running"), ...o });
  served = 0;
}

/** A run waiting for approval, its trail up to its `approval.requested`. */
async function parked(runId: string): Promise<void> {
  await lifecycle(suite.bus, runId, "run.admitted");
  await lifecycle(suite.bus, runId, "approval.requested", 2);
  await running(runId, { status: "awaiting_approval" });
}

/** A run an operator halted, its trail up to its `run.halted`. */
async function halted(runId: string): Promise<void> {
  await lifecycle(suite.bus, runId, "run.admitted");
  await lifecycle(suite.bus, runId, "run.halted", 2);
  await statuses.put(treeStatus(runId, "halted", { reason: "incident" }));
  served = 0;
}

/** What the run's worker does with a decision by `by`: the run goes on, and its trail says who decided. */
async function decided(runId: string, by: string): Promise<void> {
  await statuses.put(treeStatus(runId, "running"));
  await lifecycle(suite.bus, runId, "approval.decided", 3, { decision: "approve", by });
}

describe("a stop whose outcome the client does not know", () => {
  it("a halt the supervisor could not decide is asked again, and queued once", async () => {
    const runId = "halt-undecided";
    await running(runId);
    fault.next = "before";
    const message = await client().halt({ runId, ...stop });
    expect(message).toBe(`run ${runId}: halt queued`);
    expect(served).toBe(2);
    expect(await queuedJobKinds(suite.bus, runId)).toEqual(["halt"]);
  }, 30_000);

  it("a halt whose first copy went through, the run halted since, is told as done, not refused", async () => {
    const runId = "halt-done";
    await running(runId);
    firstCopyDone(() => statuses.put(treeStatus(runId, "halted", { reason: "incident" })));
    const message = await client().halt({ runId, ...stop });
    expect(message).toMatch(
      new RegExp(
        `^run ${runId}: halted \\(the reply to this halt was lost, and the supervisor, asked again, found the run stopped already\\)$`,
      ),
    );
    expect(served).toBe(2);
    expect(await queuedJobKinds(suite.bus, runId)).toEqual(["halt"]);
  }, 30_000);

  it("a halt of a run already halted, asked once, is refused as before", async () => {
    const runId = "halt-twice";
    await statuses.put(treeStatus(runId, "halted", { reason: "earlier" }));
    served = 0;
    const refused = await failure(client().halt({ runId, ...stop }));
    expect(refused).toBeInstanceOf(AgentError);
    expect(refused).toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringContaining("it is halted") as unknown,
    });
    expect(served).toBe(1);
  }, 30_000);

  it("a cancel whose first copy went through, the run failed since, is told as done with the run's failure", async () => {
    const runId = "cancel-done";
    await running(runId);
    firstCopyDone(() => statuses.put(treeStatus(runId, "failed", { reason: "[RUN_CANCELLED] incident" })));
    const message = await client().cancel({ runId, ...stop });
    expect(message).toMatch(
      new RegExp(
        `^run ${runId}: failed \\(\\[RUN_CANCELLED\\] incident\\) \\(the reply to this cancel was lost`,
      ),
    );
    expect(served).toBe(2);
  }, 30_000);

  it("a cancel whose first copy went through while the run committed on its own is refused: the run was not stopped", async () => {
    const runId = "cancel-late";
    await running(runId);
    firstCopyDone(() => statuses.put(treeStatus(runId, "committed", { reason: "done" })));
    const refused = await failure(client().cancel({ runId, ...stop }));
    expect(refused).toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringContaining("it is committed") as unknown,
    });
    expect(served).toBe(2);
  }, 30_000);

  it("the kill switch the supervisor could not set is asked again, and set", async () => {
    fault.next = "before";
    served = 0;
    expect(await client().killSwitch({ active: true, reason: "incident", by: "ops" })).toBe("kill switch on");
    expect(served).toBe(2);
    expect(await readKillSwitch(suite.bus.buckets.pool)).toMatchObject({ active: true, by: "ops" });
    expect(await client().killSwitch({ active: false, reason: "over", by: "ops" })).toBe("kill switch off");
  }, 30_000);

  it("an approval the supervisor could not decide is asked again, and queued once", async () => {
    const runId = "approve-undecided";
    await running(runId, { status: "awaiting_approval" });
    fault.next = "before";
    const message = await client().decide(runId, { decision: "approve", by: "ops" });
    expect(message).toBe(`run ${runId}: approve recorded`);
    expect(served).toBe(2);
    expect(await queuedJobKinds(suite.bus, runId)).toEqual(["approvalDecided"]);
  }, 30_000);

  it("an approval whose first copy moved the run on is told as done, from the decision in the run's trail", async () => {
    const runId = "approve-done";
    await parked(runId);
    firstCopyDone(() => decided(runId, "ops"));
    const message = await client().decide(runId, { decision: "approve", by: "ops" });
    expect(message).toMatch(new RegExp(`^run ${runId}: approve recorded \\(the reply was lost`));
    expect(served).toBe(2);
    expect(await queuedJobKinds(suite.bus, runId)).toEqual(["approvalDecided"]);
  }, 30_000);

  it("an approval asked again after someone else's decision moved the run on is refused (RUN_CHANGED)", async () => {
    const runId = "approve-other";
    await parked(runId);
    firstCopyDone(() => decided(runId, "someone else"));
    const refused = await failure(client().decide(runId, { decision: "approve", by: "ops" }));
    expect(refused).toMatchObject({
      code: "RUN_CHANGED",
      message: expect.stringMatching(
        /has changed since its status was read \(revision \d+, now \d+: it is running\)/,
      ) as unknown,
    });
    expect(served).toBe(2);
  }, 30_000);

  it("a decision naming a status the run has moved on from is refused, and queues nothing", async () => {
    const runId = "approve-stale";
    await running(runId, { status: "awaiting_approval" });
    const revision = await movedOn({
      ...treeStatus(runId, "running"),
      status: "awaiting_approval",
      iteration: 2,
    });
    const stale = encode(ApprovalRequest, { decision: "approve", by: "ops", revision });
    await refusedAsChanged(runId, decideApproval(suite.bus, suite.bus.subjects.approvals(runId), stale));
  }, 30_000);

  it("a resume the supervisor could not decide is asked again, and queued once", async () => {
    const runId = "resume-undecided";
    await halted(runId);
    fault.next = "before";
    expect(await client().resume({ runId, by: "ops" })).toBe(`run ${runId}: resume queued`);
    expect(served).toBe(2);
    expect(await queuedJobKinds(suite.bus, runId)).toEqual(["resume"]);
  }, 30_000);

  it("a resume whose first copy went through, the run resumed since, is told as done from the run's trail", async () => {
    const runId = "resume-done";
    await halted(runId);
    firstCopyDone(async () => {
      await statuses.put(treeStatus(runId, "running"));
      await lifecycle(suite.bus, runId, "run.resumed", 3, { by: "ops" });
    });
    const message = await client().resume({ runId, by: "ops" });
    expect(message).toMatch(new RegExp(`^run ${runId}: resume queued \\(the reply was lost`));
    expect(served).toBe(2);
  }, 30_000);

  it("a resume naming a status the run has moved on from (halted again since) is refused, and queues nothing", async () => {
    const runId = "resume-stale";
    await halted(runId);
    const revision = await movedOn({
      ...treeStatus(runId, "halted", { reason: "halted again" }),
      iteration: 2,
    });
    const stale = encode(ResumeRequest, { runId, by: "ops", revision });
    await refusedAsChanged(runId, resumeRun(suite.bus, PoolLedger.of(suite.bus), 10, stale));
  }, 30_000);

  it("a tree's resume the supervisor could not finish is asked once: a second copy could resume runs of it halted again", async () => {
    const runId = "resume-tree-undecided";
    await halted(runId);
    fault.next = "before";
    const failed = await failure(client().resume({ runId, by: "ops", tree: true }));
    expect(failed).toMatchObject({
      code: "INTERNAL",
      retryable: true,
      message: expect.stringMatching(
        /^the supervisor could not finish this request \(.+\): it may or may not have been carried out; read the run's status/,
      ) as unknown,
    });
    expect(served).toBe(1);
    expect(await queuedJobKinds(suite.bus, runId)).toEqual([]);
  }, 30_000);
});

describe("two decisions on one approval request at the same moment", () => {
  it("the one that came first is recorded; another decision is refused naming it, the same decision by someone else is told who decided first", async () => {
    const runId = "decided-together";
    await running(runId, { status: "awaiting_approval" });
    expect(await client().decide(runId, { decision: "approve", by: "alice" })).toBe(
      `run ${runId}: approve recorded`,
    );
    const refused = await failure(
      client().decide(runId, { decision: "reject", by: "bob", reason: "too pricey" }),
    );
    expect(refused).toMatchObject({
      code: "RUN_CHANGED",
      message: `run '${runId}': approve by alice was decided first on this request; your reject was not recorded`,
    });
    expect(await client().decide(runId, { decision: "approve", by: "carol" })).toBe(
      `run ${runId}: approve recorded (decided first by alice)`,
    );
    expect(await client().decide(runId, { decision: "approve", by: "alice" })).toBe(
      `run ${runId}: approve recorded`,
    );
    expect(await queuedJobKinds(suite.bus, runId)).toEqual(["approvalDecided"]);
  }, 30_000);

  it("once the first decision's worker is done with it, a later one is compared with what the run's trail recorded", async () => {
    const runId = "decided-and-taken";
    await parked(runId);
    expect(await client().decide(runId, { decision: "modify", by: "alice", feedback: "cheaper" })).toBe(
      `run ${runId}: modify recorded`,
    );
    // Its worker took the job and recorded the decision; the run's status has not moved yet.
    await suite.bus.jsm.streams.purge(suite.bus.subjects.streams().runs, {
      filter: suite.bus.subjects.runQueue(runId),
    });
    await lifecycle(suite.bus, runId, "approval.decided", 3, { decision: "modify", by: "alice" });
    const refused = await failure(
      client().decide(runId, { decision: "modify", by: "bob", feedback: "faster" }),
    );
    expect(refused).toMatchObject({
      code: "RUN_CHANGED",
      message: expect.stringContaining("modify by alice was decided first") as unknown,
    });
  }, 30_000);
});

describe("a stop asked by two people at once", () => {
  const bobs = " (already, by alice: the run stops once, and this halt by bob is not recorded)";

  it("a halt queued already is answered with who asked first, and not queued again; the first one's copy is told nothing more", async () => {
    const runId = "halt-twice";
    await running(runId);
    expect(await client().halt({ runId, by: "alice", reason: "incident" })).toBe(`run ${runId}: halt queued`);
    expect(await client().halt({ runId, by: "bob", reason: "other" })).toBe(
      `run ${runId}: halt queued${bobs}`,
    );
    expect(await client().halt({ runId, by: "alice", reason: "incident" })).toBe(`run ${runId}: halt queued`);
    expect((await queuedJobs(suite.bus, runId)).map((job) => job?.event)).toMatchObject([
      { type: "halt", by: "alice", reason: "incident" },
    ]);
  }, 30_000);

  it("once its worker took the first halt, who asked it is read from the run's trail", async () => {
    const runId = "halt-taken";
    await running(runId);
    await client().halt({ runId, by: "alice", reason: "incident" });
    await suite.bus.jsm.streams.purge(suite.bus.subjects.streams().runs, {
      filter: suite.bus.subjects.runQueue(runId),
    });
    await lifecycle(suite.bus, runId, "run.halted", 2, { by: "alice" });
    expect(await client().halt({ runId, by: "bob", reason: "other" })).toBe(
      `run ${runId}: halt queued${bobs}`,
    );
  }, 30_000);

  it("so is a cancel", async () => {
    const runId = "cancel-twice";
    await running(runId);
    const then = ": it stops, undoes what it can, then fails";
    expect(await client().cancel({ runId, by: "alice", reason: "incident" })).toBe(
      `run ${runId}: cancel queued${then}`,
    );
    expect(await client().cancel({ runId, by: "bob", reason: "other" })).toBe(
      `run ${runId}: cancel queued (already, by alice: the run stops once, and this cancel by bob is not recorded)${then}`,
    );
    expect((await queuedJobs(suite.bus, runId)).map((job) => job?.event)).toMatchObject([
      { type: "cancel", by: "alice", reason: "incident" },
    ]);
  }, 30_000);
});
