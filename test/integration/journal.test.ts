import { Writable } from "node:stream";
import { describe, expect, it, vi } from "vitest";
import { RunJournal, STEP_KINDS } from "../../services/agent/journal.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { readLog, LogWriter } from "../../shared/bus/run-log.js";
import { followRun, readProgress, statusWithProgress } from "../../shared/bus/run-progress.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { startRun, transition } from "../../shared/loop/fsm.js";
import { eventOf } from "../../shared/loop/replay.js";
import type { LoopConfig, LoopState, Transition } from "../../shared/loop/state.js";
import { ManualClock } from "../../shared/runtime/clock.js";
import { createLogger, silentLogger } from "../../shared/runtime/logger.js";
import { ActorMetrics } from "../../shared/runtime/metrics.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { describeTool } from "../../shared/tools/tool.js";
import { echoCall, runner, spec, START } from "../helpers/fixtures.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { auditTrail } from "../helpers/audit-trail.js";
import { until } from "../helpers/until.js";

const config: LoopConfig = { tools: [describeTool(echoTool)], checkpointEvery: 3 };
const clock = new ManualClock(START);

const suite = useActorBus("jr", { clock, random: seededRandom(3) });

/** A real run's transitions, rebuilt from its WAL as a worker would have made them. */
async function transitionsOf(runId: string, steps: number): Promise<Transition[]> {
  const script = [...Array.from({ length: steps }, (_, i) => echoCall(`step ${i}`)), { text: "done" }];
  const result = await runner({ checkpointEvery: 3 }).run(
    spec({ script, resources: { maxIterations: steps + 5 } }),
    { runId },
  );
  expect(result.state.status).toBe("committed");
  const out: Transition[] = [];
  let state: LoopState | undefined;
  for (const record of result.wal) {
    const event = eventOf(record);
    if (!event) continue;
    const t =
      event.type === "start" ? startRun(event, config) : transition(state as LoopState, event, config);
    out.push(t);
    state = t.state;
  }
  return out;
}

const walOf = (t: Transition): WalRecord[] => t.effects.flatMap((e) => (e.type === "wal" ? [e.record] : []));
const auditsOf = (t: Transition): AuditEvent[] =>
  t.effects.flatMap((e) => (e.type === "audit" ? [e.event] : []));
/** The worker's rule (drive.ts): a transition that waits only on a model call may hold its records. */
const holds = (t: Transition): boolean =>
  t.effects.some((e) => e.type === "callModel") && !t.effects.some((e) => e.type === "storeMemory");

/**
 * A fresh lease's journal; `via` is the bus it publishes audit events and statuses on, `after` the
 * WAL position it writes after (an empty log by default).
 */
function journal(runId: string, via: ActorBus = suite.bus, after = { lastSeq: 0, count: 0 }): RunJournal {
  return new RunJournal({
    bus: via,
    writer: new LogWriter(suite.bus, runId, "w1", after.lastSeq, after.count),
    metrics: new ActorMetrics("agent"),
    logger: silentLogger,
    logContext: () => ({ runId }),
  });
}

describe("the run journal: the log and status of a lease", () => {
  it("writes one log message per step, carrying its transitions' records and events together, in order", async () => {
    const runId = "journal-steps";
    const ts = await transitionsOf(runId, 7);
    const j = journal(runId);
    let flushes = 0;
    for (const [i, t] of ts.entries()) {
      const before = (await readLog(suite.bus, runId)).lastSeq;
      await j.record(t, holds(t));
      const after = await readLog(suite.bus, runId);
      if (holds(t) && !walOf(t).some((r) => r.type === "CHECKPOINT")) {
        expect(after.lastSeq, `transition ${i} held`).toBe(before);
        continue;
      }
      flushes += 1;
      // Everything recorded so far is durable, events with their records, in the order recorded.
      expect(after.records.map((r) => r.record)).toEqual(ts.slice(0, i + 1).flatMap(walOf));
      expect(after.events).toEqual(ts.slice(0, i + 1).flatMap(auditsOf));
    }
    await j.settle();
    const read = await readLog(suite.bus, runId);
    expect(read.messages).toBe(flushes);
    expect(read.messages).toBeLessThan(ts.length);
    expect(read.records.map((r) => r.record)).toEqual(ts.flatMap(walOf));
    expect(await auditTrail(suite.bus, runId)).toEqual(ts.flatMap(auditsOf));
    // Each message is on its headline's subject: the commit's, for the last one.
    const last = await suite.bus.jsm.streams.getMessage(suite.bus.subjects.streams().log, {
      last_by_subj: suite.bus.subjects.logAll(runId),
    });
    expect(last?.subject).toBe(suite.bus.subjects.log(runId, "run.committed"));
    expect(last?.header.get("Agents-Events")?.split(",").at(-1)).toBe("run.committed");
  });

  it("writes the status when the run's status changes, and each log message carries the run's progress", async () => {
    const runId = "status-changes";
    const ts = await transitionsOf(runId, 12);
    const j = journal(runId);
    // Every write of this run's status, as the KV bucket's subject carries it.
    const seen: string[] = [];
    const sub = suite.bus.nc.subscribe(`$KV.${suite.bus.subjects.buckets().runs}.${runId}`, {
      callback: (_err, msg) => {
        seen.push(msg.json<{ status: string }>().status);
      },
    });
    await suite.bus.nc.flush();
    // All but the last transition, then the lease ends: the run is still running.
    const going = ts.slice(0, -1);
    expect(new Set(going.map((t) => t.state.phase)).size).toBeGreaterThan(1);
    for (const t of going) {
      await j.record(t, false);
      const last = t.state;
      expect(await readProgress(suite.bus, runId)).toEqual({
        phase: last.phase,
        iteration: last.guard.iteration,
        usage: last.usage,
        at: last.updatedAt,
      });
    }
    await j.settle();
    await suite.bus.nc.flush();
    expect(seen).toEqual(["running"]);
    // The run's status, then its progress from its log.
    const status = await statusWithProgress(suite.bus, runId);
    const last = going.at(-1)!.state;
    expect(status).toMatchObject({
      status: "running",
      phase: last.phase,
      iteration: last.guard.iteration,
      usage: last.usage,
    });
    await j.record(ts.at(-1)!, false);
    await j.settle();
    await suite.bus.nc.flush();
    sub.unsubscribe();
    expect(seen).toEqual(["running", "committed"]);
  });

  it("a run followed shows each step's progress from its log while its status stays running", async () => {
    const runId = "status-followed";
    const ts = await transitionsOf(runId, 6);
    const j = journal(runId);
    const seen: { status: string; iteration: number; toolCalls: number }[] = [];
    const following = (async () => {
      for await (const s of followRun(suite.bus, runId)) {
        seen.push({ status: s.status, iteration: s.iteration, toolCalls: s.usage.toolCalls });
        if (s.status === "committed") return;
      }
    })();
    // Each step is shown before the next is written: none is passed over for a later one.
    for (const t of ts.slice(0, -1)) {
      await j.record(t, false);
      const { status, guard } = t.state;
      if (status === "running")
        await until(() => seen.some((s) => s.iteration === guard.iteration), 5_000, {
          what: "the step shown",
        });
    }
    await j.record(ts.at(-1)!, false);
    await j.settle();
    await following;
    const running = seen.filter((s) => s.status === "running");
    expect(new Set(running.map((s) => s.iteration)).size).toBeGreaterThan(3);
    expect(Math.max(...running.map((s) => s.toolCalls))).toBe(6);
    expect(seen.at(-1)).toMatchObject({ status: "committed", toolCalls: 6 });
  });

  it("a follow ends when its signal aborts, whether the run has a status or not, or was aborted before", async () => {
    const runId = "status-followed-ends";
    const j = journal(runId);
    for (const t of await transitionsOf(runId, 2)) await j.record(t, false);
    await j.settle();
    for (const id of [runId, "never-submitted"]) {
      const seen: string[] = [];
      for await (const s of followRun(suite.bus, id, AbortSignal.timeout(300))) seen.push(s.status);
      expect(seen).toEqual(id === runId ? ["committed"] : []);
    }
    const none: string[] = [];
    for await (const s of followRun(suite.bus, runId, AbortSignal.abort())) none.push(s.status);
    expect(none).toEqual([]);
  });

  it("logs a run's milestones at info with the lease's context, and no line for a step's events", async () => {
    const runId = "journal-log-lines";
    const ts = await transitionsOf(runId, 2);
    const events = ts.flatMap(auditsOf);
    const lines: { level: number; runId?: string; phase?: string; kind: string }[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as (typeof lines)[number]);
        done();
      },
    });
    const j = new RunJournal({
      bus: suite.bus,
      writer: new LogWriter(suite.bus, runId, "w1", 0, 0),
      metrics: new ActorMetrics("agent"),
      logger: createLogger({ actor: "agent", level: "info", destination }),
      logContext: () => ({ runId, phase: "ACT" }),
    });
    for (const t of ts) await j.record(t, holds(t));
    await j.settle();
    const milestones = events.filter((e) => !STEP_KINDS.has(e.kind));
    expect(milestones.length).toBeGreaterThan(0);
    expect(events.length).toBeGreaterThan(milestones.length);
    expect(lines.map((l) => l.kind)).toEqual(milestones.map((e) => e.kind));
    for (const line of lines) expect(line).toMatchObject({ level: 30, runId, phase: "ACT" });
  });

  it("a status refreshed from an older read of the log leaves a finished run's status as it is, and does not write over one written since the read", async () => {
    const ts = await transitionsOf("jr-refresh", 2);
    const done = ts.at(-1)?.state as LoopState;
    const going = ts[2]?.state as LoopState;
    expect([done.status, going.status]).toEqual(["committed", "running"]);
    const store = new RunStatusStore(suite.bus.buckets.runs);
    const j = journal("jr-refresh");
    // No status yet: written.
    await j.refreshStatus(going);
    expect(await store.get("jr-refresh")).toMatchObject({ status: "running" });
    // Another lease finished the run since this one read its log: the status stays committed.
    await journal("jr-refresh").putStatus(done);
    await j.refreshStatus(going);
    expect(await store.get("jr-refresh")).toMatchObject({ status: "committed" });
    // A finished state is written over anything.
    await j.refreshStatus(done);
    expect(await store.get("jr-refresh")).toMatchObject({ status: "committed" });
    // Written between this lease's read and its write: the other write stands.
    await j.putStatus(going);
    vi.spyOn(RunStatusStore.prototype, "read").mockImplementationOnce(async function (
      this: RunStatusStore,
      runId: string,
    ) {
      // The spy answers its first call only: this one reads.
      const stored = await this.read(runId);
      if (stored) await this.put({ ...stored.status, status: "halted", phase: "HALT" });
      return stored;
    });
    await j.refreshStatus(going);
    expect(await store.get("jr-refresh")).toMatchObject({ status: "halted", phase: "HALT" });
  });
});
