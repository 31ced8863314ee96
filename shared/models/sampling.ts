import type { ModelRequest } from "../contracts/model.js";

/**
 * The request's sampling parameters, or the ref's where the request has none: the loop sets them
 * on every call it makes, a critic's call takes its ref's.
 */
export function withRefSampling(
  request: ModelRequest,
  ref: { maxTokens?: number | undefined; temperature?: number | undefined; seed?: number | undefined },
): ModelRequest {
  const maxTokens = request.maxTokens ?? ref.maxTokens;
  const temperature = request.temperature ?? ref.temperature;
  const seed = request.seed ?? ref.seed;
  return {
    ...request,
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(temperature === undefined ? {} : { temperature }),
    ...(seed === undefined ? {} : { seed }),
  };
}
