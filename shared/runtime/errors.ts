/**
 * Every error the runtime raises or returns over the wire has a stable code from this table.
 * Retryability lives in the table (and so in the type), never in message text: callers decide
 * whether to retry by reading `error.retryable`, which TypeScript narrows from the code.
 */
export const ERROR_CODES = {
  INVALID_SPEC: { retryable: false },
  INVALID_INPUT: { retryable: false },
  POOL_FULL: { retryable: true },
  DEPTH_LIMIT: { retryable: false },
  KILL_SWITCH_ACTIVE: { retryable: true },
  GLOBAL_CAP: { retryable: false },
  INTERNAL: { retryable: true },
  SCRIPT_EXHAUSTED: { retryable: false },
  UNKNOWN_TOOL: { retryable: false },
  CAPABILITY_DENIED: { retryable: false },
  PRIVACY_DENIED: { retryable: false },
  HOST_NOT_ALLOWED: { retryable: false },
  /** A file tool's path (or the shell tool's working directory) leads outside the grant's `allowedPaths`. */
  PATH_NOT_ALLOWED: { retryable: false },
  /** The shell tool's command is not in the grant's `allowedCommands`, or is not a bare command. */
  COMMAND_NOT_ALLOWED: { retryable: false },
  TOOL_TIMEOUT: { retryable: true },
  TOOL_FAILED: { retryable: false },
  TOOL_UNAVAILABLE: { retryable: true },
  /** A call with this idempotency key is still running in the tool service: ask again later. */
  TOOL_IN_PROGRESS: { retryable: true },
  CIRCUIT_OPEN: { retryable: true },
  GUARD_BLOCKED: { retryable: false },
  MODEL_RATE_LIMITED: { retryable: true },
  MODEL_UNAVAILABLE: { retryable: true },
  MODEL_TIMEOUT: { retryable: true },
  MODEL_NETWORK: { retryable: true },
  MODEL_REJECTED: { retryable: false },
  MODEL_AUTH: { retryable: false },
  MODEL_BAD_RESPONSE: { retryable: false },
  MISSING_API_KEY: { retryable: false },
  /**
   * A model's `apiKeyEnv` names a variable MODEL_KEY_ENVS does not allow: a spec may not have any
   * variable of a worker's or critic's environment (its NATS password, say) sent to its endpoint.
   */
  MODEL_KEY_DENIED: { retryable: false },
  PLAN_INVALID: { retryable: false },
  /**
   * The run names a convergence policy this worker does not register: its job goes back to the
   * queue for a worker that does, rather than be judged by another policy.
   */
  POLICY_UNAVAILABLE: { retryable: true },
  NONDETERMINISM: { retryable: false },
  INVALID_TRANSITION: { retryable: false },
  /** Another writer appended to this run's WAL: this worker must stop driving the run. */
  FENCED: { retryable: false },
  BUS_UNAVAILABLE: { retryable: true },
  /** The NATS server refused the connection's credentials: fix NATS_USER / NATS_PASSWORD, or the key files. */
  BUS_AUTH: { retryable: false },
  /**
   * TLS with the NATS server failed: its certificate is not trusted by NATS_TLS_CA or does not name
   * the host connected to, or TLS is required and the server offers none. Waiting will not help.
   */
  BUS_TLS: { retryable: false },
  /** The NATS server is older than the wire contract needs (2.12): upgrade it; waiting will not help. */
  UNSUPPORTED_SERVER: { retryable: false },
  /**
   * The NATS server refused a write because its JetStream storage is full (max_file_store, or the
   * account's JetStream limits): nothing was written. Retryable once there is room again: a run
   * waits where it stopped, a submit was not admitted (or is answered `existing` when asked again).
   */
  STORAGE_FULL: { retryable: true },
  /** A message larger than the server's max_payload: sending it again cannot help. */
  PAYLOAD_TOO_LARGE: { retryable: false },
  /** An HTTP request's body is not of the type the endpoint reads (the web console reads `application/json`). */
  UNSUPPORTED_MEDIA_TYPE: { retryable: false },
  /** The web console holds as many live feeds as CONSOLE_MAX_FEEDS allows: one ends, then ask again. */
  TOO_MANY_FEEDS: { retryable: true },
  /** A non-idempotent tool's outcome is unknown after a crash: a human must reconcile it. */
  RECONCILIATION_REQUIRED: { retryable: false },
  /**
   * The NATS server refused a publish to this connection's user (its permissions): the wrong
   * NATS_USER, or a permissions.conf older than this build. agentctl reports it so.
   */
  PERMISSION_DENIED: { retryable: false },
  /** The named run (or other object) does not exist. */
  NOT_FOUND: { retryable: false },
  /**
   * A submit named a run that finished and whose status was removed after
   * SUPERVISOR_STATUS_RETAIN_MS: starting it again could repeat what it did. Use a new id.
   */
  RUN_REMOVED: { retryable: false },
  /**
   * The run is admitted but no worker has started it yet (status `queued`): a halt queued for it
   * has nothing to stop until it runs, so a worker hands the halt's job back until then.
   */
  RUN_NOT_STARTED: { retryable: true },
  /**
   * An operator ended the run (`agentctl cancel`), or its parent failed while it was still going:
   * it stopped, undid what it could and failed. A parent's fan-in carries it as the child's code.
   */
  RUN_CANCELLED: { retryable: false },
  /**
   * A decision named the run's status as its decider read it (its revision), and the run has
   * changed since (decided by someone else, parked again for another request): read it again.
   */
  RUN_CHANGED: { retryable: false },
  /**
   * A failing parent undoes what its committed children did only once every child it cancelled
   * has ended (one still going could commit after it was read): the lease hands the run back, to
   * look again shortly. Not a failed lease.
   */
  CHILDREN_GOING: { retryable: true },
  /**
   * A submit named a run that exists with another spec: a run id names one spec (a retried submit of
   * the same one answers "existing"). Submit the new spec under a new id.
   */
  RUN_ID_TAKEN: { retryable: false },
  /** A child submitted for a parent that has already finished: nobody would take its result. */
  PARENT_FINISHED: { retryable: false },
  /** The run has neither ended nor halted (it is queued, running or awaiting approval): it has no result yet. */
  RUN_NOT_FINISHED: { retryable: true },
  /** A halted run's pool slot has not been freed yet (its halt is still being processed): resume it again shortly. */
  HALT_PENDING: { retryable: true },
  /**
   * A run's admission stopped midway (its supervisor was killed) and no submit finished it: the
   * run is failed with this code, and its spec, never recorded, must be submitted again under a new id.
   */
  ADMISSION_LOST: { retryable: false },
  /**
   * A tool will run this call only with a human's approval: `details` carries the tool's
   * `{ token, reason }`, the run waits for `agentctl approve`, then the call is made again with it.
   */
  APPROVAL_REQUIRED: { retryable: false },
  /** A human rejected a tool call that needed approval; the model is told and the run goes on. */
  APPROVAL_REJECTED: { retryable: false },
  /**
   * A tool call whose input held redacted fields is to be sent again by a worker that never had
   * their values (they are kept out of the log): it is not sent, and the model is told.
   */
  REDACTED_INPUT_LOST: { retryable: false },
  /** The web console was asked without its token (CONSOLE_TOKEN), or with a wrong one. */
  UNAUTHORIZED: { retryable: false },
  /** The web console was asked to operate (approve, halt, the kill switch…) without its operate token. */
  FORBIDDEN: { retryable: false },
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;
export type Retryable<C extends ErrorCode> = (typeof ERROR_CODES)[C]["retryable"];

export interface ErrorBody {
  code: ErrorCode;
  message: string;
  retryable: boolean;
  details?: unknown;
}

export class AgentError<C extends ErrorCode = ErrorCode> extends Error {
  override readonly name = "AgentError";
  readonly code: C;
  readonly retryable: Retryable<C>;
  readonly details: unknown;

  constructor(code: C, message: string, options: { cause?: unknown; details?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = ERROR_CODES[code].retryable;
    this.details = options.details;
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { code: this.code, message: this.message, retryable: this.retryable };
    if (this.details !== undefined) body.details = this.details;
    return body;
  }
}

export function isAgentError(value: unknown): value is AgentError {
  return value instanceof AgentError;
}

export function isRetryable(value: unknown): boolean {
  return isAgentError(value) && value.retryable;
}

/** Wraps anything thrown into an AgentError so callers only ever handle one shape. */
export function toAgentError(value: unknown, fallback: ErrorCode = "INTERNAL"): AgentError {
  if (isAgentError(value)) return value;
  return new AgentError(fallback, messageOf(value), { cause: value });
}

/**
 * A thrown value's message. fetch's says only "fetch failed"; what failed (a connection refused, a
 * name that does not resolve, a reset, and where) is in its cause, which whoever reads the error
 * (a model told its tool call failed, an operator reading a run's status or failure) needs.
 */
function messageOf(value: unknown): string {
  if (!(value instanceof Error)) return String(value);
  const fetchFailed = value instanceof TypeError && value.message === "fetch failed";
  return fetchFailed && value.cause instanceof Error
    ? `${value.message}: ${value.cause.message}`
    : value.message;
}

export function isErrorCode(code: string): code is ErrorCode {
  return Object.hasOwn(ERROR_CODES, code);
}

/**
 * Rebuilds an error that crossed the wire. A code this runtime does not know (a tool written in
 * another language may invent its own) becomes `fallback`, keeping the original code in the text.
 */
export function fromErrorPayload(
  payload: { code: string; message: string; details?: unknown },
  fallback: ErrorCode = "INTERNAL",
): AgentError {
  const details = payload.details === undefined ? {} : { details: payload.details };
  if (isErrorCode(payload.code)) return new AgentError(payload.code, payload.message, details);
  return new AgentError(fallback, `[${payload.code}] ${payload.message}`, details);
}
