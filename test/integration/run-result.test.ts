import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { publishEvent } from "../helpers/log.js";
import { RunStatusStore } from "../../shared/bus/run-status.js";
import { LogWriter } from "../../shared/bus/run-log.js";
import type { ScriptStep } from "../../shared/contracts/model.js";
import type { RunStatus } from "../../shared/contracts/run-status.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { runResult, type RunResult } from "../../services/cli/result.js";
import { failureSummary, resultLines } from "../../services/cli/result-text.js";
import { useActorBus } from "../helpers/actor-bus.js";
import { AGENTCTL, credentials, runProcess } from "../helpers/cluster-suite.js";
import { bookingTools, irreversibleCharge as charge } from "../helpers/bookings.js";
import { queuedStatus, registry, runner, spec } from "../helpers/fixtures.js";
import { until } from "../helpers/until.js";

const suite = useActorBus("result", { random: seededRandom(5) });

const { tools: bookings } = bookingTools();

/** A run driven in this process, its WAL written to the bus and its status as its worker leaves it. */
async function recorded(runId: string, script: ScriptStep[], resources = {}): Promise<RunStatus> {
  const result = await runner({ registry: registry(...bookings, charge) }).run(
    spec({ script, tools: ["book", "unbook", "charge"], resources }),
    { runId },
  );
  await new LogWriter(suite.bus, runId, "w1", 0, 0).append(result.wal);
  const status: RunStatus = {
    runId,
    status: result.state.status,
    phase: result.state.phase,
    iteration: result.state.guard.iteration,
    usage: result.state.usage,
    ...(result.state.terminal
      ? { terminal: { kind: result.state.terminal.kind, reason: result.state.terminal.reason } }
      : {}),
    updatedAt: new Date().toISOString(),
  };
  await new RunStatusStore(suite.bus.buckets.runs).put(status);
  return status;
}

/** What agentctl needs to reach the suite's server, under its prefix. */
const env = () => ({
  ...process.env,
  NATS_URL: suite.server.url,
  AGENTS_PREFIX: suite.bus.subjects.prefix,
  ...credentials(suite.server),
});

/** Writes a run's status: one queued a moment ago, with `over` (its status, phase, terminal…). */
const putStatus = (runId: string, over: Partial<RunStatus>) =>
  new RunStatusStore(suite.bus.buckets.runs).put({ ...queuedStatus(runId), ...over });

const call = (name: string, input: Record<string, unknown>): ScriptStep => ({ toolCalls: [{ name, input }] });

/** agentctl watch of a run: its exit code and output, whether or not it exited 0. */
async function watchExit(runId: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return runProcess(process.execPath, [AGENTCTL, "watch", runId], { env: env() }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => err,
  );
}

/** The artifact the result read for display, asserted to be read from the WAL. */
function viewOf(result: RunResult) {
  expect(result.source).toBe("wal");
  return result.source === "wal" ? result.view : undefined;
}

describe("agentctl result: what a run ended with", () => {
  it("a failure's report from its WAL: diagnosis, what was undone, what is left to a human", async () => {
    // Two calls within budget (a booking, then an irreversible charge), the third over it.
    await recorded(
      "failed-run",
      [call("book", { item: "room" }), call("charge", { cents: 5 }), call("book", { item: "car" })],
      { maxToolCalls: 2 },
    );
    const result = await runResult(suite.bus, "failed-run");
    expect(result).toMatchObject({ outcome: "FAIL", reason: "maxToolCalls" });
    expect(viewOf(result)).toMatchObject({
      kind: "failure",
      diagnosis: "tool call 3 exceeds maxToolCalls 2",
      compensations: [{ tool: "unbook", ok: true }],
      manualIntervention: [{ tool: "charge", reason: expect.stringMatching(/irreversible/) as unknown }],
    });
    const text = resultLines(result).join("\n");
    expect(text).toMatch(/^FAIL {2}maxToolCalls {2}\(failed-run, /);
    expect(text).toMatch(/diagnosis: tool call 3 exceeds maxToolCalls 2/);
    expect(text).toMatch(/compensations \(1, most recent first\):\n {2}act-\d+ {2}undone by unbook/);
    expect(text).toMatch(/left to a human \(1\)[^\n]*\n {2}act-\d+ {2}charge: irreversible/);
    expect(failureSummary(result)).toEqual([
      "diagnosis: tool call 3 exceeds maxToolCalls 2",
      "1 call left to a human: `agentctl result failed-run`",
    ]);
  });

  it("a commit's output and provenance; a run not ended or halted has no result yet", async () => {
    await recorded("committed-run", [call("book", { item: "room" }), { text: "booked the room" }]);
    const result = await runResult(suite.bus, "committed-run");
    expect(result).toMatchObject({ outcome: "COMMIT", source: "wal" });
    expect(viewOf(result)).toMatchObject({ kind: "commit", output: "booked the room" });
    const text = resultLines(result).join("\n");
    expect(text).toMatch(/output:\nbooked the room/);
    expect(text).toMatch(/tool calls: 1 \(book ×1\)/);
    expect(failureSummary(result)).toEqual([]);

    await putStatus("moving-run", { status: "running", phase: "ACT", iteration: 2 });
    await expect(runResult(suite.bus, "moving-run")).rejects.toMatchObject({
      code: "RUN_NOT_FINISHED",
      message: expect.stringMatching(
        /is running \(ACT\): it has no result yet; `agentctl watch moving-run`/,
      ) as unknown,
    });
    await expect(runResult(suite.bus, "never-run")).rejects.toMatchObject({
      code: "NOT_FOUND",
      message: "no run 'never-run'",
    });
  });

  it("a halt found before the run's last checkpoint, the log read whole when the tail from it has none", async () => {
    const runId = "halted-run";
    const halt: WalRecord = {
      schemaVersion: 1,
      runId,
      iteration: 1,
      at: Date.parse("2026-11-27T10:00:00Z"),
      type: "TERMINAL",
      outcome: "HALT",
      reason: "stop for the audit",
      artifactHash: "h1",
      artifact: {
        kind: "halt",
        reason: "stop for the audit",
        by: "oncall",
        phase: "ACT",
        lastCheckpoint: null,
      },
    };
    const checkpoint: WalRecord = {
      schemaVersion: 1,
      runId,
      iteration: 1,
      at: Date.parse("2026-11-27T10:00:01Z"),
      type: "CHECKPOINT",
      checkpointId: "c1",
      stateHash: "s1",
      state: {},
    };
    const writer = new LogWriter(suite.bus, runId, "w1", 0, 0);
    await writer.append([halt]);
    // The log's last message names the first checkpoint: the halt is found before it.
    await writer.append([checkpoint]);
    await writer.append([{ ...checkpoint, checkpointId: "c2" }]);
    await putStatus(runId, { status: "halted", phase: "HALT", iteration: 1 });
    const result = await runResult(suite.bus, runId);
    expect(result).toMatchObject({
      outcome: "HALT",
      reason: "stop for the audit",
      at: "2026-11-27T10:00:00.000Z",
    });
    expect(resultLines(result)).toEqual([
      "HALT  stop for the audit  (halted-run, 2026-11-27T10:00:00.000Z)",
      "halted by oncall in ACT; last checkpoint: none",
      "halted: `agentctl resume halted-run` continues it; `agentctl cancel halted-run --reason …` ends it, undoing what it can",
      "artifact sha256: h1",
    ]);
  });

  it("with no TERMINAL record in its log (a run failed before a worker started it), what its closing event says", async () => {
    const runId = "swept-run";
    await putStatus(runId, {
      status: "failed",
      phase: "FAIL",
      iteration: 3,
      terminal: { kind: "FAIL", reason: "maxToolCalls" },
    });
    await publishEvent(suite.bus, {
      schemaVersion: 1,
      auditId: `${runId}:9`,
      runId,
      rootRunId: runId,
      seq: 9,
      iteration: 3,
      phase: "FAIL",
      kind: "run.failed",
      actor: "agent",
      status: "failed",
      reason: "maxToolCalls",
      artifacts: ["h9"],
      data: { diagnosis: "tool call 3 exceeds maxToolCalls 2", manualIntervention: 2 },
      timestamp: "2026-11-27T11:00:00.000Z",
    });
    const result = await runResult(suite.bus, runId);
    expect(result).toEqual({
      runId,
      outcome: "FAIL",
      reason: "maxToolCalls",
      at: "2026-11-27T11:00:00.000Z",
      artifactHash: "h9",
      source: "audit",
      diagnosis: "tool call 3 exceeds maxToolCalls 2",
      needsHuman: 2,
    });
    const text = resultLines(result).join("\n");
    expect(text).toMatch(/from its closing event: its log holds no TERMINAL record/);
    expect(text).toMatch(/left to a human: 2 calls/);
    expect(failureSummary(result)).toEqual([
      "diagnosis: tool call 3 exceeds maxToolCalls 2",
      "2 calls left to a human: `agentctl result swept-run`",
    ]);
  });

  it("a child refused at its submit: what its status says, and that nothing more was recorded", async () => {
    await putStatus("refused-child", {
      parentRunId: "some-parent",
      status: "failed",
      terminal: { kind: "FAIL", reason: "[PARENT_FINISHED] parent run some-parent is failed" },
      updatedAt: "2026-11-27T12:00:00.000Z",
    });
    const result = await runResult(suite.bus, "refused-child");
    expect(result).toEqual({
      runId: "refused-child",
      outcome: "FAIL",
      reason: "[PARENT_FINISHED] parent run some-parent is failed",
      at: "2026-11-27T12:00:00.000Z",
      artifactHash: undefined,
      source: "status",
    });
    expect(resultLines(result)[1]).toMatch(
      /^from its status alone: no WAL or closing audit event holds more/,
    );
  });

  it("agentctl watch of a run not submitted yet says it waits for it, and ends a failure with its diagnosis", async () => {
    const watching = spawn(process.execPath, [AGENTCTL, "watch", "later-run"], { env: env() });
    let stdout = "";
    let stderr = "";
    watching.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    watching.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => watching.on("exit", resolve));
    await until(() => Promise.resolve(stderr.length > 0), 10_000, { what: "watch's first words" });
    expect(stderr).toBe("no run 'later-run' yet: waiting for it to be submitted (Ctrl-C stops)\n");
    await recorded(
      "later-run",
      [call("book", { item: "room" }), call("charge", { cents: 5 }), call("book", { item: "car" })],
      {
        maxToolCalls: 2,
      },
    );
    // A failed run's watch exits 1: a script tells it from a commit without reading the output.
    expect(await exited).toBe(1);
    expect(stdout).toMatch(/failed +FAIL[^\n]*\nFAIL: maxToolCalls\n/);
    expect(stdout).toMatch(
      /diagnosis: tool call 3 exceeds maxToolCalls 2\n1 call left to a human: `agentctl result later-run`\n$/,
    );
  });

  it("watch exits by how the run settled: 0 committed, 1 failed, 3 halted (4 awaiting approval, below)", async () => {
    await putStatus("done-run", {
      status: "committed",
      phase: "COMMIT",
      terminal: { kind: "COMMIT", reason: "converged", output: "hi" },
    });
    await putStatus("stopped-run", {
      status: "halted",
      phase: "ACT",
      terminal: { kind: "HALT", reason: "stopped by an operator" },
    });
    await putStatus("broken-run", {
      status: "failed",
      phase: "FAIL",
      terminal: { kind: "FAIL", reason: "maxIterations" },
    });
    const [done, stopped, broken] = await Promise.all(
      ["done-run", "stopped-run", "broken-run"].map((runId) => watchExit(runId)),
    );
    expect(done).toMatchObject({
      code: 0,
      stdout: expect.stringMatching(/COMMIT: converged\nhi\n/) as unknown,
    });
    expect(stopped).toMatchObject({
      code: 3,
      stdout: expect.stringMatching(/HALT: stopped by an operator/) as unknown,
    });
    expect(broken).toMatchObject({ code: 1, stderr: "" });
    // submit --watch runs the same watch, and its help says the same codes.
    const help = await runProcess(process.execPath, [AGENTCTL, "submit", "--help"]);
    expect(help.stdout).toMatch(
      /Exit codes \(watch, submit --watch\):\n {2}0 +the run committed\n {2}1 +the run failed/,
    );
  });

  it("a run awaiting approval: watch stops there saying what a human can do, and it has no result yet", async () => {
    await putStatus("asking-run", { status: "awaiting_approval", phase: "VERIFY", iteration: 1 });
    const watched = await watchExit("asking-run");
    expect(watched.code).toBe(4);
    expect(watched.stdout.trim().split("\n")).toEqual([
      expect.stringMatching(/^awaiting_approval +VERIFY/),
      "waiting for a human: `agentctl approve asking-run`, `agentctl reject asking-run` or `agentctl modify asking-run --feedback …`",
    ]);
    await expect(runResult(suite.bus, "asking-run")).rejects.toMatchObject({
      code: "RUN_NOT_FINISHED",
      message: expect.stringMatching(
        /awaiting approval \(VERIFY\): it has no result yet; a human decides it/,
      ) as unknown,
    });
  });
});
