import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { ScriptedDriver } from "../../shared/models/scripted.js";
import { ManualClock } from "../../shared/runtime/clock.js";
import { defineTool } from "../../shared/tools/tool.js";
import { echoCall, modelCalls, registry, runner, spec } from "../helpers/fixtures.js";

describe("budgets inside a run", () => {
  it("a cost budget crossed mid-run fails it, after a recorded warning", async () => {
    const script = Array.from({ length: 5 }, (_, i) => ({ ...echoCall(`c${i}`), costUsd: 0.3 }));
    const result = await runner().run(spec({ script, resources: { maxCostUsd: 1 } }));
    expect(result.state.terminal?.reason).toBe("costBudget");
    expect(modelCalls(result)).toBe(4);
    expect(result.audit.filter((e) => e.kind === "guard.warn").map((e) => e.data?.guardReason)).toContain(
      "costNearBudget",
    );
  });

  it("five truncated responses in a row break the loop; each asks the model to continue", async () => {
    const driver = new ScriptedDriver({ script: [{ text: "part", stopReason: "maxTokens" }], loop: true });
    const result = await runner({ driver }).run(spec());
    expect(result.state.terminal?.reason).toBe("truncation");
    expect(driver.requests).toHaveLength(5);
    expect(driver.requests[4]?.messages.at(-1)?.content).toContain("continue");
  });

  it("token-budget warnings are audited, never swallowed", async () => {
    const script = [{ ...echoCall("a"), usage: { inputTokens: 85, outputTokens: 0 } }, { text: "ok" }];
    const result = await runner().run(spec({ script, resources: { maxTokensBudget: 100 } }));
    expect(result.state.status).toBe("committed");
    expect(result.audit.find((e) => e.kind === "guard.warn")?.data?.guardReason).toBe("tokensNearBudget");
  });

  it("the wall-clock deadline fails the run at the next step", async () => {
    const clock = new ManualClock(0);
    const slow = defineTool({
      name: "slow",
      description: "takes a minute",
      input: z.object({ n: z.number() }),
      capability: { kind: "compute" },
      execute: async () => {
        await clock.advance(60_000);
        return { output: "late" };
      },
    });
    const script = Array.from({ length: 5 }, (_, n) => ({ toolCalls: [{ name: "slow", input: { n } }] }));
    const result = await runner({ clock, registry: registry(slow) }).run(
      spec({ tools: ["slow"], script, resources: { deadlineMs: 90_000 } }),
    );
    expect(result.state.terminal?.reason).toBe("deadline");
    expect(modelCalls(result)).toBe(2);
  });

  it("the third identical tool call is blocked in a run and not executed", async () => {
    const execute = vi.fn(() => Promise.resolve({ output: "x" }));
    const probe = defineTool({
      name: "probe",
      description: "p",
      input: z.object({}),
      capability: { kind: "compute" },
      execute,
    });
    const driver = new ScriptedDriver({
      script: [
        ...Array.from({ length: 3 }, () => ({ toolCalls: [{ name: "probe", input: {} }] })),
        { text: "done" },
      ],
    });
    const result = await runner({ driver, registry: registry(probe) }).run(spec({ tools: ["probe"] }));
    expect(execute).toHaveBeenCalledTimes(2);
    expect(driver.requests[3]?.messages.at(-1)?.content).toContain("GUARD_BLOCKED");
    expect(result.state.status).toBe("committed");
  });
});
