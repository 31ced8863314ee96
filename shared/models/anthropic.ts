import { z } from "zod";
import {
  DEFAULT_MAX_TOKENS,
  type AnthropicModelRef,
  type Message,
  type ModelRequest,
  type ModelResponse,
  type StopReason,
} from "../contracts/model.js";
import { AgentError } from "../runtime/errors.js";
import { providerName, type DriverLocality, type ModelDriver } from "./driver.js";
import { postJson, readApiKey, type HttpDeps, type HttpPolicy } from "./http.js";
import { isLoopbackUrl } from "./locality.js";
import { withRefSampling } from "./sampling.js";
import { costOf, type PriceTable } from "./pricing.js";

export const ANTHROPIC_DEFAULT_BASE_URL = "https://api.anthropic.com";
export const ANTHROPIC_DEFAULT_KEY_ENV = "ANTHROPIC_API_KEY";
export const ANTHROPIC_VERSION = "2023-06-01";
/** The Messages API requires a reply length: a request with none (a critic's) gets this one. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = DEFAULT_MAX_TOKENS;

const Block = z.discriminatedUnion("type", [
  z.object({ type: z.literal("text"), text: z.string() }),
  z.object({ type: z.literal("tool_use"), id: z.string(), name: z.string(), input: z.unknown() }),
  z.object({ type: z.literal("thinking"), thinking: z.string().optional() }).loose(),
]);

const AnthropicReply = z.object({
  model: z.string().optional(),
  content: z.array(Block),
  stop_reason: z.string().nullable().optional(),
  usage: z
    .object({
      input_tokens: z.number(),
      output_tokens: z.number(),
      cache_read_input_tokens: z.number().nullish(),
      cache_creation_input_tokens: z.number().nullish(),
    })
    .optional(),
});

const STOP: Record<string, StopReason> = {
  end_turn: "endTurn",
  tool_use: "toolUse",
  max_tokens: "maxTokens",
  stop_sequence: "stopSequence",
  pause_turn: "endTurn",
  refusal: "endTurn",
};

export interface AnthropicDriverOptions {
  ref: AnthropicModelRef;
  env: Readonly<Record<string, string | undefined>>;
  prices: PriceTable;
  http: HttpDeps;
  policy?: HttpPolicy;
}

/** Anthropic's Messages API with tool_use / tool_result blocks. */
export class AnthropicDriver implements ModelDriver {
  readonly id: string;
  readonly locality: DriverLocality;
  readonly provider: string;
  private readonly baseUrl: string;

  constructor(private readonly options: AnthropicDriverOptions) {
    this.baseUrl = (options.ref.baseUrl ?? ANTHROPIC_DEFAULT_BASE_URL).replace(/\/+$/, "");
    this.id = `anthropic:${options.ref.model}`;
    this.locality = isLoopbackUrl(this.baseUrl) ? "local" : "remote";
    this.provider = providerName(this.id, this.baseUrl, options.ref.apiKeyEnv, ANTHROPIC_DEFAULT_KEY_ENV);
  }

  async complete(request: ModelRequest, signal?: AbortSignal): Promise<ModelResponse> {
    const { ref } = this.options;
    const key = readApiKey(this.options.env, ref.apiKeyEnv ?? ANTHROPIC_DEFAULT_KEY_ENV, true) as string;
    const headers = { "x-api-key": key, "anthropic-version": ANTHROPIC_VERSION };
    const raw = await postJson(
      `${this.baseUrl}/v1/messages`,
      headers,
      toAnthropicBody(ref.model, withRefSampling(request, ref)),
      this.options.http,
      this.options.policy,
      signal,
    );
    return parseAnthropicReply(raw, ref.model, this.options.prices);
  }
}

export function toAnthropicBody(model: string, request: ModelRequest): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model,
    max_tokens: request.maxTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    messages: toAnthropicMessages(request.messages),
  };
  // The Messages API has no seed: a request's seed (a self-consistency sample's) is not sent.
  if (request.temperature !== undefined) body.temperature = request.temperature;
  if (request.system) body.system = request.system;
  if (request.tools.length > 0) {
    body.tools = request.tools.map((tool) => ({
      name: tool.name,
      description: tool.description,
      input_schema: tool.inputSchema,
    }));
  }
  return body;
}

interface Turn {
  role: "user" | "assistant";
  content: unknown[];
}

/** Tool results travel as user-turn blocks; consecutive blocks of one role merge into one turn. */
function toAnthropicMessages(messages: readonly Message[]): Turn[] {
  const turns: Turn[] = [];
  const push = (role: Turn["role"], block: unknown): void => {
    const last = turns.at(-1);
    if (last && last.role === role) last.content.push(block);
    else turns.push({ role, content: [block] });
  };
  for (const message of messages) {
    if (message.role === "user") push("user", { type: "text", text: message.content });
    else if (message.role === "tool") {
      push("user", {
        type: "tool_result",
        tool_use_id: message.toolCallId,
        content: message.content,
        is_error: message.isError,
      });
    } else {
      if (message.content !== "") push("assistant", { type: "text", text: message.content });
      for (const call of message.toolCalls ?? []) {
        push("assistant", { type: "tool_use", id: call.id, name: call.name, input: call.input ?? {} });
      }
    }
  }
  return turns;
}

export function parseAnthropicReply(raw: unknown, requestedModel: string, prices: PriceTable): ModelResponse {
  const parsed = AnthropicReply.safeParse(raw);
  if (!parsed.success) {
    throw new AgentError("MODEL_BAD_RESPONSE", `unexpected Messages API reply: ${parsed.error.message}`);
  }
  const reply = parsed.data;
  let text = "";
  const toolCalls: ModelResponse["toolCalls"] = [];
  for (const block of reply.content) {
    if (block.type === "text") text += block.text;
    else if (block.type === "tool_use")
      toolCalls.push({ id: block.id, name: block.name, input: block.input ?? {} });
  }
  // Anthropic counts cache reads and writes apart from input_tokens: all three are input here,
  // the reads priced at the cached rate and the writes at the input rate.
  const read = reply.usage?.cache_read_input_tokens ?? 0;
  const written = reply.usage?.cache_creation_input_tokens ?? 0;
  const usage = {
    inputTokens: (reply.usage?.input_tokens ?? 0) + read + written,
    outputTokens: reply.usage?.output_tokens ?? 0,
    ...(read > 0 ? { cachedInputTokens: read } : {}),
  };
  return {
    text,
    toolCalls,
    stopReason: STOP[reply.stop_reason ?? ""] ?? (toolCalls.length > 0 ? "toolUse" : "endTurn"),
    usage,
    costUsd: costOf(prices, requestedModel, usage, "anthropic"),
    model: reply.model ?? requestedModel,
  };
}
