import { describe, expect, it } from "vitest";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { startRun, transition } from "../../shared/loop/fsm.js";
import { replay } from "../../shared/loop/replay.js";
import type { FailureReport, LoopConfig, Transition } from "../../shared/loop/state.js";
import { createSpawnTool } from "../../shared/tools/builtin/spawn.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { describeTool } from "../../shared/tools/tool.js";
import { spec } from "../helpers/fixtures.js";
import { effectOf, toolTurn } from "../helpers/transitions.js";

const cfg: LoopConfig = {
  tools: [
    describeTool(createSpawnTool(() => Promise.reject(new Error("not called")))),
    describeTool(echoTool),
  ],
};
const effect = effectOf;
const turn = (t: Transition, call: { name: string; input: object }): Transition => toolTurn(t, call, cfg);

/**
 * A parent whose spawn came back with `results`, then cancelled in its next call (an echo, or a
 * second spawn it waits on): the transitions of its FAIL, each compensation answered.
 */
function cancelledAfterFanIn(
  results: { runId: string; status: string }[],
  undoChildren: boolean | undefined,
  next: "echo" | "spawn" = "echo",
): { calls: { tool: string; input: unknown }[]; report: FailureReport; t: Transition; wal: WalRecord[] } {
  const child = spec({ script: [{ text: "child" }] });
  const s = RunSpec.parse(spec({ tools: ["spawn_agent"], capabilities: [{ kind: "spawn", maxDepth: 1 }] }));
  const start = { type: "start" as const, at: 0, spec: s, runId: "p", rootRunId: "p", depth: 0 };
  const wal: WalRecord[] = [];
  const step = (next: Transition): Transition => {
    for (const e of next.effects) if (e.type === "wal") wal.push(e.record);
    return next;
  };
  let t = step(startRun(undoChildren === undefined ? start : { ...start, undoChildren }, cfg));
  t = step(transition(t.state, { type: "memoryRecalled", at: 1, memories: [] }, cfg));
  t = step(turn(t, { name: "spawn_agent", input: { runs: [child, child] } }));
  t = step(
    transition(
      t.state,
      { type: "toolCompleted", at: 2, actionId: effect(t, "callTool").actionId, output: { results } },
      cfg,
    ),
  );
  t = step(
    next === "spawn"
      ? turn(t, { name: "spawn_agent", input: { runs: [child, { ...child, runId: "named-child" }] } })
      : turn(t, { name: "echo", input: { text: "next" } }),
  );
  t = step(transition(t.state, { type: "halt", at: 3, reason: "stop", by: "ops" }, cfg));
  t = step(transition(t.state, { type: "cancel", at: 4, reason: "wrong trip", by: "ops" }, cfg));
  const calls: { tool: string; input: unknown }[] = [];
  for (let call = effect(t, "callTool"); call; call = effect(t, "callTool")) {
    calls.push({ tool: call.tool, input: call.input });
    t = step(transition(t.state, { type: "toolCompleted", at: 5, actionId: call.actionId, output: {} }, cfg));
  }
  expect(t.state.status).toBe("failed");
  return { calls, report: t.state.terminal?.artifact as FailureReport, t, wal };
}

describe("a parent's FAIL and its committed children", () => {
  const results = [
    { runId: "p-act-1-1", status: "committed" },
    { runId: "p-act-1-2", status: "failed" },
  ];

  it("undoes what its committed children did, through undo_children: those that failed undid their own", () => {
    const { calls, report } = cancelledAfterFanIn(results, true);
    expect(calls).toEqual([
      { tool: "undo_children", input: { original: null, output: { committed: ["p-act-1-1"] } } },
    ]);
    expect(report.compensations).toMatchObject([{ tool: "undo_children", ok: true }]);
  });

  it("a spawn none of whose children committed leaves nothing to undo", () => {
    const { calls } = cancelledAfterFanIn([{ runId: "p-act-1-1", status: "failed" }], true);
    expect(calls).toEqual([]);
  });

  it("cancelled while it waits on a second spawn, it undoes whichever of those children committed too, first: the worker reads which did", () => {
    const { calls } = cancelledAfterFanIn(results, true, "spawn");
    expect(calls).toEqual([
      {
        tool: "undo_children",
        input: {
          original: null,
          output: { committed: [expect.stringMatching(/^p-act-\d+-1$/), "named-child"] },
        },
      },
      { tool: "undo_children", input: { original: null, output: { committed: ["p-act-1-1"] } } },
    ]);
    // A run started without it leaves them as before.
    expect(cancelledAfterFanIn(results, undefined, "spawn").calls).toEqual([]);
  });

  it("a run started without it (by a build before it) fails as it did: its children's effects stay", () => {
    expect(cancelledAfterFanIn(results, undefined).calls).toEqual([]);
  });

  it("replayed from its log, a run makes the same choice its start recorded", () => {
    for (const undo of [true, undefined]) {
      const { t, wal } = cancelledAfterFanIn(results, undo);
      const replayed = replay(wal, cfg);
      expect(replayed.state.transitionHash).toBe(t.state.transitionHash);
      expect(replayed.state.compensation?.results.map((r) => r.tool)).toEqual(undo ? ["undo_children"] : []);
    }
  });
});
