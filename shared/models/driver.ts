import type { ModelRequest, ModelResponse } from "../contracts/model.js";

/** Where inference happens: `local` never leaves the machine or cluster, `remote` does. */
export type DriverLocality = "local" | "remote";

/** One interface for every model: a request in, content, tool calls, stop reason, usage and cost out. */
export interface ModelDriver {
  readonly id: string;
  readonly locality: DriverLocality;
  /**
   * Where its calls go, when other runs' calls go there too (`openai:gpt-4o@https://…`, with
   * `;key=<variable>` for a key of its own, see providerName; `actor:<name>`): agent workers keep
   * one breaker per provider. Absent (the scripted model): none.
   */
  readonly provider?: string;
  complete(request: ModelRequest, signal?: AbortSignal): Promise<ModelResponse>;
}

/**
 * What a driver's breaker is kept for (see ModelDriver.provider): its model and endpoint, and the
 * key variable when a spec names one other than the default. A provider's rate limits and quotas
 * are per key: one team's key at its limit must not stop the calls made with another's. The
 * variable's name, not the key, goes into the name, which is logged, shown and stored.
 */
export function providerName(
  id: string,
  baseUrl: string,
  keyEnv: string | undefined,
  defaultKeyEnv: string,
): string {
  const endpoint = `${id}@${baseUrl}`;
  return keyEnv === undefined || keyEnv === defaultKeyEnv ? endpoint : `${endpoint};key=${keyEnv}`;
}
