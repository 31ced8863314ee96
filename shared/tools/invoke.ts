import type { Clock } from "../runtime/clock.js";
import { AgentError, toAgentError } from "../runtime/errors.js";
import type { Random } from "../runtime/random.js";
import { fullJitterDelay, servicePollDelay, type BackoffOptions } from "./backoff.js";
import { CircuitBreaker, DEFAULT_BREAKER, type BreakerOptions } from "./breaker.js";
import { TOOL_REFUSALS } from "./capabilities.js";
import type { ToolContext, ToolDefinition, ToolOutput } from "./tool.js";

export interface InvokePolicy extends BackoffOptions {
  /** Attempts after the first, for errors typed retryable. */
  retries: number;
  breaker: BreakerOptions;
  /**
   * How long a call that finds nobody serving its tool (TOOL_UNAVAILABLE) waits for a service to
   * come back, asking again with backoff, before the usual retries; 0 does not wait.
   */
  serviceWaitMs: number;
}

export const DEFAULT_INVOKE_POLICY: InvokePolicy = {
  retries: 2,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
  breaker: DEFAULT_BREAKER,
  serviceWaitMs: 0,
};

export interface InvokerDeps {
  clock: Clock;
  random: Random;
  policy?: Partial<InvokePolicy>;
  /** Told once per call that finds nobody serving its tool and starts waiting for a service. */
  onServiceWait?: (tool: string, ctx: ToolInvocationContext) => void;
}

export type ToolInvocationContext = Omit<ToolContext, "signal"> & { signal?: AbortSignal };

/** Errors after which an attempt may or may not have had its effect. */
export const OUTCOME_UNKNOWN: ReadonlySet<string> = new Set(["TOOL_TIMEOUT", "TOOL_IN_PROGRESS"]);
/** Failures that say nothing about an earlier attempt: nobody answered, or none was sent. */
const NOTHING_LEARNED: ReadonlySet<string> = new Set(["TOOL_UNAVAILABLE", "CIRCUIT_OPEN", "BUS_UNAVAILABLE"]);

/**
 * The error a call ends with. An earlier attempt whose outcome is unknown (its reply lost when the
 * connection dropped, say) stays the call's outcome when the last attempt learned nothing (the
 * service not serving yet after a restart, the breaker open): the caller then reconciles it from
 * the service's record. Ending with "unavailable" instead recorded a call as not made while its
 * first attempt had paid.
 */
function stillUnknown(unknown: AgentError | undefined, last: AgentError): AgentError {
  if (!unknown || unknown === last || !NOTHING_LEARNED.has(last.code)) return last;
  return new AgentError(unknown.code, unknown.message, { cause: last });
}

/**
 * Refusals of the call, not failures of the tool: a model that asks for paths or hosts outside its
 * grant, or with a bad input, must not open the breaker for the runs that call the tool rightly.
 */
const REFUSALS: ReadonlySet<string> = new Set([
  "INVALID_INPUT",
  "CAPABILITY_DENIED",
  "PRIVACY_DENIED",
  "HOST_NOT_ALLOWED",
  "APPROVAL_REQUIRED",
  ...TOOL_REFUSALS,
]);

/** Why a settled attempt's timer and signal are let go: one shared reason, not an Error per call. */
const ATTEMPT_SETTLED = new Error("attempt settled");

/**
 * Runs tools under the invocation policy: input validation, a timeout per attempt, retries with
 * full-jitter backoff for retryable errors only, and one circuit breaker per tool name.
 */
export class ToolInvoker {
  private readonly breakers = new Map<string, CircuitBreaker>();
  private readonly policy: InvokePolicy;

  constructor(private readonly deps: InvokerDeps) {
    this.policy = { ...DEFAULT_INVOKE_POLICY, ...deps.policy };
  }

  breakerFor(tool: string): CircuitBreaker {
    let breaker = this.breakers.get(tool);
    if (!breaker) {
      breaker = new CircuitBreaker(this.policy.breaker);
      this.breakers.set(tool, breaker);
    }
    return breaker;
  }

  async invoke<I, O>(
    tool: ToolDefinition<I, O>,
    rawInput: unknown,
    ctx: ToolInvocationContext,
  ): Promise<ToolOutput<O>> {
    const parsed = tool.input.safeParse(rawInput);
    if (!parsed.success) {
      throw new AgentError(
        "INVALID_INPUT",
        `invalid input for tool '${tool.name}': ${parsed.error.message}`,
        {
          details: parsed.error.issues,
        },
      );
    }
    const breaker = this.breakerFor(tool.name);
    let unknown: AgentError | undefined;
    // Set at the first TOOL_UNAVAILABLE: the call waits for a service until serviceWaitMs after it.
    let waitingSince: number | undefined;
    for (let attempt = 0, asked = 0; ; asked++) {
      if (!breaker.tryAcquire(this.deps.clock.now())) {
        const open = new AgentError(
          "CIRCUIT_OPEN",
          `tool '${tool.name}' is failing; its circuit breaker is open`,
        );
        throw stillUnknown(unknown, open);
      }
      try {
        const result = await this.attempt(tool, parsed.data, ctx);
        breaker.onSuccess();
        return result;
      } catch (err) {
        const error = toAgentError(err, "TOOL_FAILED");
        if (OUTCOME_UNKNOWN.has(error.code)) unknown = error;
        const now = this.deps.clock.now();
        waitingSince ??= this.startsWaiting(error, now, tool.name, ctx);
        const waitLeft = this.waitLeft(error, now, waitingSince);
        if (waitLeft > 0 && !ctx.signal?.aborted) {
          // Nobody is serving the tool (restarting, or reconnecting after the NATS server did): no
          // attempt reached it, so neither the retries nor the breaker count this; the call asks again.
          breaker.release();
          const pause = servicePollDelay(asked, this.deps.random);
          await this.deps.clock.sleep(Math.min(waitLeft, pause), ctx.signal);
          continue;
        }
        // A service that could not record the call for a full store: no attempt here makes room
        // (its run is handed back, see EffectPerformer), and the tool itself did not fail; nor
        // did it when the call was refused.
        if (error.code === "STORAGE_FULL" || REFUSALS.has(error.code)) {
          breaker.release();
          throw stillUnknown(unknown, error);
        }
        breaker.onFailure(now);
        if (!error.retryable || attempt >= this.policy.retries || ctx.signal?.aborted)
          throw stillUnknown(unknown, error);
        await this.deps.clock.sleep(fullJitterDelay(attempt, this.policy, this.deps.random), ctx.signal);
        attempt++;
      }
    }
  }

  /** `now` when `error` says nobody serves the tool, told once to onServiceWait; else undefined. */
  private startsWaiting(
    error: AgentError,
    now: number,
    tool: string,
    ctx: ToolInvocationContext,
  ): number | undefined {
    if (error.code !== "TOOL_UNAVAILABLE") return undefined;
    if (this.policy.serviceWaitMs > 0) this.deps.onServiceWait?.(tool, ctx);
    return now;
  }

  /** How much longer a call that got `error` waits for its tool's service; 0 when it does not. */
  private waitLeft(error: AgentError, now: number, since: number | undefined): number {
    if (error.code !== "TOOL_UNAVAILABLE" || since === undefined) return 0;
    return Math.max(0, since + this.policy.serviceWaitMs - now);
  }

  private async attempt<I, O>(
    tool: ToolDefinition<I, O>,
    input: I,
    ctx: ToolInvocationContext,
  ): Promise<ToolOutput<O>> {
    const controller = new AbortController();
    const onOuterAbort = (): void => controller.abort(ctx.signal?.reason);
    ctx.signal?.addEventListener("abort", onOuterAbort, { once: true });
    const timeout = this.deps.clock.sleep(tool.timeoutMs, controller.signal).then(() => {
      throw new AgentError("TOOL_TIMEOUT", `tool '${tool.name}' timed out after ${tool.timeoutMs} ms`);
    });
    try {
      return await Promise.race([tool.execute(input, { ...ctx, signal: controller.signal }), timeout]);
    } finally {
      ctx.signal?.removeEventListener("abort", onOuterAbort);
      controller.abort(ATTEMPT_SETTLED);
      timeout.catch(() => undefined);
    }
  }
}
