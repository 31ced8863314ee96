import { describe, expect, it } from "vitest";
import { spentBudget } from "../../shared/bus/tree-spend.js";
import { parseAnthropicReply } from "../../shared/models/anthropic.js";
import { DEFAULT_PRICES } from "../../shared/models/default-prices.js";
import { parseOpenAiReply } from "../../shared/models/openai.js";
import { loadPriceTable } from "../../shared/models/price-config.js";
import { costOf, priceOf, toMicroUsd, unpricedModel } from "../../shared/models/pricing.js";
import { parseSubmitRequest } from "../../shared/bus/submit.js";
import { checkPrices } from "../../services/supervisor/submit-request.js";
import { kinds, runner, spec } from "../helpers/fixtures.js";

const PRICES = {
  m: { inputPerMTok: 1, cachedInputPerMTok: 0.5, outputPerMTok: 10 },
  "anthropic:m": { inputPerMTok: 3, outputPerMTok: 15 },
};

describe("cost: prices", () => {
  it("prices cached input at its own rate, and a provider:model key before the bare model", () => {
    const usage = { inputTokens: 1_000, cachedInputTokens: 400, outputTokens: 100 };
    // 600 × $1 + 400 × $0.50 + 100 × $10, per million.
    expect(costOf(PRICES, "m", usage, "openai")).toBeCloseTo(0.0018, 12);
    expect(costOf(PRICES, "m", usage, "anthropic")).toBeCloseTo((1_000 * 3 + 100 * 15) / 1e6, 12);
    expect(priceOf(PRICES, "m")).toBe(PRICES.m);
    expect(costOf(PRICES, "other", usage)).toBe(0);
    expect(toMicroUsd(0.0018)).toBe(1_800);
    expect(toMicroUsd(0.1 + 0.2)).toBe(300_000);
  });

  it("reads cached tokens from OpenAI's prompt_tokens_details and Anthropic's cache_read_input_tokens", () => {
    const openai = parseOpenAiReply(
      {
        choices: [{ message: { content: "hi" }, finish_reason: "stop" }],
        usage: {
          prompt_tokens: 1_000,
          completion_tokens: 100,
          prompt_tokens_details: { cached_tokens: 400 },
        },
      },
      "m",
      PRICES,
    );
    expect(openai.usage).toEqual({ inputTokens: 1_000, outputTokens: 100, cachedInputTokens: 400 });
    expect(openai.costUsd).toBeCloseTo(0.0018, 12);
    const anthropic = parseAnthropicReply(
      {
        content: [{ type: "text", text: "hi" }],
        stop_reason: "end_turn",
        usage: {
          input_tokens: 100,
          output_tokens: 10,
          cache_read_input_tokens: 900,
          cache_creation_input_tokens: 0,
        },
      },
      "m",
      { m: { inputPerMTok: 3, cachedInputPerMTok: 0.3, outputPerMTok: 15 } },
    );
    expect(anthropic.usage).toEqual({ inputTokens: 1_000, outputTokens: 10, cachedInputTokens: 900 });
    expect(anthropic.costUsd).toBeCloseTo((100 * 3 + 900 * 0.3 + 10 * 15) / 1e6, 12);
  });

  it("loads defaults, then a YAML file, then inline JSON, and names the variable of bad configuration", () => {
    expect(loadPriceTable({})).toEqual(DEFAULT_PRICES);
    const file =
      "gpt-4o:\n  inputPerMTok: 9\n  outputPerMTok: 9\nlocal:\n  inputPerMTok: 0\n  outputPerMTok: 0\n";
    const table = loadPriceTable(
      { MODEL_PRICES_FILE: "/prices.yaml", MODEL_PRICES: '{"local":{"inputPerMTok":1,"outputPerMTok":2}}' },
      (path) => (path === "/prices.yaml" ? file : ""),
    );
    expect(table["gpt-4o"]).toEqual({ inputPerMTok: 9, outputPerMTok: 9 });
    expect(table.local).toEqual({ inputPerMTok: 1, outputPerMTok: 2 });
    expect(table["gpt-4o-mini"]).toEqual(DEFAULT_PRICES["gpt-4o-mini"]);
    expect(() => loadPriceTable({ MODEL_PRICES: '{"m":{"inputPerMTok":-1,"outputPerMTok":1}}' })).toThrow(
      /MODEL_PRICES: m\.inputPerMTok/,
    );
    expect(() => loadPriceTable({ MODEL_PRICES: '{"m":{"input":1}}' })).toThrow(/MODEL_PRICES: m/);
    expect(() => loadPriceTable({ MODEL_PRICES: "{not json" })).toThrow(
      /invalid configuration: MODEL_PRICES:/,
    );
    expect(() =>
      loadPriceTable({ MODEL_PRICES_FILE: "/missing.yaml" }, () => {
        throw new Error("ENOENT: no such file");
      }),
    ).toThrow(/MODEL_PRICES_FILE \(\/missing\.yaml\): ENOENT/);
  });

  it("a model asked over HTTP needs a price under a cost budget, loopback too; scripted and actor models do not", () => {
    const local = { provider: "openai" as const, model: "qwen", baseUrl: "http://127.0.0.1:11434/v1" };
    expect(unpricedModel(local, PRICES)).toMatch(/'openai:qwen' has no price.*MODEL_PRICES.*maxCostUsd to 0/);
    expect(unpricedModel({ ...local, model: "m" }, PRICES)).toBeUndefined();
    expect(unpricedModel({ provider: "anthropic", model: "claude-x" }, PRICES)).toMatch(/anthropic:claude-x/);
    expect(unpricedModel({ provider: "scripted", script: [{ text: "x" }] }, {})).toBeUndefined();
    expect(unpricedModel({ provider: "actor", name: "planner" }, {})).toBeUndefined();
  });

  it("a submit under a cost budget is refused for an unpriced escalation model too, not only the first model", () => {
    const priced = { provider: "openai" as const, model: "m" };
    const base = spec();
    const request = parseSubmitRequest({
      ...base,
      agent: {
        ...base.agent,
        model: priced,
        escalationModel: { provider: "openai", model: "bigger" },
        privacy: "standard",
        resources: { maxCostUsd: 1 },
      },
    });
    expect(() => checkPrices(request, PRICES)).toThrow(
      /agent\.escalationModel: .*'openai:bigger' has no price/,
    );
    expect(() =>
      checkPrices({ ...request, agent: { ...request.agent, escalationModel: priced } }, PRICES),
    ).not.toThrow();
  });
});

describe("cost: budgets", () => {
  it("a tree's spend passes its budget only past the root's maxCostUsd or maxTokensBudget", () => {
    const budget = { cap: 100, maxCostUsd: 0.006, maxTokens: 10_000 };
    expect(spentBudget("r", budget, { tokens: 10_000, costMicroUsd: 6_000 })).toBeUndefined();
    expect(spentBudget("r", budget, { tokens: 1, costMicroUsd: 6_001 })).toMatchObject({
      budget: "cost",
      message: expect.stringContaining("run tree r spent $0.006001") as string,
    });
    expect(spentBudget("r", budget, { tokens: 10_001, costMicroUsd: 0 })).toMatchObject({ budget: "tokens" });
    expect(spentBudget("r", { cap: 100 }, { tokens: 1e9, costMicroUsd: 1e9 })).toBeUndefined();
  });

  it("a critic's reviews count toward the run's cost: a costly critic circuit-breaks the run at its budget", async () => {
    const verdict = JSON.stringify({
      scores: { correctness: 0.1, completeness: 0.1, coherence: 0.1, safety: 1 },
      defects: [],
      repairHints: ["try again"],
      passed: false,
    });
    const result = await runner().run(
      spec({
        script: [{ text: "answer", usage: { inputTokens: 10, outputTokens: 5 } }],
        loop: true,
        critic: {
          model: {
            provider: "scripted",
            script: [{ text: verdict, usage: { inputTokens: 1_000, outputTokens: 50 }, costUsd: 0.002 }],
            loop: true,
          },
        },
        resources: { maxCostUsd: 0.005, maxRepairs: 10, maxIterations: 20 },
      }),
    );
    expect(result.state.status).toBe("failed");
    expect(result.state.terminal?.reason).toMatch(/^costBudget/);
    const reviews = result.audit.filter((e) => e.kind === "critic.verdict");
    expect(reviews).toHaveLength(3);
    expect(reviews[0]?.data).toMatchObject({
      usage: { inputTokens: 1_000, outputTokens: 50, costUsd: 0.002 },
    });
    expect(result.state.usage).toMatchObject({ inputTokens: 3_030, outputTokens: 165, modelCalls: 3 });
    expect(result.state.usage.costUsd).toBeCloseTo(0.006, 12);
    const trip = result.audit.find((e) => e.kind === "guard.circuit_break");
    expect(trip?.data).toMatchObject({ guardReason: "costBudget", by: "critic" });
    expect(kinds(result).at(-1)).toBe("run.failed");
  });

  it("a critic reply that is no verdict was paid for too: its usage counts toward the run", async () => {
    const result = await runner().run(
      spec({
        script: [{ text: "answer" }],
        loop: true,
        critic: {
          model: {
            provider: "scripted",
            script: [{ text: "no JSON here", usage: { inputTokens: 500, outputTokens: 20 }, costUsd: 0.003 }],
            loop: true,
          },
        },
        resources: { maxCostUsd: 0.005, maxRepairs: 10, maxIterations: 20 },
      }),
    );
    expect(result.state.terminal?.reason).toMatch(/^costBudget/);
    expect(result.audit.filter((e) => e.kind === "critic.verdict" && e.status === "failed")).toHaveLength(2);
    expect(result.state.usage).toMatchObject({ inputTokens: 1_000, outputTokens: 40 });
    expect(result.state.usage.costUsd).toBeCloseTo(0.006, 12);
  });
});
