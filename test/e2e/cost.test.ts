import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuditEvent } from "../../shared/contracts/audit.js";
import { readCounter } from "../../shared/bus/tree-iterations.js";
import { ended, useClusterSuite } from "../helpers/cluster-suite.js";
import { spec } from "../helpers/fixtures.js";
import {
  json,
  startServer,
  type Handler,
  type RecordedRequest,
  type TestServer,
} from "../helpers/http-server.js";

/**
 * Prices in USD per million tokens of the models the test's OpenAI-compatible server serves; the
 * cluster reads them from MODEL_PRICES, as an operator's would.
 */
const PRICES = {
  "budget-gen": { inputPerMTok: 1, cachedInputPerMTok: 0.5, outputPerMTok: 10 },
  "free-gen": { inputPerMTok: 0, outputPerMTok: 0 },
  "costly-critic": { inputPerMTok: 2, outputPerMTok: 0 },
  "tree-root": { inputPerMTok: 1, outputPerMTok: 0 },
  "tree-child": { inputPerMTok: 1, outputPerMTok: 0 },
};

const suite = useClusterSuite("cost", {
  actors: [
    { kind: "supervisor" },
    { kind: "critic" },
    { kind: "agent", name: "agent-1" },
    { kind: "agent", name: "agent-2" },
  ],
  // A loopback server is asked without a key.
  env: { OPENAI_API_KEY: "", AGENT_RETRY_DELAY_MS: "500", MODEL_PRICES: JSON.stringify(PRICES) },
});

interface Chat {
  model: string;
  messages: { role: string; content?: string | null }[];
}
const chatOf = (req: RecordedRequest): Chat => JSON.parse(req.body) as Chat;

/** A failing verdict: the run goes to repair, and its critic is asked again. */
const FAILING_VERDICT = JSON.stringify({
  scores: { correctness: 0.2, completeness: 0.2, coherence: 0.2, safety: 1 },
  defects: [],
  repairHints: ["say more"],
  passed: false,
});

/** Answers that share (almost) no letter pairs, so no two read as the same attempt. */
const ATTEMPTS = [
  "apple",
  "zebra",
  "quick",
  "mountain",
  "violet",
  "jigsaw",
  "oxygen",
  "fjord",
  "kiwi",
  "uptown",
  "clutch",
  "dwarf",
];

let server: TestServer;
let baseUrl: string;

/** The children the tree's root spawns: each drafts and repairs for ever (its verifier never passes). */
const treeChild = (i: number) => ({
  schemaVersion: 1,
  task: { prompt: `part ${i}`, verifiers: [{ kind: "regex", pattern: "^never$" }] },
  agent: {
    name: "part",
    model: { provider: "openai", model: "tree-child", baseUrl },
    tools: [],
    capabilities: ["compute"],
    resources: { maxRepairs: 30, maxIterations: 40 },
  },
});

/**
 * An OpenAI-compatible chat-completions server that reports usage, as OpenAI does (cached prompt
 * tokens in prompt_tokens_details). Each model answers as its test needs.
 */
const models: Handler = (req, res) => {
  const chat = chatOf(req);
  const reply = (message: Record<string, unknown>, finish: string, usage: Record<string, unknown>) =>
    json(res, 200, {
      id: `chatcmpl-${chat.messages.length}`,
      object: "chat.completion",
      model: chat.model,
      choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish }],
      usage,
    });
  const call = (name: string, args: unknown) => ({
    content: "",
    tool_calls: [
      { id: `call_${name}`, type: "function", function: { name, arguments: JSON.stringify(args) } },
    ],
  });
  switch (chat.model) {
    case "budget-gen":
      return reply({ content: "draft" }, "stop", {
        prompt_tokens: 1_000,
        completion_tokens: 100,
        prompt_tokens_details: { cached_tokens: 400 },
      });
    case "costly-critic":
      return reply({ content: FAILING_VERDICT }, "stop", { prompt_tokens: 1_000, completion_tokens: 50 });
    case "tree-root": {
      const usage = { prompt_tokens: 100, completion_tokens: 10 };
      if (chat.messages.some((m) => m.role === "tool"))
        return reply(call("finish", { answer: "fanned in" }), "tool_calls", usage);
      return reply(
        call("spawn_agent", { runs: [treeChild(1), treeChild(2), treeChild(3)] }),
        "tool_calls",
        usage,
      );
    }
    case "tree-child": {
      // A new answer each attempt: the same one again would end the run as a semantic loop.
      const attempt = chat.messages.filter((m) => m.role === "assistant").length;
      const content = ATTEMPTS[attempt % ATTEMPTS.length];
      return reply({ content }, "stop", { prompt_tokens: 1_000, completion_tokens: 0 });
    }
    default:
      return reply({ content: "answer" }, "stop", { prompt_tokens: 10, completion_tokens: 5 });
  }
};

beforeAll(async () => {
  server = await startServer(models);
  baseUrl = `${server.url}/v1`;
});
afterAll(async () => {
  await server?.close();
});

const asked = (model: string): number => server.requests.filter((r) => chatOf(r).model === model).length;
const withKind = (events: AuditEvent[], kind: string): AuditEvent[] => events.filter((e) => e.kind === kind);
const model = (name: string) => ({ provider: "openai" as const, model: name, baseUrl });

describe("cost that binds (CTL-1)", () => {
  it("cost: a run on a priced OpenAI-compatible model circuit-breaks at its maxCostUsd, the audit showing each call's usage and the guard's trip", async () => {
    const { runId } = await suite.client.submit({
      ...spec({ verifiers: [{ kind: "regex", pattern: "^never$" }], tools: [] }),
      agent: {
        name: "spender",
        model: model("budget-gen"),
        tools: [],
        capabilities: ["compute"],
        resources: { maxCostUsd: 0.005, maxRepairs: 10, maxIterations: 20 },
      },
    });
    const status = await suite.waitFor(runId, ended, 30_000);
    expect(status.status).toBe("failed");
    expect(status.terminal?.reason).toMatch(/^costBudget/);
    // 600 uncached × $1 + 400 cached × $0.50 + 100 out × $10 per million: $0.0018 a call, so the
    // third call ($0.0054) passes $0.005 and the run stops there, with 7 repairs still allowed.
    expect(asked("budget-gen")).toBe(3);
    expect(status.usage).toMatchObject({ inputTokens: 3_000, outputTokens: 300, modelCalls: 3 });
    expect(status.usage.costUsd).toBeCloseTo(0.0054, 9);
    const audit = await suite.audit(runId);
    const responded = withKind(audit, "model.responded");
    expect(responded).toHaveLength(3);
    for (const event of responded) {
      expect(event.data).toMatchObject({
        usage: { inputTokens: 1_000, outputTokens: 100, cachedInputTokens: 400 },
      });
      expect((event.data as { costUsd: number }).costUsd).toBeCloseTo(0.0018, 9);
    }
    const [trip] = withKind(audit, "guard.circuit_break");
    expect(trip?.data).toMatchObject({ guardReason: "costBudget" });
    expect(trip?.reason).toMatch(/cost \$0\.005400 exceeds budget \$0\.005/);
    expect(withKind(audit, "run.failed")).toHaveLength(1);
  });

  it("cost: the critic's usage counts toward the run and its tree: a costly critic stops a run whose generator is free", async () => {
    const { runId } = await suite.client.submit({
      schemaVersion: 1,
      task: { prompt: "Answer well" },
      agent: {
        name: "reviewed",
        model: model("free-gen"),
        tools: [],
        capabilities: ["compute"],
        resources: { maxCostUsd: 0.005, maxRepairs: 10, maxIterations: 20 },
      },
      critic: { model: model("costly-critic") },
    });
    const status = await suite.waitFor(runId, ended, 30_000);
    expect(status.status).toBe("failed");
    expect(status.terminal?.reason).toMatch(/^costBudget/);
    // $0.002 a review (1,000 tokens at $2 per million), the generator's calls at $0: the third review stops it.
    expect(asked("costly-critic")).toBe(3);
    expect(status.usage.costUsd).toBeCloseTo(0.006, 9);
    expect(status.usage.inputTokens).toBe(3 * 1_000 + 3 * 10);
    const audit = await suite.audit(runId);
    const verdicts = withKind(audit, "critic.verdict");
    expect(verdicts).toHaveLength(3);
    for (const event of verdicts)
      expect(event.data).toMatchObject({
        usage: { inputTokens: 1_000, outputTokens: 50, costUsd: 0.002, modelCalls: 1 },
      });
    expect(withKind(audit, "guard.circuit_break")[0]?.data).toMatchObject({
      guardReason: "costBudget",
      by: "critic",
    });
    // The tree's counter holds the reviews' spend: 3 × 2,000 micro-dollars.
    expect(await readCounter(suite.bus, runId, "costMicroUsd")).toBe(6_000);
    expect(await readCounter(suite.bus, runId, "tokens")).toBe(3 * 1_050 + 3 * 15);
  });

  it("cost: a root's maxCostUsd bounds its whole tree: children that spend are stopped once the tree's counter passes it", async () => {
    const { runId } = await suite.client.submit({
      schemaVersion: 1,
      task: { prompt: "Split it in three", verifiers: [{ kind: "nonEmpty" }] },
      agent: {
        name: "splitter",
        model: model("tree-root"),
        tools: ["spawn_agent"],
        capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
        resources: { maxCostUsd: 0.006 },
      },
    });
    const root = await suite.waitFor(runId, ended, 60_000);
    const children = await Promise.all(
      [1, 2, 3].map((i) => suite.waitFor(`${runId}-act-1-${i}`, ended, 30_000)),
    );
    // Each child inherits $0.006 of its own, 7 calls at $0.001: 21 calls unbounded. The tree stops at
    // 6 (its counter then past $0.006 with the root's $0.0001), plus at most one call each child was
    // making as it passed.
    const childCalls = asked("tree-child");
    expect(childCalls).toBeGreaterThanOrEqual(6);
    expect(childCalls).toBeLessThanOrEqual(6 + children.length);
    const spent = await readCounter(suite.bus, runId, "costMicroUsd");
    expect(spent).toBe(childCalls * 1_000 + asked("tree-root") * 100);
    expect(spent).toBeGreaterThan(6_000);
    // A child submitted after the tree was spent is refused at admission (GLOBAL_CAP).
    for (const child of children) {
      expect(child.status).toBe("failed");
      expect(child.terminal?.reason).toMatch(/^(treeCostBudget|\[GLOBAL_CAP\] run tree \S+ spent)/);
    }
    expect(children.some((c) => c.terminal?.reason.startsWith("treeCostBudget"))).toBe(true);
    // The root, back from its fan-in, is refused its next call too.
    expect(root.status).toBe("failed");
    expect(root.terminal?.reason).toMatch(/^treeCostBudget/);
    const trip = withKind(await suite.audit(runId), "guard.circuit_break")[0];
    expect(trip?.data).toMatchObject({ guardReason: "treeCostBudget" });
    expect(trip?.reason).toMatch(/past its cost budget of \$0\.006/);
  });

  it("cost: a root's maxTokensBudget bounds its whole tree too, scripted models spending what their scripts report", async () => {
    // Each child answers 1,000 tokens a call, a new answer each time, and never passes its verifier.
    const child = spec({
      script: ATTEMPTS.map((text) => ({ text, usage: { inputTokens: 900, outputTokens: 100 } })),
      loop: true,
      verifiers: [{ kind: "regex", pattern: "^never$" }],
      tools: [],
      resources: { maxRepairs: 30, maxIterations: 40 },
    });
    const { runId } = await suite.client.submit(
      spec({
        script: [
          { toolCalls: [{ name: "spawn_agent", input: { runs: [child, child, child] } }] },
          { toolCalls: [{ name: "finish", input: { answer: "fanned in" } }] },
        ],
        tools: ["spawn_agent"],
        capabilities: [{ kind: "spawn", maxDepth: 1 }, "compute"],
        resources: { maxTokensBudget: 5_000 },
      }),
    );
    const root = await suite.waitFor(runId, ended, 60_000);
    const children = await Promise.all(
      [1, 2, 3].map((i) => suite.waitFor(`${runId}-act-1-${i}`, ended, 30_000)),
    );
    // Each child inherits 5,000 tokens of its own (6 calls: 18 unbounded); the tree stops after 6
    // calls (6,000 tokens, past its 5,000), plus at most the one each child was making.
    const calls = children.reduce((n, c) => n + c.usage.modelCalls, 0);
    expect(calls).toBeGreaterThanOrEqual(6);
    expect(calls).toBeLessThanOrEqual(6 + children.length);
    expect(await readCounter(suite.bus, runId, "tokens")).toBe(calls * 1_000);
    // A child that made the tree's last calls alone trips its own budget on the same call, and one
    // submitted after the tree was spent is refused at admission.
    for (const c of children)
      expect(c.terminal?.reason).toMatch(/^(treeTokenBudget|tokenBudget|\[GLOBAL_CAP\] run tree \S+ used)/);
    expect(root.status).toBe("failed");
    expect(root.terminal?.reason).toMatch(/^treeTokenBudget/);
  });

  it("cost: a run with maxCostUsd naming a model without a price is refused at submit with INVALID_SPEC naming the model and the setting", async () => {
    const unpriced = {
      schemaVersion: 1,
      task: { prompt: "Answer", verifiers: [{ kind: "nonEmpty" }] },
      agent: {
        name: "unpriced",
        model: model("no-price-model"),
        tools: [],
        capabilities: ["compute"],
        resources: { maxCostUsd: 0.5 },
      },
    };
    await expect(suite.client.submit(unpriced)).rejects.toMatchObject({
      code: "INVALID_SPEC",
      message: expect.stringMatching(
        /^agent\.model: model 'openai:no-price-model' has no price.*MODEL_PRICES.*maxCostUsd to 0/,
      ) as string,
    });
    await expect(
      suite.client.submit({
        ...spec({ resources: { maxCostUsd: 0.5 } }),
        critic: { model: model("no-price-critic") },
      }),
    ).rejects.toMatchObject({
      code: "INVALID_SPEC",
      message: expect.stringMatching(/^critic\.model: model 'openai:no-price-critic' has no price/) as string,
    });
    expect(asked("no-price-model")).toBe(0);
    // Without a budget the same model runs; a scripted model costs what its script says, and runs under one.
    const free = await suite.client.submit({
      ...unpriced,
      agent: { ...unpriced.agent, resources: { maxCostUsd: 0 } },
    });
    const scripted = await suite.client.submit(spec({ resources: { maxCostUsd: 0.5 } }));
    expect((await suite.waitFor(free.runId, ended)).status).toBe("committed");
    expect((await suite.waitFor(scripted.runId, ended)).status).toBe("committed");
  });
});
