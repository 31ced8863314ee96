import { z } from "zod";
import { INFERENCE_TOOL_TIMEOUT_MS } from "../../contracts/tool.js";
import { defineTool } from "../tool.js";

export const InferenceInput = z.object({ prompt: z.string().min(1), system: z.string().optional() });
export type InferenceInput = z.infer<typeof InferenceInput>;

export type Infer = (input: InferenceInput, signal: AbortSignal) => Promise<string>;

/**
 * Delegates a sub-question to a model. Long chains of thought need time, so this tool's timeout
 * is 300 s rather than the default 120 s.
 */
export function createInferenceTool(infer: Infer) {
  return defineTool({
    name: "inference",
    description: "Asks a language model a self-contained question and returns its answer.",
    input: InferenceInput,
    capability: { kind: "inference" },
    timeoutMs: INFERENCE_TOOL_TIMEOUT_MS,
    reversibility: "pure",
    idempotent: false,
    execute: async (input, ctx) => ({ output: { text: await infer(input, ctx.signal) } }),
  });
}
