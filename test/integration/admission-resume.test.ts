import { beforeAll, describe, expect, it } from "vitest";
import { auditCount, readAudit } from "../../shared/bus/audit.js";
import { encode } from "../../shared/bus/codec.js";
import { hasQueuedJob } from "../../shared/bus/jobs.js";
import { writeKillSwitch } from "../../shared/bus/kill-switch.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { SubmitRequest, RunJob } from "../../shared/contracts/cluster.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { Admission } from "../../services/supervisor/admission.js";
import { queuedStatus, spec } from "../helpers/fixtures.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { lifecycle } from "../helpers/finished-runs.js";

const suite = useActorBus("ar", { random: seededRandom(7) });
let admission: Admission;
let pool: PoolLedger;

beforeAll(() => {
  pool = PoolLedger.of(suite.bus);
  admission = new Admission(
    suite.bus,
    pool,
    { poolCapacity: 100, maxDepth: 3, treeIterationCap: 1_000 },
    uuidIds,
  );
});

const submit = (runId: string) =>
  admission.submit(encode(SubmitRequest, { ...SubmitRequest.parse(spec()), runId }));

/** How many jobs of the run are on the work queue (nobody consumes them here), and the last. */
async function jobsOf(runId: string): Promise<{ count: number; last: RunJob | undefined }> {
  const stream = suite.bus.subjects.streams().runs;
  const subject = suite.bus.subjects.runQueue(runId);
  const info = await suite.bus.jsm.streams.info(stream, { subjects_filter: subject });
  const count = Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
  const last = await suite.bus.jsm.streams.getMessage(stream, { last_by_subj: subject });
  return { count, last: last ? RunJob.parse(last.json()) : undefined };
}

describe("a run whose admission a supervisor did not finish", () => {
  it("submitted again after the supervisor stopped between taking its slot and queuing its job, is queued now", async () => {
    // Killed after the slot, before the status: the pool holds the run, nothing else does.
    const bare = "cut-after-slot";
    expect(await pool.acquire(bare, 100)).toBe("admitted");
    expect(await submit(bare)).toMatchObject({ ok: true, status: "existing" });
    expect(await new RunStatusStore(suite.bus.buckets.runs).get(bare)).toMatchObject({ status: "queued" });
    expect(await jobsOf(bare)).toMatchObject({
      count: 1,
      last: { runId: bare, auditSeq: 1, spec: { runId: bare } },
    });
    expect(await auditCount(suite.bus, bare)).toBe(1);

    // Killed after the status: queued, no job, no event.
    const queued = "cut-after-status";
    expect(await pool.acquire(queued, 100)).toBe("admitted");
    await new RunStatusStore(suite.bus.buckets.runs).put(queuedStatus(queued));
    expect(await hasQueuedJob(suite.bus, queued)).toBe(false);
    expect(await submit(queued)).toMatchObject({ ok: true, status: "existing" });
    expect(await jobsOf(queued)).toMatchObject({ count: 1, last: { runId: queued, auditSeq: 1 } });
  }, 30_000);

  it("audits the admission it finishes even when the run id was refused before (kept outside its log)", async () => {
    const runId = "refused-then-cut";
    const killSwitch = { reason: "drill", by: "test" };
    await writeKillSwitch(suite.bus.buckets.pool, { ...killSwitch, active: true, at: Date.now() });
    expect(await submit(runId)).toMatchObject({ ok: false, error: { code: "KILL_SWITCH_ACTIVE" } });
    await writeKillSwitch(suite.bus.buckets.pool, { ...killSwitch, active: false, at: Date.now() });
    // Submitted again, and cut after the slot: the refusal is all there is, outside the run's log.
    expect(await pool.acquire(runId, 100)).toBe("admitted");
    expect(await submit(runId)).toMatchObject({ ok: true, status: "existing" });
    const trail = [];
    for await (const event of readAudit(suite.bus, { runId })) trail.push([event.seq, event.kind]);
    expect(trail).toEqual([
      [1, "run.rejected"],
      [1, "run.admitted"],
    ]);
    expect(await jobsOf(runId)).toMatchObject({ count: 1, last: { runId, auditSeq: 1 } });
  }, 30_000);

  it("a queued run whose job waits is left alone when submitted again: one job, one admission event", async () => {
    const runId = "whole-admission";
    expect(await submit(runId)).toMatchObject({ ok: true, status: "admitted" });
    const status = await new RunStatusStore(suite.bus.buckets.runs).get(runId);
    await systemClock.sleep(5);
    expect(await submit(runId)).toMatchObject({ ok: true, status: "existing" });
    // Not admitted again: its status is not even rewritten.
    expect(await new RunStatusStore(suite.bus.buckets.runs).get(runId)).toEqual(status);
    expect((await jobsOf(runId)).count).toBe(1);
    expect(await auditCount(suite.bus, runId)).toBe(1);
  }, 30_000);

  it("a named run submitted again with another spec is refused (RUN_ID_TAKEN), its trail untouched; the same spec is existing", async () => {
    const runId = "one-spec";
    const asked = { ...SubmitRequest.parse(spec({ prompt: "book room 12" })), runId };
    expect(await admission.submit(encode(SubmitRequest, asked))).toMatchObject({ status: "admitted" });
    // Keys in another order are the same spec.
    const reordered = Object.fromEntries(Object.entries(asked).reverse());
    expect(await admission.submit(new TextEncoder().encode(JSON.stringify(reordered)))).toMatchObject({
      ok: true,
      status: "existing",
    });
    const amended = { ...SubmitRequest.parse(spec({ prompt: "book room 14" })), runId };
    const refused = await admission.submit(encode(SubmitRequest, amended));
    expect(refused).toMatchObject({
      ok: false,
      error: {
        code: "RUN_ID_TAKEN",
        message: expect.stringMatching(
          /^run one-spec was submitted with another spec \(admitted 20/,
        ) as unknown,
      },
    });
    // Its trail is its worker's: no run.rejected in it, one job.
    expect(await auditCount(suite.bus, runId)).toBe(1);
    expect((await jobsOf(runId)).count).toBe(1);
  }, 30_000);

  it("a run whose admission kept no spec hash (an earlier build), or a child its parent sends again, is existing whatever the spec", async () => {
    const status = new RunStatusStore(suite.bus.buckets.runs);
    for (const runId of ["admitted-before", "spawned-child"]) {
      const parent = runId === "spawned-child" ? { parentRunId: "its-parent", rootRunId: "its-parent" } : {};
      await status.put({ ...queuedStatus(runId), status: "running", phase: "ACT", ...parent });
      const data = { depth: 0, agent: "tester", ...(runId === "spawned-child" ? { specHash: "other" } : {}) };
      await lifecycle(suite.bus, runId, "run.admitted", 1, data);
    }
    expect(await submit("admitted-before")).toMatchObject({ ok: true, status: "existing" });
    const child = {
      ...SubmitRequest.parse(spec()),
      runId: "spawned-child",
      parent: { runId: "its-parent", rootRunId: "its-parent", depth: 0 },
    };
    expect(await admission.submit(encode(SubmitRequest, child))).toMatchObject({
      ok: true,
      status: "existing",
    });
  }, 30_000);

  it("a child whose spawn names a run that is not its parent's (a root run, another parent's child) is refused with RUN_ID_TAKEN, and that run left as it is", async () => {
    const status = new RunStatusStore(suite.bus.buckets.runs);
    // Answered `existing`, the intruder would take either for its child.
    await submit("someone-elses");
    await status.put({ ...queuedStatus("elses-child"), parentRunId: "elses", rootRunId: "elses" });
    for (const runId of ["someone-elses", "elses-child"]) {
      const before = { status: await status.get(runId), events: await auditCount(suite.bus, runId) };
      const jobs = (await jobsOf(runId)).count;
      const child = {
        ...SubmitRequest.parse(spec({ prompt: "take it over" })),
        runId,
        parent: { runId: "intruder", rootRunId: "intruder", depth: 0 },
      };
      const reply = await admission.submit(encode(SubmitRequest, child));
      expect(reply, runId).toMatchObject({ ok: false, error: { code: "RUN_ID_TAKEN" } });
      expect(JSON.stringify(reply)).toMatch(new RegExp(`run ${runId} exists and is not a child of intruder`));
      expect(await status.get(runId)).toEqual(before.status);
      expect(await auditCount(suite.bus, runId)).toBe(before.events);
      expect((await jobsOf(runId)).count).toBe(jobs);
    }
  }, 30_000);
});
