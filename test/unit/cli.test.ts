import { describe, expect, it } from "vitest";
import { SubmitRequest } from "../../shared/contracts/cluster.js";
import { specFromFlags } from "../../services/cli/spec-flags.js";

const base = { name: "n", model: "scripted:hi", tools: "", capabilities: "compute" };

describe("agentctl submit flags", () => {
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
});
