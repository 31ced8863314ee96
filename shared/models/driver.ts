import type { ModelRequest, ModelResponse } from "../contracts/model.js";

/** Where inference happens: `local` never leaves the machine or cluster, `remote` does. */
export type DriverLocality = "local" | "remote";

/** One interface for every model: a request in, content, tool calls, stop reason, usage and cost out. */
export interface ModelDriver {
  readonly id: string;
  readonly locality: DriverLocality;
  /**
   * Where its calls go, when other runs' calls go there too (`openai:gpt-4o@https://…`,
   * `actor:<name>`): agent workers keep one breaker per provider. Absent (the scripted model): none.
   */
  readonly provider?: string;
  complete(request: ModelRequest, signal?: AbortSignal): Promise<ModelResponse>;
}
