/** How an error answers over HTTP: its status by code, the body the structured error. Pure. */
import { errors } from "@nats-io/transport-node";
import { isJetStreamSilent } from "../../shared/bus/jetstream-silent.js";
import type { ErrorBody, ErrorCode } from "../../shared/runtime/errors.js";
import { AgentError, toAgentError } from "../../shared/runtime/errors.js";

export type HttpStatus = 400 | 401 | 403 | 404 | 409 | 415 | 421 | 500 | 502 | 503;

const STATUS: Partial<Record<ErrorCode, HttpStatus>> = {
  INVALID_INPUT: 400,
  INVALID_SPEC: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  RUN_CHANGED: 409,
  PARENT_FINISHED: 409,
  HALT_PENDING: 409,
  UNSUPPORTED_MEDIA_TYPE: 415,
  HOST_NOT_ALLOWED: 421,
  PERMISSION_DENIED: 502,
  BUS_UNAVAILABLE: 503,
  TOO_MANY_FEEDS: 503,
};

const UNREACHABLE = [
  errors.ClosedConnectionError,
  errors.DrainingConnectionError,
  errors.ConnectionError,
  errors.NoRespondersError,
];

/** Whether `err`, or an error it caused, says NATS cannot be reached (or its JetStream does not answer). */
function busDown(err: unknown, depth = 0): boolean {
  if (isJetStreamSilent(err) || UNREACHABLE.some((type) => err instanceof type)) return true;
  if (!(err instanceof Error) || depth >= 3) return false;
  return busDown(err.cause, depth + 1);
}

/** A thrown error as the console's structured error: NATS out of reach is BUS_UNAVAILABLE, not INTERNAL. */
export function consoleError(err: unknown): AgentError {
  if (err instanceof AgentError || !busDown(err)) return toAgentError(err);
  const text = err instanceof Error ? err.message : String(err);
  return new AgentError(
    "BUS_UNAVAILABLE",
    `the console cannot reach NATS (${text}): check that the NATS server runs and that the console's NATS_URL reaches it; ask again once it does`,
    { cause: err },
  );
}

/** The HTTP status and JSON body of an error: retryable ones not listed are 503, others 500. */
export function httpError(err: unknown): { status: HttpStatus; body: { error: ErrorBody } } {
  const error = consoleError(err);
  const status = STATUS[error.code] ?? (error.retryable ? 503 : 500);
  return { status, body: { error: error.toBody() } };
}
