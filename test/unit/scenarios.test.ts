import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { z } from "zod";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { neverConverges, policyFromSpec, type ConvergencePolicy } from "../../shared/loop/policy.js";
import type { RunResult } from "../../shared/loop/runner.js";
import { ScriptedDriver } from "../../shared/models/scripted.js";
import { defineTool } from "../../shared/tools/tool.js";
import { echoCall, kinds, modelCalls, registry, runner, spec } from "../helpers/fixtures.js";

/** A tool that reports success and emits whatever progress signals it is given. */
function progressTool(signals: string[] = []) {
  const execute = vi.fn(() => Promise.resolve({ output: { success: true }, signals }));
  return {
    execute,
    tool: defineTool({
      name: "work",
      description: "does work",
      input: z.object({ n: z.number() }),
      capability: { kind: "compute" },
      execute,
    }),
  };
}

const workCalls = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ toolCalls: [{ name: "work", input: { n: i } }] }));
const converges = (name: string, when: (step: number, signals: string[]) => boolean): ConvergencePolicy => ({
  name,
  evaluate: (v) => ({
    converged: when(
      v.step,
      v.signals.map((s) => s.name),
    ),
    reason: name,
  }),
});

/** Runs a scripted loop whose tool emits two domain signals; converges once the second one is seen. */
async function domainRun(signals: [string, string]): Promise<RunResult> {
  const { tool } = progressTool();
  let call = 0;
  const emitting = {
    ...tool,
    execute: () =>
      Promise.resolve({ output: { success: true }, signals: [signals[Math.min(call++, 1)] as string] }),
  };
  return runner({
    registry: registry(emitting),
    policy: converges("domain", (_s, seen) => seen.includes(signals[1])),
  }).run(spec({ tools: ["work"], script: workCalls(10), resources: { maxIterations: 8 } }));
}

const shape = (r: RunResult) => r.audit.map((e) => `${e.phase}:${e.kind}:${e.status}`);

describe("runtime invariants (the 14 scenarios)", () => {
  it("RT-01 always halts at max steps even when the model always returns tool calls", async () => {
    const result = await runner({ policy: neverConverges }).run(
      spec({
        script: Array.from({ length: 50 }, (_, i) => echoCall(`varied ${i}`)),
        resources: { maxIterations: 5 },
      }),
    );
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("maxIterations");
    expect(modelCalls(result)).toBe(5);
  });

  it("RT-02 stops executing when the policy indicates convergence", async () => {
    const driver = new ScriptedDriver({ script: workCalls(10) });
    const { tool, execute } = progressTool();
    const result = await runner({
      driver,
      registry: registry(tool),
      policy: converges("after two steps", (step) => step >= 2),
    }).run(spec({ tools: ["work"] }));
    expect(result.state.status).toBe("committed");
    expect(driver.requests).toHaveLength(2);
    // Step 2's tool call was proposed but the policy spoke first: only step 1's tool ran.
    expect(execute).toHaveBeenCalledTimes(1);
  });

  it("RT-03 does not interpret progress signals", async () => {
    const noisy = progressTool([":foo", ":bar", ":baz"]);
    const quiet = progressTool([]);
    const run = (t: ReturnType<typeof progressTool>) =>
      runner({ registry: registry(t.tool), policy: neverConverges }).run(
        spec({ tools: ["work"], script: workCalls(10), resources: { maxIterations: 4 } }),
      );
    const [a, b] = [await run(noisy), await run(quiet)];
    // maxIterations 4: four responses, four tool runs, then the fifth iteration check breaks.
    expect(a.state.signals.map((s) => s.name)).toEqual(Array(4).fill([":foo", ":bar", ":baz"]).flat());
    expect(b.state.signals).toEqual([]);
    expect(a.audit.map((e) => e.kind)).toEqual(b.audit.map((e) => e.kind));
    expect(a.state.terminal?.reason).toBe(b.state.terminal?.reason);
  });

  it("RT-04 continues looping when a tool succeeds but the policy does not converge", async () => {
    const { tool, execute } = progressTool();
    const result = await runner({ registry: registry(tool), policy: neverConverges }).run(
      spec({ tools: ["work"], script: workCalls(10), resources: { maxIterations: 4 } }),
    );
    expect(execute).toHaveBeenCalledTimes(4);
    expect(modelCalls(result)).toBe(4);
    expect(kinds(result).filter((k) => k === "tool.completed")).toHaveLength(4);
    expect(result.state.status).toBe("failed");
  });

  it("RT-05 a tool emits progress but does not control termination", async () => {
    const { tool } = progressTool(["done", "complete", "finished"]);
    const result = await runner({ registry: registry(tool), policy: neverConverges }).run(
      spec({ tools: ["work"], script: workCalls(10), resources: { maxIterations: 3 } }),
    );
    expect(result.state.signals.length).toBe(9);
    expect(result.audit.find((e) => e.kind === "tool.completed")?.data).toMatchObject({
      signals: ["done", "complete", "finished"],
    });
    expect(result.state.terminal?.reason).toBe("maxIterations");
  });

  it("RT-06 terminates when the policy says so, even if the LLM wants to continue", async () => {
    const driver = new ScriptedDriver({ script: workCalls(10), loop: true });
    const { tool, execute } = progressTool();
    const result = await runner({
      driver,
      registry: registry(tool),
      policy: converges("immediately", () => true),
    }).run(spec({ tools: ["work"] }));
    expect(result.state.status).toBe("committed");
    expect(execute).not.toHaveBeenCalled();
    expect(driver.requests.length).toBe(0);
  });

  it("RT-07 requires an explicit convergence policy: the default never converges", async () => {
    const bare = {
      schemaVersion: 1,
      task: { prompt: "loop" },
      agent: {
        name: "a",
        model: { provider: "scripted", script: [{ text: "x" }] },
        tools: [],
        capabilities: [],
      },
    };
    const refused = RunSpec.safeParse(bare);
    expect(refused.success).toBe(false);
    expect(JSON.stringify(refused.error?.issues)).toContain("no convergence policy");
    expect(policyFromSpec(bare as unknown as RunSpec)).toBe(neverConverges);
    const result = await runner({ policy: policyFromSpec(bare as unknown as RunSpec) }).run(
      spec({
        script: [
          "I am done!",
          "Finished, trust me.",
          "42 is the answer",
          "Complete report attached",
          "All good here",
          "Nothing left to do",
          "Done again",
        ].map((text) => ({ text })),
        resources: { maxIterations: 6, maxRepairs: 10 },
      }),
    );
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("maxIterations");
    expect(kinds(result)).not.toContain("run.committed");
  });

  it("RT-08 works identically with coding signal names", async () => {
    const [coding, neutral] = [
      await domainRun([":patch_applied", ":syntax_ok"]),
      await domainRun([":s1", ":s2"]),
    ];
    expect(coding.state.status).toBe("committed");
    expect(shape(coding)).toEqual(shape(neutral));
  });

  it("RT-09 works identically with trading signal names", async () => {
    const [trading, neutral] = [
      await domainRun([":order_placed", ":confirmation_received"]),
      await domainRun([":s1", ":s2"]),
    ];
    expect(trading.state.status).toBe("committed");
    expect(shape(trading)).toEqual(shape(neutral));
  });

  it("RT-10 works identically with research signal names", async () => {
    const [research, neutral] = [
      await domainRun([":sources_collected", ":analysis_complete"]),
      await domainRun([":s1", ":s2"]),
    ];
    expect(research.state.status).toBe("committed");
    expect(shape(research)).toEqual(shape(neutral));
  });

  it("RT-11 does not hardcode domain concepts in runtime state", async () => {
    const result = await runner().run(spec());
    const keys = JSON.stringify(Object.keys(result.state)) + JSON.stringify(Object.keys(result.state.guard));
    expect(keys).not.toMatch(/patch|syntax|order_|trad|confirm|sources_|analysis/i);
  });

  it("RT-12 does not hardcode domain concepts in policy, executor or any runtime code", () => {
    const files: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else if (path.endsWith(".ts")) files.push(path);
      }
    };
    walk("shared");
    expect(files.length).toBeGreaterThan(20);
    const domain =
      /patch_applied|syntax_ok|order_placed|confirmation_received|sources_collected|analysis_complete|\btrad(e|es|ing)\b/i;
    const offenders = files.filter((f) => domain.test(readFileSync(f, "utf8")));
    expect(offenders).toEqual([]);
  });

  it("RT-13 produces the same result when run three times with the same inputs", async () => {
    const make = () =>
      runner().run(
        spec({
          script: [echoCall("a"), echoCall("b"), { text: "final" }],
          verifiers: [{ kind: "regex", pattern: "final" }],
        }),
      );
    const runs = [await make(), await make(), await make()];
    const [first] = runs;
    for (const r of runs) {
      expect(r.state.status).toBe("committed");
      expect(r.state.guard.iteration).toBe(first?.state.guard.iteration);
      expect(r.transitions).toEqual(first?.transitions);
      expect(r.wal).toEqual(first?.wal);
    }
    expect(new Set(first?.transitions).size).toBe(first?.transitions.length);
  });

  it("RT-14 a 'finish' action ends the act loop at once and goes to VERIFY, whatever the policy", async () => {
    const { tool, execute } = progressTool();
    const script = [
      {
        toolCalls: [
          { name: "finish", input: { answer: "42" } },
          { name: "work", input: { n: 1 } },
        ],
      },
      { text: "again" },
    ];
    const never = await runner({ registry: registry(tool), policy: neverConverges }).run(
      spec({ tools: ["work"], script, loop: true, resources: { maxRepairs: 0 } }),
    );
    const phases = never.audit.filter((e) => e.kind === "phase.entered").map((e) => e.phase);
    expect(phases.slice(phases.indexOf("ACT"), phases.indexOf("ACT") + 2)).toEqual(["ACT", "VERIFY"]);
    expect(execute).not.toHaveBeenCalled();
    expect(modelCalls(never)).toBe(1);
    expect(never.state.status).toBe("failed");

    const gated = await runner({ registry: registry(tool) }).run(
      spec({ tools: ["work"], script, verifiers: [{ kind: "regex", pattern: "^42$" }] }),
    );
    expect(gated.state.status).toBe("committed");
    expect(gated.state.terminal?.output).toBe("42");
  });
});
