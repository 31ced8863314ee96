import type { ModelRequest, ModelResponse } from "../contracts/model.js";

/** Where inference happens: `local` never leaves the machine or cluster, `remote` does. */
export type DriverLocality = "local" | "remote";

/** One interface for every model: a request in, content, tool calls, stop reason, usage and cost out. */
export interface ModelDriver {
  readonly id: string;
  readonly locality: DriverLocality;
  complete(request: ModelRequest, signal?: AbortSignal): Promise<ModelResponse>;
}
