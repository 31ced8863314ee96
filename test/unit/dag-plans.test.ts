import { describe, expect, it } from "vitest";
import { SubmitRequest } from "../../shared/contracts/cluster.js";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import { RunSpec, type RunSpecInput } from "../../shared/contracts/run-spec.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { startRun, transition } from "../../shared/loop/fsm.js";
import { replay } from "../../shared/loop/replay.js";
import type { Effect, LoopConfig, Transition } from "../../shared/loop/state.js";
import { fanOutSpawnTool } from "../../shared/tools/builtin/spawn.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { describeTool } from "../../shared/tools/tool.js";
import { spec, START } from "../helpers/fixtures.js";

type Plan = NonNullable<NonNullable<RunSpecInput["task"]>["plan"]>;
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
type Spawn = Extract<Effect, { type: "callTool" }>;

const config: LoopConfig = { tools: [describeTool(echoTool), describeTool(fanOutSpawnTool())] };

const DIAMOND: Plan = {
  nodes: [
    { id: "a", prompt: "first" },
    { id: "b", prompt: "left", dependsOn: ["a"] },
    { id: "c", prompt: "right", dependsOn: ["a"], tools: [] },
    { id: "d", prompt: "join", dependsOn: ["b", "c"] },
  ],
  maxParallel: 2,
};

function planned(plan: Plan, extra: Partial<RunSpecInput["agent"]> = {}): RunSpec {
  const base = spec({ tools: ["echo"], capabilities: ["compute", { kind: "network", allowedHosts: ["x"] }] });
  return RunSpec.parse({ ...base, task: { ...base.task, plan }, agent: { ...base.agent, ...extra } });
}

/** A run driven by hand: every record it wrote, and what it waits on. */
class Drive {
  records: WalRecord[] = [];
  current: Transition;
  at = START;
  constructor(runSpec: RunSpec) {
    this.current = this.keep(
      startRun({ type: "start", at: START, spec: runSpec, runId: "p", rootRunId: "p", depth: 0 }, config),
    );
  }
  keep(t: Transition): Transition {
    for (const e of t.effects) if (e.type === "wal") this.records.push(e.record);
    return t;
  }
  send(event: DistributiveOmit<LoopEvent, "at">): void {
    this.at += 1;
    this.current = this.keep(transition(this.current.state, { ...event, at: this.at }, config));
  }
  spawn(): Spawn {
    const awaiting = this.current.state.awaiting;
    if (awaiting?.type !== "callTool" || awaiting.tool !== "spawn_agent") throw new Error("not spawning");
    return awaiting;
  }
  /** The round's children as their specs say: node prompt, tools, grants. */
  children(): { runId: string; prompt: string; tools: string[]; kinds: string[] }[] {
    const input = this.spawn().input as { runs: RunSpec[] };
    return input.runs.map((r) => ({
      runId: r.runId ?? "",
      prompt: r.task.prompt,
      tools: r.agent.tools,
      kinds: r.agent.capabilities.map((c) => c.kind),
    }));
  }
  /** The fan-in: each child of the round committed with `out-<node>`, or failed when listed. */
  fanIn(failing: string[] = []): void {
    const call = this.spawn();
    const nodes = this.current.state.dag?.round ?? [];
    const results = this.children().map((c, i) => {
      const node = nodes[i] ?? "";
      return failing.includes(node)
        ? { runId: c.runId, status: "failed", error: { code: "FAILED", message: `${node} broke` } }
        : { runId: c.runId, status: "committed", output: `out-${node}` };
    });
    this.send({ type: "toolCompleted", actionId: call.actionId, output: { results } });
  }
}

function started(runSpec: RunSpec): Drive {
  const drive = new Drive(runSpec);
  drive.send({ type: "memoryRecalled", memories: [] });
  return drive;
}

describe("DAG plans: the pure core runs task.plan as rounds of child runs", () => {
  it("a diamond runs a, then b and c together, then d with b's and c's outputs; the sink's output is verified and committed", () => {
    const run = started(planned(DIAMOND));
    expect(run.current.state.dag?.round).toEqual(["a"]);
    run.fanIn();
    expect(run.current.state.dag?.round).toEqual(["b", "c"]);
    const [b, c] = run.children();
    expect(b).toMatchObject({ tools: ["echo"], kinds: ["compute"] });
    // A node naming no tools gets none, and no grant.
    expect(c).toMatchObject({ tools: [], kinds: [] });
    expect(b?.prompt).toContain("left\n\nResults of the steps this one depends on:\n\n[a]\nout-a");
    run.fanIn();
    const [d] = run.children();
    expect(d?.prompt).toContain("[b]\nout-b\n\n[c]\nout-c");
    run.fanIn();
    const s = run.current.state;
    expect(s.status).toBe("committed");
    expect(s.output).toBe("out-d");
    expect(s.terminal?.kind).toBe("COMMIT");
  });

  it("the longest remaining chain starts first, and no more than maxParallel nodes run at once", () => {
    const run = started(
      planned({
        nodes: [
          { id: "alone", prompt: "x" },
          { id: "z1", prompt: "x" },
          { id: "z2", prompt: "x", dependsOn: ["z1"] },
          { id: "z3", prompt: "x", dependsOn: ["z2"] },
        ],
        maxParallel: 1,
      }),
    );
    const rounds: string[][] = [];
    while (run.current.state.dag?.round.length) {
      rounds.push(run.current.state.dag.round);
      run.fanIn();
    }
    // z1 heads a chain of three: it goes before `alone`, which the id order would put first.
    expect(rounds).toEqual([["z1"], ["z2"], ["alone"], ["z3"]]);
    // Several sinks: each one's output, named.
    expect(run.current.state.output).toBe("[alone]\nout-alone\n\n[z3]\nout-z3");
  });

  it("a failing node fails the run by default, and no node after it starts", () => {
    const run = started(planned(DIAMOND));
    run.fanIn();
    run.fanIn(["b"]);
    const s = run.current.state;
    expect(s.status).toBe("failed");
    expect(s.terminal?.reason).toBe("planNodeFailed");
    expect(s.failing?.diagnosis).toBe("node 'b' failed: [FAILED] b broke");
  });

  it("onNodeFailure repair runs the failed node again, told why, spending a repair; past maxRepairs the run fails", () => {
    const run = started(planned({ ...DIAMOND, onNodeFailure: "repair" }, { resources: { maxRepairs: 1 } }));
    run.fanIn();
    run.fanIn(["c"]);
    expect(run.current.state.dag?.round).toEqual(["c"]);
    expect(run.children()[0]?.prompt).toContain("An earlier attempt at this step failed: [FAILED] c broke");
    expect(run.current.state.dag?.attempts).toMatchObject({ a: 1, b: 1, c: 2 });
    run.fanIn(["c"]);
    expect(run.current.state).toMatchObject({ status: "failed", terminal: { reason: "maxRepairs" } });
  });

  it("the run's deadline holds between rounds: past it, no next round starts and the run fails", () => {
    // The driven clock moves 1 ms an event: the first round starts at 1 ms, the second would at 2 ms.
    const run = started(planned(DIAMOND, { resources: { deadlineMs: 1 } }));
    expect(run.current.state.dag?.round).toEqual(["a"]);
    run.fanIn();
    expect(run.current.state).toMatchObject({ status: "failed", terminal: { reason: "deadline" } });
  });

  it("replaying the log gives the same states, transition for transition", () => {
    const run = started(planned(DIAMOND));
    run.fanIn();
    run.fanIn();
    run.fanIn();
    const again = replay(run.records, config);
    expect(again.state.transitionHash).toBe(run.current.state.transitionHash);
    expect(again.state.dag).toEqual(run.current.state.dag);
  });

  it("a plan a worker's tools cannot serve fails at PLAN with planInvalid", () => {
    const runSpec = planned({ nodes: [{ id: "a", prompt: "x", tools: ["echo"] }] });
    const t = startRun(
      { type: "start", at: START, spec: runSpec, runId: "p", rootRunId: "p", depth: 0 },
      { tools: [] },
    );
    expect(t.state).toMatchObject({ status: "failed", terminal: { reason: "planInvalid" } });
  });
});

describe("DAG plans: a plan the model proposes in PLAN", () => {
  const answer = (text: string) => ({
    text,
    toolCalls: [],
    stopReason: "endTurn" as const,
    usage: { inputTokens: 10, outputTokens: 10 },
    costUsd: 0,
    model: "m",
  });
  const model = (run: Drive) => {
    const awaiting = run.current.state.awaiting;
    if (awaiting?.type !== "callModel") throw new Error("not asking the model");
    return awaiting;
  };

  it("is asked for with no tools, checked as a given plan is, asked again when unsound, then run as rounds", () => {
    const run = new Drive(planned({ propose: true, maxParallel: 2 }, { resources: { maxRepairs: 1 } }));
    const first = model(run);
    expect(first.request.tools).toEqual([]);
    expect(first.request.system).toMatch(/Reply with JSON only[\s\S]*tools among: echo\./);
    const cyclic = {
      nodes: [
        { id: "x", prompt: "p", dependsOn: ["y"] },
        { id: "y", prompt: "p", dependsOn: ["x"] },
      ],
    };
    run.send({
      type: "modelResponded",
      requestId: first.requestId,
      response: answer(JSON.stringify(cyclic)),
    });
    const again = model(run);
    expect(again.request.messages.at(-1)?.content).toMatch(
      /That plan cannot run: dependency cycle among: x, y/,
    );
    const diamond = { nodes: DIAMOND.nodes };
    const fenced = "Here it is:\n```json\n" + JSON.stringify(diamond) + "\n```";
    run.send({ type: "modelResponded", requestId: again.requestId, response: answer(fenced) });
    expect(run.current.state.phase).toBe("RETRIEVE");
    run.send({ type: "memoryRecalled", memories: [] });
    expect(run.current.state.dag?.round).toEqual(["a"]);
    run.fanIn();
    run.fanIn();
    run.fanIn();
    expect(run.current.state).toMatchObject({ status: "committed", output: "out-d" });
    const again2 = replay(run.records, config);
    expect(again2.state.transitionHash).toBe(run.current.state.transitionHash);
  });

  it("past maxRepairs of unsound proposals, the run fails with planInvalid", () => {
    const run = new Drive(planned({ propose: true }, { resources: { maxRepairs: 0 } }));
    run.send({ type: "modelResponded", requestId: model(run).requestId, response: answer("no plan today") });
    expect(run.current.state).toMatchObject({ status: "failed", terminal: { reason: "planInvalid" } });
    expect(run.current.state.failing?.diagnosis).toBe("the reply is not JSON");
  });
});

describe("DAG plans: refused at submit with INVALID_SPEC naming the problem", () => {
  const refusal = (plan: Plan, resources?: { maxIterations: number }): string[] => {
    const base = spec();
    const parsed = SubmitRequest.safeParse({
      ...base,
      task: { ...base.task, plan },
      agent: { ...base.agent, ...(resources ? { resources } : {}) },
    });
    return parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  };

  it("a cycle, an unknown dependency, a duplicate id, a tool the agent lacks, more nodes than iterations", () => {
    expect(
      refusal({
        nodes: [
          { id: "a", prompt: "x", dependsOn: ["b"] },
          { id: "b", prompt: "x", dependsOn: ["a"] },
        ],
      }),
    ).toEqual(["task.plan: dependency cycle among: a, b"]);
    expect(refusal({ nodes: [{ id: "a", prompt: "x", dependsOn: ["nope"] }] })).toEqual([
      "task.plan: subtask 'a' depends on unknown subtask 'nope'",
    ]);
    expect(
      refusal({
        nodes: [
          { id: "a", prompt: "x" },
          { id: "a", prompt: "y" },
        ],
      })[0],
    ).toMatch(/duplicate/);
    expect(refusal({ nodes: [{ id: "a", prompt: "x", tools: ["shell"] }] })).toEqual([
      "task.plan: subtask 'a' needs unavailable tool 'shell'",
    ]);
    const three = { nodes: ["a", "b", "c"].map((id) => ({ id, prompt: "x" })) };
    expect(refusal(three, { maxIterations: 2 })[0]).toMatch(
      /3 iterations exceed the budget of 2 .*maxIterations/,
    );
    expect(refusal({ nodes: [{ id: "a b", prompt: "x" }] })[0]).toMatch(/node id/);
    expect(refusal({ nodes: [{ id: "a", prompt: "x" }], maxParallel: 0 })).toHaveLength(1);
    expect(refusal(DIAMOND)).toEqual([]);
    expect(refusal({ propose: true })).toEqual([]);
    expect(refusal({ ...DIAMOND, propose: true })[0]).toMatch(/either nodes, or propose: true/);
    expect(refusal({ maxParallel: 2 })[0]).toMatch(/either nodes, or propose: true/);
  });
});
