import { describe, expect, it } from "vitest";
import { z } from "zod";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import type { LoopEvent, WaitedOnCall } from "../../shared/contracts/loop-event.js";
import { startRun, transition } from "../../shared/loop/fsm.js";
import { replay, resumableFromCheckpoint } from "../../shared/loop/replay.js";
import type { FailureReport, LoopConfig, LoopState, Transition } from "../../shared/loop/state.js";
import { sha256 } from "../../shared/runtime/hash.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { defineTool, describeTool } from "../../shared/tools/tool.js";
import { echoCall, runner, spec } from "../helpers/fixtures.js";
import { effectOf, toolTurn } from "../helpers/transitions.js";

const config: LoopConfig = { tools: [describeTool(echoTool)], checkpointEvery: 3 };
const longScript = (n: number) => [
  ...Array.from({ length: n }, (_, i) => echoCall(`step ${i}`)),
  { text: "final answer" },
];

describe("durability", () => {
  it("replaying the WAL reproduces every transition hash and the final state", async () => {
    const result = await runner({ checkpointEvery: 3 }).run(
      spec({ script: longScript(7), resources: { maxIterations: 20 } }),
    );
    expect(result.state.status).toBe("committed");
    const replayed = replay(result.wal, { ...config });
    expect(replayed.transitions).toEqual(result.transitions);
    expect(replayed.state).toEqual(result.state);
  });

  it("replay yields every audit event the run emitted; from a checkpoint, exactly those after it (what a successor may owe the stream)", async () => {
    const result = await runner({ checkpointEvery: 3 }).run(
      spec({ script: longScript(7), resources: { maxIterations: 20 } }),
    );
    // The runner's own events past admission (the supervisor publishes run.admitted).
    expect(replay(result.wal, config).audits).toEqual(result.audit.filter((e) => e.kind !== "run.admitted"));
    const fromCheckpoint = replay(result.wal, config, { fromCheckpoint: true }).audits;
    expect(fromCheckpoint.length).toBeGreaterThan(0);
    expect(fromCheckpoint).toEqual(result.audit.slice(-fromCheckpoint.length));
    const seqs = result.audit.map((e) => e.seq);
    expect(seqs).toEqual(seqs.map((_, i) => i + 1));
  });

  it("checkpoints are considered every N model responses, the first written at the first, and resume from the last one equals a full replay", async () => {
    const result = await runner({ checkpointEvery: 3 }).run(
      spec({ script: longScript(10), resources: { maxIterations: 20 } }),
    );
    const checkpoints = result.wal.filter((r) => r.type === "CHECKPOINT");
    const at = checkpoints.map((c) => c.type === "CHECKPOINT" && (c.state as { step: number }).step);
    expect(at[0]).toBe(3);
    expect(at.length).toBeGreaterThanOrEqual(2);
    expect(at.every((step) => typeof step === "number" && step % 3 === 0)).toBe(true);
    const full = replay(result.wal, config);
    const fromCheckpoint = replay(result.wal, config, { fromCheckpoint: true });
    expect(fromCheckpoint.state.transitionHash).toBe(full.state.transitionHash);
    expect(fromCheckpoint.state).toEqual(full.state);
    // Resume cost: only the tail after the last checkpoint is replayed, one transition per input.
    const last = result.wal.findLastIndex((r) => r.type === "CHECKPOINT");
    const inputs = result.wal
      .slice(last + 1)
      .filter((r) => ["MODEL", "COMPLETE", "ABORT", "EVENT"].includes(r.type));
    expect(fromCheckpoint.transitions).toHaveLength(inputs.length);
    expect(inputs.length).toBeLessThan(full.transitions.length / 2);
  });

  it("a log cut right after a checkpoint replays from the one before, so the last transition is known", async () => {
    const result = await runner({ checkpointEvery: 3 }).run(
      spec({ script: longScript(7), resources: { maxIterations: 20 } }),
    );
    const second = result.wal.findIndex(
      (r, i) =>
        r.type === "CHECKPOINT" && i > 0 && result.wal.slice(0, i).some((x) => x.type === "CHECKPOINT"),
    );
    const cut = result.wal.slice(0, second + 1);
    expect(resumableFromCheckpoint(cut)).toBe(true);
    expect(resumableFromCheckpoint(cut.slice(second))).toBe(false);
    const full = replay(cut, config);
    const fromCheckpoint = replay(cut, config, { fromCheckpoint: true });
    expect(fromCheckpoint.state).toEqual(full.state);
    expect(fromCheckpoint.last.effects).toEqual(full.last.effects);
    expect(fromCheckpoint.unwritten).toEqual([]);
    // Only the checkpoint: no transition to replay, and the caller must read the log from the start.
    expect(() => replay(cut.slice(second), config, { fromCheckpoint: true })).toThrow(/no run to replay/);
  });

  it("checkpoint ids are content-addressed: sha256 of runId‖iteration", async () => {
    const a = await runner({ checkpointEvery: 2 }).run(spec({ script: longScript(10) }));
    const b = await runner({ checkpointEvery: 2 }).run(spec({ script: longScript(10) }));
    const ids = (r: typeof a) => r.wal.flatMap((w) => (w.type === "CHECKPOINT" ? [w.checkpointId] : []));
    expect(ids(a).length).toBeGreaterThanOrEqual(2);
    expect(ids(a)).toEqual(ids(b));
    for (const w of a.wal) {
      if (w.type !== "CHECKPOINT") continue;
      const { runId, guard } = w.state as LoopState;
      expect(w.checkpointId).toBe(sha256(`${runId}\u0000${guard.iteration}`));
    }
    expect(a.state.lastCheckpoint).toBe(ids(a).at(-1));
  });

  it("a log cut short by a crash replays to the state at the cut, with the pending effect to re-issue", async () => {
    const result = await runner().run(spec({ script: longScript(3) }));
    const cut = result.wal.findIndex((r) => r.type === "INTENT") + 1;
    const replayed = replay(result.wal.slice(0, cut), config);
    expect(replayed.state.pending).toMatchObject({ kind: "tool", actionId: "act-1" });
    expect(replayed.last.effects.some((e) => e.type === "callTool")).toBe(true);
  });

  it("a tampered log is reported as nondeterminism, naming the record", async () => {
    const result = await runner().run(spec({ script: longScript(2) }));
    const tampered: WalRecord[] = result.wal.map((r) =>
      r.type === "INTENT" ? { ...r, input: { text: "changed" } } : r,
    );
    expect(() => replay(tampered, config)).toThrow(
      expect.objectContaining({
        code: "NONDETERMINISM",
        message: expect.stringMatching(/diverged at record \d+ \(INTENT/) as unknown,
      }),
    );
    expect(() => replay([...result.wal, result.wal.at(-1) as WalRecord], config)).toThrow(
      /the replay does not produce/,
    );
    expect(() => replay([], config)).toThrow(/no run to replay/);
  });

  it("a log read back as JSON, every key in another order, replays to the same hashes; a change deep in a record diverges", async () => {
    const result = await runner({ checkpointEvery: 3 }).run(
      spec({ script: longScript(7), resources: { maxIterations: 20 } }),
    );
    const reread = result.wal.map((r) => reversedKeys(JSON.parse(JSON.stringify(r))) as WalRecord);
    const replayed = replay(reread, config, { snapshots: "strict" });
    expect(replayed.transitions).toEqual(result.transitions);
    expect(replay(reread, config, { fromCheckpoint: true }).state.transitionHash).toBe(
      result.state.transitionHash,
    );
    const at = reread.findIndex((r) => r.type === "INTENT");
    const changed = (change: (r: Extract<WalRecord, { type: "INTENT" }>) => object) =>
      reread.map((r, i) => (i === at && r.type === "INTENT" ? (change(r) as WalRecord) : r));
    const diverges: unknown = expect.objectContaining({
      code: "NONDETERMINISM",
      message: expect.stringContaining(`diverged at record ${at + 1} (INTENT`) as unknown,
    });
    expect(() =>
      replay(
        changed((r) => ({ ...r, input: { ...(r.input as object), extra: null } })),
        config,
      ),
    ).toThrow(diverges);
    expect(() =>
      replay(
        changed(({ input: _input, ...r }) => r),
        config,
      ),
    ).toThrow(diverges);
    // An undefined member is no member, as in the JSON the log holds.
    expect(
      replay(
        changed((r) => ({ ...r, extra: undefined })),
        config,
      ).transitions,
    ).toEqual(result.transitions);
  });

  it("events that do not fit the state are refused with INVALID_TRANSITION", () => {
    const s = RunSpec.parse(spec());
    const started = startRun(
      { type: "start", at: 0, spec: s, runId: "r1", rootRunId: "r1", depth: 0 },
      config,
    );
    expect(started.state.pending).toEqual({ kind: "memory" });
    const bad: Extract<LoopEvent, { type: "modelResponded" }> = {
      type: "modelResponded",
      at: 1,
      requestId: "model-1",
      response: {
        text: "",
        toolCalls: [],
        stopReason: "endTurn",
        usage: { inputTokens: 0, outputTokens: 0 },
        costUsd: 0,
        model: "m",
      },
    };
    expect(() => transition(started.state, bad, config)).toThrow(
      expect.objectContaining({ code: "INVALID_TRANSITION" }),
    );
    const acting = transition(started.state, { type: "memoryRecalled", at: 1, memories: [] }, config);
    expect(() => transition(acting.state, { ...bad, requestId: "model-9" }, config)).toThrow(/does not fit/);
    const cancel = { type: "cancel", at: 2, reason: "not needed", by: "ops" } as const;
    // A run still going stops where it is, as a halt stops it, then ends as a halted one does.
    const stopped = transition(acting.state, cancel, config);
    expect(stopped.state).toMatchObject({ status: "failed", phase: "FAIL" });
    expect(stopped.effects.filter((e) => e.type === "audit").map((e) => e.event.kind)).toEqual([
      "phase.entered",
      "run.halted",
      "phase.entered",
      "run.failed",
    ]);
    expect(stopped.effects.find((e) => e.type === "audit" && e.event.kind === "run.halted")).toMatchObject({
      event: { reason: "not needed", data: { by: "ops" } },
    });
    const halted = transition(acting.state, { type: "halt", at: 2, reason: "operator", by: "ops" }, config);
    expect(() => transition(halted.state, bad, config)).toThrow(/does not fit/);
    // Cancelled, a run with nothing to undo fails at once, saying who and why; a halt is no longer possible.
    const cancelled = transition(halted.state, cancel, config);
    expect(cancelled.state).toMatchObject({
      status: "failed",
      phase: "FAIL",
      terminal: { kind: "FAIL", reason: "[RUN_CANCELLED] cancelled by ops: not needed" },
    });
    expect(cancelled.effects.filter((e) => e.type === "audit").map((e) => e.event.kind)).toEqual([
      "phase.entered",
      "run.failed",
    ]);
    expect(() => transition(cancelled.state, cancel, config)).toThrow(/does not fit/);
    const resumed = transition(halted.state, { type: "resume", at: 3, by: "ops" }, config);
    expect(resumed.effects.find((e) => e.type === "callModel")).toMatchObject({ requestId: "model-1" });
    const committed = transition(
      resumed.state,
      { ...bad, response: { ...bad.response, text: "hi" } },
      config,
    );
    expect(committed.state.status).toBe("committed");
    expect(() =>
      transition(committed.state, { type: "halt", at: 4, reason: "late", by: "ops" }, config),
    ).toThrow(/does not fit/);
  });

  it("a plan naming a tool the runtime cannot reach fails at PLAN with a clear reason", async () => {
    const result = await runner().run(spec({ tools: ["echo", "ghost"] }));
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("planInvalid");
    expect(result.audit.find((e) => e.kind === "run.failed")?.data?.diagnosis).toContain(
      "unavailable tool 'ghost'",
    );
  });
});

describe("cancel", () => {
  const tool = (
    name: string,
    reversibility: "compensable" | "irreversible" | "pure",
    compensation?: string,
  ) =>
    describeTool(
      defineTool({
        name,
        description: name,
        input: z.record(z.string(), z.unknown()),
        capability: { kind: "compute" },
        reversibility,
        idempotent: false,
        ...(compensation ? { compensation: { tool: compensation } } : {}),
        execute: () => Promise.resolve({ output: {} }),
      }),
    );
  const cfg: LoopConfig = {
    tools: [
      tool("reserve", "compensable", "release"),
      tool("release", "pure"),
      tool("charge", "irreversible"),
    ],
  };
  const effect = effectOf;
  const turn = (t: Transition, call: { name: string; input: object }): Transition => toolTurn(t, call, cfg);

  /** A run that reserved `held` (completed), now waiting on `next`. */
  const reservedThen = (runId: string, held: string, next: { name: string; input: object }): Transition => {
    const s = RunSpec.parse(spec({ tools: ["reserve", "charge"] }));
    let t = startRun({ type: "start", at: 0, spec: s, runId, rootRunId: runId, depth: 0 }, cfg);
    t = transition(t.state, { type: "memoryRecalled", at: 1, memories: [] }, cfg);
    t = turn(t, { name: "reserve", input: { id: held } });
    t = transition(
      t.state,
      { type: "toolCompleted", at: 2, actionId: effect(t, "callTool").actionId, output: { held } },
      cfg,
    );
    return turn(t, next);
  };

  it("undoes what the run completed, and leaves the call it halted waiting on to a human", () => {
    const t = reservedThen("r3", "r1", { name: "charge", input: { amount: 5 } });
    const charge = effect(t, "callTool").actionId;
    const halted = transition(t.state, { type: "halt", at: 3, reason: "stop", by: "ops" }, cfg);
    const cancelled = transition(
      halted.state,
      { type: "cancel", at: 4, reason: "wrong order", by: "ops" },
      cfg,
    );
    const release = effect(cancelled, "callTool");
    expect(release).toMatchObject({
      tool: "release",
      purpose: "compensate",
      input: { original: { id: "r1" } },
    });
    const done = transition(
      cancelled.state,
      { type: "toolCompleted", at: 5, actionId: release.actionId, output: {} },
      cfg,
    );
    expect(done.state.status).toBe("failed");
    const report = done.state.terminal?.artifact as FailureReport;
    expect(report.compensations).toMatchObject([{ tool: "release", ok: true }]);
    expect(report.manualIntervention).toEqual([
      {
        actionId: charge,
        tool: "charge",
        reason: expect.stringContaining("it may have happened") as unknown,
      },
    ]);
  });

  it("undoes the call it halted on when its tool service says it completed, and drops one that never ran", () => {
    const t = reservedThen("r4", "first", { name: "reserve", input: { id: "second" } });
    const second = effect(t, "callTool").actionId;
    const halted = transition(t.state, { type: "halt", at: 3, reason: "stop", by: "ops" }, cfg).state;
    const cancel = (waitedOn?: WaitedOnCall) =>
      transition(
        halted,
        { type: "cancel", at: 4, reason: "x", by: "ops", ...(waitedOn ? { waitedOn } : {}) },
        cfg,
      );
    /** Answers every compensation the run asks for; returns the failure report and the trail. */
    const undo = (c: Transition) => {
      const releases: unknown[] = [];
      const audits = c.effects.flatMap((e) => (e.type === "audit" ? [e.event] : []));
      for (let call = effect(c, "callTool"); call; call = effect(c, "callTool")) {
        releases.push(call.input);
        c = transition(c.state, { type: "toolCompleted", at: 5, actionId: call.actionId, output: {} }, cfg);
      }
      expect(c.state.status).toBe("failed");
      return { releases, audits, report: c.state.terminal?.artifact as FailureReport };
    };

    const completed = undo(cancel({ actionId: second, outcome: "completed", output: { held: "second" } }));
    expect(completed.releases).toEqual([
      { original: { id: "second" }, output: { held: "second" } },
      { original: { id: "first" }, output: { held: "first" } },
    ]);
    expect(completed.report.manualIntervention).toEqual([]);
    expect(completed.audits.find((e) => e.kind === "tool.completed")).toMatchObject({
      actor: "tool:reserve",
      data: { actionId: second, settledBy: "cancel" },
    });

    const notRun = undo(cancel({ actionId: second, outcome: "notRun" }));
    expect(notRun.releases).toEqual([{ original: { id: "first" }, output: { held: "first" } }]);
    expect(notRun.report.manualIntervention).toEqual([]);
    expect(notRun.audits.find((e) => e.kind === "tool.aborted")).toMatchObject({
      status: "failed",
      reason: expect.stringMatching(/^\[RUN_CANCELLED\] it never ran/) as unknown,
      data: { actionId: second },
    });

    const failed = undo(
      cancel({ actionId: second, outcome: "failed", error: { code: "TOOL_FAILED", message: "sold out" } }),
    );
    expect(failed.releases).toHaveLength(1);
    expect(failed.audits.find((e) => e.kind === "tool.aborted")?.reason).toBe("[TOOL_FAILED] sold out");

    // A run cancelled while it still waits on the call (not halted first) settles it the same way.
    const running = transition(
      t.state,
      {
        type: "cancel",
        at: 4,
        reason: "x",
        by: "ops",
        waitedOn: { actionId: second, outcome: "completed", output: { held: "second" } },
      },
      cfg,
    );
    expect(undo(running).releases).toEqual(completed.releases);

    // What another call did says nothing of this one: it is left to a human.
    const other = undo(cancel({ actionId: "act-elsewhere", outcome: "notRun" }));
    expect(other.report.manualIntervention.map((m) => m.actionId)).toEqual([second]);
    expect(undo(cancel()).report.manualIntervention.map((m) => m.actionId)).toEqual([second]);
  });
});

/** The same data with every object's keys in reverse order, as another writer might have sent it. */
function reversedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reversedKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(
    Object.entries(value)
      .reverse()
      .map(([k, v]) => [k, reversedKeys(v)]),
  );
}
