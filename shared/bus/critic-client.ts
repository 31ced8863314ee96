import type { NatsConnection } from "@nats-io/transport-node";
import { CriticReviewReply, CriticReviewRequest } from "../contracts/cluster.js";
import type { Critic } from "../loop/critic.js";
import type { LoopState } from "../loop/state.js";
import { AgentError, fromErrorPayload } from "../runtime/errors.js";
import { requestJson, type ServiceWait } from "./request.js";
import type { Subjects } from "./subjects.js";
import { traceHeaders } from "./trace-context.js";

export const DEFAULT_CRITIC_TIMEOUT_MS = 120_000;

/**
 * The critic as the worker sees it: a request to the critic service with only what the critic
 * may see (task, output, evidence, rubric) and the critic's model, never the generator's messages.
 */
export function remoteCritic(
  deps: { nc: NatsConnection; subjects: Subjects; timeoutMs?: number; wait?: ServiceWait | undefined },
  state: LoopState,
): Critic {
  return async (request) => {
    const critic = state.spec.critic;
    if (!critic) throw new AgentError("INVALID_SPEC", "the run has no critic");
    const reply = await requestJson(
      deps.nc,
      deps.subjects.criticReview(),
      {
        schema: CriticReviewRequest,
        value: {
          schemaVersion: 1,
          request,
          ...(critic.model ? { model: critic.model } : {}),
          checks: critic.checks ?? [],
          privacy: state.spec.agent.privacy,
          attempt: Math.max(0, state.critiques - 1),
        },
      },
      CriticReviewReply,
      {
        timeoutMs: deps.timeoutMs ?? DEFAULT_CRITIC_TIMEOUT_MS,
        headers: traceHeaders(),
        // A review has no side effect: one whose reply a dropped connection lost is asked again
        // rather than sending a good answer back for repair.
        wait: deps.wait && { ...deps.wait, repeatable: true },
      },
    );
    if (!reply.ok) throw fromErrorPayload(reply.error);
    return reply.usage ? { ...reply.verdict, usage: reply.usage } : reply.verdict;
  };
}
