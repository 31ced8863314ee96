import { AgentError } from "../runtime/errors.js";
import type { ModelResponse, ToolCall } from "../contracts/model.js";
import { contentHash } from "../runtime/hash.js";
import { clusterAnswers } from "./answer-clusters.js";
import type { Draft } from "./draft.js";
import { convergedNow, requestModel, sampleCount } from "./model-step.js";
import { FINISH_TOOL, type LoopConfig, type Sample } from "./state.js";
import { enterVerify } from "./verify.js";

/** The answer a `finish` action carries, when it is a string. */
export function finishAnswer(call: ToolCall): string | undefined {
  const answer = (call.input as { answer?: unknown } | null)?.answer;
  return typeof answer === "string" ? answer : undefined;
}

/**
 * The answer a response proposes: the `finish` action's answer (its text when the answer is not a
 * string), or the text of a reply that ends the turn. A response that calls other tools, or was
 * cut off, proposes none.
 */
export function proposalOf(response: ModelResponse): string | undefined {
  const finish = response.toolCalls.find((c) => c.name === FINISH_TOOL);
  if (finish) return finishAnswer(finish) ?? response.text;
  if (response.toolCalls.length > 0 || response.stopReason === "maxTokens") return undefined;
  return response.text;
}

/**
 * Self-consistency: a response that proposes an answer (or any response of a round under way) is
 * one sample; the model is asked again, the same request through the same guard, until the round
 * has task.samples of them. Then the majority answer becomes the run's proposal and goes to VERIFY.
 * Tool calls in a sample are never run: only the answer counts, so side effects do not multiply.
 * The caller has accounted for the response (usage, cost, truncation) and the guard let it pass.
 */
export function onSample(d: Draft, config: LoopConfig, response: ModelResponse): void {
  const s = d.state;
  const answer = proposalOf(response);
  const sample: Sample =
    answer === undefined
      ? null
      : {
          answer,
          message: {
            role: "assistant",
            content: response.text,
            ...(response.toolCalls.length > 0 ? { toolCalls: response.toolCalls } : {}),
          },
        };
  const samples = [...(s.sampling ?? []), sample];
  s.sampling = samples;
  if (samples.length < sampleCount(s)) {
    requestModel(d, config);
    return;
  }
  delete s.sampling;
  const match = s.spec.task.sampleMatch;
  const clustering = clusterAnswers(
    samples.map((x) => x?.answer ?? null),
    match,
  );
  const first = clustering.clusters[clustering.chosen]?.samples[0] ?? 1;
  const chosen = samples[first - 1];
  if (!chosen)
    throw new AgentError("INTERNAL", `sample ${first} of ${samples.length} is missing from its round`);
  s.messages = [...s.messages, chosen.message];
  s.output = chosen.answer;
  s.agreement = clustering.agreement;
  d.audit("samples.clustered", "passed", {
    data: {
      samples: samples.length,
      match: match ?? "exact",
      clusters: clustering.clusters.map((c) => ({
        size: c.samples.length,
        samples: c.samples,
        answerHash: contentHash(samples[(c.samples[0] ?? 1) - 1]?.answer ?? ""),
      })),
      abstained: clustering.abstained,
      chosen: { sample: first, size: clustering.clusters[clustering.chosen]?.samples.length ?? 0 },
      agreement: clustering.agreement,
    },
  });
  if (convergedNow(d, config)) return;
  enterVerify(d, config, `the majority of ${samples.length} samples proposed an answer`);
}
