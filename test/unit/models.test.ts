import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import type { ModelRequest } from "../../shared/contracts/model.js";
import { AnthropicDriver } from "../../shared/models/anthropic.js";
import { createDriver } from "../../shared/models/factory.js";
import { retryAfterMs, shownUrl } from "../../shared/models/http.js";
import { OpenAiDriver } from "../../shared/models/openai.js";
import { InstantClock } from "../../shared/runtime/clock.js";
import { seededRandom } from "../../shared/runtime/random.js";
import { json, startServer } from "../helpers/http-server.js";

const KEY = "sk-test-PLANTED-SECRET-123";
const request: ModelRequest = {
  system: "You are terse.",
  messages: [
    { role: "user", content: "What is 2+2? Use the calculator." },
    { role: "assistant", content: "", toolCalls: [{ id: "call_1", name: "calc", input: { expr: "2+2" } }] },
    { role: "tool", toolCallId: "call_1", name: "calc", content: "4", isError: false },
  ],
  tools: [
    {
      name: "calc",
      description: "evaluates arithmetic",
      inputSchema: { type: "object", properties: { expr: { type: "string" } } },
    },
  ],
};
const http = () => ({ clock: new InstantClock(0), random: seededRandom(1) });
const fastPolicy = { retries: 2, baseDelayMs: 10, maxDelayMs: 50, timeoutMs: 2_000 };

describe("openai-compatible driver", () => {
  it("sends the exact chat-completions body and parses tool calls, usage and cost", async () => {
    await using server = await startServer((_req, res) =>
      json(res, 200, {
        model: "llama-3-8b",
        choices: [
          {
            finish_reason: "tool_calls",
            message: {
              content: null,
              tool_calls: [
                { id: "c9", type: "function", function: { name: "calc", arguments: '{"expr":"3*3"}' } },
              ],
            },
          },
        ],
        usage: { prompt_tokens: 120, completion_tokens: 30 },
      }),
    );
    const driver = new OpenAiDriver({
      ref: { provider: "openai", model: "llama-3-8b", baseUrl: `${server.url}/v1`, apiKeyEnv: "MY_KEY" },
      env: { MY_KEY: KEY },
      prices: { "llama-3-8b": { inputPerMTok: 1, outputPerMTok: 2 } },
      http: http(),
    });
    expect(driver.locality).toBe("local");
    const response = await driver.complete(request);
    expect(response).toEqual({
      text: "",
      toolCalls: [{ id: "c9", name: "calc", input: { expr: "3*3" } }],
      stopReason: "toolUse",
      usage: { inputTokens: 120, outputTokens: 30 },
      costUsd: (120 * 1 + 30 * 2) / 1_000_000,
      model: "llama-3-8b",
    });
    const sent = server.requests[0];
    expect(sent?.url).toBe("/v1/chat/completions");
    expect(sent?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(JSON.parse(sent?.body ?? "")).toEqual({
      model: "llama-3-8b",
      messages: [
        { role: "system", content: "You are terse." },
        { role: "user", content: "What is 2+2? Use the calculator." },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "calc", arguments: '{"expr":"2+2"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: "4" },
      ],
      tools: [
        {
          type: "function",
          function: {
            name: "calc",
            description: "evaluates arithmetic",
            parameters: { type: "object", properties: { expr: { type: "string" } } },
          },
        },
      ],
    });
  });

  it("maps finish_reason to stop reasons", async () => {
    const reasons: [string, string][] = [
      ["stop", "endTurn"],
      ["length", "maxTokens"],
      ["content_filter", "stopSequence"],
      ["tool_calls", "toolUse"],
    ];
    let i = 0;
    await using server = await startServer((_req, res) =>
      json(res, 200, { choices: [{ finish_reason: reasons[i++]?.[0], message: { content: "x" } }] }),
    );
    const driver = new OpenAiDriver({
      ref: { provider: "openai", model: "m", baseUrl: server.url },
      env: {},
      prices: {},
      http: http(),
    });
    for (const [, expected] of reasons) expect((await driver.complete(request)).stopReason).toBe(expected);
  });

  it("retries 429 and 5xx honouring retry-after, then succeeds", async () => {
    let calls = 0;
    await using server = await startServer((_req, res) => {
      calls++;
      if (calls === 1) return json(res, 429, { error: { message: "slow down" } }, { "retry-after": "2" });
      if (calls === 2) return json(res, 503, { error: { message: "overloaded" } });
      json(res, 200, { choices: [{ finish_reason: "stop", message: { content: "fine" } }] });
    });
    const clock = new InstantClock(0);
    const driver = new OpenAiDriver({
      ref: { provider: "openai", model: "m", baseUrl: server.url },
      env: {},
      prices: {},
      http: { clock, random: seededRandom(1) },
      policy: fastPolicy,
    });
    expect((await driver.complete(request)).text).toBe("fine");
    expect(calls).toBe(3);
    expect(clock.now()).toBeGreaterThanOrEqual(2_000);
  });

  it("fails at once on 400 and 401 without leaking the key", async () => {
    let status = 400;
    await using server = await startServer((_req, res) =>
      json(res, status, { error: { message: "bad request" } }),
    );
    const driver = new OpenAiDriver({
      ref: { provider: "openai", model: "m", baseUrl: server.url, apiKeyEnv: "K" },
      env: { K: KEY },
      prices: {},
      http: http(),
      policy: fastPolicy,
    });
    const rejected = await driver.complete(request).catch((e: unknown) => e);
    // Where the reply came from, as a 404 from a wrong baseUrl needs.
    expect(rejected).toMatchObject({
      code: "MODEL_REJECTED",
      retryable: false,
      message: expect.stringMatching(
        /^request rejected \(400\): .*bad request.* \(POST http:\/\/127\.0\.0\.1:\d+\/(v1\/)?chat\/completions\)$/,
      ) as unknown,
    });
    status = 401;
    const auth = await driver.complete(request).catch((e: unknown) => e);
    expect(auth).toMatchObject({ code: "MODEL_AUTH" });
    expect(server.requests).toHaveLength(2);
    expect(JSON.stringify(auth) + String(auth) + JSON.stringify(rejected)).not.toContain("PLANTED");
  });

  it("gives up after its retries on persistent 500, and reports network errors as retryable", async () => {
    await using server = await startServer((_req, res) => json(res, 500, { error: "down" }));
    const driver = new OpenAiDriver({
      ref: { provider: "openai", model: "m", baseUrl: server.url },
      env: {},
      prices: {},
      http: http(),
      policy: fastPolicy,
    });
    await expect(driver.complete(request)).rejects.toMatchObject({
      code: "MODEL_UNAVAILABLE",
      retryable: true,
    });
    expect(server.requests).toHaveLength(3);
    const at = (baseUrl: string) =>
      new OpenAiDriver({
        ref: { provider: "openai", model: "m", baseUrl },
        env: {},
        prices: {},
        http: http(),
        policy: { ...fastPolicy, retries: 0 },
      });
    const dead = at("http://127.0.0.1:1");
    // What failed, not only fetch's "fetch failed" (port 1 is one fetch refuses to ask).
    // What failed, and where: the URL tried, the one thing that shows a wrong baseUrl.
    await expect(dead.complete(request)).rejects.toMatchObject({
      code: "MODEL_NETWORK",
      retryable: true,
      message: "fetch failed: bad port (POST http://127.0.0.1:1/chat/completions)",
    });
    // A port nobody listens on: the connection refused, and where.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const { port } = closed.address() as AddressInfo;
    await new Promise((resolve) => closed.close(resolve));
    const refused = at(`http://127.0.0.1:${port}`);
    await expect(refused.complete(request)).rejects.toMatchObject({
      code: "MODEL_NETWORK",
      message: `fetch failed: connect ECONNREFUSED 127.0.0.1:${port} (POST http://127.0.0.1:${port}/chat/completions)`,
    });
    // A URL's credentials (fetch refuses them, quoting the URL), query and fragment, which may
    // hold a key, are not shown.
    const secret = at(`http://user:PLANTED@127.0.0.1:${port}/v1`);
    const hidden = await secret.complete(request).catch((e: unknown) => e);
    expect(hidden).toMatchObject({
      code: "MODEL_NETWORK",
      message: `Request cannot be constructed from a URL that includes credentials: http://127.0.0.1:${port}/v1/chat/completions (POST http://127.0.0.1:${port}/v1/chat/completions)`,
    });
    expect(shownUrl("https://u:PLANTED@host:8443/v1/x?api-key=PLANTED#PLANTED")).toBe(
      "https://host:8443/v1/x",
    );
    expect(shownUrl("not a url PLANTED")).toBe("(a URL that does not parse)");
  });

  it("rejects malformed replies and non-JSON tool arguments", async () => {
    let body: unknown = { nope: true };
    await using server = await startServer((_req, res) => json(res, 200, body));
    const driver = new OpenAiDriver({
      ref: { provider: "openai", model: "m", baseUrl: server.url },
      env: {},
      prices: {},
      http: http(),
    });
    await expect(driver.complete(request)).rejects.toMatchObject({ code: "MODEL_BAD_RESPONSE" });
    body = {
      choices: [
        {
          finish_reason: "tool_calls",
          message: { tool_calls: [{ id: "1", function: { name: "f", arguments: "{oops" } }] },
        },
      ],
    };
    await expect(driver.complete(request)).rejects.toThrow(/not JSON/);
  });

  it("a remote endpoint needs its key; a missing key is a clear error", async () => {
    const driver = new OpenAiDriver({
      ref: { provider: "openai", model: "gpt" },
      env: {},
      prices: {},
      http: http(),
    });
    expect(driver.locality).toBe("remote");
    await expect(driver.complete(request)).rejects.toMatchObject({
      code: "MISSING_API_KEY",
      message: "environment variable OPENAI_API_KEY is not set",
    });
  });
});

describe("anthropic driver", () => {
  it("sends the exact Messages API body and parses text, tool_use, usage and cost", async () => {
    await using server = await startServer((_req, res) =>
      json(res, 200, {
        id: "msg_1",
        type: "message",
        role: "assistant",
        model: "claude-test",
        content: [
          { type: "text", text: "Let me compute." },
          { type: "tool_use", id: "toolu_1", name: "calc", input: { expr: "5-1" } },
        ],
        stop_reason: "tool_use",
        usage: { input_tokens: 200, output_tokens: 40 },
      }),
    );
    const driver = new AnthropicDriver({
      ref: { provider: "anthropic", model: "claude-test", baseUrl: server.url, apiKeyEnv: "ANTH" },
      env: { ANTH: KEY },
      prices: { "claude-test": { inputPerMTok: 3, outputPerMTok: 15 } },
      http: http(),
    });
    const response = await driver.complete(request);
    expect(response).toEqual({
      text: "Let me compute.",
      toolCalls: [{ id: "toolu_1", name: "calc", input: { expr: "5-1" } }],
      stopReason: "toolUse",
      usage: { inputTokens: 200, outputTokens: 40 },
      costUsd: (200 * 3 + 40 * 15) / 1_000_000,
      model: "claude-test",
    });
    const sent = server.requests[0];
    expect(sent?.url).toBe("/v1/messages");
    expect(sent?.headers["x-api-key"]).toBe(KEY);
    expect(sent?.headers["anthropic-version"]).toBe("2023-06-01");
    expect(JSON.parse(sent?.body ?? "")).toEqual({
      model: "claude-test",
      max_tokens: 4096,
      system: "You are terse.",
      messages: [
        { role: "user", content: [{ type: "text", text: "What is 2+2? Use the calculator." }] },
        {
          role: "assistant",
          content: [{ type: "tool_use", id: "call_1", name: "calc", input: { expr: "2+2" } }],
        },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "call_1", content: "4", is_error: false }],
        },
      ],
      tools: [
        {
          name: "calc",
          description: "evaluates arithmetic",
          input_schema: { type: "object", properties: { expr: { type: "string" } } },
        },
      ],
    });
  });

  it("maps stop_reason and surfaces API errors by class", async () => {
    const replies = [
      [200, { content: [{ type: "text", text: "cut" }], stop_reason: "max_tokens" }],
      [200, { content: [{ type: "text", text: "x" }], stop_reason: "stop_sequence" }],
      [200, { content: [{ type: "text", text: "y" }], stop_reason: "end_turn" }],
      [400, { type: "error", error: { type: "invalid_request_error", message: "max_tokens too large" } }],
    ] as const;
    let i = 0;
    await using server = await startServer((_req, res) => {
      const [status, body] = replies[i++] ?? [500, {}];
      json(res, status, body);
    });
    const driver = new AnthropicDriver({
      ref: { provider: "anthropic", model: "c", baseUrl: server.url },
      env: { ANTHROPIC_API_KEY: KEY },
      prices: {},
      http: http(),
    });
    expect((await driver.complete(request)).stopReason).toBe("maxTokens");
    expect((await driver.complete(request)).stopReason).toBe("stopSequence");
    expect((await driver.complete(request)).stopReason).toBe("endTurn");
    await expect(driver.complete(request)).rejects.toThrow(/max_tokens too large/);
  });

  it("is remote by default and refused for a sovereign agent", () => {
    expect(() =>
      createDriver({ provider: "anthropic", model: "c" }, "sovereign", { env: {}, prices: {}, http: http() }),
    ).toThrow(/sovereign/);
    expect(
      createDriver({ provider: "anthropic", model: "c" }, "standard", { env: {}, prices: {}, http: http() })
        .locality,
    ).toBe("remote");
    expect(
      createDriver({ provider: "openai", model: "m", baseUrl: "http://localhost:11434/v1" }, "sovereign", {
        env: {},
        prices: {},
        http: http(),
      }).locality,
    ).toBe("local");
  });
});

describe("retry-after", () => {
  it("reads seconds and HTTP dates", () => {
    expect(retryAfterMs("3", 0)).toBe(3000);
    expect(retryAfterMs(new Date(10_000).toUTCString(), 4_000)).toBe(6_000);
    expect(retryAfterMs(null, 0)).toBeUndefined();
    expect(retryAfterMs("soon", 0)).toBeUndefined();
  });
});
