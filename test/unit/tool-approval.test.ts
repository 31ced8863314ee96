import { describe, expect, it } from "vitest";
import { z } from "zod";
import type { ToolApproval } from "../../shared/contracts/tool.js";
import { replay } from "../../shared/loop/replay.js";
import { ScriptedDriver } from "../../shared/models/scripted.js";
import { AgentError } from "../../shared/runtime/errors.js";
import { contentHash } from "../../shared/runtime/hash.js";
import { defineTool, describeTool } from "../../shared/tools/tool.js";
import { kinds, registry, runner, spec } from "../helpers/fixtures.js";

/** A tool that acts only with a human's approval of exactly this input. */
function guardedTool() {
  const effects: { amount: number; approval: ToolApproval }[] = [];
  const tool = defineTool({
    name: "transfer",
    description: "moves money; needs a human",
    input: z.object({ amount: z.number() }),
    capability: { kind: "compute" },
    reversibility: "irreversible",
    idempotent: false,
    execute: (input, ctx) => {
      const token = contentHash(input).slice(0, 16);
      if (ctx.approval?.token !== token) {
        throw new AgentError("APPROVAL_REQUIRED", `a transfer of ${input.amount} needs a human`, {
          details: { token, reason: `transfer ${input.amount}` },
        });
      }
      effects.push({ amount: input.amount, approval: ctx.approval });
      return Promise.resolve({ output: { moved: input.amount } });
    },
  });
  return { tool, effects };
}

const script = [{ toolCalls: [{ name: "transfer", input: { amount: 700 } }] }, { text: "done" }];

function setup() {
  const guarded = guardedTool();
  const driver = new ScriptedDriver({ script });
  const r = runner({ registry: registry(guarded.tool), driver, approvals: undefined });
  return { ...guarded, driver, r };
}

describe("tool calls that need a human's approval", () => {
  it("park the run awaiting approval, holding the call, and nothing runs", async () => {
    const { r, effects, driver } = setup();
    const parked = await r.run(spec({ tools: ["transfer"], script }));
    expect(parked.state.status).toBe("awaiting_approval");
    expect(parked.state.phase).toBe("ACT");
    expect(parked.state.pending).toMatchObject({
      kind: "approval",
      on: "tool",
      call: { tool: "transfer", input: { amount: 700 }, actionId: "act-1" },
    });
    expect(kinds(parked).slice(-3)).toEqual(["tool.intent", "tool.aborted", "approval.requested"]);
    expect(parked.audit.at(-1)).toMatchObject({ actor: "tool:transfer", reason: "transfer 700" });
    expect(effects).toEqual([]);
    expect(driver.requests).toHaveLength(1);
  });

  it("approved: the same call is made again with the approver, once, and the run goes on", async () => {
    const { r, effects, tool } = setup();
    const parked = await r.run(spec({ tools: ["transfer"], script }));
    const done = await r.send(parked, { type: "approvalDecided", at: 5, decision: "approve", by: "alice" });
    expect(effects).toEqual([
      { amount: 700, approval: expect.objectContaining({ by: "alice", decidedAt: 5 }) as ToolApproval },
    ]);
    expect(done.state.status).toBe("committed");
    const decided = done.audit.find((e) => e.kind === "approval.decided");
    expect(decided).toMatchObject({ actor: "human", status: "passed", data: { by: "alice", on: "tool" } });
    const intents = done.audit.filter((e) => e.kind === "tool.intent");
    expect(intents.map((e) => e.data?.actionId)).toEqual(["act-1", "act-2"]);
    expect(intents[1]?.data).toMatchObject({ approvedBy: "alice" });
    expect(done.state.invocations.map((i) => [i.actionId, i.ok, i.code])).toEqual([
      ["act-1", false, "APPROVAL_REQUIRED"],
      ["act-2", true, undefined],
    ]);
    // The WAL alone reproduces the run, approval included.
    const replayed = replay(done.wal, { tools: [describeTool(tool)] });
    expect(replayed.state.transitionHash).toBe(done.state.transitionHash);
  });

  it("rejected: the model is told who refused and why, nothing runs, the loop goes on", async () => {
    const { r, effects, driver } = setup();
    const parked = await r.run(spec({ tools: ["transfer"], script }));
    const done = await r.send(parked, {
      type: "approvalDecided",
      at: 5,
      decision: "reject",
      by: "bob",
      feedback: "too large",
    });
    expect(effects).toEqual([]);
    expect(done.state.status).toBe("committed");
    const told = driver.requests.at(-1)?.messages.at(-1);
    expect(told).toMatchObject({ role: "tool", isError: true });
    expect(told?.content).toBe("error [APPROVAL_REJECTED]: rejected by bob: too large");
    expect(done.audit.find((e) => e.kind === "approval.decided")).toMatchObject({ status: "failed" });
  });

  it("an APPROVAL_REQUIRED error without a token is an ordinary tool error", async () => {
    const tool = defineTool({
      name: "transfer",
      description: "refuses",
      input: z.object({ amount: z.number() }),
      capability: { kind: "compute" },
      execute: () => Promise.reject(new AgentError("APPROVAL_REQUIRED", "no token given")),
    });
    const r = runner({ registry: registry(tool), approvals: undefined });
    const done = await r.run(spec({ tools: ["transfer"], script }));
    expect(done.state.status).toBe("committed");
    expect(kinds(done)).not.toContain("approval.requested");
  });
});
