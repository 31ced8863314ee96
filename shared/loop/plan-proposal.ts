import { z } from "zod";
import type { ModelResponse } from "../contracts/model.js";
import { MAX_PLAN_NODES, PlanNode } from "../contracts/task-plan.js";
import { accountFor, tallyResponse } from "./act.js";
import { decompose } from "./decompose.js";
import { activeModel, modelCallAllowed, samplingParams } from "./model-step.js";
import type { Draft } from "./draft.js";
import { checkRepair } from "./guard.js";
import { planHash, planOfSpec, validatePlan } from "./plan.js";
import type { LoopConfig } from "./state.js";
import { fail } from "./terminal.js";

const Proposal = z.object({ nodes: z.array(PlanNode).min(1).max(MAX_PLAN_NODES) });

/**
 * `task.plan.propose`: in PLAN the agent's model is asked for the plan's nodes, as JSON and with no
 * tools. Its answer is checked as a submitted plan is (acyclic, tools known to the agent and the
 * worker, within budget); one that fails is asked for again with the problems, each time spending
 * a repair, and past `maxRepairs` the run fails with `planInvalid`. An adopted plan runs as a given
 * one does (see dag.ts).
 */
export function requestPlan(d: Draft, config: LoopConfig): void {
  if (!modelCallAllowed(d, config)) return;
  const s = d.state;
  const requestId = `model-${s.guard.iteration}`;
  const system = [s.system, planningInstructions(toolsOf(d, config), s.limits.maxIterations)]
    .filter((part) => part !== "")
    .join("\n\n");
  // Like every call, a proposal asks for a bounded reply, with the model's sampling parameters.
  const params = samplingParams(activeModel(s), 1);
  d.audit("model.called", "started", {
    data: { requestId, messages: s.messages.length, purpose: "plan", ...params },
  });
  d.await(
    { type: "callModel", requestId, request: { system, messages: s.messages, tools: [], ...params } },
    { kind: "model", requestId },
  );
}

/** The tools a proposed node may name: the agent's, as far as this worker can reach them. */
function toolsOf(d: Draft, config: LoopConfig): string[] {
  const reachable = new Set(config.tools.map((t) => t.name));
  return d.state.spec.agent.tools.filter((t) => reachable.has(t));
}

function planningInstructions(tools: readonly string[], maxIterations: number): string {
  return [
    "Before the task is done, plan it as a dependency graph of steps. Reply with JSON only:",
    '{"nodes": [{"id": "...", "prompt": "...", "dependsOn": ["..."], "tools": ["..."]}]}',
    "Each node is done by a separate agent given only its prompt and the outputs of the nodes it",
    "depends on; the outputs of the nodes nothing depends on are the answer. Ids match",
    `[A-Za-z0-9_-]{1,32}; no cycles; at most ${Math.min(MAX_PLAN_NODES, maxIterations)} nodes;`,
    `tools among: ${tools.length > 0 ? tools.join(", ") : "(none)"}.`,
  ].join("\n");
}

/** The model's proposal: accounted for as any response, then adopted, asked for again, or the run fails. */
export function onPlanProposed(d: Draft, config: LoopConfig, response: ModelResponse): void {
  const s = d.state;
  // Sent without tools, so a proposal has no tool calls: its audit says so whatever the reply held.
  tallyResponse(d, { ...response, toolCalls: [] });
  s.messages = [...s.messages, { role: "assistant", content: response.text }];
  if (!accountFor(d, config, response)) return;
  const { nodes, errors } = readProposal(response.text, toolsOf(d, config), s.limits);
  d.audit("plan.proposed", errors.length === 0 ? "passed" : "failed", {
    ...(errors.length > 0 ? { reason: errors.join("; ") } : {}),
    data: { nodes: nodes ?? [], errors },
  });
  if (nodes && errors.length === 0) {
    const plan = planOfSpec({ nodes }, s.spec.agent.tools);
    s.plan = plan;
    s.planHash = planHash(plan);
    decompose(d, config);
    return;
  }
  const { state, verdict } = checkRepair(s.guard, s.limits);
  s.guard = state;
  d.guard(verdict);
  if (verdict.kind === "circuitBreak") return fail(d, config, "planInvalid", errors.join("\n"));
  s.messages = [
    ...s.messages,
    {
      role: "user",
      content: `That plan cannot run: ${errors.join("; ")}. Reply with a corrected plan, JSON only.`,
    },
  ];
  requestPlan(d, config);
}

/** The nodes of a proposal (JSON, in a code fence or not), and what is wrong with them. */
function readProposal(
  text: string,
  tools: readonly string[],
  limits: { maxIterations: number; maxCostUsd: number },
): { nodes?: PlanNode[]; errors: string[] } {
  const body = /```(?:json)?\s*([\s\S]*?)```/.exec(text)?.[1] ?? text;
  let json: unknown;
  try {
    json = JSON.parse(body.trim());
  } catch {
    return { errors: ["the reply is not JSON"] };
  }
  const parsed = Proposal.safeParse(json);
  if (!parsed.success) {
    const first = parsed.error.issues[0];
    return {
      errors: [`the reply is not a plan: ${first?.path.join(".") ?? ""} ${first?.message ?? ""}`.trim()],
    };
  }
  const nodes = parsed.data.nodes;
  const validation = validatePlan(planOfSpec({ nodes }, tools), tools, limits);
  return { nodes, errors: validation.errors };
}
