import {
  CriticVerdict,
  type CriticCheck,
  type CriticRequest,
  type ReviewUsage,
} from "../contracts/rubric.js";
import type { ModelDriver } from "../models/driver.js";
import { AgentError } from "../runtime/errors.js";
import { evaluatePureVerifier, verifierDefects } from "./verifiers.js";

/** A verdict with what its review's model calls used and cost (absent: no model was asked). */
export type ReviewedVerdict = CriticVerdict & { usage?: ReviewUsage };

export type Critic = (request: CriticRequest, signal?: AbortSignal) => Promise<ReviewedVerdict>;

/** A reviewed verdict split into the verdict and its usage. */
export function splitUsage(reviewed: ReviewedVerdict): { verdict: CriticVerdict; usage?: ReviewUsage } {
  const { usage, ...verdict } = reviewed;
  return usage ? { verdict, usage } : { verdict };
}

/** The critic's prompt: the task, the output, the evidence and the rubric, nothing of the generator's reasoning. */
export function criticPrompt(request: CriticRequest): string {
  const dims = request.rubric.dimensions
    .map((d) => `- ${d.name} (weight ${d.weight}, minimum ${d.min})`)
    .join("\n");
  return [
    "You are an independent reviewer. Score the OUTPUT against the TASK on each rubric dimension from 0 to 1.",
    'Reply with JSON only: {"scores": {dimension: number}, "defects": [{"severity", "rootCause", "location"?, "description"}], "repairHints": [string], "passed": boolean}.',
    "",
    `TASK:\n${request.task}`,
    "",
    `OUTPUT:\n${request.output}`,
    "",
    `EVIDENCE:\n${request.evidence.length > 0 ? request.evidence.map((e) => `- ${e}`).join("\n") : "(none)"}`,
    "",
    `RUBRIC (threshold ${request.rubric.threshold}):\n${dims}`,
  ].join("\n");
}

/** Reads a verdict out of model text; tolerates prose or code fences around one JSON object. */
export function parseVerdict(text: string): CriticVerdict {
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  if (start < 0 || end < start)
    throw new AgentError("MODEL_BAD_RESPONSE", "critic reply contains no JSON object");
  let raw: unknown;
  try {
    raw = JSON.parse(text.slice(start, end + 1)) as unknown;
  } catch (cause) {
    throw new AgentError("MODEL_BAD_RESPONSE", "critic reply is not valid JSON", { cause });
  }
  const parsed = CriticVerdict.safeParse(raw);
  if (!parsed.success)
    throw new AgentError("MODEL_BAD_RESPONSE", `critic verdict is malformed: ${parsed.error.message}`);
  return parsed.data;
}

/** A critic backed by a model driver (scripted, OpenAI-compatible or Anthropic). */
export function modelCritic(driver: ModelDriver): Critic {
  return async (request, signal) => {
    const response = await driver.complete(
      { messages: [{ role: "user", content: criticPrompt(request) }], tools: [] },
      signal,
    );
    const usage: ReviewUsage = { ...response.usage, costUsd: response.costUsd, modelCalls: 1 };
    try {
      return { ...parseVerdict(response.text), usage };
    } catch (err) {
      // A reply that is no verdict was paid for all the same: its usage rides in the error.
      const error = err as AgentError;
      throw new AgentError(error.code, error.message, { cause: err, details: { usage } });
    }
  };
}

/**
 * Applies the critic's deterministic checks to a verdict (the model's, or a clean one when the
 * critic has no model). A failed check is a defect and caps the `correctness` dimension (or the
 * rubric's first) at 0, so the gates fail whatever a model scored.
 */
export function checkedVerdict(
  request: CriticRequest,
  checks: readonly CriticCheck[],
  verdict?: CriticVerdict,
): CriticVerdict {
  const names = request.rubric.dimensions.map((d) => d.name);
  const base: CriticVerdict = verdict ?? {
    scores: Object.fromEntries(names.map((n) => [n, 1])),
    defects: [],
    repairHints: [],
    passed: true,
  };
  const failed = checks.flatMap((check, i) => {
    const result = evaluatePureVerifier(check, i, request.output);
    return result && !result.passed ? [result] : [];
  });
  if (failed.length === 0) return base;
  const capped = names.includes("correctness") ? "correctness" : (names[0] ?? "correctness");
  return {
    scores: { ...base.scores, [capped]: 0 },
    defects: [
      ...verifierDefects(failed).map((d) => ({ ...d, location: `critic.${d.location ?? "check"}` })),
      ...base.defects,
    ],
    repairHints: [...base.repairHints, ...failed.map((r) => `fix: ${r.message}`)],
    passed: false,
  };
}

/** A critic from a spec: its checks, then its model when it has one. */
export function checkingCritic(checks: readonly CriticCheck[], model?: Critic): Critic {
  return async (request, signal) => {
    const reviewed = model ? splitUsage(await model(request, signal)) : undefined;
    const verdict = checkedVerdict(request, checks, reviewed?.verdict);
    return reviewed?.usage ? { ...verdict, usage: reviewed.usage } : verdict;
  };
}
