import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_TOKENS, type ModelRequest, type ScriptStep } from "../../shared/contracts/model.js";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { parseSubmitRequest } from "../../shared/bus/submit.js";
import { answerKey, clusterAnswers } from "../../shared/loop/answer-clusters.js";
import { transition } from "../../shared/loop/fsm.js";
import { samplingParams } from "../../shared/loop/model-step.js";
import { replay } from "../../shared/loop/replay.js";
import type { CommitArtifact } from "../../shared/loop/state.js";
import { toAnthropicBody } from "../../shared/models/anthropic.js";
import { toOpenAiBody } from "../../shared/models/openai.js";
import { withRefSampling } from "../../shared/models/sampling.js";
import { ScriptedDriver } from "../../shared/models/scripted.js";
import type { ModelDriver } from "../../shared/models/driver.js";
import { ManualClock } from "../../shared/runtime/clock.js";
import { echoCall, kinds, modelCalls, runner, spec, START } from "../helpers/fixtures.js";

const finish = (answer: string) => ({ toolCalls: [{ name: "finish", input: { answer } }] });
type Resources = NonNullable<Parameters<typeof spec>[0]>["resources"];
/** A spec asking for three samples per answer. */
const sampled = (script: ScriptStep[], resources?: Resources) => {
  const s = spec({ script, ...(resources ? { resources } : {}) });
  return { ...s, task: { ...s.task, samples: 3 } };
};

describe("answer clusters", () => {
  it("A, B, A: the majority is A with agreement 2/3", () => {
    const c = clusterAnswers(["A", "B", "A"]);
    expect(c.clusters.map((x) => x.samples)).toEqual([[1, 3], [2]]);
    expect(c.chosen).toBe(0);
    expect(c.agreement).toBeCloseTo(2 / 3);
  });

  it("a tie goes to the answer sampled first; a sample with no answer counts in the total only", () => {
    expect(clusterAnswers(["B", "A", "A", "B"]).chosen).toBe(0);
    const c = clusterAnswers(["A", null, "B", "B"]);
    expect(c.abstained).toEqual([2]);
    expect(c.clusters[c.chosen]?.samples).toEqual([3, 4]);
    expect(c.agreement).toBe(0.5);
  });

  it("normalized text agrees across case, punctuation and spaces; exact text does not", () => {
    expect(answerKey("Paris.", "normalized")).toBe(answerKey("  paris ", "normalized"));
    expect(answerKey("Paris.")).not.toBe(answerKey("paris"));
  });

  it("a JSON field is compared as canonical JSON; an answer without it agrees only with the same text", () => {
    const match = { jsonField: "verdict.label" };
    const a = answerKey('{"verdict":{"label":{"x":1,"y":2}},"why":"one"}', match);
    expect(answerKey('{"why":"two","verdict":{"label":{"y":2,"x":1}}}', match)).toBe(a);
    expect(answerKey('{"verdict":{"label":"other"}}', match)).not.toBe(a);
    expect(answerKey("not json", match)).toBe(answerKey("not json"));
  });
});

describe("sampling parameters", () => {
  const openai = { provider: "openai" as const, model: "m", temperature: 0.7, seed: 40, maxTokens: 256 };

  it("a call always carries a reply length; sample k of a round gets seed + k - 1", () => {
    expect(samplingParams({ provider: "scripted", script: [{ text: "x" }] }, 1)).toEqual({
      maxTokens: DEFAULT_MAX_TOKENS,
    });
    expect(samplingParams(openai, 1)).toEqual({ maxTokens: 256, temperature: 0.7, seed: 40 });
    expect(samplingParams(openai, 3)).toEqual({ maxTokens: 256, temperature: 0.7, seed: 42 });
  });

  it("the OpenAI-compatible body carries temperature, seed and max_tokens (max_completion_tokens on OpenAI itself)", () => {
    const request: ModelRequest = { messages: [{ role: "user", content: "hi" }], tools: [] };
    const body = toOpenAiBody("m", withRefSampling(request, openai));
    expect(body).toMatchObject({ max_tokens: 256, temperature: 0.7, seed: 40 });
    const own = toOpenAiBody("m", { ...request, maxTokens: 99 }, true);
    expect(own).toMatchObject({ max_completion_tokens: 99 });
    expect(own).not.toHaveProperty("max_tokens");
  });

  it("the Anthropic body carries temperature and max_tokens, never a seed", () => {
    const body = toAnthropicBody("c", {
      messages: [{ role: "user", content: "hi" }],
      tools: [],
      maxTokens: 300,
      temperature: 0.5,
      seed: 7,
    });
    expect(body).toMatchObject({ max_tokens: 300, temperature: 0.5 });
    expect(body).not.toHaveProperty("seed");
  });
});

describe("the RunSpec's sampling fields", () => {
  const base = spec();
  const refused = (raw: unknown): string => {
    try {
      parseSubmitRequest(raw);
    } catch (err) {
      return `${(err as { code: string }).code}: ${(err as Error).message}`;
    }
    return "admitted";
  };

  it("are optional: a spec without them parses as before", () => {
    const parsed = RunSpec.parse(base);
    expect(parsed.task).not.toHaveProperty("samples");
    expect(parsed.task).not.toHaveProperty("sampleMatch");
  });

  it("refuse a jsonField without a jsonSchema verifier, samples out of 1..10, and a seed on Anthropic", () => {
    expect(refused({ ...base, task: { ...base.task, sampleMatch: { jsonField: "a" } } })).toMatch(
      /INVALID_SPEC: .*jsonField needs a jsonSchema verifier/s,
    );
    expect(refused({ ...base, task: { ...base.task, samples: 0 } })).toMatch(/INVALID_SPEC: .*samples/s);
    expect(refused({ ...base, task: { ...base.task, samples: 11 } })).toMatch(/INVALID_SPEC: .*samples/s);
    const anthropic = { provider: "anthropic", model: "c", temperature: 0.5, seed: 1 };
    expect(refused({ ...base, agent: { ...base.agent, model: anthropic } })).toMatch(
      /INVALID_SPEC: .*unknown field 'agent.model.seed'/s,
    );
    const schema = { kind: "jsonSchema", schema: { type: "object" } };
    expect(
      refused({
        ...base,
        task: { ...base.task, verifiers: [schema], samples: 3, sampleMatch: { jsonField: "a" } },
      }),
    ).toBe("admitted");
  });
});

describe("self-consistency in the loop", () => {
  it("samples 3 answering A, B, A: commits A with agreement 2/3, audited and in the provenance", async () => {
    const driver = new ScriptedDriver({ script: [{ text: "A" }, finish("B"), { text: "A" }] });
    const result = await runner({ driver }).run(sampled([{ text: "x" }]));
    expect(result.state.status).toBe("committed");
    expect(result.state.terminal?.output).toBe("A");
    expect(result.state.agreement).toBeCloseTo(2 / 3);
    expect((result.state.terminal?.artifact as CommitArtifact).provenance.agreement).toBeCloseTo(2 / 3);
    const clustered = result.audit.find((e) => e.kind === "samples.clustered");
    expect(clustered?.data).toMatchObject({
      samples: 3,
      match: "exact",
      clusters: [
        { size: 2, samples: [1, 3] },
        { size: 1, samples: [2] },
      ],
      abstained: [],
      chosen: { sample: 1, size: 2 },
    });
    // Three calls of one request (the seed aside), and one answer in the transcript.
    expect(modelCalls(result)).toBe(3);
    expect(result.state.usage.modelCalls).toBe(3);
    const [a, b, c] = driver.requests;
    expect(b?.messages).toEqual(a?.messages);
    expect(c?.messages).toEqual(a?.messages);
    expect(result.state.messages.filter((m) => m.role === "assistant")).toHaveLength(1);
    expect(kinds(result).indexOf("samples.clustered")).toBeLessThan(kinds(result).indexOf("run.committed"));
  });

  it("a sample that calls a tool is not run and proposes nothing: an abstention", async () => {
    const driver = new ScriptedDriver({ script: [{ text: "A" }, echoCall("side effect"), { text: "B" }] });
    const result = await runner({ driver }).run(sampled([{ text: "x" }]));
    expect(result.state.status).toBe("committed");
    expect(result.state.terminal?.output).toBe("A");
    expect(kinds(result)).not.toContain("tool.intent");
    expect(result.audit.find((e) => e.kind === "samples.clustered")?.data).toMatchObject({
      abstained: [2],
      agreement: 1 / 3,
    });
  });

  it("tool calls before the answer run once; only the answer is sampled", async () => {
    const driver = new ScriptedDriver({
      script: [echoCall("look"), { text: "A" }, { text: "A" }, { text: "A" }],
    });
    const result = await runner({ driver }).run(sampled([{ text: "x" }]));
    expect(result.state.terminal?.output).toBe("A");
    expect(kinds(result).filter((k) => k === "tool.intent")).toHaveLength(1);
    expect(result.state.agreement).toBe(1);
  });

  it("each sample is counted by maxIterations: a budget too small for the round circuit-breaks", async () => {
    const result = await runner().run(
      sampled([{ text: "A" }, { text: "A" }, { text: "A" }], { maxIterations: 2 }),
    );
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("maxIterations");
    expect(modelCalls(result)).toBe(2);
  });

  it("each sample's tokens count against the token budget", async () => {
    const usage = { inputTokens: 40, outputTokens: 10 };
    const result = await runner().run(
      sampled(
        [
          { text: "A", usage },
          { text: "A", usage },
          { text: "A", usage },
        ],
        { maxTokensBudget: 120 },
      ),
    );
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("tokenBudget");
  });

  it("a repair's new answer is sampled again, and the agreement is the new round's", async () => {
    const result = await runner().run({
      ...sampled([
        { text: "no" },
        { text: "no" },
        { text: "yes" },
        { text: "yes" },
        { text: "yes" },
        { text: "no" },
      ]),
      task: {
        prompt: "Say yes",
        verifiers: [{ kind: "regex", pattern: "^yes$" }],
        samples: 3,
      },
    });
    expect(result.state.status).toBe("committed");
    expect(result.state.terminal?.output).toBe("yes");
    expect(result.audit.filter((e) => e.kind === "samples.clustered").map((e) => e.data?.agreement)).toEqual([
      2 / 3,
      2 / 3,
    ]);
  });

  it("each sample's cost counts against the cost budget", async () => {
    const result = await runner().run(
      sampled(
        [
          { text: "A", costUsd: 0.4 },
          { text: "A", costUsd: 0.4 },
          { text: "A", costUsd: 0.4 },
        ],
        { maxCostUsd: 1 },
      ),
    );
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("costBudget");
  });

  it("each sample is asked only within the deadline", async () => {
    const clock = new ManualClock(START);
    const scripted = new ScriptedDriver({ script: [{ text: "A" }], loop: true });
    // A model that takes 600 ms a reply, on the run's clock.
    const slow: ModelDriver = {
      id: "slow",
      locality: "local",
      complete: async (request) => {
        await clock.advance(600);
        return scripted.complete(request);
      },
    };
    const result = await runner({ clock, driver: slow }).run(sampled([{ text: "A" }], { deadlineMs: 1_000 }));
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toBe("deadline");
    expect(scripted.requests).toHaveLength(2);
  });

  it("a log cut mid-round resumes the round from its checkpoint: the samples so far kept, the next one asked", async () => {
    const result = await runner({ checkpointEvery: 1 }).run(
      sampled([{ text: "A" }, { text: "B" }, { text: "A" }]),
    );
    const third = result.wal.findIndex(
      (r, i) => r.type === "MODEL" && result.wal.slice(0, i).filter((x) => x.type === "MODEL").length === 2,
    );
    const cut = result.wal.slice(0, third);
    const config = runner({ checkpointEvery: 1 }).config();
    const resumed = replay(cut, config, { fromCheckpoint: true });
    expect(resumed.state.sampling?.map((x) => x?.answer)).toEqual(["A", "B"]);
    expect(resumed.state.pending).toMatchObject({ kind: "model" });
    const event = result.wal[third];
    if (event?.type !== "MODEL") throw new Error("no third sample on record");
    const done = transition(resumed.state, event.event, config);
    expect(done.state.terminal?.output).toBe("A");
    expect(done.state.agreement).toBeCloseTo(2 / 3);
    expect(done.state.transitionHash).toBe(result.state.transitionHash);
  });

  it("a sampled run replays from its log to the same transitions", async () => {
    const result = await runner().run(sampled([{ text: "A" }, { text: "B" }, { text: "A" }]));
    const replayed = replay(result.wal, runner().config());
    expect(replayed.transitions).toEqual(result.transitions);
    expect(replayed.state.agreement).toBeCloseTo(2 / 3);
    expect(replayed.modelRequests.map((r) => r.request.maxTokens)).toEqual([4096, 4096, 4096]);
  });
});
