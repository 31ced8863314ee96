import { describe, expect, it } from "vitest";
import type { Message } from "../../shared/contracts/model.js";
import { canonicalJson } from "../../shared/runtime/canonical-json.js";
import type { ExecutorFunction } from "../../examples/trading/executor/control-contract.js";
import { nextStep } from "../../examples/trading/planner/strategy.js";
import { TickOutcome } from "../../examples/trading/planner/tick.js";
import { desk } from "../helpers/trading.js";
import { runner } from "../helpers/fixtures.js";
import { ScriptedDriver } from "../../shared/models/scripted.js";
import { FINISH_TOOL } from "../../shared/loop/state.js";
import { ToolRegistry } from "../../shared/tools/registry.js";
import { FUNCTION_NAMES } from "../../examples/trading/executor/contract.js";
import { CONTROL_FUNCTION } from "../../examples/trading/executor/control-contract.js";
import type { ExecutorStore } from "../../examples/trading/executor/store.js";
import { executorTools } from "../../examples/trading/executor/tools.js";
import { LLM_PLANNER_PROMPT, tickSpec } from "../../examples/trading/planner/spec.js";

const task = {
  decision_id: "d-1",
  tick_id: "t-1",
  as_of: "2026-11-23T00:00:00Z",
  symbols: ["BTC-USD", "ETH-USD"],
};

/**
 * One tick of the deterministic planner against the pure executor, the way the runtime relays it;
 * `tamper` may change what a function answers, to walk the planner down a failure branch.
 */
function tick(tamper: (fn: string, body: Record<string, unknown>) => Record<string, unknown> = (_f, b) => b) {
  const d = desk();
  const messages: Message[] = [{ role: "user", content: JSON.stringify(task) }];
  const calls: string[] = [];
  for (let turn = 0; turn < 20; turn++) {
    const response = nextStep({ messages, tools: [], maxTokens: 1_000 });
    messages.push({ role: "assistant", content: response.text, toolCalls: response.toolCalls });
    const [call] = response.toolCalls;
    if (!call) return { outcome: TickOutcome.parse(JSON.parse(response.text)), calls, d };
    calls.push(call.name);
    const input = call.input as Record<string, unknown>;
    const { decision_id: decision, tick_id: tickId, idempotency_key: _k, ...body } = input;
    const out = d.call(call.name as ExecutorFunction, body, String(tickId), String(decision)).response;
    messages.push({
      role: "tool",
      toolCallId: call.id,
      name: call.name,
      content: canonicalJson(tamper(call.name, out)),
      isError: false,
    });
  }
  throw new Error("the tick did not finish in 20 turns");
}

const failedDryRun = (body: Record<string, unknown>) => ({
  ...body,
  dry_run: { pass: false, projected: [], idempotency_conflicts: [], blocking_reasons: ["slippage too high"] },
});

describe("the deterministic planner's tick loop", () => {
  it("the straight path: PLAN → VALIDATE → DRY_RUN → EXECUTE → VERIFY → RECORD", () => {
    const { outcome, calls } = tick();
    expect(calls).toEqual([
      "get_canonical_state",
      "get_market_snapshot",
      "validate_plan",
      "dry_run_plan",
      "execute_plan",
      "verify_execution",
      "record_decision",
    ]);
    expect(outcome).toMatchObject({ outcome: "executed", ledger_ref: "ledger-1" });
  });

  it("a failed dry run is adjusted: a smaller plan goes back to VALIDATE, then trades", () => {
    let failures = 0;
    const { outcome, calls, d } = tick((fn, body) =>
      fn === "dry_run_plan" && failures++ === 0 ? failedDryRun(body) : body,
    );
    expect(calls.slice(2, 7)).toEqual([
      "validate_plan",
      "dry_run_plan",
      "validate_plan",
      "dry_run_plan",
      "execute_plan",
    ]);
    expect(outcome.outcome).toBe("executed");
    const validated = Object.keys(d.state().decisions["d-1"]?.validated ?? {});
    expect(validated).toHaveLength(2);
  });

  it("dry runs that keep failing are aborted after the bounded adjustments, and the abort is recorded", () => {
    const { outcome, calls, d } = tick((fn, body) => (fn === "dry_run_plan" ? failedDryRun(body) : body));
    expect(calls.filter((c) => c === "validate_plan")).toHaveLength(3);
    expect(calls).not.toContain("execute_plan");
    expect(calls.at(-1)).toBe("record_decision");
    expect(outcome.outcome).toBe("aborted");
    expect(d.state().orders).toEqual({});
  });

  it("a failed validation is a no-op decision with remediation hints", () => {
    const { outcome, calls } = tick((fn, body) =>
      fn === "validate_plan"
        ? {
            ...body,
            validation: { pass: false, checks: [], blocking_reasons: ["market_sanity: BTC-USD is halted"] },
          }
        : body,
    );
    expect(calls).not.toContain("dry_run_plan");
    expect(outcome.outcome).toBe("rejected");
  });
});

describe("an LLM planner", () => {
  it("is offered exactly the eight functions with their JSON Schemas and the planner prompt, no other action", async () => {
    const driver = new ScriptedDriver({
      script: [{ text: JSON.stringify({ ...task, outcome: "no_op", ledger_ref: "ledger-1", reason: "x" }) }],
    });
    const spec = tickSpec(task, {
      model: { provider: "scripted", script: [{ text: "unused: the driver is given" }] },
    });
    // The executor's tools as a worker would discover them (the operator's function among them).
    const tools = new ToolRegistry(executorTools({} as ExecutorStore));
    await runner({ registry: tools, driver }).run(spec);
    const offered = driver.requests[0]?.tools ?? [];
    // Plus the runtime's own `finish` (how any model gives its final answer), which acts on nothing.
    expect(offered.map((t) => t.name).sort()).toEqual([...FUNCTION_NAMES, FINISH_TOOL].sort());
    expect(offered.map((t) => t.name)).not.toContain(CONTROL_FUNCTION);
    const validate = offered.find((t) => t.name === "validate_plan")?.inputSchema as { required: string[] };
    expect(validate.required).toEqual(
      expect.arrayContaining(["decision_id", "tick_id", "idempotency_key", "plan"]),
    );
    expect(driver.requests[0]?.system).toContain(LLM_PLANNER_PROMPT);
  });
});
