import { describe, expect, it } from "vitest";
import { z } from "zod";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import type { WalRecord } from "../../shared/contracts/wal.js";
import { replay } from "../../shared/loop/replay.js";
import { defineTool, describeTool } from "../../shared/tools/tool.js";
import { ToolRegistry } from "../../shared/tools/registry.js";
import { echoTool } from "../../shared/tools/builtin/echo.js";
import { runner, spec } from "../helpers/fixtures.js";

/** Tools that count how many of their calls are in flight at once; `write` is not idempotent. */
function probes() {
  const peak = { read: 0, write: 0 };
  const inFlight = { read: 0, write: 0 };
  const probe = (name: "read" | "write", idempotent: boolean) =>
    defineTool({
      name,
      description: `${name} probe`,
      input: z.object({ key: z.string() }),
      capability: { kind: "compute" },
      reversibility: idempotent ? "pure" : "irreversible",
      idempotent,
      execute: async (input) => {
        inFlight[name] += 1;
        peak[name] = Math.max(peak[name], inFlight[name]);
        // Yield to the event loop: a call started alongside this one gets in meanwhile.
        await new Promise((resolve) => setImmediate(resolve));
        inFlight[name] -= 1;
        return { output: `${name} ${input.key}` };
      },
    });
  return { peak, tools: [probe("read", true), probe("write", false)] };
}

const call = (name: string, key: string) => ({ name, input: { key } });

function batchSpec() {
  return RunSpec.parse(
    spec({
      tools: ["read", "write", "echo"],
      script: [
        {
          toolCalls: [
            call("read", "a"),
            call("read", "b"),
            call("read", "c"),
            call("write", "x"),
            call("write", "y"),
            call("read", "d"),
          ],
        },
        { toolCalls: [{ name: "finish", input: { answer: "done" } }] },
      ],
    }),
  );
}

const intentsAndOutcomes = (wal: WalRecord[]): string[] =>
  wal.flatMap((r) =>
    r.type === "INTENT" ? [`I ${r.actionId}`] : r.type === "COMPLETE" ? [`C ${r.event.actionId}`] : [],
  );

describe("a batch: independent idempotent calls of one response run at the same time", () => {
  it("the idempotent calls at the head run together, INTENTs logged before any runs; non-idempotent ones one at a time, in order", async () => {
    const { peak, tools } = probes();
    const result = await runner({ registry: new ToolRegistry([echoTool, ...tools]) }).run(batchSpec());
    expect(result.state.status).toBe("committed");
    expect(peak).toEqual({ read: 3, write: 1 });
    // a, b, c: three INTENTs, then their outcomes in the model's order; x and y each alone; d alone.
    expect(intentsAndOutcomes(result.wal)).toEqual([
      "I act-1",
      "I act-2",
      "I act-3",
      "C act-1",
      "C act-2",
      "C act-3",
      "I act-4",
      "C act-4",
      "I act-5",
      "C act-5",
      "I act-6",
      "C act-6",
    ]);
    // The tool results reach the model in the order of its calls.
    const results = result.state.messages.filter((m) => m.role === "tool").map((m) => m.content);
    expect(results).toEqual(["read a", "read b", "read c", "write x", "write y", "read d"]);
  });

  it("the three INTENTs are in one transition, the one that waits on the first call", async () => {
    const { tools } = probes();
    const effects: string[][] = [];
    let current: string[] = [];
    const result = await runner({
      registry: new ToolRegistry([echoTool, ...tools]),
      onEffect: (e) => {
        if (e.type === "wal" && e.record.type === "INTENT") current.push(e.record.actionId);
        if (e.type === "callTool") {
          effects.push([
            ...current,
            `await ${e.actionId}`,
            ...(e.concurrent ?? []).map((c) => `with ${c.actionId}`),
          ]);
          current = [];
        }
      },
    }).run(batchSpec());
    expect(result.state.status).toBe("committed");
    expect(effects.slice(0, 3)).toEqual([
      ["act-1", "act-2", "act-3", "await act-1", "with act-2", "with act-3"],
      ["await act-2"],
      ["await act-3"],
    ]);
  });

  it("replaying the log of a run with a batch gives the same transitions", async () => {
    const { tools } = probes();
    const registry = new ToolRegistry([echoTool, ...tools]);
    const run = runner({ registry });
    const result = await run.run(batchSpec());
    const replayed = replay(result.wal, { tools: registry.descriptors() });
    expect(replayed.transitions).toEqual(result.transitions);
    expect(replayed.state.transitionHash).toBe(result.state.transitionHash);
    expect(describeTool(echoTool).idempotent).toBe(true);
  });
});
