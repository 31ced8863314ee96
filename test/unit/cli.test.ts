import { describe, expect, it } from "vitest";
import { SubmitRequest } from "../../shared/contracts/cluster.js";
import { AGENTCTL, runProcess } from "../helpers/cluster-suite.js";
import { specFromFlags } from "../../services/cli/spec-flags.js";

const base = { name: "n", model: "scripted:hi", tools: "", capabilities: "compute" };

/** The error of an agentctl command that must fail before it connects (no server needed). */
async function refusal(...args: string[]): Promise<{ code: string; message: string }> {
  const failed = await runProcess(process.execPath, [AGENTCTL, ...args]).then(
    () => undefined,
    (err: { code: number; stderr: string }) => err,
  );
  expect(failed).toMatchObject({ code: 2 });
  const last = failed?.stderr.trim().split("\n").at(-1) ?? "";
  return (JSON.parse(last) as { error: { code: string; message: string } }).error;
}

describe("agentctl flags", () => {
  it("build an admissible RunSpec with explicit convergence", () => {
    const spec = specFromFlags({
      ...base,
      prompt: "p",
      pattern: "^h",
      maxIterations: 3,
      tools: "echo, memory",
    });
    const parsed = SubmitRequest.parse(spec);
    expect(parsed.task.verifiers?.map((v) => v.kind)).toEqual(["nonEmpty", "regex"]);
    expect(parsed.agent.tools).toEqual(["echo", "memory"]);
    expect(parsed.agent.resources.maxIterations).toBe(3);
    expect(parsed.agent.model).toEqual({ provider: "scripted", script: [{ text: "hi" }] });
  });

  it("name models by provider", () => {
    const model = (m: string) =>
      SubmitRequest.parse(specFromFlags({ ...base, prompt: "p", model: m })).agent.model;
    expect(model("openai:llama@http://127.0.0.1:8000/v1")).toMatchObject({
      provider: "openai",
      model: "llama",
      baseUrl: "http://127.0.0.1:8000/v1",
    });
    expect(model("anthropic:claude-x")).toMatchObject({ provider: "anthropic", model: "claude-x" });
    expect(() => specFromFlags({ ...base, prompt: "p", model: "gpt" })).toThrow(/--model 'gpt'/);
    expect(() => specFromFlags({ ...base })).toThrow(/--prompt/);
  });

  it("set the run's budgets; the ones not given keep the spec's defaults", () => {
    const resources = (flags: Record<string, number>) =>
      SubmitRequest.parse(specFromFlags({ ...base, prompt: "p", ...flags })).agent.resources;
    expect(
      resources({ maxToolCalls: 0, maxCostUsd: 0.25, maxTokensBudget: 5_000, deadlineMs: 60_000 }),
    ).toMatchObject({
      maxIterations: 20,
      maxToolCalls: 0,
      maxCostUsd: 0.25,
      maxTokensBudget: 5_000,
      deadlineMs: 60_000,
    });
    expect(resources({})).toMatchObject({ maxIterations: 20, maxToolCalls: 50, maxCostUsd: 0 });
  });

  it("parse budgets strictly, and refuse spec flags next to a spec file instead of ignoring them", async () => {
    expect(await refusal("submit", "--prompt", "p", "--max-cost-usd", "-1")).toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringMatching(/0 or more/) as string,
    });
    expect(await refusal("submit", "--prompt", "p", "--max-tool-calls", "1.5")).toMatchObject({
      message: expect.stringMatching(/whole number/) as string,
    });
    expect(await refusal("submit", "spec.yaml", "--max-cost-usd", "2", "--prompt", "p")).toEqual({
      code: "INVALID_INPUT",
      message: "--prompt, --max-cost-usd shape a spec from flags; with a spec file, set them in the file",
    });
  });

  it("refuse a replay's checkpoint interval that is not a positive integer before connecting", async () => {
    for (const value of ["0", "2.5", "ten"]) {
      expect(await refusal("replay", "run-1", "--checkpoint-every", value)).toMatchObject({
        code: "INVALID_INPUT",
        message: expect.stringMatching(/--checkpoint-every.*positive integer/) as string,
      });
    }
  });
});
