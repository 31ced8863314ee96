import type { MsgHdrs } from "@nats-io/transport-node";
import { ROOT_CONTEXT, SpanKind, trace, type Attributes, type Context, type Span } from "@opentelemetry/api";
import type { RunJob } from "../../shared/contracts/cluster.js";
import type { LoopEvent } from "../../shared/contracts/loop-event.js";
import { contextOf, remoteParent, runSpanIds, type RunSpanIds } from "../../shared/bus/trace-context.js";
import type { EffectSpans } from "../../shared/loop/performer.js";
import type { AwaitingEffect, LoopState, Transition } from "../../shared/loop/state.js";
import { activeTracing, failed, inSpan, type Tracing } from "../../shared/runtime/tracing.js";

/**
 * One lease's share of a run's trace: a span per phase the run goes through while this worker
 * drives it, a span per model call, tool call and review inside the phase's, and, from the lease
 * that ends the run (commit or fail), the run's own span, the root of them all, under the ids the
 * run's jobs name (see runSpanIds). Made only while tracing is on.
 */
export class RunTrace implements EffectSpans {
  private phase: { name: string; span: Span; context: Context } | undefined;
  private finished = false;

  private constructor(
    private readonly tracing: Tracing,
    private readonly ids: RunSpanIds,
    /** The run's span as the job names it (its `traceparent`): the phases' parent. */
    private readonly run: Context,
  ) {}

  /** The trace of a lease on `job`; undefined while tracing is off. */
  static of(prefix: string, job: RunJob, jobHeaders: MsgHdrs | undefined): RunTrace | undefined {
    const tracing = activeTracing();
    if (!tracing) return undefined;
    const ids = runSpanIds(prefix, job);
    // A job from a supervisor without traces names no parent: the run's span is derived the same way.
    const run = contextOf(jobHeaders) ?? remoteParent(ids.traceId, ids.spanId);
    return new RunTrace(tracing, ids, run);
  }

  /**
   * A transition the lease records: each phase it enters (its PHASE records: one transition may
   * pass through several, VERIFY on its way to CRITIQUE, say) starts a span; a run ended makes the root.
   */
  step(t: Transition): void {
    const { state } = t;
    for (const effect of t.effects)
      if (effect.type === "wal" && effect.record.type === "PHASE")
        this.enter(effect.record.to, state, effect.record.reason);
    // A lease that continues a run (a takeover, a decision) starts in the phase the run is in.
    if (!this.phase) this.enter(state.phase, state);
    if (!this.finished && (state.status === "committed" || state.status === "failed")) this.finish(state);
  }

  /** The lease ends: so does its phase's span (the next lease starts its own). */
  end(): void {
    this.phase?.span.end();
    this.phase = undefined;
  }

  around<E extends LoopEvent | undefined>(
    effect: AwaitingEffect,
    state: LoopState,
    perform: () => Promise<E>,
  ): Promise<E> {
    const named = spanOf(effect, state);
    if (!named) return perform();
    const parent = this.phase?.context ?? this.run;
    return inSpan(
      this.tracing,
      named.name,
      { kind: SpanKind.CLIENT, attributes: named.attributes, parent },
      async (span) => {
        const event = await perform();
        if (event) describeOutcome(span, event);
        return event;
      },
    );
  }

  private enter(phase: string, state: LoopState, reason?: string): void {
    this.phase?.span.end();
    const attributes = {
      "run.id": state.runId,
      "run.phase": phase,
      ...(reason ? { "phase.reason": reason } : {}),
    };
    const span = this.tracing.tracer.startSpan(`phase ${phase}`, { attributes }, this.run);
    this.phase = { name: phase, span, context: trace.setSpan(this.run, span) };
  }

  /** The run's span, from its start to its end, made once the run has ended (see RunTrace). */
  private finish(state: LoopState): void {
    this.finished = true;
    this.end();
    const { traceId, spanId, parentSpanId } = this.ids;
    const parent = parentSpanId === undefined ? ROOT_CONTEXT : remoteParent(traceId, parentSpanId);
    const span = this.tracing.startWithIds(
      "run",
      { startTime: state.startedAt, attributes: runAttributes(state) },
      parent,
      { traceId, spanId },
    );
    if (state.status === "failed") failed(span, undefined, state.terminal?.reason ?? "failed");
    span.end();
  }
}

function runAttributes(state: LoopState): Attributes {
  const { usage } = state;
  return {
    "run.id": state.runId,
    "run.root_id": state.rootRunId,
    ...(state.parentRunId ? { "run.parent_id": state.parentRunId } : {}),
    "run.depth": state.depth,
    "run.status": state.status,
    ...(state.terminal ? { "run.reason": state.terminal.reason } : {}),
    "agent.name": state.spec.agent.name,
    "run.iterations": state.guard.iteration,
    "run.repairs": state.repairHistory.length,
    "run.model_calls": usage.modelCalls,
    "run.tool_calls": usage.toolCalls,
    "gen_ai.usage.input_tokens": usage.inputTokens,
    "gen_ai.usage.output_tokens": usage.outputTokens,
    "run.cost_usd": usage.costUsd,
  };
}

/** The span an effect gets: model calls, tool calls and reviews; none for the others. */
function spanOf(
  effect: AwaitingEffect,
  state: LoopState,
): { name: string; attributes: Attributes } | undefined {
  const run = { "run.id": state.runId, "run.iteration": state.guard.iteration };
  switch (effect.type) {
    case "callModel": {
      const model = state.spec.agent.model;
      return {
        name: "model.call",
        attributes: {
          ...run,
          "gen_ai.provider.name": model.provider,
          ...("model" in model ? { "gen_ai.request.model": model.model } : {}),
          "model.request_id": effect.requestId,
        },
      };
    }
    case "callTool":
      return {
        name: "tool.call",
        attributes: {
          ...run,
          "tool.name": effect.tool,
          "tool.action_id": effect.actionId,
          "tool.purpose": effect.purpose,
        },
      };
    case "critique":
      return { name: "critic.review", attributes: { ...run, "critic.attempt": state.critiques } };
    default:
      return undefined;
  }
}

function describeOutcome(span: Span, event: NonNullable<LoopEvent>): void {
  switch (event.type) {
    case "modelResponded": {
      const { response } = event;
      span.setAttributes({
        "gen_ai.response.model": response.model,
        "gen_ai.response.finish_reasons": [response.stopReason],
        "gen_ai.usage.input_tokens": response.usage.inputTokens,
        "gen_ai.usage.output_tokens": response.usage.outputTokens,
        "model.cost_usd": response.costUsd,
        "model.tool_calls": response.toolCalls.length,
      });
      break;
    }
    case "criticReviewed":
      span.setAttributes({
        "critic.passed": event.verdict.passed,
        "critic.defects": event.verdict.defects.length,
        ...Object.fromEntries(
          Object.entries(event.verdict.scores).map(([name, score]) => [`critic.score.${name}`, score]),
        ),
      });
      break;
    case "toolCompleted":
      span.setAttribute("tool.outcome", "completed");
      break;
    case "toolAborted":
      span.setAttribute("tool.outcome", "aborted");
      failed(span, event.error, event.error.code);
      break;
    case "modelFailed":
    case "criticFailed":
      // An error's message may quote a prompt or a tool's data, which redaction keeps out of the
      // log (this event is not redacted yet): the trace gets the code only.
      failed(span, event.error, event.error.code);
      break;
    default:
      break;
  }
}
