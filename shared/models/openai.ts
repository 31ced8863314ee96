import { z } from "zod";
import type { Message, ModelRequest, ModelResponse, OpenAiModelRef, StopReason } from "../contracts/model.js";
import { AgentError } from "../runtime/errors.js";
import { providerName, type DriverLocality, type ModelDriver } from "./driver.js";
import { postJson, readApiKey, type HttpDeps, type HttpPolicy } from "./http.js";
import { isLoopbackUrl } from "./locality.js";
import { withRefSampling } from "./sampling.js";
import { costOf, type PriceTable } from "./pricing.js";

export const OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1";
export const OPENAI_DEFAULT_KEY_ENV = "OPENAI_API_KEY";

const OpenAiReply = z.object({
  model: z.string().optional(),
  choices: z
    .array(
      z.object({
        finish_reason: z.string().nullable().optional(),
        message: z.object({
          content: z.string().nullable().optional(),
          tool_calls: z
            .array(
              z.object({ id: z.string(), function: z.object({ name: z.string(), arguments: z.string() }) }),
            )
            .optional(),
        }),
      }),
    )
    .min(1),
  usage: z
    .object({
      prompt_tokens: z.number(),
      completion_tokens: z.number(),
      prompt_tokens_details: z.object({ cached_tokens: z.number().optional() }).nullish(),
    })
    .optional(),
});

const FINISH: Record<string, StopReason> = {
  stop: "endTurn",
  tool_calls: "toolUse",
  function_call: "toolUse",
  length: "maxTokens",
  content_filter: "stopSequence",
};

export interface OpenAiDriverOptions {
  ref: OpenAiModelRef;
  env: Readonly<Record<string, string | undefined>>;
  prices: PriceTable;
  http: HttpDeps;
  policy?: HttpPolicy;
}

/** Any OpenAI-compatible chat-completions endpoint: OpenAI, vLLM, Ollama, llama.cpp server. */
export class OpenAiDriver implements ModelDriver {
  readonly id: string;
  readonly locality: DriverLocality;
  readonly provider: string;
  private readonly baseUrl: string;

  constructor(private readonly options: OpenAiDriverOptions) {
    this.baseUrl = (options.ref.baseUrl ?? OPENAI_DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.id = `openai:${options.ref.model}`;
    this.locality = isLoopbackUrl(this.baseUrl) ? "local" : "remote";
    this.provider = providerName(this.id, this.baseUrl, options.ref.apiKeyEnv, OPENAI_DEFAULT_KEY_ENV);
  }

  async complete(request: ModelRequest, signal?: AbortSignal): Promise<ModelResponse> {
    const { ref } = this.options;
    // Local servers (Ollama, llama.cpp) usually need no key; a named key variable must be set.
    const key = readApiKey(
      this.options.env,
      ref.apiKeyEnv ?? OPENAI_DEFAULT_KEY_ENV,
      ref.apiKeyEnv !== undefined || this.locality === "remote",
    );
    const headers: Record<string, string> = key ? { authorization: `Bearer ${key}` } : {};
    const raw = await postJson(
      `${this.baseUrl}/chat/completions`,
      headers,
      toOpenAiBody(ref.model, withRefSampling(request, ref), this.baseUrl === OPENAI_DEFAULT_BASE_URL),
      this.options.http,
      this.options.policy,
      signal,
    );
    return parseOpenAiReply(raw, ref.model, this.options.prices);
  }
}

/**
 * The chat-completions body. OpenAI's own API takes the reply length as `max_completion_tokens`
 * (its reasoning models refuse `max_tokens`); compatible servers (vLLM, Ollama, llama.cpp) read
 * `max_tokens`.
 */
export function toOpenAiBody(
  model: string,
  request: ModelRequest,
  openAiItself = false,
): Record<string, unknown> {
  const messages: unknown[] = [];
  if (request.system) messages.push({ role: "system", content: request.system });
  for (const message of request.messages) messages.push(toOpenAiMessage(message));
  const body: Record<string, unknown> = { model, messages };
  if (request.tools.length > 0) {
    body.tools = request.tools.map((tool) => ({
      type: "function",
      function: { name: tool.name, description: tool.description, parameters: tool.inputSchema },
    }));
  }
  if (request.maxTokens !== undefined)
    body[openAiItself ? "max_completion_tokens" : "max_tokens"] = request.maxTokens;
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.seed !== undefined) body.seed = request.seed;
  return body;
}

function toOpenAiMessage(message: Message): unknown {
  switch (message.role) {
    case "user":
      return { role: "user", content: message.content };
    case "assistant":
      return message.toolCalls && message.toolCalls.length > 0
        ? {
            role: "assistant",
            content: message.content === "" ? null : message.content,
            tool_calls: message.toolCalls.map((call) => ({
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.input ?? {}) },
            })),
          }
        : { role: "assistant", content: message.content };
    case "tool":
      return { role: "tool", tool_call_id: message.toolCallId, content: message.content };
  }
}

export function parseOpenAiReply(raw: unknown, requestedModel: string, prices: PriceTable): ModelResponse {
  const parsed = OpenAiReply.safeParse(raw);
  if (!parsed.success) {
    throw new AgentError("MODEL_BAD_RESPONSE", `unexpected chat-completions reply: ${parsed.error.message}`);
  }
  const reply = parsed.data;
  const choice = reply.choices[0];
  if (!choice) throw new AgentError("MODEL_BAD_RESPONSE", "chat-completions reply has no choices");
  const toolCalls = (choice.message.tool_calls ?? []).map((call) => ({
    id: call.id,
    name: call.function.name,
    input: parseArguments(call.function.name, call.function.arguments),
  }));
  // Cached prompt tokens are a part of prompt_tokens, priced at the cached rate.
  const cached = reply.usage?.prompt_tokens_details?.cached_tokens ?? 0;
  const usage = {
    inputTokens: reply.usage?.prompt_tokens ?? 0,
    outputTokens: reply.usage?.completion_tokens ?? 0,
    ...(cached > 0 ? { cachedInputTokens: cached } : {}),
  };
  const model = reply.model ?? requestedModel;
  return {
    text: choice.message.content ?? "",
    toolCalls,
    stopReason: FINISH[choice.finish_reason ?? ""] ?? (toolCalls.length > 0 ? "toolUse" : "endTurn"),
    usage,
    costUsd: costOf(prices, requestedModel, usage, "openai"),
    model,
  };
}

function parseArguments(name: string, text: string): unknown {
  if (text.trim() === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch (cause) {
    throw new AgentError("MODEL_BAD_RESPONSE", `tool call '${name}' has arguments that are not JSON`, {
      cause,
    });
  }
}
