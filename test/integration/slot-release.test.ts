import { randomBytes } from "node:crypto";
import { AckPolicy, DeliverPolicy } from "@nats-io/jetstream";
import { describe, expect, it } from "vitest";
import { POOL_KEY, PoolLedger } from "../../shared/bus/pool.js";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { decode, encode } from "../../shared/bus/codec.js";
import { writeFanOut } from "../../shared/bus/fanout.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { CancelRequest, ResumeRequest, RunJob } from "../../shared/contracts/cluster.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import { cancelOrphans, cancelRun } from "../../services/supervisor/cancel.js";
import { RELEASE_CONSUMER, releaseSlots } from "../../services/supervisor/control.js";
import { resumeRun } from "../../services/supervisor/resume.js";
import { seededRandom } from "../../shared/runtime/random.js";
import type { ActorBus } from "../../shared/bus/actor.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { LogWriter } from "../../shared/bus/run-log.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { publishEvent } from "../helpers/log.js";

const suite = useActorBus("sr", { random: seededRandom(5) });

function settled(runId: string, kind: "run.committed" | "run.failed" | "run.halted"): AuditEvent {
  return {
    schemaVersion: 1,
    auditId: `${runId}:9`,
    runId,
    rootRunId: runId,
    seq: 9,
    iteration: 1,
    phase: "COMMIT",
    kind,
    actor: "agent",
    status: kind === "run.committed" ? "passed" : "failed",
    artifacts: [],
    timestamp: new Date().toISOString(),
  };
}

/** A run that halted and still holds its pool slot: its release has not been read yet. */
async function haltedHoldingSlot(pool: PoolLedger, runId: string): Promise<void> {
  await pool.acquire(runId, 1_000);
  await new RunStatusStore(suite.bus.buckets.runs).put({
    runId,
    rootRunId: runId,
    depth: 0,
    status: "halted",
    phase: "HALT",
    iteration: 1,
    usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 1, toolCalls: 0 },
    terminal: { kind: "HALT", reason: "operator stop" },
    updatedAt: new Date().toISOString(),
  });
}

/** Waits until the release loop has handled and acknowledged everything published so far. */
async function drained(stream: string): Promise<void> {
  await expect
    .poll(
      async () => {
        const info = await suite.bus.jsm.consumers.info(stream, RELEASE_CONSUMER);
        return info.num_pending + info.num_ack_pending;
      },
      { timeout: 10_000 },
    )
    .toBe(0);
}

/** Runs the supervisors' release loop while `body` runs. */
async function whileReleasing(pool: PoolLedger, body: () => Promise<void>): Promise<void> {
  const stopping = new AbortController();
  const loop = releaseSlots(suite.bus, pool, stopping.signal);
  try {
    await body();
  } finally {
    stopping.abort();
    await loop;
  }
}

/** Jobs on the work queue for `runId`. */
async function queued(runId: string): Promise<number> {
  const subject = suite.bus.subjects.runQueue(runId);
  const runs = await suite.bus.jsm.streams.info(suite.bus.subjects.streams().runs, {
    subjects_filter: subject,
  });
  return runs.state.subjects?.[subject] ?? 0;
}

/** The ledger key's revision: one per write of the ledger. */
async function ledgerRevision(): Promise<number> {
  return (await suite.bus.buckets.pool.get(POOL_KEY))?.revision ?? 0;
}

describe("the supervisor's slot release loop", () => {
  it("frees the slots of 300 settled runs in a few writes of the ledger, and leaves running runs their slots", async () => {
    const pool = PoolLedger.of(suite.bus);
    const ids = Array.from({ length: 320 }, (_, i) => `run-rel-${i}`);
    await Promise.all(ids.map((id) => pool.acquire(id, 1_000)));
    expect(await pool.active()).toHaveLength(320);

    // A first start creates the loop's durable consumer (it delivers what is published after it):
    // the events then wait for the second start as one backlog, as after a burst of settling runs.
    const first = new AbortController();
    const starting = releaseSlots(suite.bus, pool, first.signal);
    const stream = suite.bus.subjects.streams().log;
    await expect
      .poll(() => suite.bus.jsm.consumers.info(stream, RELEASE_CONSUMER).catch(() => null), { interval: 20 })
      .toBeTruthy();
    first.abort();
    await starting;
    const kinds = ["run.committed", "run.failed", "run.halted"] as const;
    for (const [i, id] of ids.slice(0, 300).entries())
      await publishEvent(suite.bus, settled(id, kinds[i % 3]!));
    const before = await ledgerRevision();
    const stopping = new AbortController();
    const loop = releaseSlots(suite.bus, pool, stopping.signal);

    await expect.poll(async () => (await pool.active()).length, { timeout: 15_000 }).toBe(20);
    stopping.abort();
    await loop;

    expect(new Set(await pool.active())).toEqual(new Set(ids.slice(300)));
    // One write per release when each waits for the one before; queued together they share writes.
    const writes = (await ledgerRevision()) - before;
    expect(writes).toBeGreaterThan(0);
    expect(writes).toBeLessThan(100);
  });

  it("a loop stopped while its consumer is being made ends: the stop is not missed", async () => {
    // Aborted before the loop could listen for it: before, the loop read its messages for ever.
    await releaseSlots(suite.bus, PoolLedger.of(suite.bus), AbortSignal.abort());
  });

  it("a run's last transition frees its slot whatever it carries with its commit, written whole or in parts; its other messages leave the slot held", async () => {
    const pool = PoolLedger.of(suite.bus);
    const [whole, split, going] = ["run-log-whole", "run-log-split", "run-log-going"];
    for (const runId of [whole, split, going]) await pool.acquire(runId, 1_000);
    const event = (runId: string, seq: number, kind: AuditEvent["kind"]): AuditEvent => ({
      ...settled(runId, "run.committed"),
      auditId: `${runId}:${seq}`,
      seq,
      kind,
      status: "passed",
    });
    const phase = (runId: string): WalRecord => ({
      schemaVersion: 1,
      runId,
      iteration: 1,
      at: Date.now(),
      type: "PHASE",
      from: "ACT",
      to: "COMMIT",
    });
    // A record past the server's max_payload: the message is written as parts on one subject.
    const large = (runId: string): WalRecord => ({
      schemaVersion: 1,
      runId,
      iteration: 1,
      at: Date.now(),
      type: "INTENT",
      actionId: "act-1",
      tool: "pay",
      // Random text: a body is stored compressed, and must still pass max_payload.
      input: { note: randomBytes(1_200_000).toString("base64") },
      idempotencyKey: `${runId}:act-1`,
      purpose: "act",
    });
    const stream = suite.bus.subjects.streams().log;
    await whileReleasing(pool, async () => {
      // Messages of a run still going: a step, and a resume (a run.* headline that frees nothing).
      const goingLog = new LogWriter(suite.bus, going, "w1", 0, 0);
      await goingLog.append([phase(going)], [event(going, 1, "tool.completed")]);
      await goingLog.append([], [event(going, 2, "run.resumed")]);
      // The commit comes last among the transition's events, its headline all the same.
      const wholeLog = new LogWriter(suite.bus, whole, "w1", 0, 0);
      await wholeLog.append(
        [phase(whole)],
        [
          event(whole, 1, "approval.decided"),
          event(whole, 2, "phase.entered"),
          event(whole, 3, "run.committed"),
        ],
      );
      const splitLog = new LogWriter(suite.bus, split, "w1", 0, 0);
      const first = await splitLog.append([large(split), phase(split)], [event(split, 1, "run.committed")]);
      const parts = await suite.bus.jsm.streams.info(stream, {
        subjects_filter: suite.bus.subjects.logAll(split),
      });
      expect(parts.state.subjects?.[suite.bus.subjects.log(split, "run.committed")]).toBe(2);
      expect(first).toBeGreaterThan(0);
      const held = async () => (await pool.active()).filter((id) => id === whole || id === split);
      await expect.poll(held, { timeout: 10_000 }).toEqual([]);
      await drained(stream);
      expect(await pool.active()).toContain(going);
    });
    expect(await pool.active()).toContain(going);
    await pool.release(going);
  });

  it("a resume that comes before the halt's release waits for it: the resumed run keeps a slot", async () => {
    const pool = PoolLedger.of(suite.bus);
    const runId = "run-halt-resume";
    await haltedHoldingSlot(pool, runId);
    // The halt is in the run's log, but the release loop has not read it yet (it lags behind,
    // or its supervisor restarts): the run's slot is still held when the operator resumes it.
    await publishEvent(suite.bus, settled(runId, "run.halted"));
    const resuming = resumeRun(suite.bus, pool, 1_000, encode(ResumeRequest, { runId, by: "oncall" }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    await whileReleasing(pool, async () => {
      await expect(resuming).resolves.toMatchObject({ ok: true });
      await drained(suite.bus.subjects.streams().log);
      // The halt's release came first and the resume's slot after it, not the other way round.
      expect(await pool.active()).toContain(runId);
    });
  });

  it("a halt delivered again after its run was resumed leaves the resumed run its slot, and hands its parent nothing", async () => {
    const pool = PoolLedger.of(suite.bus);
    const runId = "run-halt-again";
    const stream = suite.bus.subjects.streams().log;
    await haltedHoldingSlot(pool, runId);
    const parentRunId = "run-halt-again-parent";
    const halt = await publishEvent(suite.bus, { ...settled(runId, "run.halted"), parentRunId });
    await whileReleasing(pool, async () => {
      await expect.poll(async () => (await pool.active()).includes(runId), { timeout: 10_000 }).toBe(false);
      const resumed = resumeRun(suite.bus, pool, 1_000, encode(ResumeRequest, { runId, by: "oncall" }));
      await expect(resumed).resolves.toMatchObject({ ok: true });
      await drained(stream);
    });

    // The loop reads the halt again, as when its ack was lost or it was NAK'd after the release
    // (its parent's fan-in failed): its durable consumer is put back to start at the halt's
    // message. The parent's fan-out names the run, whose status still reads halted (no worker has
    // taken the resume yet): the late halt must not hand the parent a result for it.
    await writeFanOut(suite.bus.buckets.runs, {
      parentRunId,
      rootRunId: parentRunId,
      depth: 0,
      actionId: "spawn-1",
      children: [runId],
    });
    const info = await suite.bus.jsm.consumers.info(stream, RELEASE_CONSUMER);
    await suite.bus.jsm.consumers.delete(stream, RELEASE_CONSUMER);
    await suite.bus.jsm.consumers.add(stream, {
      durable_name: RELEASE_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: halt.seq,
      filter_subject: info.config.filter_subject,
    });
    await whileReleasing(pool, async () => {
      await drained(stream);
      expect(
        (await suite.bus.jsm.consumers.info(stream, RELEASE_CONSUMER)).ack_floor.stream_seq,
      ).toBeGreaterThanOrEqual(halt.seq);
      expect(await pool.active()).toContain(runId);
      expect(await queued(parentRunId)).toBe(0);
      // The resumed run's own end still frees it.
      await publishEvent(suite.bus, { ...settled(runId, "run.committed"), auditId: `${runId}:10`, seq: 10 });
      await expect.poll(async () => (await pool.active()).includes(runId), { timeout: 10_000 }).toBe(false);
    });
  });

  it("a run that fails while children of its fan-out are still going has them cancelled (running, waiting, queued), not those halted, finished or undoing their calls; read again, its failure queues nothing more", async () => {
    const pool = PoolLedger.of(suite.bus);
    const parentRunId = "run-orphaning";
    const store = new RunStatusStore(suite.bus.buckets.runs);
    const child = (name: string, status: RunStatus["status"], phase: RunStatus["phase"]): RunStatus => ({
      runId: `${parentRunId}-${name}`,
      rootRunId: parentRunId,
      parentRunId,
      depth: 1,
      status,
      phase,
      iteration: 1,
      usage: { inputTokens: 0, outputTokens: 0, costUsd: 0, modelCalls: 1, toolCalls: 0 },
      updatedAt: new Date().toISOString(),
    });
    const children = [
      child("going", "running", "ACT"),
      child("asking", "awaiting_approval", "ACT"),
      child("queued", "queued", "PLAN"),
      child("halted", "halted", "HALT"),
      child("done", "committed", "COMMIT"),
      child("undoing", "running", "FAIL"),
    ];
    for (const c of children) await store.put(c);
    const unknown = `${parentRunId}-never-admitted`;
    await writeFanOut(suite.bus.buckets.runs, {
      parentRunId,
      rootRunId: parentRunId,
      depth: 0,
      actionId: "spawn-1",
      children: [...children.map((c) => c.runId), unknown],
    });
    // Its cancel names what becomes of its children.
    await store.put({ ...child("self", "running", "ACT"), runId: parentRunId, depth: 0 });
    const request = encode(CancelRequest, { runId: parentRunId, by: "oncall", reason: "x" });
    const reply = await cancelRun(suite.bus, request);
    const name = (n: string): string => `${parentRunId}-${n}`;
    expect(reply).toMatchObject({
      ok: true,
      data: {
        going: ["going", "asking", "queued"].map(name),
        halted: [name("halted")],
        committed: [name("done")],
      },
    });
    expect(reply.ok && reply.message).toContain(
      `; its children still going are cancelled with it: ${name("going")}, ${name("asking")}, ${name("queued")}; its halted children stay halted, and can no longer be resumed (cancel --tree ends them too): ${name("halted")}; its committed children have what they did undone with its own calls: ${name("done")}`,
    );
    const failed = {
      ...settled(parentRunId, "run.failed"),
      reason: "[RUN_CANCELLED] cancelled by oncall: x",
    };
    await whileReleasing(pool, async () => {
      await publishEvent(suite.bus, failed);
      // Its worker writes the status just after the log message that failed the run.
      await store.put({ ...child("self", "failed", "FAIL"), runId: parentRunId, depth: 0 });
      await drained(suite.bus.subjects.streams().log);
      // Its failure read again (another event, as a redelivery is): the same cancels, deduplicated.
      await publishEvent(suite.bus, { ...failed, auditId: `${parentRunId}:10`, seq: 10 });
      await drained(suite.bus.subjects.streams().log);
    });
    const ids = [...children.map((c) => c.runId), unknown];
    const cancelled = new Set(["going", "asking", "queued"].map((n) => `${parentRunId}-${n}`));
    expect(await Promise.all(ids.map((id) => queued(id)))).toEqual(
      ids.map((id) => (cancelled.has(id) ? 1 : 0)),
    );
    // Asked again, it finds each cancel queued already: nothing more is queued, or counted.
    expect(await cancelOrphans(suite.bus, parentRunId, failed.reason)).toEqual([]);
    const job = await suite.bus.jsm.streams.getMessage(suite.bus.subjects.streams().runs, {
      last_by_subj: suite.bus.subjects.runQueue(`${parentRunId}-going`),
    });
    expect(decode(RunJob, job?.data ?? new Uint8Array())).toMatchObject({
      runId: `${parentRunId}-going`,
      event: {
        type: "cancel",
        by: "supervisor",
        reason: `its parent ${parentRunId} failed: [RUN_CANCELLED] cancelled by oncall: x`,
      },
    });
  });

  it("a resume whose halt is not released within 5 s is refused with HALT_PENDING (retryable), and queues nothing", async () => {
    const pool = PoolLedger.of(suite.bus);
    const runId = "run-halt-pending";
    await haltedHoldingSlot(pool, runId);
    const started = Date.now();
    await expect(
      resumeRun(suite.bus, pool, 1_000, encode(ResumeRequest, { runId, by: "oncall" })),
    ).rejects.toMatchObject({ code: "HALT_PENDING", retryable: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_900);
    expect(await pool.active()).toContain(runId);
    expect(await queued(runId)).toBe(0);
  }, 15_000);

  it("a resume that stopped after taking its slot, its job not queued, is finished by the next resume at once, not refused with HALT_PENDING", async () => {
    const pool = PoolLedger.of(suite.bus);
    const runId = "run-resume-midway";
    await haltedHoldingSlot(pool, runId);
    await pool.release(runId);
    const halted = await publishEvent(suite.bus, settled(runId, "run.halted"));
    const resume = encode(ResumeRequest, { runId, by: "oncall" });
    // Its supervisor fails between the slot and the job (killed, in production).
    const jobless = { ...suite.bus, nc: failingJobs(suite.bus.nc, suite.bus.subjects.runQueue(runId)) };
    await expect(resumeRun(jobless, pool, 1_000, resume)).rejects.toThrow("the supervisor stopped");
    expect(await pool.slotOf(runId)).toEqual({ after: halted.seq });
    expect(await queued(runId)).toBe(0);
    const started = Date.now();
    expect(await resumeRun(suite.bus, pool, 1_000, resume)).toMatchObject({ ok: true });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(await queued(runId)).toBe(1);
    // Asked again before a worker takes the job: answered, nothing queued twice, one slot.
    expect(await resumeRun(suite.bus, pool, 1_000, resume)).toMatchObject({ ok: true });
    expect(await queued(runId)).toBe(1);
    expect((await pool.active()).filter((id) => id === runId)).toHaveLength(1);
  }, 15_000);
});

/** `nc`, whose publishes on `subject` fail as a supervisor's that stops there would. */
function failingJobs(nc: ActorBus["nc"], subject: string): ActorBus["nc"] {
  return new Proxy(nc, {
    get(target, prop) {
      const value: unknown = Reflect.get(target, prop, target);
      if (typeof value !== "function") return value;
      const bound = value.bind(target) as (...args: unknown[]) => unknown;
      if (prop !== "publish") return bound;
      return (to: string, ...rest: unknown[]) => {
        if (to === subject) throw new AgentError("INTERNAL", "the supervisor stopped");
        return bound(to, ...rest);
      };
    },
  });
}
