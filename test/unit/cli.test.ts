import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { SubmitRequest } from "../../shared/contracts/cluster.js";
import { AGENTCTL, runProcess } from "../helpers/cluster-suite.js";
import fc from "fast-check";
import { jsonProblem } from "../../services/cli/spec-file.js";
import { specFromFlags } from "../../services/cli/spec-flags.js";

const base = { name: "n", model: "scripted:hi", tools: "", capabilities: "compute" };

const TRADING_CONTROL = fileURLToPath(
  new URL("../../dist/examples/trading/executor/control-cli.js", import.meta.url),
);

/** The error of an agentctl command that must fail before it connects (no server needed). */
async function refusal(...args: string[]): Promise<{ code: string; message: string }> {
  return refusalOf(AGENTCTL, args);
}

async function refusalOf(cli: string, args: string[]): Promise<{ code: string; message: string }> {
  const failed = await runProcess(process.execPath, [cli, ...args]).then(
    () => undefined,
    (err: { code: number; stderr: string }) => err,
  );
  expect(failed).toMatchObject({ code: 2 });
  // One JSON line, nothing else: a script reads stderr as the error.
  const lines = failed?.stderr.trim().split("\n") ?? [];
  expect(lines).toHaveLength(1);
  return (JSON.parse(lines[0] ?? "") as { error: { code: string; message: string } }).error;
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
    // A hosted model needs a privacy tier that lets data leave the machine: --privacy gives it.
    const privacy = (flags: { privacy?: string }) =>
      SubmitRequest.parse(specFromFlags({ ...base, prompt: "p", model: "openai:gpt-x", ...flags })).agent
        .privacy;
    expect(privacy({})).toBe("sovereign");
    expect(privacy({ privacy: "standard" })).toBe("standard");
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

  it("answer a bad command or argument with one JSON error line, and help on stdout", async () => {
    expect(await refusal("frobnicate")).toEqual({
      code: "INVALID_INPUT",
      message: "unknown command 'frobnicate'",
    });
    expect(await refusal("status", "not a run id")).toMatchObject({
      code: "INVALID_INPUT",
      message: expect.stringMatching(
        /^command-argument value 'not a run id' is invalid.*runId is 1-64/,
      ) as string,
    });
    expect(await refusal("watch")).toMatchObject({
      message: expect.stringMatching(/^missing required argument 'runId'/) as string,
    });
    expect(await refusal("submit", "--prompt", "p", "--privacy", "open")).toMatchObject({
      message: expect.stringMatching(/^option '--privacy <tier>' argument 'open' is invalid/) as string,
    });
    expect(await refusal("audit", "tail", "--all", "-n", "5")).toEqual({
      code: "INVALID_INPUT",
      message: "--all and --last: give one of them",
    });
    expect(await refusal("cluster", "--listen-ms", "5")).toEqual({
      code: "INVALID_INPUT",
      message: "option '--listen-ms <ms>' argument '5' is invalid. expected milliseconds, 100 to 60000",
    });
    // -n 0 means "only new events", which only -f has.
    expect(await refusal("audit", "tail", "-n", "0")).toEqual({
      code: "INVALID_INPUT",
      message: "-n 0 prints nothing without -f (which then prints only new events)",
    });
    expect(await refusal("audit", "tail", "-n", "-1")).toMatchObject({
      message: expect.stringMatching(/^option '-n, --last <n>' argument '-1' is invalid/) as string,
    });
    expect(await refusalOf(TRADING_CONTROL, ["pause"])).toEqual({
      code: "INVALID_INPUT",
      message: "required option '--reason <text>' not specified",
    });
    const help = await runProcess(process.execPath, [AGENTCTL, "runs", "--help"]);
    expect(help.stdout).toMatch(/Usage: agentctl runs/);
    expect(help.stderr).toBe("");
  });

  it("print help on stdout and exit 0, however it is asked for (a command left out too)", async () => {
    for (const args of [[], ["--help"], ["help"], ["audit"], ["help", "audit"], ["watch", "--help"]]) {
      const help = await runProcess(process.execPath, [AGENTCTL, ...args]);
      expect({ args, stdout: help.stdout, stderr: help.stderr }).toEqual({
        args,
        stdout: expect.stringMatching(/^Usage: agentctl/) as string,
        stderr: "",
      });
    }
    // watch's help says what its exit codes mean.
    const watch = await runProcess(process.execPath, [AGENTCTL, "watch", "--help"]);
    expect(watch.stdout).toMatch(
      / 1 +the run failed\n.* 3 +the run halted.*\n.* 4 +the run waits for approval/s,
    );
  });

  it("read a spec file by its name: .json as JSON, .yaml as YAML, each saying where it breaks", async () => {
    const dir = await mkdtemp(join(tmpdir(), "agentctl-spec-"));
    const at = async (name: string, text: string) => {
      await writeFile(join(dir, name), text);
      return refusal("submit", join(dir, name));
    };
    expect(await at("spec.yaml", "task:\n  prompt: [unclosed\n")).toEqual({
      code: "INVALID_SPEC",
      message: expect.stringMatching(
        /^spec file '.*spec\.yaml' is not valid YAML: .* at line \d+, column \d+$/,
      ) as string,
    });
    // A trailing comma YAML would have taken in its stride (as a flow mapping) is JSON's problem.
    expect(await at("spec.json", '{\n  "task": { "prompt": "p", },\n  "agent": {}\n}\n')).toEqual({
      code: "INVALID_SPEC",
      message: `spec file '${join(dir, "spec.json")}' is not valid JSON: expected a property name in double quotes at line 2, column 28`,
    });
    expect(await at("spec.json.txt", "a: [")).toMatchObject({
      message: expect.stringMatching(/is neither JSON nor YAML: /) as string,
    });
    await rm(dir, { recursive: true });
  });

  it("find where a text stops being JSON exactly when JSON.parse refuses it", () => {
    const texts = fc.oneof(
      fc.json(),
      // JSON with one character dropped, doubled or swapped for another: mostly not JSON any more.
      fc
        .tuple(fc.json(), fc.nat(), fc.constantFrom("", ",", "}", "]", '"', ":", "\\", "\n", "x", "0"))
        .map(([text, at, c]) => {
          const i = at % (text.length + 1);
          return text.slice(0, i) + c + text.slice(i + (c === "" ? 1 : 0));
        }),
    );
    fc.assert(
      fc.property(texts, (text) => {
        let parses = true;
        try {
          JSON.parse(text);
        } catch {
          parses = false;
        }
        const problem = jsonProblem(text);
        expect(problem === undefined).toBe(parses);
        if (problem) expect(problem.line).toBe(Math.min(problem.line, text.split("\n").length));
      }),
      { numRuns: 2_000 },
    );
  });

  it("end quietly when whoever reads its output stops reading (agentctl … | head)", async () => {
    const child = spawn(process.execPath, [AGENTCTL, "contracts"], { stdio: ["ignore", "pipe", "pipe"] });
    // Closed before the command writes its first line: every write it makes meets a closed pipe.
    child.stdout.destroy();
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
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
