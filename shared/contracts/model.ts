import { z } from "zod";
import { SchemaVersion, Usage } from "./common.js";

export const StopReason = z.enum(["endTurn", "toolUse", "maxTokens", "stopSequence"]);
export type StopReason = z.infer<typeof StopReason>;

export const ScriptToolCall = z.object({ name: z.string().min(1), input: z.unknown() });
export type ScriptToolCall = z.infer<typeof ScriptToolCall>;

export const ScriptStep = z.object({
  text: z.string().optional(),
  toolCalls: z.array(ScriptToolCall).optional(),
  stopReason: StopReason.optional(),
  usage: Usage.optional(),
  costUsd: z.number().nonnegative().optional(),
  delayMs: z.number().int().nonnegative().optional(),
});
export type ScriptStep = z.infer<typeof ScriptStep>;

/**
 * How a model samples, sent with every request. Absent temperature and seed leave the provider's
 * own defaults; the loop always sends a maxTokens (DEFAULT_MAX_TOKENS when the ref has none).
 */
const sampling = {
  maxTokens: z.number().int().positive().optional(),
  /** Sample k of a self-consistency round (task.samples) is asked with seed + k - 1. */
  seed: z.number().int().nonnegative().optional(),
};
const temperature = (max: number) => z.number().min(0).max(max).optional();
/** The reply length the loop asks for when a ModelRef names none (a model call always has one). */
export const DEFAULT_MAX_TOKENS = 4096;

export const ScriptedModelRef = z.object({
  provider: z.literal("scripted"),
  script: z.array(ScriptStep).min(1),
  loop: z.boolean().optional(),
});
export const OpenAiModelRef = z.object({
  provider: z.literal("openai"),
  model: z.string().min(1),
  baseUrl: z.url().optional(),
  apiKeyEnv: z.string().min(1).optional(),
  temperature: temperature(2),
  ...sampling,
});
/** Anthropic's Messages API takes no seed: a ref that names one is refused at submit. */
export const AnthropicModelRef = z.object({
  provider: z.literal("anthropic"),
  model: z.string().min(1),
  baseUrl: z.url().optional(),
  apiKeyEnv: z.string().min(1).optional(),
  temperature: temperature(1),
  maxTokens: sampling.maxTokens,
});
/**
 * A model served by another actor on `<prefix>.models.<name>` (request/reply): a planner written
 * as code, a remote inference service, a model in another language. It runs inside the cluster.
 */
export const ActorModelRef = z.object({
  provider: z.literal("actor"),
  name: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/),
  timeoutMs: z.number().int().positive().optional(),
  temperature: temperature(2),
  ...sampling,
});
export const ModelRef = z.discriminatedUnion("provider", [
  ScriptedModelRef,
  OpenAiModelRef,
  AnthropicModelRef,
  ActorModelRef,
]);
export type ModelRef = z.infer<typeof ModelRef>;
export type ScriptedModelRef = z.infer<typeof ScriptedModelRef>;
export type OpenAiModelRef = z.infer<typeof OpenAiModelRef>;
export type AnthropicModelRef = z.infer<typeof AnthropicModelRef>;
export type ActorModelRef = z.infer<typeof ActorModelRef>;

/** A tool call proposed by a model; `id` pairs it with its result in the conversation. */
export const ToolCall = z.object({ id: z.string().min(1), name: z.string().min(1), input: z.unknown() });
export type ToolCall = z.infer<typeof ToolCall>;

export const Message = z.discriminatedUnion("role", [
  z.object({ role: z.literal("user"), content: z.string() }),
  z.object({
    role: z.literal("assistant"),
    content: z.string(),
    toolCalls: z.array(ToolCall).optional(),
  }),
  z.object({
    role: z.literal("tool"),
    toolCallId: z.string(),
    name: z.string(),
    content: z.string(),
    isError: z.boolean(),
  }),
]);
export type Message = z.infer<typeof Message>;

/** The tool view a model gets: name, description and a JSON Schema of the input. */
export const ToolSpec = z.object({
  name: z.string(),
  description: z.string(),
  inputSchema: z.record(z.string(), z.unknown()),
});
export type ToolSpec = z.infer<typeof ToolSpec>;

export const ModelRequest = z.object({
  system: z.string().optional(),
  messages: z.array(Message),
  tools: z.array(ToolSpec),
  maxTokens: z.number().int().positive().optional(),
  temperature: z.number().min(0).optional(),
  seed: z.number().int().nonnegative().optional(),
});
export type ModelRequest = z.infer<typeof ModelRequest>;

export const ModelResponse = z.object({
  text: z.string(),
  toolCalls: z.array(ToolCall),
  stopReason: StopReason,
  usage: Usage,
  costUsd: z.number().nonnegative(),
  model: z.string(),
});
export type ModelResponse = z.infer<typeof ModelResponse>;

/** What a model actor answers on `<prefix>.models.<name>`. */
export const ModelCallReply = z.discriminatedUnion("ok", [
  z.object({ schemaVersion: SchemaVersion, ok: z.literal(true), response: ModelResponse }),
  z.object({
    schemaVersion: SchemaVersion,
    ok: z.literal(false),
    error: z.object({ code: z.string(), message: z.string(), retryable: z.boolean() }),
  }),
]);
export type ModelCallReply = z.infer<typeof ModelCallReply>;
