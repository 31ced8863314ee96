import { describe, expect, it } from "vitest";
import { RunSpec } from "../../shared/contracts/run-spec.js";
import { childGrantRefusal, childSpec, withinParentBudgets } from "../../shared/loop/child-grants.js";
import { spec } from "../helpers/fixtures.js";

type Overrides = Parameters<typeof spec>[0];
const parent = RunSpec.parse(
  spec({
    tools: ["spawn_agent", "echo", "http_fetch", "book"],
    capabilities: [
      { kind: "spawn", maxDepth: 2 },
      "compute",
      { kind: "network", allowedHosts: ["api.example.com", "Pay.Example.com"] },
      { kind: "fileRead", allowedPaths: ["*"] },
      { kind: "mcp", server: "crm", tool: "*" },
    ],
    privacy: "private",
  }),
);
const refusal = (child: Overrides) => childGrantRefusal(parent, RunSpec.parse(spec(child)));

describe("what a spawned child may be given: no more than its parent has", () => {
  it("gives a child its parent's tools and grants, or fewer, narrower ones, and a stricter tier", () => {
    expect(refusal({ tools: ["echo"], capabilities: ["compute"] })).toBeUndefined();
    expect(refusal({ tools: [], capabilities: [] })).toBeUndefined();
    expect(
      refusal({
        tools: ["http_fetch", "spawn_agent"],
        capabilities: [
          { kind: "network", allowedHosts: ["pay.example.com"] },
          { kind: "spawn", maxDepth: 1 },
          { kind: "fileRead", allowedPaths: ["/data/in"] },
          { kind: "mcp", server: "crm", tool: "lookup" },
        ],
        privacy: "sovereign",
      }),
    ).toBeUndefined();
  });

  it("refuses a tool its parent may not call", () => {
    expect(refusal({ tools: ["echo", "charge", "shell_exec"] })).toMatchObject({
      code: "CAPABILITY_DENIED",
      message: "a child may be given only tools its parent may call; not: charge, shell_exec",
    });
  });

  it("refuses a grant its parent's do not cover: another host, a kind it lacks, a deeper spawn, another MCP server", () => {
    const denied = (capabilities: NonNullable<Overrides>["capabilities"]) =>
      refusal({ tools: [], ...(capabilities ? { capabilities } : {}) });
    const hosts = denied([{ kind: "network", allowedHosts: ["api.example.com", "evil.example.net"] }]);
    expect(hosts?.code).toBe("CAPABILITY_DENIED");
    expect(hosts?.message).toMatch(
      /not: network \{"allowedHosts":\["api\.example\.com","evil\.example\.net"\]\}$/,
    );
    expect(denied([{ kind: "network", allowedHosts: ["*"] }])?.code).toBe("CAPABILITY_DENIED");
    expect(denied([{ kind: "shell", allowedCommands: ["ls"] }])?.message).toMatch(/not: shell /);
    expect(denied(["inference"])?.message).toMatch(/not: inference$/);
    expect(denied([{ kind: "fileWrite", allowedPaths: ["/tmp"] }])?.code).toBe("CAPABILITY_DENIED");
    expect(denied([{ kind: "spawn", maxDepth: 3 }])?.message).toMatch(/not: spawn \{"maxDepth":3\}$/);
    expect(denied([{ kind: "mcp", server: "billing", tool: "refund" }])?.code).toBe("CAPABILITY_DENIED");
    expect(denied([{ kind: "mcp", server: "*", tool: "lookup" }])?.code).toBe("CAPABILITY_DENIED");
  });

  it("lets a child ask a model over HTTP only at an endpoint, with a key, its parent's models use", () => {
    const hosted = RunSpec.parse({
      ...spec({ tools: [], capabilities: [], privacy: "private" }),
      agent: {
        ...spec({ tools: [], capabilities: [], privacy: "private" }).agent,
        model: {
          provider: "openai",
          model: "big",
          baseUrl: "https://llm.example.com/v1",
          apiKeyEnv: "TEAM_KEY",
        },
      },
      critic: { model: { provider: "anthropic", model: "judge" } },
    });
    const child = (model: object, critic?: object) =>
      RunSpec.parse({
        ...spec({ tools: [], capabilities: [] }),
        agent: { ...spec({ tools: [], capabilities: [] }).agent, model },
        ...(critic ? { critic: { model: critic } } : {}),
      });
    const asked = (model: object, critic?: object) => childGrantRefusal(hosted, child(model, critic));
    const teamModel = { provider: "openai", baseUrl: "https://llm.example.com/v1", apiKeyEnv: "TEAM_KEY" };
    // Another model at its parent's endpoint with its key, its parent critic's provider, a script.
    expect(asked({ ...teamModel, model: "small" })).toBeUndefined();
    expect(asked({ provider: "anthropic", model: "other" })).toBeUndefined();
    expect(asked({ provider: "scripted", script: [{ text: "x" }] })).toBeUndefined();
    // Another variable of the worker's environment sent to that endpoint, or the key to another host.
    expect(asked({ ...teamModel, model: "small", apiKeyEnv: "NATS_PASSWORD" })).toMatchObject({
      code: "CAPABILITY_DENIED",
      message:
        "a child may ask a model over HTTP only at an endpoint, with a key, its parent's models use; not: openai at https://llm.example.com/v1 with the key in NATS_PASSWORD",
    });
    expect(
      asked({ ...teamModel, model: "small", baseUrl: "https://collector.example.net/v1" })?.message,
    ).toMatch(/not: openai at https:\/\/collector\.example\.net\/v1 with the key in TEAM_KEY$/);
    expect(asked({ provider: "openai", model: "gpt" })?.message).toMatch(
      /not: openai at https:\/\/api\.openai\.com\/v1 with the key in OPENAI_API_KEY$/,
    );
    // The critic's model is held to the same.
    expect(
      asked(
        { ...teamModel, model: "small" },
        { provider: "anthropic", model: "j", apiKeyEnv: "AWS_SECRET_ACCESS_KEY" },
      )?.message,
    ).toMatch(/not: anthropic at https:\/\/api\.anthropic\.com with the key in AWS_SECRET_ACCESS_KEY$/);
  });

  it("refuses a privacy tier less strict than its parent's", () => {
    expect(refusal({ tools: [], capabilities: [], privacy: "standard" })).toMatchObject({
      code: "PRIVACY_DENIED",
      message: "a child's privacy tier may be no less strict than its parent's ('private'), not 'standard'",
    });
  });
});

describe("what a spawned child may spend: no more than its parent may", () => {
  const withLimits = (resources: NonNullable<Overrides>["resources"]) =>
    RunSpec.parse(spec({ ...(resources ? { resources } : {}) }));
  const bounded = (p: NonNullable<Overrides>["resources"], c: NonNullable<Overrides>["resources"]) =>
    withinParentBudgets(withLimits(p), withLimits(c)).agent.resources;

  it("takes its parent's cost, token and time limits where its own are looser or unset", () => {
    expect(bounded({ maxCostUsd: 1, maxTokensBudget: 5_000, deadlineMs: 60_000 }, {})).toMatchObject({
      maxCostUsd: 1,
      maxTokensBudget: 5_000,
      deadlineMs: 60_000,
    });
    expect(
      bounded({ maxCostUsd: 1, deadlineMs: 60_000 }, { maxCostUsd: 5, deadlineMs: 90_000 }),
    ).toMatchObject({
      maxCostUsd: 1,
      deadlineMs: 60_000,
    });
  });

  it("keeps its own where they are tighter, or where its parent has none; its iterations and tool calls are its own", () => {
    expect(
      bounded(
        { maxCostUsd: 1, maxTokensBudget: 5_000, deadlineMs: 60_000 },
        {
          maxCostUsd: 0.25,
          maxTokensBudget: 1_000,
          deadlineMs: 10_000,
        },
      ),
    ).toMatchObject({ maxCostUsd: 0.25, maxTokensBudget: 1_000, deadlineMs: 10_000 });
    const free = bounded({}, { maxCostUsd: 2 });
    expect(free.maxCostUsd).toBe(2);
    expect(free.maxTokensBudget).toBeUndefined();
    expect(free.deadlineMs).toBeUndefined();
    expect(
      bounded({ maxIterations: 2, maxToolCalls: 1 }, { maxIterations: 30, maxToolCalls: 40 }),
    ).toMatchObject({
      maxIterations: 30,
      maxToolCalls: 40,
    });
  });
});

describe("a spawned child's privacy tier", () => {
  it("is its parent's when the model named none (parsed, the strictest), its own when it named one", () => {
    const asked = spec({ tools: [] });
    const named = spec({ tools: [], privacy: "sovereign" });
    expect(childSpec(parent, RunSpec.parse(asked), asked).agent.privacy).toBe("private");
    expect(childSpec(parent, RunSpec.parse(named), named).agent.privacy).toBe("sovereign");
  });
});
