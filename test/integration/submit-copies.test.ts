import { beforeAll, describe, expect, it } from "vitest";
import { auditCount, lastAuditEvent } from "../../shared/bus/audit.js";
import { publishEvent } from "../helpers/log.js";
import { encode } from "../../shared/bus/codec.js";
import { hasQueuedJob } from "../../shared/bus/jobs.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { RunJob, SubmitRequest } from "../../shared/contracts/cluster.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { Admission } from "../../services/supervisor/admission.js";
import { spec, treeStatus } from "../helpers/fixtures.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { aroundRunsBucket } from "../helpers/runs-bucket.js";

/**
 * Copies of one named submit at once: what a client's resend after a dropped connection makes
 * (ServiceWait), and after an outage both copies reach the supervisors together. A copy slower
 * than the other must not write its run back to "queued".
 */
const suite = useActorBus("sc", { random: seededRandom(3) });
const limits = { poolCapacity: 100, maxDepth: 3, treeIterationCap: 1_000 };
let pool: PoolLedger;
let statuses: RunStatusStore;

beforeAll(() => {
  pool = PoolLedger.of(suite.bus);
  statuses = new RunStatusStore(suite.bus.buckets.runs);
});

const request = (runId: string, prompt?: string) =>
  encode(SubmitRequest, { ...SubmitRequest.parse(spec(prompt === undefined ? {} : { prompt })), runId });

/**
 * An Admission whose first read of `runId`'s status finds none, as a copy reading just before the
 * other copy wrote it would; `meanwhile` (the other copy, and what its run did next) runs between
 * that read and the rest of this copy's admission.
 */
function slowCopy(runId: string, meanwhile: () => Promise<void>): Admission {
  let stalled = false;
  const bus = aroundRunsBucket(suite.bus, ["get"], async (key, call) => {
    const entry = await call();
    if (key !== runId || stalled) return entry;
    stalled = true;
    await meanwhile();
    return entry;
  });
  return new Admission(bus, PoolLedger.of(bus), limits, uuidIds);
}

/** The other copy admits the run, whose worker then takes its job and moves it to `status`. */
async function admittedAndMoved(runId: string, status: RunStatus, finished: boolean): Promise<void> {
  await admitted(runId);
  await moved(runId, status, finished);
}

async function admitted(runId: string): Promise<void> {
  const first = new Admission(suite.bus, pool, limits, uuidIds);
  expect(await first.submit(request(runId))).toMatchObject({ ok: true, status: "admitted" });
}

/** The prompt of the run's queued job: the spec its worker will run. */
async function queuedPrompt(runId: string): Promise<string | undefined> {
  const stream = suite.bus.subjects.streams().runs;
  const message = await suite.bus.jsm.streams.getMessage(stream, {
    last_by_subj: suite.bus.subjects.runQueue(runId),
  });
  return message ? RunJob.parse(message.json()).spec?.task.prompt : undefined;
}

async function moved(runId: string, status: RunStatus, finished: boolean): Promise<void> {
  await statuses.put(status);
  // Its job acked: a parked run holds none, nor does a finished one.
  const stream = suite.bus.subjects.streams().runs;
  await suite.bus.jsm.streams.purge(stream, { filter: suite.bus.subjects.runQueue(runId) });
  if (finished) await pool.release(runId);
}

describe("copies of one named submit admitted at once", () => {
  it("every copy sent together is answered, one admitted and the rest existing: one admission event", async () => {
    const admission = new Admission(suite.bus, pool, limits, uuidIds);
    for (let round = 0; round < 5; round++) {
      const runId = `together-${round}`;
      const replies = await Promise.all([1, 2, 3, 4].map(() => admission.submit(request(runId))));
      expect(replies.map((r) => (r.ok ? r.status : r.error.code)).sort()).toEqual([
        "admitted",
        "existing",
        "existing",
        "existing",
      ]);
      expect(await auditCount(suite.bus, runId)).toBe(1);
      expect(await statuses.get(runId)).toMatchObject({ status: "queued" });
      expect(await hasQueuedJob(suite.bus, runId)).toBe(true);
    }
  }, 30_000);

  it("a copy that read no status leaves the status the run moved on to (awaiting approval) as it is, and queues nothing", async () => {
    const runId = "moved-on";
    const parked = { ...treeStatus(runId, "running"), status: "awaiting_approval" as const };
    const copy = slowCopy(runId, () => admittedAndMoved(runId, parked, false));
    expect(await copy.submit(request(runId))).toMatchObject({ ok: true, status: "existing" });
    expect(await statuses.get(runId)).toEqual(parked);
    expect(await hasQueuedJob(suite.bus, runId)).toBe(false);
    expect(await pool.active()).toContain(runId);
    expect(await auditCount(suite.bus, runId)).toBe(1);
  }, 30_000);

  it("a copy that read the run queued, before its worker parked it, leaves it parked", async () => {
    const runId = "parked-meanwhile";
    await admitted(runId);
    const parked = { ...treeStatus(runId, "running"), status: "awaiting_approval" as const };
    const copy = slowCopy(runId, () => moved(runId, parked, false));
    expect(await copy.submit(request(runId))).toMatchObject({ ok: true, status: "existing" });
    expect(await statuses.get(runId)).toEqual(parked);
    expect(await hasQueuedJob(suite.bus, runId)).toBe(false);
    expect(await auditCount(suite.bus, runId)).toBe(1);
  }, 30_000);

  it("a copy that read no status while the run went on to commit leaves it committed, and frees the slot it took", async () => {
    const runId = "done-meanwhile";
    const committed = treeStatus(runId, "committed", { reason: "done" });
    const copy = slowCopy(runId, () => admittedAndMoved(runId, committed, true));
    expect(await copy.submit(request(runId))).toMatchObject({ ok: true, status: "existing" });
    expect(await statuses.get(runId)).toEqual(committed);
    expect(await pool.active()).not.toContain(runId);
    expect(await hasQueuedJob(suite.bus, runId)).toBe(false);
    expect(await auditCount(suite.bus, runId)).toBe(1);
  }, 30_000);

  it("a copy that read no status while the run went on to commit, its trail closed, is answered existing: no rejection after the commit", async () => {
    const runId = "closed-meanwhile";
    const committed = treeStatus(runId, "committed", { reason: "done" });
    const copy = slowCopy(runId, async () => {
      await admittedAndMoved(runId, committed, true);
      const admittedEvent = (await lastAuditEvent(suite.bus, runId, "run.admitted"))?.event;
      if (!admittedEvent) throw new Error(`${runId} has no run.admitted`);
      await publishEvent(suite.bus, {
        ...admittedEvent,
        auditId: `${runId}:2`,
        seq: 2,
        kind: "run.committed",
      });
    });
    expect(await copy.submit(request(runId))).toMatchObject({ ok: true, status: "existing" });
    expect(await statuses.get(runId)).toEqual(committed);
    expect(await auditCount(suite.bus, runId)).toBe(2);
  }, 30_000);

  it("a copy with another spec that read no status before the other copy admitted the run is refused, not answered existing", async () => {
    const runId = "other-spec-late";
    const copy = slowCopy(runId, () => admitted(runId));
    const reply = await copy.submit(request(runId, "Say something else"));
    expect(reply).toMatchObject({ ok: false, error: { code: "RUN_ID_TAKEN" } });
    expect(await queuedPrompt(runId)).toBe("Say hello");
    expect(await auditCount(suite.bus, runId)).toBe(1);
  }, 30_000);

  it("a copy with another spec that reads the run queued before its admission is audited is refused, and the run keeps the first spec", async () => {
    const runId = "other-spec-early";
    let other: Promise<unknown> | undefined;
    const bus = aroundRunsBucket(suite.bus, ["create"], async (key, call) => {
      const created = await call();
      // The other copy arrives between this copy's status write and its `run.admitted`.
      if (key === runId)
        other ??= new Admission(suite.bus, pool, limits, uuidIds).submit(request(runId, "Another"));
      await other;
      return created;
    });
    const first = new Admission(bus, PoolLedger.of(bus), limits, uuidIds);
    expect(await first.submit(request(runId))).toMatchObject({ ok: true, status: "admitted" });
    expect(await other).toMatchObject({ ok: false, error: { code: "RUN_ID_TAKEN" } });
    expect(await queuedPrompt(runId)).toBe("Say hello");
    expect(await auditCount(suite.bus, runId)).toBe(1);
  }, 30_000);
});
