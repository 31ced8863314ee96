import type { CapabilityObject } from "../contracts/capability.js";
import { SpawnAgentOutput } from "../contracts/control.js";
import type { RunSpec } from "../contracts/run-spec.js";
import { findGrant } from "../tools/capabilities.js";
import { sanitizeOutput } from "../tools/sanitize.js";
import { descriptorOf, startAction } from "./action.js";
import { PLAN_ROUND_PREFIX, type DagProgress } from "./dag-progress.js";
import type { Draft } from "./draft.js";
import { checkDeadline, checkRepair } from "./guard.js";
import { readySet, type Plan } from "./plan.js";
import { childRunId, SPAWN_AGENT_TOOL, spawnAction } from "./saga.js";
import type { LoopConfig, LoopState } from "./state.js";
import { fail } from "./terminal.js";
import { enterVerify } from "./verify.js";

/**
 * A spec's `task.plan`, executed: the runtime runs the plan's nodes as child runs of the tree, in
 * rounds. Each round is one fan-out (the spawn path: the children admitted by the supervisor, the
 * parent parked, no worker held) of the nodes ready then, the longest remaining chain first, at
 * most `maxParallel`; the next round starts when the round's children have all ended. A node's
 * child is told its dependencies' outputs in its prompt. When every node has committed, the
 * outputs of the nodes nothing depends on are the run's answer, and VERIFY judges it.
 */
export function startPlan(d: Draft, config: LoopConfig): void {
  d.state.dag = { outputs: {}, round: [], attempts: {}, failures: {} };
  startRound(d, config);
}

function startRound(d: Draft, config: LoopConfig): void {
  const s = d.state;
  const dag = s.dag;
  const plan = s.plan;
  const maxParallel = s.spec.task.plan?.maxParallel ?? 1;
  if (!dag || !plan) return;
  // The run's wall-clock deadline holds across rounds too (each child is bounded by it on its own).
  const deadline = checkDeadline(s.guard, s.limits, d.at);
  d.guard(deadline);
  if (deadline.kind === "circuitBreak") {
    fail(d, config, deadline.reason, deadline.message);
    return;
  }
  const ready = readySet(plan, new Set(Object.keys(dag.outputs)), new Set(), maxParallel);
  // In a DAG some node not done has all its dependencies done: none ready means all are done.
  if (ready.length === 0) {
    finishPlan(d, config, plan, dag);
    return;
  }
  s.actionCount += 1;
  const actionId = `${PLAN_ROUND_PREFIX}${s.actionCount}`;
  const attempts = { ...dag.attempts };
  const runs = ready.map((id, i) => {
    attempts[id] = (attempts[id] ?? 0) + 1;
    const runId = childRunId(s.runId, actionId, i);
    d.audit("plan.node.started", "started", {
      data: { node: id, runId, attempt: attempts[id], actionId },
    });
    return nodeSpec(s, config, plan, id, runId);
  });
  s.dag = { ...dag, round: ready, attempts };
  startAction(d, config, {
    actionId,
    tool: SPAWN_AGENT_TOOL,
    input: { runs },
    purpose: "act",
    audit: { kind: "tool.intent", data: { actionId, nodes: ready } },
  });
}

/** The round's fan-in (or the fan-out's refusal): each node's outcome, then the next round. */
export function onPlanRound(
  d: Draft,
  config: LoopConfig,
  ok: boolean,
  output: unknown,
  detail: string,
): void {
  const s = d.state;
  const pending = s.pending;
  const dag = s.dag;
  if (pending?.kind !== "tool" || !dag) return;
  d.settle();
  const fanIn = ok ? SpawnAgentOutput.safeParse(output) : undefined;
  const results = fanIn?.success ? fanIn.data.results : [];
  if (s.undoChildren) {
    const spawned = spawnAction(pending, output);
    if (spawned) s.completed = [...s.completed, spawned];
  }
  const outputs = { ...dag.outputs };
  const failures = { ...dag.failures };
  const failed: string[] = [];
  dag.round.forEach((node, i) => {
    const result = results[i];
    if (result?.status === "committed") {
      outputs[node] = result.output ?? "";
      d.audit("plan.node.finished", "passed", { data: { node, runId: result.runId } });
      return;
    }
    const why = result?.error
      ? `[${result.error.code}] ${result.error.message}`
      : result
        ? `ended ${result.status}`
        : detail || "the round's fan-out gave no result for it";
    failures[node] = why;
    failed.push(node);
    d.audit("plan.node.finished", "failed", {
      reason: why,
      data: { node, ...(result ? { runId: result.runId } : {}) },
    });
  });
  s.dag = { ...dag, outputs, failures, round: [] };
  if (failed.length > 0 && !retryFailed(d, config, failed, failures)) return;
  startRound(d, config);
}

/**
 * Failed nodes under `onNodeFailure: "fail"` fail the run; under `"repair"` each runs again in a
 * later round, spending one of the run's repairs. False when the run failed.
 */
function retryFailed(
  d: Draft,
  config: LoopConfig,
  failed: readonly string[],
  failures: Readonly<Record<string, string>>,
): boolean {
  const s = d.state;
  const diagnosis = failed.map((node) => `node '${node}' failed: ${failures[node] ?? ""}`).join("\n");
  if (s.spec.task.plan?.onNodeFailure !== "repair") {
    fail(d, config, "planNodeFailed", diagnosis);
    return false;
  }
  for (const node of failed) {
    const { state, verdict } = checkRepair(s.guard, s.limits);
    s.guard = state;
    d.guard(verdict, { node });
    if (verdict.kind === "circuitBreak") {
      fail(d, config, "maxRepairs", diagnosis);
      return false;
    }
    d.audit("repair.started", "started", {
      reason: `node '${node}' runs again`,
      data: { strategy: "rerunNode", node, attempt: (s.dag?.attempts[node] ?? 0) + 1 },
    });
  }
  return true;
}

/** Every node committed: the outputs nothing depends on are the candidate answer. */
function finishPlan(d: Draft, config: LoopConfig, plan: Plan, dag: DagProgress): void {
  const s = d.state;
  const needed = new Set(plan.subtasks.flatMap((t) => t.dependsOn));
  const sinks = plan.subtasks.filter((t) => !needed.has(t.id));
  const only = sinks.length === 1 ? sinks[0] : undefined;
  const output = only
    ? (dag.outputs[only.id] ?? "")
    : sinks.map((t) => `[${t.id}]\n${dag.outputs[t.id] ?? ""}`).join("\n\n");
  s.output = output;
  // In the transcript as the run's own answer: a repair asks the agent's model to revise it.
  s.messages = [...s.messages, { role: "assistant", content: output }];
  enterVerify(d, config, `every node of the plan committed (${plan.subtasks.length})`);
}

/**
 * A node's child: the node's prompt with its dependencies' outputs (sanitised, as tool output is),
 * the parent's agent with only the node's tools and the grants they need, checked by `nonEmpty`
 * and by the parent's critic when it has one.
 */
function nodeSpec(s: LoopState, config: LoopConfig, plan: Plan, id: string, runId: string): RunSpec {
  const parent = s.spec;
  const subtask = plan.subtasks.find((t) => t.id === id);
  const tools = subtask?.tools ?? [];
  const dag = s.dag;
  const inputs = (subtask?.dependsOn ?? []).map((dep) => {
    const text = sanitizeOutput(dag?.outputs[dep] ?? "", config.maxOutputBytes).text;
    return `[${dep}]\n${text}`;
  });
  const lines = [subtask?.description ?? ""];
  if (inputs.length > 0) lines.push("", "Results of the steps this one depends on:", "", inputs.join("\n\n"));
  const failure = dag?.failures[id];
  if (failure) lines.push("", `An earlier attempt at this step failed: ${failure}`);
  return {
    schemaVersion: 1,
    runId,
    task: {
      prompt: lines.join("\n"),
      ...(parent.task.context ? { context: parent.task.context } : {}),
      verifiers: [{ kind: "nonEmpty" }],
    },
    agent: { ...parent.agent, tools, capabilities: grantsFor(tools, parent.agent.capabilities, config) },
    ...(parent.critic ? { critic: parent.critic } : {}),
  };
}

/** The parent's grants the node's tools need, and no others. */
function grantsFor(
  tools: readonly string[],
  granted: readonly CapabilityObject[],
  config: LoopConfig,
): CapabilityObject[] {
  const needed: CapabilityObject[] = [];
  for (const tool of tools) {
    const required = descriptorOf(config, tool)?.capability;
    const grant = required ? findGrant(granted, required) : undefined;
    if (grant && !needed.includes(grant)) needed.push(grant);
  }
  return needed;
}
