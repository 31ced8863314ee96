import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { auditCount, readAudit } from "../../shared/bus/audit.js";
import { publishEvent } from "../helpers/log.js";
import { writeFanOut } from "../../shared/bus/fanout.js";
import { publishJob } from "../../shared/bus/jobs.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { RunJob } from "../../shared/contracts/cluster.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { releaseSlots } from "../../services/supervisor/control.js";
import { LostAdmissions } from "../../services/supervisor/lost-admissions.js";
import { scanSlots } from "../../services/supervisor/slot-scan.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { queuedStatus, spec } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";

const suite = useActorBus("lost", { random: seededRandom(11) });
const STALE_MS = 60_000;
let pool: PoolLedger;
let store: RunStatusStore;
const stopping = new AbortController();
let releasing: Promise<void>;

beforeAll(() => {
  pool = PoolLedger.of(suite.bus);
  store = new RunStatusStore(suite.bus.buckets.runs);
  // The real release loop frees a slot when it reads the run's `run.failed`, as in the supervisor.
  releasing = releaseSlots(suite.bus, pool, stopping.signal);
});
afterAll(async () => {
  stopping.abort();
  await releasing;
});

/** What a supervisor killed after recording the run (and, with `event`, auditing it) leaves: slot and status, no job. */
async function cutBeforeJob(status: RunStatus, event = true): Promise<void> {
  await pool.acquire(status.runId, 100);
  await store.put(status);
  if (!event) return;
  await publishEvent(suite.bus, {
    schemaVersion: 1,
    auditId: `${status.runId}:1`,
    runId: status.runId,
    rootRunId: status.rootRunId ?? status.runId,
    ...(status.parentRunId ? { parentRunId: status.parentRunId } : {}),
    seq: 1,
    iteration: 0,
    phase: "PLAN",
    kind: "run.admitted",
    actor: "supervisor",
    status: "passed",
    artifacts: [],
    data: {},
    timestamp: status.updatedAt,
  });
}

const events = async (runId: string) => {
  const all = [];
  for await (const e of readAudit(suite.bus, { runId })) all.push(e);
  return all;
};

const jobFor = (runId: string): RunJob => ({
  schemaVersion: 1,
  runId,
  rootRunId: runId,
  depth: 0,
  spec: RunSpec.parse({ ...spec(), runId }),
  auditSeq: 1,
});

describe("an admission a supervisor stopped midway, which no submit finished", () => {
  it("fails a run left queued with no job for the stale period: status, run.failed, slot freed, parent settled", async () => {
    const now = Date.now();
    const lost = new LostAdmissions(suite.bus, pool, STALE_MS);
    await writeFanOut(suite.bus.buckets.runs, {
      parentRunId: "parent",
      rootRunId: "parent",
      depth: 0,
      actionId: "spawn-1",
      children: ["lost-child"],
    });
    await cutBeforeJob(queuedStatus("lost-child", now - STALE_MS, "parent"));
    await cutBeforeJob(queuedStatus("fresh", now - STALE_MS + 5_000));
    await cutBeforeJob(queuedStatus("waiting", now - 2 * STALE_MS));
    await publishJob(suite.bus, jobFor("waiting"), "waiting:start");

    await lost.settle(await scanSlots(suite.bus), now);

    const failed = await store.get("lost-child");
    expect(failed).toMatchObject({ status: "failed", terminal: { kind: "FAIL" }, parentRunId: "parent" });
    expect(failed?.terminal?.reason).toMatch(/^\[ADMISSION_LOST\] .*submit it again under a new run id/);
    const trail = await events("lost-child");
    expect(trail).toHaveLength(2);
    expect(trail.map((e) => [e.seq, e.kind, e.actor])).toEqual([
      [1, "run.admitted", "supervisor"],
      [2, "run.failed", "supervisor"],
    ]);
    expect(trail[1]?.data).toEqual({ code: "ADMISSION_LOST" });
    // The release loop read the event: the slot is free, and the parent waiting on the child is queued.
    await until(async () => !(await pool.active()).includes("lost-child"), 5_000);
    const parentJob = () =>
      suite.bus.jsm.streams.getMessage(suite.bus.subjects.streams().runs, {
        last_by_subj: suite.bus.subjects.runQueue("parent"),
      });
    await until(async () => (await parentJob()) !== null, 5_000, { what: "the parent's fan-in job" });
    const job = RunJob.parse((await parentJob())?.json());
    expect(job.event).toMatchObject({ type: "toolCompleted", actionId: "spawn-1" });

    // A queued run not yet stale, and a stale one whose job waits for a worker, are left alone.
    expect((await store.get("fresh"))?.status).toBe("queued");
    expect((await store.get("waiting"))?.status).toBe("queued");
    expect(await pool.active()).toEqual(expect.arrayContaining(["fresh", "waiting"]));
    expect(await auditCount(suite.bus, "waiting")).toBe(1);
  });

  it("leaves a run whose status changed after the scan read it (a retried submit or a worker moved it)", async () => {
    const now = Date.now();
    const lost = new LostAdmissions(suite.bus, pool, STALE_MS);
    const old = queuedStatus("moved-on", now - STALE_MS);
    await cutBeforeJob(old);
    const scan = await scanSlots(suite.bus);
    const moved = { ...old, updatedAt: new Date(now).toISOString() };
    await store.put(moved);
    await lost.settle(scan, now);
    expect(await store.get("moved-on")).toEqual(moved);
    expect(await auditCount(suite.bus, "moved-on")).toBe(1);
  });

  it("announces a lost admission whose run.failed a stopped supervisor never published, once", async () => {
    const now = Date.now();
    const lost = new LostAdmissions(suite.bus, pool, STALE_MS);
    // Failed by a supervisor that stopped before its event: the status says so, the slot is held.
    await cutBeforeJob({
      ...queuedStatus("unannounced", now - STALE_MS),
      status: "failed",
      terminal: { kind: "FAIL", reason: "[ADMISSION_LOST] the run's admission stopped" },
    });
    await lost.settle(await scanSlots(suite.bus), now);
    await until(async () => !(await pool.active()).includes("unannounced"), 5_000);
    // A scan that still sees the slot (its release not yet read) publishes nothing more.
    await pool.acquire("unannounced", 100);
    await lost.settle(await scanSlots(suite.bus), now);
    expect((await events("unannounced")).map((e) => e.kind)).toEqual(["run.admitted", "run.failed"]);
    await pool.release("unannounced");
  });

  it("frees a slot held with no status once it has been so for the stale period, not before", async () => {
    const now = Date.now();
    const lost = new LostAdmissions(suite.bus, pool, STALE_MS);
    await pool.acquire("unrecorded", 100);
    await pool.acquire("recorded-late", 100);
    await lost.settle(await scanSlots(suite.bus), now);
    await lost.settle(await scanSlots(suite.bus), now + STALE_MS - 1);
    expect(await pool.active()).toEqual(expect.arrayContaining(["unrecorded", "recorded-late"]));
    // An admission that records its run after the scan read the bucket keeps its slot.
    const scan = await scanSlots(suite.bus);
    expect(scan.unrecorded).toEqual(expect.arrayContaining(["unrecorded", "recorded-late"]));
    await store.put({ ...queuedStatus("recorded-late", now), status: "running" });
    await lost.settle(scan, now + STALE_MS);
    const active = await pool.active();
    expect(active).not.toContain("unrecorded");
    expect(active).toContain("recorded-late");
    // Nothing was made of the freed run: no status, no event.
    expect(await store.get("unrecorded")).toBeUndefined();
    expect(await auditCount(suite.bus, "unrecorded")).toBe(0);
  });
});
