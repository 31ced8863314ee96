/** How an error answers over HTTP: its status by code, the body the structured error. Pure. */
import type { ErrorBody, ErrorCode } from "../../shared/runtime/errors.js";
import { toAgentError } from "../../shared/runtime/errors.js";

const STATUS: Partial<Record<ErrorCode, 400 | 401 | 403 | 404 | 409 | 502 | 503>> = {
  INVALID_INPUT: 400,
  INVALID_SPEC: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  RUN_CHANGED: 409,
  PARENT_FINISHED: 409,
  HALT_PENDING: 409,
  PERMISSION_DENIED: 502,
  BUS_UNAVAILABLE: 503,
};

export type HttpStatus = 400 | 401 | 403 | 404 | 409 | 500 | 502 | 503;

/** The HTTP status and JSON body of an error: retryable ones not listed are 503, others 500. */
export function httpError(err: unknown): { status: HttpStatus; body: { error: ErrorBody } } {
  const error = toAgentError(err);
  const status = STATUS[error.code] ?? (error.retryable ? 503 : 500);
  return { status, body: { error: error.toBody() } };
}
