import { Counter } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publishAudit } from "../../shared/bus/audit.js";
import { provision, setAuditMaxAge } from "../../shared/bus/provision.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import type { AuditKind } from "../../shared/contracts/audit.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { sweepFinishedWals } from "../../services/supervisor/retention.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { until } from "../helpers/until.js";

const suite = useActorBus("retain", { random: seededRandom(5) });
const RETAIN_MS = 2_000;
const removed = new Counter({ name: "test_wals_removed", help: "-", registers: [] });
const stopping = new AbortController();
let sweeping: Promise<void>;

beforeAll(() => {
  sweeping = sweepFinishedWals(suite.bus, { retainMs: RETAIN_MS }, removed, stopping.signal);
});
afterAll(async () => {
  stopping.abort();
  await sweeping;
});

async function walMessages(runId: string): Promise<number> {
  const info = await suite.bus.jsm.streams.info(suite.bus.subjects.streams().wal, {
    subjects_filter: suite.bus.subjects.wal(runId),
  });
  return Object.values(info.state.subjects ?? {}).reduce((sum, n) => sum + n, 0);
}

/** A run's lifecycle event (seq 1, or `seq`). */
async function lifecycle(runId: string, kind: AuditKind, seq = 1): Promise<void> {
  await publishAudit(suite.bus, {
    schemaVersion: 1,
    auditId: `${runId}:${seq}`,
    runId,
    rootRunId: runId,
    seq,
    iteration: 1,
    phase: kind === "run.admitted" ? "PLAN" : "COMMIT",
    kind,
    actor: kind === "run.admitted" ? "supervisor" : "agent",
    status: kind === "run.failed" ? "failed" : "passed",
    artifacts: [],
    data: {},
    timestamp: new Date().toISOString(),
  });
}

/** A run with a WAL of 3 messages, a status, and its lifecycle event (the sweeper reads only these). */
async function finished(runId: string, status: RunStatus["status"], kind: AuditKind, seq = 1): Promise<void> {
  const { bus } = suite;
  for (let i = 0; i < 3; i += 1) await bus.js.publish(bus.subjects.wal(runId), new Uint8Array([i]));
  const at = new Date().toISOString();
  await new RunStatusStore(bus.buckets.runs).put({
    runId,
    status,
    phase: "COMMIT",
    iteration: 1,
    usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 1, toolCalls: 0 },
    updatedAt: at,
  });
  await lifecycle(runId, kind, seq);
}

describe("the retention of finished runs' WALs", () => {
  it("removes a committed or failed run's WAL once the retention has passed since it finished, and only then", async () => {
    const sleepUntil = (at: number) => systemClock.sleep(Math.max(0, at - Date.now()));
    const started = Date.now();
    await finished("done", "committed", "run.committed");
    await finished("broke", "failed", "run.failed");
    await finished("paused", "halted", "run.halted");
    // A run whose status says it is not finished (its event is stale): its WAL is not touched.
    await finished("moving", "running", "run.committed");
    // Admitted now, finished a second later: its retention counts from the finish.
    await lifecycle("later", "run.admitted");
    await sleepUntil(started + 1_000);
    const laterAt = Date.now();
    await finished("later", "committed", "run.committed", 2);

    // Not before the retention has passed (half a second of slack for a loaded machine).
    await sleepUntil(started + RETAIN_MS - 500);
    for (const runId of ["done", "broke", "later"]) expect(await walMessages(runId)).toBe(3);
    await until(async () => (await walMessages("done")) === 0 && (await walMessages("broke")) === 0, 10_000, {
      what: "the first two WALs removed",
    });
    // Finished later, removed later: put back until its own retention has passed.
    await sleepUntil(laterAt + RETAIN_MS - 500);
    expect(await walMessages("later")).toBe(3);
    await until(async () => (await walMessages("later")) === 0, 10_000, { what: "the later WAL removed" });
    expect(await walMessages("paused")).toBe(3);
    expect(await walMessages("moving")).toBe(3);
    expect((await removed.get()).values[0]?.value).toBe(3);
  }, 30_000);

  it("sets the audit stream's max_age for the supervisor; an actor provisioning later leaves it", async () => {
    const { bus } = suite;
    const maxAge = async () => (await bus.jsm.streams.info(bus.subjects.streams().audit)).config.max_age;
    const ninetyDays = 90 * 86_400_000;
    expect(await setAuditMaxAge(bus.nc, bus.subjects, ninetyDays)).toBe(true);
    expect(await maxAge()).toBe(ninetyDays * 1_000_000);
    expect(await setAuditMaxAge(bus.nc, bus.subjects, ninetyDays)).toBe(false);
    await provision(bus.nc, { subjects: bus.subjects, replicas: 1 });
    expect(await maxAge()).toBe(ninetyDays * 1_000_000);
    // Still an audit stream nobody can delete from or purge.
    const { config } = await bus.jsm.streams.info(bus.subjects.streams().audit);
    expect(config).toMatchObject({ deny_delete: true, deny_purge: true });
    expect(await setAuditMaxAge(bus.nc, bus.subjects, 0)).toBe(true);
    expect(await maxAge()).toBe(0);
  });
});
