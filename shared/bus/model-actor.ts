import type { NatsConnection, Subscription } from "@nats-io/transport-node";
import { type ActorModelRef, ModelCallReply, ModelRequest, type ModelResponse } from "../contracts/model.js";
import { fromErrorPayload } from "../runtime/errors.js";
import type { Logger } from "../runtime/logger.js";
import type { ModelDriver } from "../models/driver.js";
import { withRefSampling } from "../models/sampling.js";
import { decode } from "./codec.js";
import { servedInSpan, traceHeaders } from "./trace-context.js";
import { requestJson, type ServiceWait } from "./request.js";
import { failureReply, serve } from "./serve.js";
import type { Subjects } from "./subjects.js";

/** How long a worker waits for a model actor when its ModelRef names no timeout. */
export const DEFAULT_MODEL_ACTOR_TIMEOUT_MS = 60_000;

export interface ModelActorDeps {
  nc: NatsConnection;
  subjects: Subjects;
  /** Waits for the actor when nobody serves the model yet (restarting, say) instead of failing the call. */
  wait?: ServiceWait | undefined;
}

/**
 * The driver of a model another actor serves on `<prefix>.models.<name>`. It is local (the actor
 * runs inside the cluster); its answers are WAL records like any model's, so a resumed run replays
 * them instead of asking again.
 */
export function actorModelDriver(ref: ActorModelRef, deps: ModelActorDeps): ModelDriver {
  const subject = deps.subjects.model(ref.name);
  return {
    id: `actor:${ref.name}`,
    locality: "local",
    provider: `actor:${ref.name}`,
    complete: async (request) => {
      const reply = await requestJson(
        deps.nc,
        subject,
        { schema: ModelRequest, value: withRefSampling(request, ref) },
        ModelCallReply,
        {
          timeoutMs: ref.timeoutMs ?? DEFAULT_MODEL_ACTOR_TIMEOUT_MS,
          unavailable: "MODEL_UNAVAILABLE",
          timeout: "MODEL_TIMEOUT",
          // A turn has no side effect: one whose reply a dropped connection lost is asked again
          // (billed twice, perhaps) rather than failing its run.
          wait: deps.wait && { ...deps.wait, repeatable: true },
          headers: traceHeaders(),
        },
      );
      if (!reply.ok) throw fromErrorPayload(reply.error, "MODEL_REJECTED");
      return reply.response;
    },
  };
}

/**
 * Serves a model on `<prefix>.models.<name>` in a queue group. A malformed request or a failing
 * model gets a structured error reply (INVALID_INPUT, or the model's own code) and the actor keeps
 * serving.
 */
export function serveModel(
  name: string,
  complete: (request: ModelRequest) => Promise<ModelResponse>,
  deps: ModelActorDeps & { logger: Logger },
): Subscription {
  return serve(deps.nc, deps.subjects.model(name), {
    queue: `models.${name}`,
    reply: ModelCallReply,
    logger: deps.logger,
    handle: (msg) =>
      servedInSpan(
        "model.serve",
        msg,
        { "model.name": name },
        async () => {
          const request = decode(ModelRequest, msg.data);
          return { schemaVersion: 1 as const, ok: true as const, response: await complete(request) };
        },
        ({ response }) => ({
          "gen_ai.response.model": response.model,
          "gen_ai.usage.input_tokens": response.usage.inputTokens,
          "gen_ai.usage.output_tokens": response.usage.outputTokens,
        }),
      ),
    onError: failureReply,
  });
}
