import { readdir } from "node:fs/promises";
import { appendEach } from "../helpers/log.js";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { RunJob } from "../../shared/contracts/cluster.js";
import { continuationJob, publishJob, queuedJobKinds } from "../../shared/bus/jobs.js";
import { KvMemory, memoryReads, prefixOf } from "../../shared/bus/kv-memory.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { LogWriter } from "../../shared/bus/run-log.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import type { LoopState } from "../../shared/loop/state.js";
import { statusOf } from "../../shared/loop/status.js";
import { systemClock } from "../../shared/runtime/clock.js";
import { defineTool } from "../../shared/tools/tool.js";
import {
  AGENTCTL,
  chargeRun,
  runProcess,
  serveCharge,
  settled,
  useClusterSuite,
} from "../helpers/cluster-suite.js";
import { echoCall, olderCheckpoint, runner, spec } from "../helpers/fixtures.js";
import { bucketStream } from "../../shared/bus/subjects.js";
import { openTree } from "../../shared/bus/tree-iterations.js";

/** A root run's tree cap, as the supervisor writes it at admission before the run's first job. */
const openRunTree = (runId: string): Promise<void> => openTree(suite.bus.buckets.pool, runId, 1_000);

/** A root run's first job, as the supervisor queues it at admission. */
function firstJob(runId: string, runSpec: unknown): RunJob {
  return RunJob.parse({ schemaVersion: 1, runId, rootRunId: runId, depth: 0, spec: runSpec, auditSeq: 0 });
}

/** Workers that die, drain or collide: the run survives, and no side effect happens twice. */
const suite = useClusterSuite("takeover", {
  actors: [
    { kind: "supervisor" },
    { kind: "tools", env: { TOOLS: "echo" } },
    { kind: "agent", name: "agent-1" },
    { kind: "agent", name: "agent-2" },
  ],
  env: {
    AGENT_RETRY_DELAY_MS: "500",
  },
});

describe("takeover: kill -9, drain, fencing, unknown outcomes", () => {
  it("kill -9 of the worker mid-run: another worker resumes it, the side effect happens once, no recorded model step is called again", async () => {
    const charge = serveCharge(suite, 1_500);
    const reply = await chargeRun(suite, "charge", 5);
    const key = await charge.started;
    const holder = await suite.lastWriter(reply.runId);
    expect(holder).toMatch(/^agent-\d$/);
    suite.cluster.signal(holder as string, "SIGKILL");

    const status = await suite.waitFor(reply.runId, settled, 30_000);
    expect(status).toMatchObject({ status: "committed", terminal: { output: "charged 5" } });
    expect(charge.executions.get(key)).toBe(1);
    const events = await suite.audit(reply.runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.kind === "run.resumed")).toHaveLength(1);
    const wal = (await suite.wal(reply.runId)).map((r) => r.record);
    const models = wal.flatMap((r) => (r.type === "MODEL" ? [r.event.requestId] : []));
    expect(models).toHaveLength(2);
    expect(new Set(models).size).toBe(2);
    expect(events.filter((e) => e.kind === "model.called")).toHaveLength(2);
    await suite.cluster.start("agent", `${holder as string}b`);
  }, 60_000);

  it("a tool service finds each call's INTENT in the run's log when the call arrives, and no outcome yet", async () => {
    const seen: { intent: boolean; outcome: boolean }[] = [];
    suite.serveTool(
      defineTool({
        name: "probe",
        description: "Reads its own run's log from the service side, as a payment would be made.",
        input: z.object({ amount: z.number() }),
        capability: { kind: "compute" },
        idempotent: false,
        execute: async (_input, ctx) => {
          const records = (await suite.wal(ctx.runId)).map((r) => r.record);
          const intent = records.some(
            (r) =>
              r.type === "INTENT" && r.actionId === ctx.actionId && r.idempotencyKey === ctx.idempotencyKey,
          );
          const outcome = records.some(
            (r) => (r.type === "COMPLETE" || r.type === "ABORT") && r.event.actionId === ctx.actionId,
          );
          seen.push({ intent, outcome });
          return { output: { ok: true } };
        },
      }),
    );
    const calls = [1, 2, 3].map((amount) => ({ toolCalls: [{ name: "probe", input: { amount } }] }));
    const reply = await suite.client.submit(
      spec({ script: [...calls, { text: "probed" }], tools: ["probe"] }),
    );
    const status = await suite.waitFor(reply.runId, settled, 30_000);
    expect(status.status).toBe("committed");
    expect(seen).toEqual([1, 2, 3].map(() => ({ intent: true, outcome: false })));
  });

  it("a run of many short steps that outlasts the ack wait keeps its lease: the heartbeat spans the lease, not one step", async () => {
    const pause = defineTool({
      name: "pause",
      description: "Waits a little (a step shorter than the heartbeat interval).",
      input: z.object({ n: z.number() }),
      capability: { kind: "compute" },
      reversibility: "reversible",
      idempotent: true,
      execute: async (input) => {
        await systemClock.sleep(300);
        return { output: { n: input.n } };
      },
    });
    suite.serveTool(pause);
    // 10 steps of ~300 ms: over 3 s on one lease, with the default ack wait (1.2 s) renewed 3 times in it.
    const script = [
      ...Array.from({ length: 10 }, (_, n) => ({ toolCalls: [{ name: "pause", input: { n } }] })),
      { toolCalls: [{ name: "finish", input: { answer: "paused 10 times" } }] },
    ];
    const reply = await suite.client.submit(spec({ script, tools: ["pause"] }));
    const status = await suite.waitFor(reply.runId, settled, 30_000);
    expect(status).toMatchObject({ status: "committed" });
    expect((await suite.audit(reply.runId)).filter((e) => e.kind === "run.resumed")).toHaveLength(0);
    expect(await suite.logs()).not.toMatch(new RegExp(`"runId":"${reply.runId}"[^\\n]*(fenced|taking over)`));
  }, 60_000);

  it("a non-idempotent call whose outcome is unknown (it timed out) halts the run for reconciliation; it is never run twice", async () => {
    let executions = 0;
    const launch = defineTool({
      name: "launch",
      description: "Launches something that cannot be launched twice; hangs here.",
      input: z.object({ target: z.string() }),
      capability: { kind: "compute" },
      timeoutMs: 400,
      reversibility: "irreversible",
      idempotent: false,
      execute: async () => {
        executions += 1;
        await new Promise(() => undefined);
        return { output: {} };
      },
    });
    const served = suite.serveTool(launch);
    const reply = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "launch", input: { target: "moon" } }] },
          { toolCalls: [{ name: "launch", input: { target: "moon" } }] },
          { text: "done" },
        ],
        tools: ["launch"],
      }),
    );
    const status = await suite.waitFor(reply.runId, settled, 30_000);
    expect(status.status).toBe("halted");
    expect(status.terminal?.reason).toMatch(/RECONCILIATION_REQUIRED.*launch/);
    expect(executions).toBe(1);
    expect(status.usage.modelCalls).toBe(1);
    served.stop();
  }, 60_000);

  it("two workers forced onto one run: fencing lets exactly one drive; the other logs the conflict and lets go", async () => {
    const runId = `fence${Date.now().toString(36)}`;
    const runSpec = spec({
      script: [
        { toolCalls: [{ name: "echo", input: { text: "a" } }], delayMs: 300 },
        { toolCalls: [{ name: "echo", input: { text: "b" } }], delayMs: 300 },
        { toolCalls: [{ name: "finish", input: { answer: "done" } }], delayMs: 300 },
      ],
    });
    await suite.bus.buckets.runs.delete(runId).catch(() => undefined);
    const job = firstJob(runId, runSpec);
    await openRunTree(runId);
    await publishJob(suite.bus, job, `${runId}:copy-1`);
    await publishJob(suite.bus, job, `${runId}:copy-2`);
    const status = await suite.waitFor(runId, settled, 30_000);
    expect(status.status).toBe("committed");
    const wal = (await suite.wal(runId)).map((r) => r.record);
    const models = wal.flatMap((r) => (r.type === "MODEL" ? [r.event.requestId] : []));
    expect(new Set(models).size).toBe(models.length);
    const events = await suite.audit(runId);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events.filter((e) => e.kind === "run.committed")).toHaveLength(1);
    expect(await suite.logs()).toMatch(
      new RegExp(`"runId":"${runId}"[^\\n]*fenced: another worker drives this run`),
    );
    // The copy that lost is acknowledged by its worker (the run is driven with the other copy), and
    // the winner's when the run commits: neither is left to be offered again.
    expect(await suite.logs()).toMatch(
      new RegExp(`"runId":"${runId}"[^\\n]*another job of the run drives it: this one is settled`),
    );
    await expect.poll(() => queuedJobKinds(suite.bus, runId), { timeout: 10_000 }).toEqual([]);
  }, 60_000);

  it("SIGTERM on a worker mid-run: it finishes its step, hands the run back, and another worker continues within 2 s", async () => {
    const reply = await suite.client.submit(
      spec({
        script: [
          ...["a", "b", "c"].map((text) => ({
            toolCalls: [{ name: "echo", input: { text } }],
            delayMs: 700,
          })),
          { toolCalls: [{ name: "finish", input: { answer: "drained" } }] },
        ],
      }),
    );
    await suite.waitFor(reply.runId, (s) => s.usage.toolCalls >= 1);
    const writerOf = () => suite.lastWriter(reply.runId);
    const holder = (await writerOf()) as string;
    expect(holder).toMatch(/^agent-/);
    const stoppedAt = Date.now();
    suite.cluster.signal(holder, "SIGTERM");
    let next = holder;
    while (next === holder && Date.now() - stoppedAt < 10_000) {
      await new Promise((r) => setTimeout(r, 20));
      next = (await writerOf()) ?? holder;
    }
    const handover = Date.now() - stoppedAt;
    expect(next).not.toBe(holder);
    expect(handover).toBeLessThan(2_000);
    expect(await suite.cluster.actors.get(holder)?.exited).toBe(0);
    expect((await suite.waitFor(reply.runId, settled, 20_000)).status).toBe("committed");
    expect((await suite.audit(reply.runId)).filter((e) => e.kind === "run.resumed")).toHaveLength(1);
    await suite.cluster.start("agent", `${holder}x`);
  }, 60_000);

  it("a run whose log ends with a checkpoint an older version wrote (a rolling upgrade) is taken over and commits", async () => {
    const runId = `upgrade${Date.now().toString(36)}`;
    const script = [...Array.from({ length: 12 }, (_, i) => echoCall(`step ${i}`)), { text: "done" }];
    const recorded = await runner({ checkpointEvery: 4 }).run(spec({ script }), { runId });
    // The log as an older version left it, cut right after the second checkpoint (its worker died
    // in the next call).
    const cut = recorded.wal.flatMap((r, i) => (r.type === "CHECKPOINT" ? [i] : []))[1]!;
    const log = recorded.wal.slice(0, cut + 1).map(olderCheckpoint);
    const checkpoint = log[cut] as Extract<WalRecord, { type: "CHECKPOINT" }>;
    expect((checkpoint.state as LoopState).guard.toolCalls).toBeGreaterThan(5);
    const writer = new LogWriter(suite.bus, runId, "agent-0-older", 0, 0);
    await appendEach(writer, log);
    const status = statusOf(checkpoint.state as LoopState, Date.now());
    await new RunStatusStore(suite.bus.buckets.runs).put(status);
    await openRunTree(runId);
    await publishJob(suite.bus, continuationJob(status), `${runId}:upgrade`);
    const final = await suite.waitFor(runId, settled);
    expect(final.status).toBe("committed");
    const kinds = (await suite.audit(runId)).map((e) => e.kind);
    expect(kinds).toContain("run.resumed");
    expect(await suite.logs()).not.toContain("NONDETERMINISM");
    // agentctl replay: every transition reproduced, the older checkpoints reported, not judged;
    // --strict judges them.
    const replayed = await runProcess(process.execPath, [AGENTCTL, "replay", runId], { env: suite.env() });
    expect(replayed.stdout).toMatch(/transitions reproduced identically/);
    expect(replayed.stdout).toMatch(
      /checkpoints: \d+ on record, \d+ replayed, the 1st differs \(record \d+\)/,
    );
    const strict = await runProcess(process.execPath, [AGENTCTL, "replay", runId, "--strict"], {
      env: suite.env(),
    }).then(
      () => undefined,
      (err: { code: number; stderr: string }) => err,
    );
    expect(strict?.code).toBe(2);
    expect(strict?.stderr).toMatch(/"code":"NONDETERMINISM"/);
    const json = await runProcess(process.execPath, [AGENTCTL, "replay", runId, "--json"], {
      env: suite.env(),
    });
    const report = JSON.parse(json.stdout) as { status: string; checkpoints: Record<string, unknown> };
    expect(report.status).toBe("committed");
    expect(report.checkpoints).toMatchObject({ identical: false, firstDifference: { checkpoint: 1 } });
  });

  it("the log's last message names the run's checkpoint: the worker reads the log from there, without the run status", async () => {
    const runId = `named${Date.now().toString(36)}`;
    const script = [...Array.from({ length: 12 }, (_, i) => echoCall(`step ${i}`)), { text: "done" }];
    const recorded = await runner({ checkpointEvery: 4 }).run(spec({ script }), { runId });
    const cut = recorded.wal.flatMap((r, i) => (r.type === "CHECKPOINT" ? [i] : []))[1]!;
    const before = await appendEach(
      new LogWriter(suite.bus, runId, "agent-0-a", 0, 0),
      recorded.wal.slice(0, cut),
    );
    // A message no build can decode, before the checkpoint: a read from the start fails on it.
    const junk = await suite.bus.js.publish(
      suite.bus.subjects.log(runId, "step"),
      new TextEncoder().encode("{not json"),
    );
    expect(junk.seq).toBeGreaterThan(before);
    // The checkpoint and the next step up to its tool call's INTENT: its worker died in that call.
    const after = new LogWriter(suite.bus, runId, "agent-0-b", junk.seq, cut + 1);
    await after.append([recorded.wal[cut]!]);
    await appendEach(after, recorded.wal.slice(cut + 1, cut + 4));
    // No run status at all: the job is all the worker has to go on.
    expect(await new RunStatusStore(suite.bus.buckets.runs).get(runId)).toBeUndefined();
    const checkpoint = recorded.wal[cut] as Extract<WalRecord, { type: "CHECKPOINT" }>;
    const status = statusOf(checkpoint.state as LoopState, Date.now());
    await openRunTree(runId);
    await publishJob(suite.bus, continuationJob(status), `${runId}:named`);
    const final = await suite.waitFor(runId, settled);
    expect(final.status).toBe("committed");
    expect(final.terminal?.output).toBe("done");
  });

  it("a run whose log this build cannot replay stays queued: its job is offered again, waiting twice as long each time", async () => {
    const runId = `diverged${Date.now().toString(36)}`;
    const script = [...Array.from({ length: 3 }, (_, i) => echoCall(`step ${i}`)), { text: "done" }];
    const recorded = await runner({ checkpointEvery: 100 }).run(spec({ script }), { runId });
    // The log up to the second tool call's INTENT, that record as some other build wrote it.
    const second = recorded.wal.flatMap((r, i) => (r.type === "INTENT" ? [i] : []))[1]!;
    const log = recorded.wal
      .slice(0, second + 1)
      .map((r, i) =>
        i === second && r.type === "INTENT" ? { ...r, idempotencyKey: `${r.idempotencyKey}-other` } : r,
      );
    await appendEach(new LogWriter(suite.bus, runId, "agent-0-other", 0, 0), log);
    const status = statusOf(recorded.state, Date.now());
    await new RunStatusStore(suite.bus.buckets.runs).put({ ...status, status: "running" });
    await publishJob(suite.bus, continuationJob({ ...status, status: "running" }), `${runId}:diverged`);
    const failures = async () =>
      (await suite.logs())
        .split("\n")
        .filter((line) => line.includes(runId) && line.includes("NONDETERMINISM"))
        .map((line) => JSON.parse(line) as { delivery: number; delayMs: number; retryable: boolean })
        // Each worker's log is read in turn: the attempts are put back in order.
        .sort((a, b) => a.delivery - b.delivery);
    await expect.poll(async () => (await failures()).length, { timeout: 10_000 }).toBeGreaterThanOrEqual(3);
    const seen = await failures();
    expect(seen.slice(0, 3).map((f) => [f.delivery, f.delayMs])).toEqual([
      [1, 500],
      [2, 1_000],
      [3, 2_000],
    ]);
    expect(seen.every((f) => !f.retryable)).toBe(true);
    expect((await new RunStatusStore(suite.bus.buckets.runs).get(runId))?.status).toBe("running");
  }, 30_000);

  it("a committed run whose memory was never stored (its worker died between the commit and the memory write): its job delivered again stores it", async () => {
    const agent = `remembering-${Date.now().toString(36)}`;
    const base = spec({
      prompt: "which port does the ledger use",
      script: [{ text: "port 4222" }],
      tools: [],
    });
    const runSpec = { ...base, agent: { ...base.agent, name: agent } };
    const { runId } = await suite.client.submit(runSpec);
    expect((await suite.waitFor(runId, settled)).status).toBe("committed");
    const memory = new KvMemory(suite.bus.buckets.memory, systemClock, memoryReads(suite.bus));
    const recall = async (): Promise<string[]> =>
      (await memory.recall(agent, "ledger port", 5)).map((m) => m.text);
    await expect
      .poll(recall, { timeout: 5_000 })
      .toEqual(["Q: which port does the ledger use\nA: port 4222"]);
    // As if the worker had died right after the commit: the memory was never written, no marker.
    const bucket = suite.bus.subjects.buckets().memory;
    await suite.bus.jsm.streams.purge(bucketStream(bucket), { filter: `$KV.${bucket}.${prefixOf(agent)}.>` });
    expect(await recall()).toEqual([]);
    // Its first job, delivered again (the dead worker never acknowledged it).
    await publishJob(suite.bus, firstJob(runId, runSpec), `${runId}:again`);
    // Before, a finished run's job was acked with nothing done, and the memory stayed lost.
    await expect
      .poll(recall, { timeout: 10_000 })
      .toEqual(["Q: which port does the ledger use\nA: port 4222"]);
    expect((await suite.client.status.get(runId))?.status).toBe("committed");
    expect((await suite.audit(runId)).filter((e) => e.kind === "run.committed")).toHaveLength(1);

    // Forgotten by a human since, then the job delivered once more: the memory stays forgotten.
    const [stored] = await memory.recall(agent, "ledger port", 5);
    expect(await memory.forget(agent, stored?.id ?? "")).toBe(true);
    await publishJob(suite.bus, firstJob(runId, runSpec), `${runId}:again-after-forget`);
    // Whichever worker the job went to (earlier cases start workers of their own).
    const kept = async () => {
      const workers = (await readdir(suite.logDir)).filter((f) => f.startsWith("agent-"));
      const logs = await Promise.all(workers.map((f) => suite.log(f.replace(/\.log$/, ""))));
      return logs.some((log) => log.includes("its memory, forgotten since, is not stored again"));
    };
    await expect.poll(kept, { timeout: 10_000 }).toBe(true);
    expect(await recall()).toEqual([]);
  }, 30_000);
});
