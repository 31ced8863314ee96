import type { ErrorCode } from "../runtime/errors.js";

/**
 * The model errors that say the provider is out of reach for now, not that the request is wrong:
 * rate limited, overloaded or failing (5xx), timing out, unreachable. A driver has retried each
 * already.
 */
export const MODEL_OUTAGE_CODES: readonly ErrorCode[] = [
  "MODEL_RATE_LIMITED",
  "MODEL_UNAVAILABLE",
  "MODEL_TIMEOUT",
  "MODEL_NETWORK",
];

/** A model provider's own outage (not the bus): its runs back off, and its breaker counts it. */
export function isModelOutage(code: string): boolean {
  return MODEL_OUTAGE_CODES.includes(code as ErrorCode);
}
