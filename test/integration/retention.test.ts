import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { Counter } from "prom-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openActorBus, type ActorBus } from "../../shared/bus/actor.js";
import { provision, setLogMaxAge } from "../../shared/bus/provision.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { ActorEnv } from "../../shared/runtime/config.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { RETENTION_CONSUMER, sweepFinishedRuns } from "../../services/supervisor/retention.js";
import { ToolRecords } from "../../services/supervisor/tool-records.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { finishedRun, lifecycle, logMessages, toolRecords } from "../helpers/finished-runs.js";
import { startNats, type TestNats } from "../helpers/nats-server.js";
import { until } from "../helpers/until.js";

const suite = useActorBus("retain", { random: seededRandom(5) });
const RETAIN_MS = 2_000;
const statusesRemoved = new Counter({ name: "test_statuses_removed", help: "-", registers: [] });
const toolRecordsRemoved = new Counter({ name: "test_tool_records_removed", help: "-", registers: [] });
const stopping = new AbortController();
let sweeping: Promise<void>;

const hasStatus = async (bus: ActorBus, runId: string) => (await bus.buckets.runs.get(runId)) !== null;

beforeAll(() => {
  sweeping = sweepFinishedRuns(
    suite.bus,
    { retainMs: RETAIN_MS },
    { statuses: statusesRemoved, toolRecords: toolRecordsRemoved },
    stopping.signal,
  );
});
afterAll(async () => {
  stopping.abort();
  await sweeping;
});

describe("the retention of finished runs", () => {
  it("removes a committed or failed run's status and its tool calls' idempotency records once the retention has passed since it finished, and only then; its log is kept", async () => {
    const sleepUntil = (at: number) => systemClock.sleep(Math.max(0, at - Date.now()));
    const started = Date.now();
    await finishedRun(suite.bus, "done", "committed", "run.committed");
    await finishedRun(suite.bus, "broke", "failed", "run.failed");
    await finishedRun(suite.bus, "paused", "halted", "run.halted");
    // A run whose status says it is not finished (its event is stale): nothing of it is touched.
    await finishedRun(suite.bus, "moving", "running", "run.committed");
    // A log no record reads as: its status removed all the same, its calls' records left (it cannot name them).
    await finishedRun(suite.bus, "garbled", "committed", "run.committed", { garbled: true });
    // Admitted now, finished a second later: its retention counts from the finish.
    await lifecycle(suite.bus, "later", "run.admitted");
    await sleepUntil(started + 1_000);
    const laterAt = Date.now();
    await finishedRun(suite.bus, "later", "committed", "run.committed", { seq: 2 });
    // Each run's log: its records' message and its lifecycle event's (the later run's admission too).
    const logs = { done: 2, broke: 2, paused: 2, moving: 2, garbled: 2, later: 3 };

    // Not before the retention has passed (half a second of slack for a loaded machine).
    await sleepUntil(started + RETAIN_MS - 500);
    for (const runId of ["done", "broke", "later"]) {
      expect(await hasStatus(suite.bus, runId)).toBe(true);
      expect(await toolRecords(suite.bus, runId)).toBe(2);
    }
    await until(
      async () => !(await hasStatus(suite.bus, "done")) && !(await hasStatus(suite.bus, "broke")),
      10_000,
      { what: "the first two statuses removed" },
    );
    // Finished later, removed later: put back until its own retention has passed.
    await sleepUntil(laterAt + RETAIN_MS - 500);
    expect(await hasStatus(suite.bus, "later")).toBe(true);
    expect(await toolRecords(suite.bus, "later")).toBe(2);
    await until(async () => !(await hasStatus(suite.bus, "later")), 10_000, {
      what: "the later status removed",
    });
    expect(await hasStatus(suite.bus, "garbled")).toBe(false);
    // The idempotency records of the finished runs' calls went with their statuses, markers and all.
    for (const runId of ["done", "broke", "later"]) expect(await toolRecords(suite.bus, runId)).toBe(0);
    expect(await toolRecords(suite.bus, "garbled")).toBe(2);
    // A run that may run again keeps its status and its calls' records.
    for (const runId of ["paused", "moving"]) {
      expect(await hasStatus(suite.bus, runId)).toBe(true);
      expect(await toolRecords(suite.bus, runId)).toBe(2);
    }
    // Every run's log is kept whole: only the stream's max_age removes it.
    for (const [runId, messages] of Object.entries(logs))
      expect(await logMessages(suite.bus, runId)).toBe(messages);
    expect((await statusesRemoved.get()).values[0]?.value).toBe(4);
    expect((await toolRecordsRemoved.get()).values[0]?.value).toBe(6);
  }, 30_000);

  it("removes a record already removed as done: a delete retried after its reply was lost", async () => {
    await finishedRun(suite.bus, "twice", "committed", "run.halted");
    const records = new ToolRecords(suite.bus);
    // Both read each record before either deletes it: the second delete finds it gone. Without
    // that taken as done, each is retried for 15 s and the removal fails.
    const removed = await Promise.all([records.removeFor("twice"), records.removeFor("twice")]);
    expect(removed[0] + removed[1]).toBeGreaterThanOrEqual(2);
    expect(await toolRecords(suite.bus, "twice")).toBe(0);
  }, 10_000);

  it("sets the run log's max_age for the supervisor; an actor provisioning later leaves it", async () => {
    const { bus } = suite;
    const maxAge = async () => (await bus.jsm.streams.info(bus.subjects.streams().log)).config.max_age;
    const ninetyDays = 90 * 86_400_000;
    expect(await setLogMaxAge(bus.nc, bus.subjects, ninetyDays)).toBe(true);
    expect(await maxAge()).toBe(ninetyDays * 1_000_000);
    expect(await setLogMaxAge(bus.nc, bus.subjects, ninetyDays)).toBe(false);
    await provision(bus.nc, { subjects: bus.subjects, replicas: 1 });
    expect(await maxAge()).toBe(ninetyDays * 1_000_000);
    // Still a log nobody can delete from or purge.
    const { config } = await bus.jsm.streams.info(bus.subjects.streams().log);
    expect(config).toMatchObject({ deny_delete: true, deny_purge: true });
    expect(await setLogMaxAge(bus.nc, bus.subjects, 0)).toBe(true);
    expect(await maxAge()).toBe(0);
  });
});

describe("the retention under a NATS user that may not remove single messages", () => {
  // A supervisor upgraded before its permissions.conf: removing a record or a status is refused.
  const lines: string[] = [];
  let server: TestNats;
  let bus: ActorBus;
  let dir: string;
  const statuses = new Counter({ name: "test_denied_statuses_removed", help: "-", registers: [] });
  const records = new Counter({ name: "test_denied_records_removed", help: "-", registers: [] });
  const stop = new AbortController();
  let sweep: Promise<void>;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "retain-denied-"));
    const conf = join(dir, "nats.conf");
    await writeFile(
      conf,
      `authorization { users = [ { user: old, password: old, permissions: {
         publish: { allow: [">"], deny: ["$JS.API.STREAM.MSG.DELETE.>"] }, subscribe: { allow: [">"] } } } ] }\n`,
    );
    server = await startNats({ configFile: conf });
    const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(line) });
    bus = await openActorBus(
      ActorEnv.parse({
        NATS_URL: server.url,
        NATS_USER: "old",
        NATS_PASSWORD: "old",
        AGENTS_PREFIX: "denied",
      }),
      "retention-denied-test",
      { clock: systemClock, random: seededRandom(7), logger },
    );
    sweep = sweepFinishedRuns(bus, { retainMs: 1 }, { statuses, toolRecords: records }, stop.signal);
  }, 30_000);
  afterAll(async () => {
    stop.abort();
    try {
      // A sweep stuck in a retry (a failing run of this test) must not keep the server running.
      await Promise.race([sweep, systemClock.sleep(5_000)]);
    } finally {
      await bus?.nc.drain().catch(() => undefined);
      await server?.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("keeps finished runs' statuses and their calls' records, says so once for each bucket, and goes on to the next run", async () => {
    const runs = ["first", "second", "third"];
    await finishedRun(bus, "first", "committed", "run.committed");
    await finishedRun(bus, "second", "failed", "run.failed");
    await finishedRun(bus, "third", "committed", "run.committed");
    // Every lifecycle message handled and acknowledged: the sweep is not stuck on a refused removal.
    const stream = bus.subjects.streams().log;
    const last = (await bus.jsm.streams.info(stream)).state.last_seq;
    await until(
      async () => {
        const info = await bus.jsm.consumers.info(stream, RETENTION_CONSUMER).catch(() => undefined);
        return info !== undefined && info.num_ack_pending === 0 && info.ack_floor.stream_seq >= last;
      },
      20_000,
      { what: "the three finished runs swept" },
    );
    for (const runId of runs) {
      expect(await hasStatus(bus, runId)).toBe(true);
      expect(await toolRecords(bus, runId)).toBe(2);
      expect(await logMessages(bus, runId)).toBe(2);
    }
    expect((await statuses.get()).values[0]?.value ?? 0).toBe(0);
    expect((await records.get()).values[0]?.value ?? 0).toBe(0);
    const said = (what: string) =>
      lines.filter((line) => line.includes(`may not remove messages from ${what}`));
    expect(said("the idempotency bucket")).toHaveLength(1);
    expect(said("the runs bucket")).toHaveLength(1);
  }, 30_000);
});
