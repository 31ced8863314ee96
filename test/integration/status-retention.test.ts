import { Counter } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { auditCount, readAudit, recordRejection } from "../../shared/bus/audit.js";
import { encode } from "../../shared/bus/codec.js";
import { writeFanOut } from "../../shared/bus/fanout.js";
import { PoolLedger } from "../../shared/bus/pool.js";
import { SubmitRequest } from "../../shared/contracts/cluster.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { uuidIds } from "../../shared/runtime/ids.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { Admission } from "../../services/supervisor/admission.js";
import { sweepFinishedRuns } from "../../services/supervisor/retention.js";
import { ClusterClient } from "../../services/cli/client.js";
import { replayRun } from "../../services/cli/inspect.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { finishedRun, logMessages, toolRecords } from "../helpers/finished-runs.js";
import { spec } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";
import { bucketStream } from "../../shared/bus/subjects.js";

const suite = useActorBus("keep-status", { random: seededRandom(11) });
const RETAIN_MS = 1_500;
const counter = (name: string) => new Counter({ name, help: "-", registers: [] });
const counters = {
  toolRecords: counter("test_status_sweep_records"),
  statuses: counter("test_status_sweep_statuses"),
};
const stopping = new AbortController();
let sweeping: Promise<void>;
const count = async (c: Counter) => (await c.get()).values[0]?.value ?? 0;

beforeAll(() => {
  sweeping = sweepFinishedRuns(suite.bus, { retainMs: RETAIN_MS }, counters, stopping.signal);
});
afterAll(async () => {
  stopping.abort();
  await sweeping;
});

const submit = (admission: Admission, runId: string) =>
  admission.submit(encode(SubmitRequest, { ...SubmitRequest.parse(spec()), runId }));

describe("the retention of finished runs' statuses", () => {
  it("removes a committed or failed run's status, with its tool call records and fan-out record, once due, leaving no marker; its log is kept; a run that may run again keeps all", async () => {
    const { bus } = suite;
    const started = Date.now();
    await finishedRun(bus, "done", "committed", "run.committed");
    await finishedRun(bus, "broke", "failed", "run.failed");
    await finishedRun(bus, "paused", "halted", "run.halted");
    // Its status says it is not finished (its event is stale): nothing of it is touched.
    await finishedRun(bus, "moving", "running", "run.committed");
    // Two of them spawned children: the finished one's fan-out record goes with its status.
    for (const parentRunId of ["done", "paused"]) {
      await writeFanOut(bus.buckets.runs, {
        parentRunId,
        rootRunId: parentRunId,
        depth: 0,
        actionId: "a1",
        children: ["kid"],
      });
    }

    await systemClock.sleep(Math.max(0, started + RETAIN_MS - 500 - Date.now()));
    for (const runId of ["done", "broke"]) expect(await bus.buckets.runs.get(runId)).not.toBeNull();
    await until(
      async () =>
        (await bus.buckets.runs.get("done")) === null && (await bus.buckets.runs.get("broke")) === null,
      10_000,
      { what: "the two finished runs' statuses removed" },
    );
    // No delete marker either: the bucket's stream holds nothing of them.
    const held = await bus.jsm.streams.info(bucketStream(bus.subjects.buckets().runs), {
      subjects_filter: `$KV.${bus.subjects.buckets().runs}.>`,
    });
    expect(Object.keys(held.state.subjects ?? {}).sort()).toEqual(
      ["fanout.paused", "moving", "paused"].map((key) => `$KV.${bus.subjects.buckets().runs}.${key}`),
    );
    for (const runId of ["done", "broke"]) expect(await toolRecords(bus, runId)).toBe(0);
    for (const runId of ["paused", "moving"]) {
      expect(await bus.buckets.runs.get(runId)).not.toBeNull();
      expect(await toolRecords(bus, runId)).toBe(2);
    }
    // Every run's log is kept whole (its records' message and its lifecycle event's): the stream
    // refuses a purge, and only its max_age removes a message.
    for (const runId of ["done", "broke", "paused", "moving"]) expect(await logMessages(bus, runId)).toBe(2);
    await expect(
      bus.jsm.streams.purge(bus.subjects.streams().log, { filter: bus.subjects.logAll("done") }),
    ).rejects.toThrow();
    expect(await logMessages(bus, "done")).toBe(2);
    expect(await count(counters.statuses)).toBe(2);
    expect(await count(counters.toolRecords)).toBe(4);
  }, 30_000);

  it("refuses a submit naming a run whose status was removed, records the refusal outside its log, and tells agentctl's status why; replay still reads its log", async () => {
    const { bus } = suite;
    const pool = PoolLedger.of(bus);
    const admission = new Admission(
      bus,
      pool,
      { poolCapacity: 100, maxDepth: 3, treeIterationCap: 1_000 },
      uuidIds,
    );
    expect(await bus.buckets.runs.get("done")).toBeNull();
    expect(await submit(admission, "done")).toMatchObject({ ok: false, error: { code: "RUN_REMOVED" } });
    expect(await bus.buckets.runs.get("done")).toBeNull();
    expect(await pool.active()).not.toContain("done");
    const trail = [];
    for await (const event of readAudit(bus, { runId: "done" })) trail.push(event);
    // The refusal is not the run's: recorded beside its log (seq 1 of its own), the log untouched.
    expect(trail.map((e) => [e.kind, e.seq])).toEqual([
      ["run.committed", 1],
      ["run.rejected", 1],
    ]);
    expect(trail[1]).toMatchObject({ data: { code: "RUN_REMOVED" } });
    expect(await logMessages(bus, "done")).toBe(2);
    expect(await auditCount(bus, "done")).toBe(1);

    // A named run only ever refused before is admitted: a refusal leaves its log empty.
    await recordRejection(bus, {
      ...trail[1]!,
      runId: "refused-before",
      rootRunId: "refused-before",
      auditId: "refused-before:rejected:1",
    });
    expect(await submit(admission, "refused-before")).toMatchObject({ ok: true, status: "admitted" });
    expect(await auditCount(bus, "refused-before")).toBe(1);
    const refusedBefore = [];
    for await (const event of readAudit(bus, { runId: "refused-before" })) refusedBefore.push(event.kind);
    expect(refusedBefore).toEqual(["run.rejected", "run.admitted"]);

    const client = new ClusterClient(bus);
    const removed = await client.statusOf("done").catch((err: unknown) => err);
    expect(removed).toMatchObject({ code: "NOT_FOUND" });
    expect((removed as Error).message).toMatch(/finished, and its status was removed/);
    expect(await client.statusOf("never-submitted")).toBeUndefined();
    expect(await client.statusOf("paused")).toMatchObject({ status: "halted" });
    // Its log is kept, so replay reads its records rather than saying they expired: this made-up
    // log has no `start` record, which every real run's has (test/e2e/status-retention replays one).
    await expect(replayRun(bus, "done")).rejects.toThrow(/'done' has no WAL$/);
    await expect(replayRun(bus, "never-submitted")).rejects.toThrow(/'never-submitted' has no log$/);
  }, 20_000);
});
